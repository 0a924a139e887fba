"""A worker's stop: how often it was asked for, and the deadlines of its drain.

The first request stops fetching and lets running handlers finish within the grace
period; the second gives up one second later. ``Stop.pause`` sleeps until a deadline
or a new request, whichever comes first.
"""

from __future__ import annotations

import asyncio
import time

from fairque.common.pauses import pause_unless

#: Seconds a stopping worker keeps resending held outcomes after its grace period.
OUTCOME_PATIENCE = 10.0


async def wait_event(event: asyncio.Event, timeout: float | None) -> None:
    """Wait until ``event`` is set, at most ``timeout`` seconds (None: no limit).

    Without a timeout (the loop's usual case) no task is created.
    """
    if event.is_set():
        return
    if timeout is None:
        await event.wait()
        return
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=timeout)
    finally:
        waiter.cancel()


class Stop:
    """A worker's stop: how often it was requested, and the deadlines of its drain."""

    def __init__(self) -> None:
        self.requests = 0
        #: when running handlers are interrupted (set when the drain begins)
        self.grace_ends: float | None = None
        #: when the worker gives up on the outcomes it could not report
        self.give_up_at = float("inf")
        self._poke = asyncio.Event()  # replaced on each request: it ends every pause

    @property
    def requested(self) -> bool:
        return self.requests > 0

    def request(self) -> None:
        """Count a request; a second one gives up one second from now."""
        self.requests += 1
        poke, self._poke = self._poke, asyncio.Event()
        poke.set()
        if self.requests >= 2:
            self.give_up_at = min(self.give_up_at, time.monotonic() + 1.0)

    def begin_drain(self, grace: float) -> None:
        self.grace_ends = time.monotonic() + grace
        self.give_up_at = min(self.give_up_at, self.grace_ends + OUTCOME_PATIENCE)

    async def pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less when a stop is requested meanwhile (a cancellation
        swallowed by a call before it is raised: see ``fairque.common.pauses``)."""
        await pause_unless(self._poke, seconds)

    def until_deadline(self, seconds: float) -> float:
        """``seconds``, shortened to end at the drain's next deadline."""
        now = time.monotonic()
        ends = [t - now for t in (self.grace_ends, self.give_up_at) if t and t > now]
        return min([seconds, *ends])
