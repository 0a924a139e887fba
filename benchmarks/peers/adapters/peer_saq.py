"""SAQ: ``saq peer_saq.settings``; ``concurrency`` from ``BENCH_CONCURRENCY``."""

from __future__ import annotations

from typing import Any

from benchcommon import MAX_CONNECTIONS, Job, concurrency, redis_url, run_task_async
from redis import asyncio as aioredis
from saq import Queue
from saq.queue.redis import RedisQueue

QUEUE = "bench"


async def bench(ctx: Any, *, job_id: str, mode: str, work_ms: float) -> None:
    """The benchmark task."""
    await run_task_async(job_id, mode, work_ms)


def make_queue() -> Queue:
    """SAQ's Redis queue, its client's pool enlarged: redis-py's default (100 connections)
    runs dry at concurrency 128."""
    return RedisQueue(aioredis.from_url(redis_url(), max_connections=MAX_CONNECTIONS), name=QUEUE)


settings: dict[str, Any] = {
    "queue": make_queue(),
    "functions": [bench],
    "concurrency": concurrency(10),  # SAQ's default is 10
}


class AsyncProducer:
    """Enqueues with ``Queue.enqueue`` (SAQ has no bulk enqueue)."""

    queue: Queue

    async def open(self) -> None:
        self.queue = make_queue()
        await self.queue.connect()

    async def enqueue(self, job: Job) -> None:
        await self.queue.enqueue("bench", job_id=job.job_id, mode=job.mode, work_ms=job.work_ms)

    async def close(self) -> None:
        await self.queue.disconnect()
