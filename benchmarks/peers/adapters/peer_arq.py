"""arq: ``arq peer_arq.WorkerSettings``; ``max_jobs`` from ``BENCH_CONCURRENCY``."""

from __future__ import annotations

from typing import Any, ClassVar

from arq import create_pool
from arq.connections import ArqRedis, RedisSettings
from arq.logs import default_log_config
from benchcommon import Job, concurrency, redis_url, run_task_async


async def bench(ctx: dict[str, Any], job_id: str, mode: str, work_ms: float) -> None:
    """The benchmark task."""
    await run_task_async(job_id, mode, work_ms)


#: arq's own logging configuration at WARNING (``arq --custom-log-dict peer_arq.QUIET``):
#: arq has no quiet option, and writes two lines per job at INFO.
QUIET: dict[str, Any] = default_log_config(verbose=False)
QUIET["handlers"]["arq.standard"]["level"] = "WARNING"
QUIET["loggers"]["arq"]["level"] = "WARNING"


class WorkerSettings:
    """What ``arq`` runs."""

    functions: ClassVar[list[Any]] = [bench]
    redis_settings = RedisSettings.from_dsn(redis_url())
    max_jobs = concurrency(10)  # arq's default is 10


class AsyncProducer:
    """Enqueues with ``ArqRedis.enqueue_job`` (arq has no bulk enqueue)."""

    pool: ArqRedis

    async def open(self) -> None:
        self.pool = await create_pool(RedisSettings.from_dsn(redis_url()))

    async def enqueue(self, job: Job) -> None:
        await self.pool.enqueue_job("bench", job.job_id, job.mode, job.work_ms)

    async def close(self) -> None:
        await self.pool.aclose()
