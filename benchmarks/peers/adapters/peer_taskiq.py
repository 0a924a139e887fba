"""taskiq with taskiq-redis's ``ListQueueBroker``: ``taskiq worker peer_taskiq:broker``."""

from __future__ import annotations

from benchcommon import Job, redis_url, run_task_async
from taskiq_redis import ListQueueBroker

DISTRIBUTIONS = ("taskiq", "taskiq-redis")

broker = ListQueueBroker(redis_url(), queue_name="bench")


@broker.task(task_name="bench")
async def bench(job_id: str, mode: str, work_ms: float) -> None:
    """The benchmark task."""
    await run_task_async(job_id, mode, work_ms)


class AsyncProducer:
    """Enqueues with ``kiq`` (taskiq has no bulk enqueue)."""

    async def open(self) -> None:
        await broker.startup()

    async def enqueue(self, job: Job) -> None:
        await bench.kiq(job.job_id, job.mode, job.work_ms)

    async def close(self) -> None:
        await broker.shutdown()
