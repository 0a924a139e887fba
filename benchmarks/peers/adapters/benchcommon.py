"""What every adapter shares: the benchmark task's body and the job description.

This module is imported inside each system's worker and producer processes, which may run
in a virtual environment of their own; it depends on redis-py only.

Every task does the same thing whatever the system:

* ``count`` (throughput phases): a near no-op. The execution is counted in process memory
  (``Recorder``) and a daemon thread flushes what was counted every ``FLUSH_S`` with one
  pipeline, ``INCRBY bench:count n`` + ``RPUSH bench:ids "<id> <id> ..."`` (the ids name
  duplicates) + ``GET bench:expect`` (the first write and the one that reaches the expected
  count push a marker for the driver, see ``_write``). Fork-safe: every process writes its
  first task at once and buffers only the later ones, so a forked child that runs one
  task and leaves with ``os._exit`` (RQ's work horse, which may import this module only
  after the fork) loses nothing, while a process that lives on (a prefork pool's child, a
  threaded or asyncio worker) pays one write per flush; a forked child never reuses its
  parent's buffer or thread; a normal exit flushes;
* ``real``: what most tasks do, one Redis round trip (``INCR bench:real``, as a task
  reads or writes one key), then counted as in ``count`` mode;
* ``latency``: record the handler start time (``time.time()``) in ``bench:start``, push the
  job id on ``bench:ack`` (the producer waits on it), ``INCR bench:count``;
* ``noisy``: sleep ``work_ms`` (the task's work), record the completion time in
  ``bench:done``, ``INCR bench:count``.

Latency and noisy tasks also count their executions in ``bench:runs`` (one pipeline per task),
so duplicates can be named.

Producer and workers run on the same machine, so ``time.time()`` is a shared clock.
"""

from __future__ import annotations

import asyncio
import atexit
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
IDS = "bench:ids"
EXPECT = "bench:expect"
FIRST = "bench:first"
FINISHED = "bench:finished"
FLOOD_READY = "bench:flood_ready"
#: More than the largest concurrency tried (redis-py pools default to 100).
MAX_CONNECTIONS = 1024

MODE_COUNT = "count"
MODE_REAL = "real"
#: The key a ``real`` task increments (its one round trip).
REAL = "bench:real"
MODE_LATENCY = "latency"
MODE_NOISY = "noisy"
#: How long a count-mode execution may wait in memory before it is written.
FLUSH_S = 0.005


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


class Recorder:
    """Count-mode executions, counted in memory and written in batches.

    ``add`` is the whole per-task cost (a lock and a list append); the flusher thread writes
    one two-command pipeline per ``FLUSH_S`` while tasks run and sleeps while none do.
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.pending: list[str] = []
        self.wake = threading.Event()
        self.ran_here = 0
        self.client: redis.Redis | None = None
        self.thread: threading.Thread | None = None

    def add(self, job_id: str) -> None:
        if self.ran_here == 0:
            # a forked child's first task may be its only one before os._exit
            self.ran_here = 1
            _write(_client(), [job_id])
            return
        self.ran_here += 1
        with self.lock:
            self.pending.append(job_id)
            if self.thread is None:  # started on the first buffered task
                self.thread = threading.Thread(target=self._loop, name="bench-rec", daemon=True)
                self.thread.start()
                atexit.register(self.flush)
        self.wake.set()

    def flush(self) -> None:
        if os.getpid() != self.pid:
            return  # a forked child's copy of its parent's buffer (its atexit hook runs there)
        with self.lock:
            batch, self.pending = self.pending, []
        if batch:
            if self.client is None:
                self.client = redis.Redis.from_url(redis_url())
            _write(self.client, batch)

    def _loop(self) -> None:
        while True:
            self.wake.wait()
            time.sleep(FLUSH_S)
            self.wake.clear()
            self.flush()


def _write(client: redis.Redis, ids: list[str]) -> None:
    """Count ``ids``; tell the driver (blocked in ``BLPOP``) of the first and the last write.

    The driver sets ``bench:expect`` before it starts the worker; the write that brings
    ``bench:count`` to it pushes the count on ``bench:finished``, and the very first write
    on ``bench:first``, so the driver need not poll while the worker works.
    """
    n = len(ids)
    pipe = client.pipeline(transaction=False)
    pipe.incrby(COUNT, n)
    pipe.rpush(IDS, " ".join(ids))
    pipe.get(EXPECT)
    total, _, expect = pipe.execute()
    if total == n:
        client.rpush(FIRST, total)
    if expect is not None and total - n < int(expect) <= total:
        client.rpush(FINISHED, total)


_recorder: Recorder | None = None
_recorder_lock = threading.Lock()


def _after_fork() -> None:
    global _recorder, _recorder_lock
    _recorder = None  # the parent's buffer and thread are not this process's
    _recorder_lock = threading.Lock()  # it may have been held by another thread at the fork


os.register_at_fork(after_in_child=_after_fork)


def recorder() -> Recorder:
    """This process's recorder (a new one in a forked child)."""
    global _recorder
    rec = _recorder
    if rec is None or rec.pid != os.getpid():
        with _recorder_lock:
            rec = _recorder
            if rec is None or rec.pid != os.getpid():
                rec = _recorder = Recorder()
    return rec


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
    if mode == MODE_COUNT:
        recorder().add(job_id)
        return
    if mode == MODE_REAL:
        _client().incr(REAL)
        recorder().add(job_id)
        return
    started = time.time()
    if work_ms > 0:
        time.sleep(work_ms / 1000)
    pipe = _client().pipeline(transaction=False)
    _record(pipe, job_id, mode, started)
    pipe.execute()


async def run_task_async(job_id: str, mode: str, work_ms: float) -> None:
    """The task body for asyncio systems."""
    if mode == MODE_COUNT:
        recorder().add(job_id)
        return
    if mode == MODE_REAL:
        await _async_client().incr(REAL)
        recorder().add(job_id)
        return
    started = time.time()
    if work_ms > 0:
        await asyncio.sleep(work_ms / 1000)
    pipe = _async_client().pipeline(transaction=False)
    _record(pipe, job_id, mode, started)
    await pipe.execute()
