"""The producer side of one system, run in that system's Python environment.

``python agent.py ADAPTER COMMAND [options]`` imports ``adapters/peer_ADAPTER.py`` and prints
one JSON document on stdout. The driver (``run.py``) starts and stops the workers and checks
the counters; this script only enqueues, and times what it enqueues.

Commands:
    version   the library's version
    enqueue   N count-mode tasks, one per call (``--bulk``: the bulk API, in batches)
    latency   N latency-mode tasks one after another, each once the previous one started
    noisy     the noisy-neighbour submissions: a flood backlog, then small tenants
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.metadata
import inspect
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "adapters"))

import redis
from benchcommon import (
    ACK,
    COUNT,
    FLOOD_READY,
    MODE_COUNT,
    MODE_LATENCY,
    MODE_NOISY,
    MODE_REAL,
    STARTED,
    Job,
    redis_url,
)

#: Tenants the throughput tasks are spread over (only fairque uses them).
THROUGHPUT_TENANTS = 10
FLOOD_TENANT = "flood"


async def call(method: Any, *args: Any) -> Any:
    """Call a producer method, awaiting it when the adapter is asynchronous."""
    result = method(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


class Agent:
    """One adapter's producer plus a plain client for the benchmark's own keys."""

    def __init__(self, adapter: str) -> None:
        self.module = importlib.import_module(f"peer_{adapter}")
        self.producer: Any = None
        self.client = redis.Redis.from_url(redis_url())

    @property
    def has_bulk(self) -> bool:
        cls = getattr(self.module, "AsyncProducer", None) or self.module.Producer
        return hasattr(cls, "enqueue_many")

    async def open(self) -> None:
        cls = getattr(self.module, "AsyncProducer", None)
        if cls is not None:
            self.producer = cls()
            await self.producer.open()
        else:
            self.producer = self.module.Producer()

    async def close(self) -> None:
        await call(self.producer.close)
        self.client.close()

    async def put(self, jobs: Sequence[Job], *, bulk: bool, batch: int) -> None:
        """Enqueue ``jobs`` one per call, or with the bulk API in batches of ``batch``."""
        if bulk:
            for start in range(0, len(jobs), batch):
                await call(self.producer.enqueue_many, list(jobs[start : start + batch]))
        else:
            for job in jobs:
                await call(self.producer.enqueue, job)

    # ------------------------------------------------------------------ commands
    async def enqueue(
        self, n: int, *, bulk: bool, batch: int, mode: str = MODE_COUNT
    ) -> dict[str, Any]:
        warm = Job("warm", "u0", mode)
        await call(self.producer.enqueue, warm)  # connects; not timed
        jobs = [Job(f"c{i}", f"u{i % THROUGHPUT_TENANTS}", mode) for i in range(n)]
        t0 = time.perf_counter()
        await self.put(jobs, bulk=bulk, batch=batch)
        seconds = time.perf_counter() - t0
        return {"enqueued": n + 1, "timed": n, "seconds": seconds, "bulk": bulk, "batch": batch}

    async def wait_ack(self, job_id: str, timeout: float) -> float:
        """Wait until the handler of ``job_id`` started; return its start time."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"task {job_id} did not start within {timeout:g} s")
            popped = self.client.blpop([ACK], timeout=max(1, min(int(left), 5)))
            if popped is not None and popped[1].decode() == job_id:
                started = self.client.hget(STARTED, job_id)
                assert started is not None
                return float(started)

    async def latency(self, n: int, *, gap: float, timeout: float) -> dict[str, Any]:
        self.client.delete(ACK)
        await call(self.producer.enqueue, Job("lwarm", "u0", MODE_LATENCY))
        await self.wait_ack("lwarm", timeout)  # the worker is up and idle after this
        samples = []
        for i in range(n):
            time.sleep(gap)
            job = Job(f"l{i}", "u0", MODE_LATENCY)
            t0 = time.time()
            await call(self.producer.enqueue, job)
            started = await self.wait_ack(job.job_id, timeout)
            samples.append((started - t0) * 1000)
        return {"enqueued": n + 1, "samples_ms": samples, "gap_ms": gap * 1000}

    async def noisy(
        self, flood: int, tenants: int, per_tenant: int, work_ms: float, *, timeout: float
    ) -> dict[str, Any]:
        bulk = self.has_bulk
        jobs = [
            Job(f"n:{FLOOD_TENANT}:{i}", FLOOD_TENANT, MODE_NOISY, work_ms) for i in range(flood)
        ]
        t0 = time.perf_counter()
        await self.put(jobs, bulk=bulk, batch=1000)
        flood_seconds = time.perf_counter() - t0
        flood_done_at = time.time()
        self.client.set(FLOOD_READY, "1")
        # the driver starts the worker now; the small tenants come once it is working
        deadline = time.monotonic() + timeout
        while int(self.client.get(COUNT) or 0) < 1:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the worker did not finish a task within {timeout:g} s")
            time.sleep(0.001)
        backlog = flood - int(self.client.get(COUNT) or 0)
        submitted: dict[str, float] = {}
        t1 = time.perf_counter()
        for t in range(tenants):
            tenant = f"s{t:02d}"
            for k in range(per_tenant):
                job = Job(f"n:{tenant}:{k}", tenant, MODE_NOISY, work_ms)
                submitted[job.job_id] = time.time()
                await call(self.producer.enqueue, job)
        return {
            "enqueued": flood + tenants * per_tenant,
            "flood_bulk": bulk,
            "flood_enqueue_seconds": flood_seconds,
            "flood_enqueued_at": flood_done_at,
            "backlog_at_first_small_submit": backlog,
            "small_submit_seconds": time.perf_counter() - t1,
            "submitted": submitted,
        }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Producer side of one benchmarked system.")
    parser.add_argument("adapter")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version")
    enq = sub.add_parser("enqueue")
    enq.add_argument("--n", type=int, required=True)
    enq.add_argument("--bulk", action="store_true")
    enq.add_argument("--batch", type=int, default=1000)
    enq.add_argument("--mode", choices=[MODE_COUNT, MODE_REAL], default=MODE_COUNT)
    lat = sub.add_parser("latency")
    lat.add_argument("--n", type=int, required=True)
    lat.add_argument("--gap-ms", type=float, default=20.0)
    lat.add_argument("--timeout", type=float, default=60.0)
    noisy = sub.add_parser("noisy")
    noisy.add_argument("--flood", type=int, required=True)
    noisy.add_argument("--tenants", type=int, required=True)
    noisy.add_argument("--per-tenant", type=int, required=True)
    noisy.add_argument("--work-ms", type=float, required=True)
    noisy.add_argument("--timeout", type=float, default=60.0)
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    agent = Agent(args.adapter)
    if args.command == "version":
        dists = [*getattr(agent.module, "DISTRIBUTIONS", (args.adapter,)), "redis"]
        versions = {d: importlib.metadata.version(d) for d in dists}
        return {"versions": versions, "bulk": agent.has_bulk}
    await agent.open()
    try:
        if args.command == "enqueue":
            if args.bulk and not agent.has_bulk:
                raise SystemExit(f"{args.adapter} has no bulk enqueue")
            return await agent.enqueue(args.n, bulk=args.bulk, batch=args.batch, mode=args.mode)
        if args.command == "latency":
            return await agent.latency(args.n, gap=args.gap_ms / 1000, timeout=args.timeout)
        return await agent.noisy(
            args.flood, args.tenants, args.per_tenant, args.work_ms, timeout=args.timeout
        )
    finally:
        await agent.close()


def main(argv: Sequence[str] | None = None) -> int:
    result = asyncio.run(run(parse_args(argv)))
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
