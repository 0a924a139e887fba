"""Sync handlers in a thread pool: execution timeouts from the real start, stuck threads.

A thread cannot be interrupted. When the worker gives up on a sync handler (its
timeout passed, or its task was given back) the thread runs on, holding a pool
thread: it is *stuck* until the function returns. The worker counts stuck threads
as busy slots, so every task it leases can start at once and its timeout is never
eaten by a wait for a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class ExecutionTimeout(Exception):
    """A handler ran longer than its task's execution timeout."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"timeout after {seconds:g}s")
        self.seconds = seconds


class _Call:
    """One handler call in a pool thread; records when it really started."""

    __slots__ = ("args", "context", "func", "started")

    def __init__(self, func: Callable[..., Any], args: Sequence[Any]) -> None:
        self.func = func
        self.args = args
        self.context = contextvars.copy_context()
        self.started: float | None = None

    def __call__(self) -> Any:
        self.started = time.monotonic()
        return self.context.run(self.func, *self.args)


class HandlerThreads:
    """The pool that runs sync handlers, and the threads the worker gave up on.

    Args:
        size: pool threads (the worker's concurrency).
        on_return: called on the event loop when a stuck thread returns.
    """

    def __init__(self, size: int, on_return: Callable[[], None]) -> None:
        self._pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="fairque-handler")
        self._live: set[Future[Any]] = set()
        self._stuck: set[Future[Any]] = set()
        self._lock = threading.Lock()
        self._on_return = on_return
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop that ``on_return`` is called on."""
        self._loop = loop

    @property
    def busy(self) -> int:
        """Threads running a handler (including stuck ones)."""
        return len(self._live)

    @property
    def stuck(self) -> int:
        """Threads still running a handler the worker gave up on."""
        return len(self._stuck)

    def shutdown(self) -> None:
        """Stop accepting calls; running threads are not waited for."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def run(
        self,
        func: Callable[..., Any],
        args: Sequence[Any],
        timeout: float,
        on_abandon: Callable[[], None],
    ) -> Any:
        """Run ``func(*args)`` in a thread; its timeout counts from when it starts.

        Raises:
            ExecutionTimeout: the call ran longer than ``timeout`` (its thread runs on).
            asyncio.CancelledError: the caller was cancelled (its thread runs on).
        """
        call = _Call(func, args)
        future = self._pool.submit(call)
        self._live.add(future)
        future.add_done_callback(self._done)
        waiting = asyncio.wrap_future(future)
        deadline = time.monotonic() + timeout
        try:
            while True:
                done, _ = await asyncio.wait({waiting}, timeout=max(deadline - time.monotonic(), 0))
                if done:
                    return waiting.result()
                started = call.started
                if started is None:  # still queued for a thread: its time has not begun
                    deadline = time.monotonic() + timeout
                elif started + timeout > time.monotonic():
                    deadline = started + timeout
                else:
                    break
        except asyncio.CancelledError:
            waiting.cancel()
            self._abandon(future, on_abandon)
            raise
        waiting.cancel()
        self._abandon(future, on_abandon)
        # the handler's own TimeoutError must not look like the execution timeout
        raise ExecutionTimeout(timeout)

    def _abandon(self, future: Future[Any], on_abandon: Callable[[], None]) -> None:
        with self._lock:
            if future.done():  # returned (or never started) meanwhile: nothing is stuck
                return
            self._stuck.add(future)
        on_abandon()

    def _done(self, future: Future[Any]) -> None:
        """Runs in the pool thread (or at once if the future is already done)."""
        self._live.discard(future)
        with self._lock:
            if future not in self._stuck:
                return
            self._stuck.discard(future)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._on_return)
