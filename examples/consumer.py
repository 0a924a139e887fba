"""Run a worker for the example handlers until Ctrl-C (or --drain: until the queue is empty).

    python examples/consumer.py --url redis://127.0.0.1:6379/0 [--queue examples] [--drain]

The same worker from the command line:
    fairque --url redis://127.0.0.1:6379/0 --queue examples worker --import tasks
(run from this directory so that ``tasks`` is importable).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import tasks  # noqa: F401  (registers the handlers)

from fairque import AsyncFairQueue, TaskState, Worker, WorkerConfig


async def drain(url: str, queue: str) -> None:
    q = AsyncFairQueue.from_url(url, queue)
    worker = Worker(q, config=WorkerConfig(id="example-consumer", max_concurrent_tasks=8))
    running = asyncio.create_task(worker.run_async())
    while True:
        stats = await q.stats()
        pending = sum(stats.counts[s] for s in (TaskState.QUEUED, TaskState.SCHEDULED,
                                                 TaskState.STARTED))  # fmt: skip
        if pending == 0:
            break
        await asyncio.sleep(0.1)
    worker.request_stop()
    await running
    stats = await q.stats()
    print(f"finished {stats.counts[TaskState.FINISHED]}, failed {stats.counts[TaskState.FAILED]}")
    await q.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--queue", default="examples")
    parser.add_argument("--drain", action="store_true", help="Stop once the queue is empty.")
    args = parser.parse_args()
    if args.drain:
        asyncio.run(drain(args.url, args.queue))
        return
    q = AsyncFairQueue.from_url(args.url, args.queue)
    Worker(q, config=WorkerConfig(id="example-consumer")).run()


if __name__ == "__main__":
    main()
