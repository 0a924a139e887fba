"""Dramatiq with its Redis broker: ``dramatiq peer_dramatiq --processes 1 --threads N``."""

from __future__ import annotations

import dramatiq
from benchcommon import Job, redis_url, run_task
from dramatiq.brokers.redis import RedisBroker

broker = RedisBroker(url=redis_url())
dramatiq.set_broker(broker)


@dramatiq.actor(queue_name="bench", max_retries=0)
def bench(job_id: str, mode: str, work_ms: float) -> None:
    """The benchmark task."""
    run_task(job_id, mode, work_ms)


class Producer:
    """Enqueues with ``Actor.send`` (Dramatiq has no bulk enqueue)."""

    def enqueue(self, job: Job) -> None:
        bench.send(job.job_id, job.mode, job.work_ms)

    def close(self) -> None:
        broker.close()
