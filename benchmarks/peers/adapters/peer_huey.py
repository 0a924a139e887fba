"""Huey with Redis: ``huey_consumer peer_huey.huey [-w N -k thread]``."""

from __future__ import annotations

from benchcommon import MAX_CONNECTIONS, Job, redis_url, run_task
from huey import RedisHuey
from redis import ConnectionPool

#: Huey's client pool, enlarged: redis-py's default (100 connections) runs dry at
#: ``-w 128`` ("Too many connections").
huey = RedisHuey(
    "bench", connection_pool=ConnectionPool.from_url(redis_url(), max_connections=MAX_CONNECTIONS)
)


@huey.task()
def bench(job_id: str, mode: str, work_ms: float) -> None:
    """The benchmark task."""
    run_task(job_id, mode, work_ms)


class Producer:
    """Enqueues by calling the task (Huey has no bulk enqueue)."""

    def enqueue(self, job: Job) -> None:
        bench(job.job_id, job.mode, job.work_ms)

    def close(self) -> None:
        pass
