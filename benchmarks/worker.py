"""Worker benchmark: idle pick-up latency and end-to-end throughput of one worker process.

    uv run python benchmarks/worker.py [--quick] [--url URL]

Starts a private Valkey (unless ``--url``) and real ``fairque worker`` processes, and
prints JSON:

- ``idle_pickup``: with the worker idle (blocked on the queue's wake-up list), the time
  from just before ``enqueue`` to the handler's first line, sequentially, p50/p99/max;
  with a private server also ``server_us``, each script's run time on the server during
  those samples (``SLOWLOG``), which says how much of the latency the server's work is;
- ``throughput``: no-op tasks pushed in one batch to an idle worker process, tasks/s
  until the queue's ``completed`` counter reaches the count, at two concurrencies.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

from fairque import FairQueue, Task
from fairque.cli.embedded import EmbeddedServer
from fairque.core.scripts import load_all

HERE = Path(__file__).parent


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextmanager
def worker_process(url: str, queue: str, concurrency: int) -> Iterator[subprocess.Popen[bytes]]:
    """One ``fairque worker`` process, stopped with SIGTERM at the end."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRQUE_")}
    env.update(FAIRQUE_URL=url, PYTHONPATH=str(HERE))
    cmd = [sys.executable, "-m", "fairque", "--queue", queue, "worker", "-i", "bench_handlers",
           "--concurrency", str(concurrency), "--id", f"bench-{queue}"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
    try:
        q = FairQueue.from_url(url, queue)
        deadline = time.monotonic() + 30
        while not q.workers():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("worker process did not start")
            time.sleep(0.05)
        time.sleep(0.2)  # let it settle into its idle wait
        q.close()
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@contextmanager
def script_times(url: str) -> Iterator[dict[str, list[int]]]:
    """Every script call's run time on the server (µs) while the block runs, by script.

    Uses ``SLOWLOG`` with a zero threshold; the server's settings are restored after.
    """
    client = redis.Redis.from_url(url)
    names = {s.sha: s.name for s in load_all().values()}
    saved = client.config_get("slowlog-*")
    client.config_set("slowlog-log-slower-than", 0)
    client.config_set("slowlog-max-len", 1_000_000)
    client.slowlog_reset()
    times: dict[str, list[int]] = {}
    try:
        yield times
        for entry in client.slowlog_get(1_000_000):
            words = entry["command"].split(b" ", 2)
            if words[0].upper() == b"EVALSHA" and len(words) > 1:
                name = names.get(words[1].decode(), "other")
                times.setdefault(name, []).append(int(entry["duration"]))
    finally:
        client.slowlog_reset()
        for name in ("slowlog-log-slower-than", "slowlog-max-len"):
            client.config_set(name, str(saved[name]))
        client.close()


def idle_pickup(url: str, samples: int, server_times: bool) -> dict[str, Any]:
    queue = f"bench-idle-{uuid.uuid4().hex[:8]}"
    q = FairQueue.from_url(url, queue)
    waits: list[float] = []
    timing: dict[str, list[int]] = {}
    with worker_process(url, queue, concurrency=10), contextlib.ExitStack() as stack:
        if server_times:
            timing = stack.enter_context(script_times(url))
        for i in range(samples):
            t0 = time.time()
            task = q.enqueue("stamp", None, user_id=f"user-{i % 10}")
            started = q.result(task.task_id or "", timeout=10)
            waits.append(float(started) - t0)
            time.sleep(0.02)  # the worker goes back to its idle wait
    completed = q.stats().counters.get("completed", 0)
    if completed != samples:
        raise RuntimeError(f"unverified: {completed} completed of {samples}")
    q.purge()
    q.close()
    ms = [w * 1000 for w in waits]
    doc: dict[str, Any] = {
        "samples": samples,
        "p50_ms": round(percentile(ms, 0.5), 3),
        "p99_ms": round(percentile(ms, 0.99), 3),
        "max_ms": round(max(ms), 3),
        "mean_ms": round(sum(ms) / len(ms), 3),
    }
    if timing:
        doc["server_us"] = {
            name: {"calls": len(us), "p50": percentile(us, 0.5), "p99": percentile(us, 0.99)}
            for name, us in sorted(timing.items())
        }
    return doc


def throughput(url: str, tasks: int, concurrency: int) -> dict[str, Any]:
    queue = f"bench-tp-{uuid.uuid4().hex[:8]}"
    q = FairQueue.from_url(url, queue)
    with worker_process(url, queue, concurrency):
        batch = [
            Task(user_id=f"user-{i % 100}", name="noop", payload={"i": i}) for i in range(tasks)
        ]
        t0 = time.perf_counter()
        for start in range(0, tasks, 10_000):
            q.push_many(batch[start : start + 10_000])
        while (done := q.stats().counters.get("completed", 0)) < tasks:
            time.sleep(0.01)
        elapsed = time.perf_counter() - t0
    if done != tasks:
        raise RuntimeError(f"unverified: {done} completed of {tasks}")
    q.purge()
    q.close()
    return {"tasks": tasks, "concurrency": concurrency, "seconds": round(elapsed, 3),
            "tasks_per_second": round(tasks / elapsed)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="Small sizes (seconds).")
    parser.add_argument("--url", help="Use this server instead of a private Valkey.")
    args = parser.parse_args()
    samples, tasks = (100, 5_000) if args.quick else (500, 50_000)
    server = None if args.url else EmbeddedServer()
    if server is not None:
        server.start()
    url = args.url or (server.url if server else "")
    try:
        log(f"idle pick-up latency over {samples} tasks")
        latency = idle_pickup(url, samples, server_times=server is not None)
        results = []
        for concurrency in (10, 100):
            log(f"throughput: {tasks} no-op tasks, concurrency {concurrency}")
            results.append(throughput(url, tasks, concurrency))
        info: dict[str, Any] = redis.Redis.from_url(url).info("server")
        doc = {
            "benchmark": "worker",
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                        "server": f"{info.get('server_name', 'redis')} {info.get('valkey_version') or info.get('redis_version')}"},  # noqa: E501
            "idle_pickup": latency,
            "throughput": results,
        }  # fmt: skip
        print(json.dumps(doc, indent=2))
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
