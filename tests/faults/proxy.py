"""A loopback TCP proxy that breaks connections on demand, for the fault suite.

The proxy listens on a free port of ``127.0.0.1`` and forwards every connection
to an upstream server. The test can then:

- ``cut()``: end every open connection at once, with a TCP reset (``"rst"``) or
  an orderly close (``"close"``), as a flaky network or a load balancer would;
- ``stall(seconds)``: stop forwarding, in both directions, on every connection
  open now for ``seconds`` (bytes already sent wait in the proxy, then flow on),
  so clients hit their socket timeout while the server may still run the
  command they gave up on;
- ``chaos(...)``: do either every few seconds from a background thread.

New connections are accepted and forwarded during a stall: a client that
reconnects after a timeout gets through, as it would on a real network where
one path hangs.
"""

from __future__ import annotations

import contextlib
import random
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

_CHUNK = 65536
_MAX_PENDING = 4 * 1024 * 1024  # stop reading a side while its peer has this much unsent


@dataclass(eq=False)
class _Link:
    """One proxied connection: the client's socket and the upstream socket."""

    client: socket.socket
    upstream: socket.socket
    to_upstream: bytearray = field(default_factory=bytearray)
    to_client: bytearray = field(default_factory=bytearray)
    stalled_until: float = 0.0
    closing: bool = False  # one side ended: flush what is pending, then close

    def peer(self, sock: socket.socket) -> socket.socket:
        return self.upstream if sock is self.client else self.client

    def outgoing(self, sock: socket.socket) -> bytearray:
        """Bytes waiting to be written to ``sock``."""
        return self.to_upstream if sock is self.upstream else self.to_client


@dataclass
class ProxyStats:
    """What the proxy has done so far."""

    accepted: int = 0
    cuts: int = 0
    connections_cut: int = 0
    stalls: int = 0
    connections_stalled: int = 0
    events: list[str] = field(default_factory=list)


class FaultProxy:
    """Forward ``127.0.0.1:<port>`` to ``upstream_host:upstream_port`` until ``close()``.

    Args:
        upstream_port: Port of the server to forward to.
        upstream_host: Host of that server.
    """

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self._upstream = (upstream_host, upstream_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self.stats = ProxyStats()
        self._links: set[_Link] = set()
        self._commands: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._chaos_stop = threading.Event()
        self._chaos: threading.Thread | None = None
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """A ``redis://`` URL that goes through the proxy."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def open_connections(self) -> int:
        """Connections currently forwarded."""
        return self._call(lambda: len(self._links))

    # ------------------------------------------------------------------ faults
    def cut(self, mode: str = "rst") -> int:
        """End every open connection: ``"rst"`` resets it, ``"close"`` closes it.

        Returns:
            How many connections were cut.
        """
        if mode not in ("rst", "close"):
            raise ValueError(f"mode must be 'rst' or 'close', got {mode!r}")

        def run() -> int:
            links = list(self._links)
            for link in links:
                self._drop(link, reset=mode == "rst")
            self.stats.cuts += 1
            self.stats.connections_cut += len(links)
            self.stats.events.append(f"{time.monotonic():.3f} cut {mode} {len(links)}")
            return len(links)

        return self._call(run)

    def stall(self, seconds: float) -> int:
        """Stop forwarding on every open connection for ``seconds``.

        Returns:
            How many connections were stalled.
        """
        if seconds <= 0:
            raise ValueError(f"seconds must be positive, got {seconds!r}")

        def run() -> int:
            until = time.monotonic() + seconds
            for link in self._links:
                link.stalled_until = max(link.stalled_until, until)
            self.stats.stalls += 1
            self.stats.connections_stalled += len(self._links)
            self.stats.events.append(
                f"{time.monotonic():.3f} stall {seconds:g}s {len(self._links)}"
            )
            return len(self._links)

        return self._call(run)

    def chaos(
        self,
        every: tuple[float, float],
        *,
        stall_seconds: float | None = None,
        stall_every: int = 0,
        seed: int = 0,
    ) -> None:
        """Cut every connection every ``every[0]``-``every[1]`` seconds from a thread.

        Cuts alternate between a reset and an orderly close. With ``stall_every=k``,
        every k-th event is a stall of ``stall_seconds`` instead of a cut. Stop it
        with ``stop_chaos()``.
        """
        if self._chaos is not None:
            raise RuntimeError("chaos is already running")
        if stall_every and stall_seconds is None:
            raise ValueError("stall_every needs stall_seconds")
        rng = random.Random(seed)
        self._chaos_stop.clear()

        def loop() -> None:
            n = 0
            while not self._chaos_stop.wait(rng.uniform(*every)):
                n += 1
                if stall_every and n % stall_every == 0 and stall_seconds is not None:
                    self.stall(stall_seconds)
                    # the next event comes after the stall ends, not during it
                    if self._chaos_stop.wait(stall_seconds):
                        return
                else:
                    self.cut("rst" if n % 2 else "close")

        self._chaos = threading.Thread(target=loop, name="fault-proxy-chaos", daemon=True)
        self._chaos.start()

    def stop_chaos(self) -> None:
        """Stop the chaos thread, if any (stalls in progress run out on their own)."""
        self._chaos_stop.set()
        if self._chaos is not None:
            self._chaos.join(timeout=30)
            self._chaos = None

    def close(self) -> None:
        """Stop chaos, drop every connection and stop listening."""
        self.stop_chaos()
        if not self._stop.is_set():
            self._stop.set()
            self._wake()
            self._thread.join(timeout=10)
        for link in list(self._links):
            self._drop(link, reset=False)
        self._selector.close()
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ loop
    def _call(self, func: Callable[[], int]) -> int:
        """Run ``func`` on the proxy thread and return its result."""
        if self._stop.is_set():
            raise RuntimeError("the proxy is closed")
        done = threading.Event()
        box: list[int] = []

        def command() -> None:
            try:
                box.append(func())
            finally:
                done.set()

        with self._lock:
            self._commands.append(command)
        self._wake()
        if not done.wait(timeout=10):
            raise RuntimeError("the proxy thread did not answer within 10 s")
        return box[0]

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            self._register(now)
            stalled = [lk.stalled_until for lk in self._links if lk.stalled_until > now]
            timeout = min([0.5, *(until - now for until in stalled)])
            for key, events in self._selector.select(timeout=max(timeout, 0.001)):
                sock = key.fileobj
                if sock is self._listener:
                    self._accept()
                elif sock is self._wake_r:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                else:
                    link = key.data
                    assert isinstance(link, _Link)
                    assert isinstance(sock, socket.socket)
                    if link not in self._links:
                        continue  # dropped earlier in this round
                    if events & selectors.EVENT_WRITE:
                        self._flush(link, sock)
                    if events & selectors.EVENT_READ and link in self._links:
                        self._read(link, sock)
            with self._lock:
                commands, self._commands = self._commands, []
            for command in commands:
                command()

    def _register(self, now: float) -> None:
        """(Re)register every socket for the events it can take now."""
        wanted: dict[socket.socket, tuple[int, object]] = {
            self._listener: (selectors.EVENT_READ, None),
            self._wake_r: (selectors.EVENT_READ, None),
        }
        for link in self._links:
            if link.stalled_until > now:
                continue
            for sock in (link.client, link.upstream):
                events = 0
                if link.outgoing(sock):
                    events |= selectors.EVENT_WRITE
                if not link.closing and len(link.outgoing(link.peer(sock))) < _MAX_PENDING:
                    events |= selectors.EVENT_READ
                if events:
                    wanted[sock] = (events, link)
        stale = [key.fileobj for key in self._selector.get_map().values()]
        for fileobj in stale:
            if fileobj not in wanted:
                self._selector.unregister(fileobj)
        for sock, (events, data) in wanted.items():
            try:
                key = self._selector.get_key(sock)
            except KeyError:
                self._selector.register(sock, events, data)
            else:
                if key.events != events or key.data is not data:
                    self._selector.modify(sock, events, data)
        for link in [lk for lk in self._links if lk.closing and lk.stalled_until <= now]:
            if not link.to_client and not link.to_upstream:
                self._drop(link, reset=False)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            try:
                upstream = socket.create_connection(self._upstream, timeout=2.0)
            except OSError:
                self._close_socket(client, reset=True)  # upstream down: refuse at once
                continue
            for sock in (client, upstream):
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._links.add(_Link(client, upstream))
            self.stats.accepted += 1

    def _read(self, link: _Link, sock: socket.socket) -> None:
        try:
            data = sock.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(link, reset=True)
            return
        if not data:  # orderly end: deliver what is pending, then close both sides
            link.closing = True
            return
        link.outgoing(link.peer(sock)).extend(data)
        self._flush(link, link.peer(sock))

    def _flush(self, link: _Link, sock: socket.socket) -> None:
        pending = link.outgoing(sock)
        if not pending:
            return
        try:
            sent = sock.send(pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(link, reset=True)
            return
        del pending[:sent]

    def _drop(self, link: _Link, *, reset: bool) -> None:
        if link not in self._links:
            return
        self._links.discard(link)
        for sock in (link.client, link.upstream):
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(sock)
            self._close_socket(sock, reset=reset)

    @staticmethod
    def _close_socket(sock: socket.socket, *, reset: bool) -> None:
        with contextlib.suppress(OSError):
            if reset:  # linger 0: close sends RST instead of FIN
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                sock.shutdown(socket.SHUT_RDWR)
        sock.close()
