"""Dependency benchmark: releasing many dependents at once, and a long chain end to end.

    uv run python benchmarks/dependencies.py [--quick] [--url URL]

Prints JSON:
- ``fan_out_release``: one upstream with N dependents (10,000 by default); the time of
  the single ``complete`` call that moves all of them DEFERRED -> QUEUED;
- ``chain``: a chain of M steps (1,000 by default) run by one in-process worker with
  no-op async handlers, from push to the last step's result.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from typing import Any

from fairque import AsyncFairQueue, FairQueue, Registry, Task, TaskState, Worker, WorkerConfig
from fairque.cli.embedded import EmbeddedServer


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fan_out(url: str, dependents: int) -> dict[str, Any]:
    q = FairQueue.from_url(url, f"bench-fan-{uuid.uuid4().hex[:8]}")
    root = q.push(Task(user_id="root", name="root"))
    root_id = root.task_id or ""
    for start in range(0, dependents, 5_000):
        count = min(5_000, dependents - start)
        q.push_many(
            Task(user_id=f"user-{i % 100}", name="child", depends_on=[root_id])
            for i in range(start, start + count)
        )
    leased = q.pop("w", steal_targets=["root"])
    assert leased is not None
    t0 = time.perf_counter()
    assert q.complete(leased)
    elapsed = time.perf_counter() - t0
    counts = q.stats().counts
    if counts[TaskState.QUEUED] != dependents or counts[TaskState.DEFERRED] != 0:
        raise RuntimeError(f"unverified: {counts}")
    q.purge()
    q.close()
    return {"dependents": dependents, "complete_ms": round(elapsed * 1000, 2),
            "us_per_dependent": round(elapsed * 1e6 / dependents, 2)}  # fmt: skip


async def chain(url: str, steps: int) -> dict[str, Any]:
    q = AsyncFairQueue.from_url(url, f"bench-chain-{uuid.uuid4().hex[:8]}")
    registry = Registry()

    @registry.task(name="step")
    async def step(payload: Any) -> int:
        return int(payload)

    ids = [uuid.uuid4().hex for _ in range(steps)]
    tasks = [
        Task(user_id="pipeline", name="step", payload=i, task_id=ids[i],
             depends_on=[ids[i - 1]] if i else [])
        for i in range(steps)
    ]  # fmt: skip
    worker = Worker(q, registry, WorkerConfig(id="chain", max_concurrent_tasks=1))
    running = asyncio.create_task(worker.run_async())
    await asyncio.sleep(0.2)
    t0 = time.perf_counter()
    await q.push_many(tasks)
    last = await q.result(ids[-1], timeout=600)
    elapsed = time.perf_counter() - t0
    worker.request_stop()
    await running
    if last != steps - 1 or (await q.stats()).counters.get("completed") != steps:
        raise RuntimeError("unverified chain run")
    await q.purge()
    await q.close()
    return {"steps": steps, "seconds": round(elapsed, 3),
            "ms_per_step": round(elapsed * 1000 / steps, 3)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--url")
    args = parser.parse_args()
    dependents, steps = (1_000, 100) if args.quick else (10_000, 1_000)
    server = None if args.url else EmbeddedServer()
    if server is not None:
        server.start()
    url = args.url or (server.url if server else "")
    try:
        log(f"fan-out release of {dependents} dependents")
        fan = fan_out(url, dependents)
        log(f"chain of {steps} steps")
        result = asyncio.run(chain(url, steps))
        print(json.dumps({"benchmark": "dependencies", "fan_out_release": fan,
                          "chain": result}, indent=2))  # fmt: skip
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
