"""Celery with the Redis broker: ``celery -A peer_celery worker``."""

from __future__ import annotations

from benchcommon import Job, redis_url, run_task
from celery import Celery

app = Celery("bench", broker=redis_url())
app.conf.task_default_queue = "bench"
app.conf.broker_connection_retry_on_startup = True


@app.task(name="bench", ignore_result=True)
def bench(job_id: str, mode: str, work_ms: float) -> None:
    """The benchmark task."""
    run_task(job_id, mode, work_ms)


class Producer:
    """Enqueues with ``Task.delay`` (Celery's ``group`` is a workflow, not a bulk enqueue)."""

    def enqueue(self, job: Job) -> None:
        bench.delay(job.job_id, job.mode, job.work_ms)

    def close(self) -> None:
        app.close()
