"""The worker's periodic summary line.

A worker logs no line per finished task at INFO (a log line costs a busy worker about a
tenth of its time per task; ``--log-level DEBUG`` shows a start and an end line per
task). Failures keep their own lines. Instead, every ``summary_interval_seconds``, a
worker that finished or failed anything since its last summary logs one line::

    worker w1: 31,204 finished, 2 failed attempts in the last 10.0 s (3,120/s); 10 running
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

log = logging.getLogger("fairque.worker")


class Summary:
    """Logs what a worker did since its last summary, every ``interval`` seconds.

    Args:
        worker_id: the worker's id.
        interval: seconds between lines (0: never).
        counts: finished tasks and failed attempts so far.
        running: tasks in flight now.
    """

    def __init__(
        self,
        worker_id: str,
        interval: float,
        counts: Callable[[], tuple[int, int]],
        running: Callable[[], int],
    ) -> None:
        self.worker_id = worker_id
        self.interval = interval
        self.counts = counts
        self.running = running
        self._last = (0, 0)
        self._since = time.monotonic()
        self._loop: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start logging (nothing when the interval is 0)."""
        self._last, self._since = self.counts(), time.monotonic()
        if self.interval > 0 and log.isEnabledFor(logging.INFO):
            self._loop = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop logging; the worker's stop line says the totals."""
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.cancel()
            await asyncio.gather(loop, return_exceptions=True)

    def line(self) -> str | None:
        """The summary since the last one (None when nothing ended since), and start the
        next window."""
        now, (finished, failed) = time.monotonic(), self.counts()
        done, lost = finished - self._last[0], failed - self._last[1]
        span = now - self._since
        self._last, self._since = (finished, failed), now
        if not done and not lost:
            return None
        rate = done / span if span > 0 else 0.0
        return (
            f"worker {self.worker_id}: {done:,} finished, {lost:,} failed attempt"
            f"{'s'[: lost != 1]} in the last {span:.1f} s ({rate:,.0f}/s); "
            f"{self.running():,} running"
        )

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            text = self.line()
            if text is not None:
                log.info("%s", text)
