"""fairque: ``python -m fairque --url URL --queue bench worker --import peer_fairque``."""

from __future__ import annotations

from typing import Any

from benchcommon import Job, redis_url, run_task_async

from fairque import FairQueue, Task, task

QUEUE = "bench"


@task(name="bench")
async def bench(payload: dict[str, Any]) -> None:
    """The benchmark task."""
    await run_task_async(payload["id"], payload["mode"], payload["work_ms"])


def _payload(job: Job) -> dict[str, Any]:
    return {"id": job.job_id, "mode": job.mode, "work_ms": job.work_ms}


class Producer:
    """Enqueues with ``FairQueue.enqueue`` and, in bulk, ``FairQueue.push_many``."""

    def __init__(self) -> None:
        self.queue = FairQueue.from_url(redis_url(), QUEUE)

    def enqueue(self, job: Job) -> None:
        self.queue.enqueue("bench", _payload(job), user_id=job.tenant)

    def enqueue_many(self, jobs: list[Job]) -> None:
        self.queue.push_many(
            [Task(user_id=j.tenant, name="bench", payload=_payload(j)) for j in jobs]
        )

    def close(self) -> None:
        self.queue.close()
