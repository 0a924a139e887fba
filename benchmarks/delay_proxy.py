"""A loopback TCP proxy that delays every byte by a fixed time, each way.

Workers in production are a network hop from the server (another pod, node or zone);
on one machine they are not. This proxy puts them there: it listens on a free port of
``127.0.0.1``, forwards every connection to the server, and holds each chunk it reads
for ``delay`` seconds before writing it on, in order, in both directions. A round trip
through it takes ``2 * delay`` more than a direct one; bandwidth is not limited.

It runs its own event loop in a daemon thread, so a benchmark process or a test uses it
the same way::

    with DelayProxy(6379, delay=0.001) as proxy:
        queue = FairQueue.from_url(proxy.url, "jobs")   # 1 ms away, each way

``python benchmarks/delay_proxy.py --port 6379 --delay 0.001`` runs one until stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Coroutine
from types import TracebackType
from typing import Any

_CHUNK = 65536


class DelayProxy:
    """Forward ``127.0.0.1:<port>`` to ``host:upstream_port``, ``delay`` seconds each way.

    Args:
        upstream_port: the server's port.
        delay: seconds added to each direction (0: a plain relay).
        host: the server's host.
    """

    def __init__(self, upstream_port: int, delay: float, host: str = "127.0.0.1") -> None:
        if delay < 0:
            raise ValueError(f"delay must not be negative, got {delay!r}")
        self.delay = delay
        self._upstream = (host, upstream_port)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        self._thread = threading.Thread(target=self._run, name="delay-proxy", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if not self.port:
            raise RuntimeError("the delay proxy did not start")

    @property
    def url(self) -> str:
        """A ``redis://`` URL that goes through the proxy."""
        return f"redis://127.0.0.1:{self.port}/0"

    def __enter__(self) -> DelayProxy:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening and drop every connection."""
        if self._loop.is_closed() or not self._thread.is_alive():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    # ------------------------------------------------------------------ the loop
    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._accept, "127.0.0.1", 0)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            writer.close()
            return
        for sock in (writer, up_writer):
            raw = sock.get_extra_info("socket")
            if raw is not None:
                # the delay is ours, not Nagle's
                raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._spawn(self._pipe(reader, up_writer))
        self._spawn(self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy ``reader`` to ``writer``, each chunk ``delay`` after it was read."""
        held: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        sender = self._loop.create_task(self._send(held, writer))
        try:
            while True:
                data = await reader.read(_CHUNK)
                held.put_nowait((time.monotonic() + self.delay, data))
                if not data:
                    break
            await sender
        except (OSError, asyncio.CancelledError):
            sender.cancel()
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _send(
        self, held: asyncio.Queue[tuple[float, bytes]], writer: asyncio.StreamWriter
    ) -> None:
        while True:
            due, data = await held.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                with contextlib.suppress(OSError):
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=6379, help="the server's port")
    parser.add_argument("--delay", type=float, default=0.001, help="seconds each way")
    args = parser.parse_args()
    with DelayProxy(args.port, args.delay) as proxy:
        print(f"{proxy.url} -> 127.0.0.1:{args.port}, {args.delay * 1000:g} ms each way")
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
