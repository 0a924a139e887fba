"""streaq: ``streaq run peer_streaq:worker``; ``concurrency`` from ``BENCH_CONCURRENCY``."""

from __future__ import annotations

import os
from typing import Any

import streaq.cli
import streaq.utils
from benchcommon import Job, concurrency, redis_url, run_task_async
from streaq import Worker


def _quiet_log_config(tz: Any, verbose: bool) -> dict[str, Any]:
    """streaq's own logging configuration at WARNING: its command line has no quiet
    option, and it writes two lines per task at INFO."""
    config: dict[str, Any] = streaq.utils.default_log_config(tz, verbose)
    for section in ("handlers", "loggers"):
        for entry in config.get(section, {}).values():
            entry["level"] = "WARNING"
    return config


if os.environ.get("BENCH_QUIET"):  # the tuned setting (systems.py)
    streaq.cli.default_log_config = _quiet_log_config  # type: ignore[attr-defined]

worker: Worker[Any] = Worker(
    redis_url=redis_url(),
    queue_name="bench",
    concurrency=concurrency(16),  # default 16
)


@worker.task()
async def bench(job_id: str, mode: str, work_ms: float) -> None:
    """The benchmark task."""
    await run_task_async(job_id, mode, work_ms)


class AsyncProducer:
    """Enqueues with ``Task.enqueue`` and, in bulk, ``Worker.enqueue_many``."""

    async def open(self) -> None:
        await worker.__aenter__()

    async def enqueue(self, job: Job) -> None:
        await bench.enqueue(job.job_id, job.mode, job.work_ms)

    async def enqueue_many(self, jobs: list[Job]) -> None:
        await worker.enqueue_many([bench.enqueue(j.job_id, j.mode, j.work_ms) for j in jobs])

    async def close(self) -> None:
        await worker.__aexit__(None, None, None)
