"""streaq: ``streaq run peer_streaq:worker``; ``concurrency`` from ``BENCH_CONCURRENCY``."""

from __future__ import annotations

from typing import Any

from benchcommon import Job, concurrency, redis_url, run_task_async
from streaq import Worker

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
