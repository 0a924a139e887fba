"""An hour of the served queues' counters, for the overview's per-minute charts.

While the service runs, a sampler reads each queue's ``metrics()`` (one script call)
every ``PERIOD`` seconds and keeps an hour of snapshots in memory. The difference
between two snapshots is exact: tasks finished and failed, and the wait-time histogram's
buckets, between them (the scripts keep these in the same transition). The charts
therefore cover the time since the server started, at most an hour.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import RedisError

from fairque.client.aio import AsyncFairQueue
from fairque.errors import FairqueError
from fairque.models import QueueMetrics
from fairque.service.media import ProblemError
from fairque.service.ui import served
from fairque.service.ui.fairness import histogram_quantile

log = logging.getLogger("fairque.service.ui")

#: seconds between snapshots
PERIOD = 15.0
#: snapshots kept (an hour)
KEEP = int(3600 / PERIOD) + 1


@dataclass(frozen=True)
class Snapshot:
    """One queue's counters at one moment (monotonic seconds)."""

    at: float
    metrics: QueueMetrics


@dataclass
class _Slot:
    minute: int
    finished: int = 0
    failed: int = 0
    waits: list[int] = field(default_factory=list)


class History:
    """Snapshots per queue, newest last."""

    def __init__(self, period: float | None = None) -> None:
        self.period = PERIOD if period is None else period
        self.snapshots: dict[str, deque[Snapshot]] = {}

    def add(self, queue: str, metrics: QueueMetrics, at: float | None = None) -> None:
        kept = self.snapshots.setdefault(queue, deque(maxlen=KEEP))
        kept.append(Snapshot(time.monotonic() if at is None else at, metrics))

    async def sample(self, queues: Mapping[str, AsyncFairQueue]) -> None:
        """One snapshot of every queue, and of what its tenants were served
        (``served.watch``); a queue that fails to answer is skipped."""
        for name, q in queues.items():
            try:
                self.add(name, await q.metrics())
                await served.watch(q)
            except (RedisError, FairqueError) as exc:
                log.debug("dashboard history: %s: %s", name, exc)

    async def run(
        self,
        queues: Callable[[], Awaitable[Mapping[str, AsyncFairQueue]]],
        stop: asyncio.Event | None = None,
    ) -> None:
        """Sample every ``period`` seconds until cancelled or ``stop`` is set (the queues
        listed anew each time; while the server is away, nothing)."""
        stop = stop or asyncio.Event()
        while not stop.is_set():
            try:
                served = await queues()
            except (RedisError, FairqueError, ProblemError) as exc:
                log.debug("dashboard history: %s", exc)
                served = {}
            await self.sample(served)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), self.period)

    @contextlib.asynccontextmanager
    async def running(
        self, queues: Callable[[], Awaitable[Mapping[str, AsyncFairQueue]]]
    ) -> AsyncIterator[None]:
        """Run the sampler while the context is open (the app's lifespan).

        Closing it sets the sampler's stop flag and then cancels it: a cancellation
        that lands inside a read, where a client may turn it into a connection error
        that ``sample`` skips, still ends the loop at its next check.
        """
        stop = asyncio.Event()
        task = asyncio.create_task(self.run(queues, stop))
        try:
            yield
        finally:
            stop.set()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def minutes(self, queue: str, now: float | None = None) -> list[dict[str, Any]]:
        """Per minute, oldest first: finished, failed, wait p50/p95 (None without data).

        Each interval between two snapshots counts in the minute its end falls in.
        Empty when fewer than two snapshots exist.
        """
        kept = list(self.snapshots.get(queue, ()))
        if len(kept) < 2:
            return []
        now = time.monotonic() if now is None else now
        span = min(60, int((now - kept[0].at) // 60) + 1)
        buckets = len(kept[0].metrics.wait_time.counts)
        slots = [_Slot(m, waits=[0] * buckets) for m in range(span - 1, -1, -1)]
        for before, after in itertools.pairwise(kept):
            minute = int((now - after.at) // 60)
            if minute >= span:
                continue
            slot = slots[span - 1 - minute]
            a, b = after.metrics, before.metrics
            slot.finished += max(0, a.finished - b.finished)
            slot.failed += max(0, a.failed - b.failed)
            for i, (x, y) in enumerate(zip(a.wait_time.counts, b.wait_time.counts, strict=True)):
                slot.waits[i] += max(0, x - y)
        bounds = kept[-1].metrics.wait_time.bounds
        out = []
        for slot in slots:
            p50 = histogram_quantile(bounds, slot.waits, 0.5)
            p95 = histogram_quantile(bounds, slot.waits, 0.95)
            out.append(
                {
                    "minute": slot.minute,
                    "finished": slot.finished,
                    "failed": slot.failed,
                    "p50": None if p50 is None else p50[0],
                    "p95": None if p95 is None else p95[0],
                }
            )
        return out

    def covered(self, queue: str, now: float | None = None) -> float | None:
        """Seconds from the oldest snapshot of ``queue`` to ``now`` (None: none)."""
        kept = self.snapshots.get(queue)
        if not kept:
            return None
        return (time.monotonic() if now is None else now) - kept[0].at
