"""How an idle worker waits for work: parks and watches.

A worker whose last request found fewer tasks than it asked for *parks* its free
slots: it blocks on the queue's wake-up list with a lease request pipelined behind the
wait (``Leasing.wait_and_lease``), so the server leases a pushed task the moment the
push wakes the worker, in the same round trip.

A park does not poll. Each of its waits lasts until a wake-up token arrives (a push,
a retry, a give-back, dependents made ready), or until the next due time the queue
reports (``next_wakeup``: a scheduled task comes due, a lease expires), and at most
the worker's lease length: a lease as long that another worker takes meanwhile
cannot expire before the next wait looks again. A wait that ends empty is followed
by the next one; the park returns only with tasks, or when the worker stops. The
client also cuts each wait to what its socket timeout allows.

A worker serving several queues parks each of them whose last request came back
short with a *watch* instead (a park of no slots): a plain blocking wait on that
queue's wake-up list, one per queue (each queue may live in another cluster slot),
that takes no task and holds no slot. A watch ends when a token arrives or a due
time passes; the worker then asks that queue for its share of the free slots. A
token a watch takes while the worker has no free slot is passed on (``wake``), so
an idle worker of that queue is not left waiting behind a busy one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from fairque.client.aio import AsyncFairQueue
from fairque.common.pauses import pass_on_cancellation
from fairque.models import Task
from fairque.worker.leasing import Leasing
from fairque.worker.link import CONNECTION_ERRORS, ErrorLog, Link

log = logging.getLogger("fairque.worker")

#: The shortest wait a park sends (a due time already passed still needs a real wait).
SHORTEST_WAIT = 0.001
#: A server ends a blocking wait that times out only on its clock tick (every 100 ms
#: at the default ``hz`` of 10): a due time nearer than this is waited for here, then
#: leased at once, so a rate limit's next slot is taken on time.
LOCAL_WAIT = 0.1
#: Direct leases in a row (see ``_direct``) before a park blocks on the server again.
DIRECT_TRIES = 3
#: Seconds between the wake-up tokens that ask an open park to end (for a stop):
#: another idle worker of the queue may take a token first.
WAKE_AGAIN_AFTER = 1.0
#: Seconds ``Park.close`` waits for a cancelled park before cancelling it again, and
#: how many times it does.
CLOSE_STEP = 0.2
CLOSE_TRIES = 5


class Parked(NamedTuple):
    """What an ended park brought: its tasks, and whether they filled every slot it
    asked for (then more may be ready; an ended watch always says so)."""

    tasks: list[Task]
    filled: bool


class Park:
    """The idle wait of a worker's free slots: at most one at a time.

    The slots a park may fill count as taken until the worker collects its tasks.

    Args:
        queue: the queue to lease from.
        leasing: the worker's lease requests.
        link: the worker's connection state (backoff on outages).
        errors: where unexpected errors are logged.
        pause: sleeps a number of seconds, or less when a stop is requested.
        stopping: True once the worker stops; no new wait starts then.
        on_end: called when the park has ended and its tasks may be collected.
        room: whether the worker has a free slot (a watch passes a token on when not).
        deliver: starts leased tasks the moment the lease reply is read (None: they
            wait for ``collect``). An idle worker's task then starts one turn of the
            event loop after its reply, not three.
    """

    def __init__(
        self,
        queue: AsyncFairQueue,
        leasing: Leasing,
        link: Link,
        errors: ErrorLog,
        pause: Callable[[float], Awaitable[None]],
        stopping: Callable[[], bool],
        on_end: Callable[[], None],
        room: Callable[[], bool] = lambda: True,
        deliver: Callable[[list[Task]], None] | None = None,
    ) -> None:
        self.queue = queue
        self.leasing = leasing
        self.link = link
        self.errors = errors
        self._pause = pause
        self._stopping = stopping
        self._on_end = on_end
        self._room = room
        self._deliver = deliver
        self._asked = 0  # the slots the open park was started with
        self._delivered = 0  # tasks it handed to ``deliver``
        self._job: asyncio.Task[list[Task]] | None = None
        self._woken_at = -WAKE_AGAIN_AFTER
        #: a watch may wait here for a near due time (see ``_watch``)
        self._watch_misses = 0
        #: the slots the open park may fill (0 when none is open)
        self.slots = 0

    @property
    def open(self) -> bool:
        """True from ``start`` until its tasks are collected."""
        return self._job is not None

    def start(self, slots: int) -> None:
        """Park ``slots`` free slots until work comes (one park at a time); with no
        slots, watch the queue until it may have work (see the module's docstring)."""
        assert self._job is None, "a park is already open"
        self.slots = self._asked = slots
        self._delivered = 0
        wait = self._wait_for_work(slots) if slots else self._watch()
        self._job = asyncio.create_task(wait)
        self._job.add_done_callback(lambda _: self._on_end())

    def collect(self) -> Parked | None:
        """What a park that has ended brought (its slots are free again); None while
        it still waits, or when none is open."""
        job = self._job
        if job is None or not job.done():
            return None
        self._job = None
        self.slots = 0
        leased = [] if job.cancelled() else job.result()
        return Parked(leased, len(leased) + self._delivered >= self._asked)

    async def wake(self) -> None:
        """Ask an open park's wait to end now, for a stop: push a wake-up token.

        Another idle worker of the queue may take the token first: while the park
        stays open, each call after ``WAKE_AGAIN_AFTER`` seconds pushes another.
        """
        now = time.monotonic()
        if self._job is None or self._job.done() or now - self._woken_at < WAKE_AGAIN_AFTER:
            return
        self._woken_at = now
        with contextlib.suppress(Exception):
            await self.queue.wake(1)

    async def close(self) -> None:
        """Forget the park; one still waiting is cancelled (the worker is leaving).

        Tasks it leased that were never collected keep their leases until they
        expire, and then run again. A cancellation swallowed as a blocking wait was
        sent is seen only once the wait returns: the cancel is repeated meanwhile.
        """
        job, self._job, self.slots = self._job, None, 0
        if job is None:
            return
        for _ in range(CLOSE_TRIES):
            if job.done():
                break
            job.cancel()
            await asyncio.wait({job}, timeout=CLOSE_STEP)
        if job.done() and not job.cancelled() and job.exception() is None and job.result():
            log.warning(
                "worker %s: %d task(s) leased while leaving were not started; their leases "
                "will expire",
                self.leasing.worker_id, len(job.result()),
            )  # fmt: skip

    async def _wait_for_work(self, slots: int) -> list[Task]:
        """Wait after wait until one leases tasks, or the worker stops."""
        longest = self.leasing.lease_seconds
        misses = 0  # direct leases in a row that found nothing (see _direct)
        while not self._stopping():
            # a cancellation (``close``) that a call swallowed ends the park before its
            # next call, not after a whole wait (see ``fairque.common.pauses``)
            pass_on_cancellation()
            try:
                asked = time.monotonic()
                due = await self.queue.next_wakeup()
                trip = time.monotonic() - asked
                self.link.ok()  # the server answers: an outage ends before the wait
                pass_on_cancellation()
                if _direct(due, misses):
                    # nearer than the server's clock tick: wait here, then lease, timed
                    # to reach the server at the due time (the answer came half a trip
                    # after it was measured, the lease takes half a trip to arrive).
                    await asyncio.sleep(max((due or 0.0) - trip, 0.0))
                    leased = await self.leasing.lease(slots)
                    misses = 0 if leased else misses + 1
                else:
                    misses = 0
                    leased = await self.leasing.wait_and_lease(_blocking_wait(due, longest), slots)
            except CONNECTION_ERRORS as exc:
                await self._pause(self.link.failed(exc))
                continue
            except Exception as exc:
                self.errors.error(f"worker {self.leasing.worker_id}: waiting for work failed", exc)
                self.link.failures += 1  # back off as for an outage
                await self._pause(self.link.delay())
                continue
            self.link.ok()
            if leased:
                if self._deliver is None or _cancel_swallowed():
                    return leased  # a closed park's are not started (``close`` says so)
                self._delivered, self.slots = len(leased), 0  # the tasks hold the slots now
                self._deliver(leased)
                return []
        return []

    async def _watch(self) -> list[Task]:
        """Wait until a wake-up token arrives or a due time passes, leasing nothing.

        A due time nearer than the server's clock tick is waited for here, as a park
        does; when the worker's request after it finds nothing, the next watch blocks
        unless the due time is still ahead, so a due time that keeps passing cannot spin.
        """
        longest = self.leasing.lease_seconds
        while not self._stopping():
            pass_on_cancellation()  # one a call swallowed (see ``_wait_for_work``)
            try:
                asked = time.monotonic()
                due = await self.queue.next_wakeup()
                trip = time.monotonic() - asked
                self.link.ok()
                pass_on_cancellation()
                if _direct(due, self._watch_misses):
                    await asyncio.sleep(max((due or 0.0) - trip, 0.0))
                    self._watch_misses += 1  # until the next blocking wait
                    return []
                self._watch_misses = 0
                wait = _blocking_wait(due, longest)
                woken = await self.queue.wait_for_work(wait)
            except CONNECTION_ERRORS as exc:
                await self._pause(self.link.failed(exc))
                continue
            except Exception as exc:
                self.errors.error(f"worker {self.leasing.worker_id}: waiting for work failed", exc)
                self.link.failures += 1  # back off as for an outage
                await self._pause(self.link.delay())
                continue
            self.link.ok()
            if woken and not self._room() and not self._stopping():
                # busy with other queues: another idle worker of this one may take it now
                with contextlib.suppress(Exception):
                    await self.queue.wake(1)
            if woken or (due is not None and wait >= due):
                return []  # a token, or the due time came (one left short is waited again)
        return []


def _blocking_wait(due: float | None, longest: float) -> float:
    """How long a blocking wait lasts for a due time ``due`` seconds away (None: none).

    The server ends a wait that times out on its clock tick, up to ``LOCAL_WAIT`` after
    the timeout: a wait for a due time ends that much early, and the rest is waited for
    here (``_direct``), so a due time past a tick away is not missed by a tick either.
    """
    if due is None:
        return longest
    if due >= LOCAL_WAIT:
        due -= LOCAL_WAIT
    return min(max(due, SHORTEST_WAIT), longest)


def _direct(due: float | None, misses: int) -> bool:
    """Whether to wait for ``due`` here and then lease, rather than block on the server.

    A due time nearer than the server's clock tick is waited for on this clock (timed
    to reach the server at it, see the callers), so a rate limit's next slot is taken on
    time. When that finds nothing, a due time still ahead is waited for the same way
    (the lease came a moment early), up to ``DIRECT_TRIES`` times in a row; one already
    passed makes the next wait block: a due time that keeps passing cannot spin.
    """
    if due is None or due >= LOCAL_WAIT:
        return False
    return misses == 0 or (due > 0 and misses < DIRECT_TRIES)


def _cancel_swallowed() -> bool:
    """Whether the running task was asked to cancel and a call swallowed the request
    (see ``fairque.common.pauses``)."""
    try:
        pass_on_cancellation()
    except asyncio.CancelledError:
        return True
    return False
