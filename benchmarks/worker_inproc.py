"""Worker runtime benchmark: one in-process worker drains pushed no-op tasks.

    uv run python benchmarks/worker_inproc.py [--url URL] [-n 20000] [-c 10 -c 128]
        [--log INFO|none] [--sync | --real] [--reps 3]

``--real`` gives each task what most tasks do instead of nothing: one Redis round trip
(an ``INCR`` on a client of the handler's own).

Pushes ``n`` no-op tasks (100 users), then runs a burst ``Worker`` in this process
until it stops, and prints one line per run: tasks/s, the worker's CPU time per task
(``time.process_time``: what load on a shared machine distorts least), the server's
script time per task (``INFO commandstats``, reset after the push) and how many
tasks each completion wave carried. ``--log INFO`` logs as the CLI worker does
(a summary line; per-task lines only at DEBUG). Starts a private Valkey unless
``--url`` is given. Run it under ``py-spy record`` to see where a task's time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
import uuid
from typing import Any

import redis
import redis.asyncio as aioredis

from fairque import FairQueue, Task
from fairque.cli.base import LOG_FORMAT, configure_logging
from fairque.cli.embedded import EmbeddedServer
from fairque.client.aio import AsyncFairQueue
from fairque.common.urls import RedactingFormatter
from fairque.config import WorkerConfig
from fairque.worker import Worker
from fairque.worker.acker import Acknowledger
from fairque.worker.registry import Registry

registry = Registry()


@registry.task(name="noop")
async def noop(payload: Any) -> None:
    """Nothing: the run measures the worker."""


@registry.task(name="noop_sync")
def noop_sync(payload: Any) -> None:
    """Nothing, in a handler thread."""


_real_clients: dict[int, Any] = {}


@registry.task(name="real")
async def real(payload: Any) -> None:
    """What most tasks do: one Redis round trip (``INCR``, on a client of its own)."""
    loop = id(asyncio.get_running_loop())
    client = _real_clients.get(loop)
    if client is None:
        client = _real_clients[loop] = aioredis.Redis.from_url(_real_url[0])
    await client.incr("bench:inproc:real")


_real_url = [""]


class Waves:
    """Counts the completion waves of every acknowledger (tasks finished per wave)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        original = Acknowledger._complete_and_lease
        sizes = self.sizes

        async def counted(self: Acknowledger, finished: Any, wanted: int) -> Any:
            sizes.append(len(finished))
            return await original(self, finished, wanted)

        Acknowledger._complete_and_lease = counted  # type: ignore[method-assign]


async def drain(url: str, n: int, concurrency: int, name: str) -> dict[str, float]:
    queue = f"bench-inproc-{uuid.uuid4().hex[:8]}"
    q = FairQueue.from_url(url, queue)
    tasks = [Task(user_id=f"user-{i % 100}", name=name, payload={"i": i}) for i in range(n)]
    for start in range(0, n, 10_000):
        q.push_many(tasks[start : start + 10_000])
    stats = redis.Redis.from_url(url)
    stats.config_resetstat()
    aq = AsyncFairQueue.from_url(url, queue)
    cfg = WorkerConfig(max_concurrent_tasks=concurrency, burst=True, maintenance_interval_seconds=0)
    worker = Worker(aq, registry, cfg)
    wall, cpu = time.perf_counter(), time.process_time()
    await worker.run_async()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if worker.processed != n:
        raise RuntimeError(f"unverified: {worker.processed} processed of {n}")
    scripts = stats.info("commandstats")
    server_us = sum(v["usec"] for k, v in scripts.items() if "eval" in k)
    stats.close()
    await aq.close()
    q.purge()
    q.close()
    return {"per_s": n / wall, "cpu_us": cpu / n * 1e6, "server_us": server_us / n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", help="Use this server instead of a private Valkey.")
    parser.add_argument("-n", type=int, default=20_000, help="tasks per run")
    parser.add_argument("-c", type=int, action="append", help="concurrency (repeatable)")
    parser.add_argument("--log", default="INFO", help="log level, or none")
    parser.add_argument("--sync", action="store_true", help="a sync no-op handler")
    parser.add_argument(
        "--real", action="store_true", help="a handler that makes one Redis round trip"
    )
    parser.add_argument("--reps", type=int, default=1)
    args = parser.parse_args()
    if args.log != "none":
        configure_logging(getattr(logging, args.log.upper()), RedactingFormatter(LOG_FORMAT))
    server = None if args.url else EmbeddedServer()
    if server is not None:
        server.start()
    url = args.url or (server.url if server else "")
    _real_url[0] = url
    waves = Waves()
    try:
        for concurrency in args.c or [10, 128]:
            for _ in range(args.reps):
                waves.sizes.clear()
                name = "real" if args.real else "noop_sync" if args.sync else "noop"
                got = asyncio.run(drain(url, args.n, concurrency, name))
                per_wave = statistics.mean(waves.sizes) if waves.sizes else 0.0
                print(
                    f"concurrency {concurrency}: {got['per_s']:,.0f} tasks/s, worker cpu "
                    f"{got['cpu_us']:.1f} us/task, server scripts {got['server_us']:.1f} "
                    f"us/task, {per_wave:.1f} tasks/wave",
                    file=sys.stdout,
                    flush=True,
                )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
