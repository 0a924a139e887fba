"""RQ: ``rq worker`` (forks a work horse per job) or ``--worker-class rq.SimpleWorker``."""

from __future__ import annotations

from benchcommon import Job, redis_url, run_task
from redis import Redis
from rq import Queue

QUEUE = "bench"


def bench(job_id: str, mode: str, work_ms: float) -> None:
    """The benchmark task."""
    run_task(job_id, mode, work_ms)


class Producer:
    """Enqueues with ``Queue.enqueue`` and, in bulk, ``Queue.enqueue_many``."""

    def __init__(self) -> None:
        self.connection = Redis.from_url(redis_url())
        self.queue = Queue(QUEUE, connection=self.connection)

    def enqueue(self, job: Job) -> None:
        self.queue.enqueue(bench, job.job_id, job.mode, job.work_ms)

    def enqueue_many(self, jobs: list[Job]) -> None:
        self.queue.enqueue_many(
            [Queue.prepare_data(bench, (j.job_id, j.mode, j.work_ms)) for j in jobs]
        )

    def close(self) -> None:
        self.connection.close()
