"""What every adapter shares: the benchmark task's body and the job description.

This module is imported inside each system's worker and producer processes, which may run
in a virtual environment of their own; it depends on redis-py only.

Every task does the same thing whatever the system:

* ``count`` (throughput phases): ``INCR bench:count``;
* ``latency``: record the handler start time (``time.time()``) in ``bench:start``, push the
  job id on ``bench:ack`` (the producer waits on it), ``INCR bench:count``;
* ``noisy``: sleep ``work_ms`` (the task's work), record the completion time in
  ``bench:done``, ``INCR bench:count``.

Every task also counts its executions in ``bench:runs``, so duplicates can be named.

Producer and workers run on the same machine, so ``time.time()`` is a shared clock.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio as aioredis

COUNT = "bench:count"
STARTED = "bench:start"
ACK = "bench:ack"
DONE = "bench:done"
RUNS = "bench:runs"
FLOOD_READY = "bench:flood_ready"
#: More than the largest concurrency tried (redis-py pools default to 100).
MAX_CONNECTIONS = 1024

MODE_COUNT = "count"
MODE_LATENCY = "latency"
MODE_NOISY = "noisy"


def redis_url() -> str:
    """The benchmark server, from ``BENCH_URL``."""
    return os.environ.get("BENCH_URL", "redis://127.0.0.1:6379/0")


def concurrency(default: int) -> int:
    """The concurrency asked for in ``BENCH_CONCURRENCY``, else the library's ``default``."""
    value = os.environ.get("BENCH_CONCURRENCY")
    return int(value) if value else default


@dataclass(frozen=True)
class Job:
    """One benchmark task: its id, its tenant, what it records and how long it works."""

    job_id: str
    tenant: str
    mode: str = MODE_COUNT
    work_ms: float = 0.0


_local = threading.local()
_async_clients: dict[int, aioredis.Redis] = {}


def _client() -> redis.Redis:
    """One client per thread: sharing a pool among freshly started threads has failed
    with 'Bad file descriptor' on connect (redis-py 8, hiredis)."""
    client: redis.Redis | None = getattr(_local, "client", None)
    if client is None:
        client = redis.Redis.from_url(redis_url(), max_connections=MAX_CONNECTIONS)
        _local.client = client
    return client


def _async_client() -> aioredis.Redis:
    """One asyncio client per event loop (a worker may run several loops)."""
    loop_id = id(asyncio.get_running_loop())
    client = _async_clients.get(loop_id)
    if client is None:
        client = aioredis.Redis.from_url(redis_url(), max_connections=MAX_CONNECTIONS)
        _async_clients[loop_id] = client
    return client


def _record(pipe: Any, job_id: str, mode: str, started: float) -> None:
    pipe.hincrby(RUNS, job_id, 1)  # executions per job, to name duplicates
    if mode == MODE_LATENCY:
        pipe.hset(STARTED, job_id, repr(started))
        pipe.rpush(ACK, job_id)
    elif mode == MODE_NOISY:
        pipe.hset(DONE, job_id, repr(time.time()))
    pipe.incr(COUNT)


def run_task(job_id: str, mode: str, work_ms: float) -> None:
    """The task body for systems that run plain functions (threads or processes)."""
    started = time.time()
    if work_ms > 0:
        time.sleep(work_ms / 1000)
    pipe = _client().pipeline(transaction=False)
    _record(pipe, job_id, mode, started)
    pipe.execute()


async def run_task_async(job_id: str, mode: str, work_ms: float) -> None:
    """The task body for asyncio systems."""
    started = time.time()
    if work_ms > 0:
        await asyncio.sleep(work_ms / 1000)
    pipe = _async_client().pipeline(transaction=False)
    _record(pipe, job_id, mode, started)
    await pipe.execute()
