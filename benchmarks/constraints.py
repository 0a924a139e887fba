"""Constraint benchmark: what defining constraints costs a lease.

Three queues, each loaded with 10,000 users and two tasks per user (``push_many``
batches of 1,000, untimed):

* ``none``: no constraint defined;
* ``defined_100``: 100 constraints defined, none matching the tasks (the lease adds
  one ``EXISTS`` per call and one ``HGET`` of the task's constraint field per task);
* ``matched_1``: the 100 constraints plus one that every task matches, with limits
  never reached (a rate and a concurrency bucket checked and taken per task).

Single ``pop`` calls are timed round robin over the three queues (so drift and noise
hit them alike); the figures are the client's latency (median, p90, p99) and the
server's script time per pop (``INFO commandstats``, ``evalsha`` wall clock, sampled
in separate blocks per queue). Runs against a private Valkey it starts on a free port,
or against ``--url``. Prints one JSON document on stdout; progress goes to stderr.

Usage::

    uv run python benchmarks/constraints.py [--users N] [--pops N] [--url URL]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from typing import Any

import redis

from fairque import FairQueue, Task
from fairque.cli.embedded import EmbeddedServer, find_valkey_server
from fairque.constraints.model import Constraint

LEASE_SECONDS = 600.0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def evalsha_usec(client: redis.Redis) -> tuple[int, int]:
    """(calls, usec) of EVALSHA so far."""
    stats: dict[str, Any] = client.info("commandstats")
    entry = stats.get("cmdstat_evalsha", {})
    return int(entry.get("calls", 0)), int(entry.get("usec", 0))


def load(q: FairQueue, users: int) -> None:
    tasks = [
        Task(user_id=f"user:{i % users}", name="job", payload={"n": i}) for i in range(2 * users)
    ]
    for start in range(0, len(tasks), 1000):
        q.push_many(tasks[start : start + 1000])


def run(url: str, users: int, pops: int) -> dict[str, Any]:
    client = redis.Redis.from_url(url)
    tag = uuid.uuid4().hex[:6]
    queues = {
        "none": FairQueue.from_url(url, f"bc-none-{tag}", lease_seconds=LEASE_SECONDS),
        "defined_100": FairQueue.from_url(url, f"bc-d100-{tag}", lease_seconds=LEASE_SECONDS),
        "matched_1": FairQueue.from_url(url, f"bc-m1-{tag}", lease_seconds=LEASE_SECONDS),
    }
    hundred = [Constraint(f"c{i}", name=f"other.{i}.*", rate=10, concurrency=5) for i in range(100)]
    queues["defined_100"].apply_constraints(hundred)
    every = Constraint("all", name="job*", rate=1_000_000, per=1.0, concurrency=1_000_000)
    queues["matched_1"].apply_constraints([*hundred, every])
    push_us: dict[str, float] = {}
    for name, q in queues.items():
        began = time.perf_counter()
        load(q, users)
        took = time.perf_counter() - began
        push_us[name] = took * 1e6 / (2 * users)
        log(f"{name}: loaded {2 * users} tasks for {users} users in {took:.1f}s")
    latencies: dict[str, list[float]] = {name: [] for name in queues}
    # client latency: round robin, so every queue sees the same conditions
    for i in range(pops):
        for name, q in queues.items():
            t0 = time.perf_counter_ns()
            task = q.pop(worker_id="bench")
            latencies[name].append((time.perf_counter_ns() - t0) / 1000)
            assert task is not None, f"{name}: queue ran dry at pop {i}"
    # server time: a block of pops per queue, evalsha time read around it
    server: dict[str, float] = {}
    for _ in range(3):
        for name, q in queues.items():
            calls0, usec0 = evalsha_usec(client)
            for _ in range(pops // 3):
                q.pop(worker_id="bench")
            calls1, usec1 = evalsha_usec(client)
            per = (usec1 - usec0) / max(1, calls1 - calls0)
            server[name] = min(server.get(name, per), per)
    report: dict[str, Any] = {"users": users, "queued_per_queue": 2 * users, "pops": pops}
    base_med = statistics.median(latencies["none"])
    for name, samples in latencies.items():
        ordered = sorted(samples)
        med = statistics.median(ordered)
        report[name] = {
            "pop_us_p50": round(med, 1),
            "pop_us_p90": round(percentile(ordered, 0.90), 1),
            "pop_us_p99": round(percentile(ordered, 0.99), 1),
            "server_us_per_pop": round(server[name], 2),
            "p50_vs_none": round(med / base_med - 1, 3),
            "server_vs_none": round(server[name] / server["none"] - 1, 3),
            "push_many_us_per_task": round(push_us[name], 1),
        }
    for q in queues.values():
        q.purge()
        for info in q.constraints():
            q.remove_constraint(info.constraint.id)
        q.close()
    client.close()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--pops", type=int, default=3000)
    parser.add_argument("--url", default=None, help="a server to use instead of a private one")
    args = parser.parse_args()
    if args.url:
        report = run(args.url, args.users, args.pops)
    else:
        with EmbeddedServer(find_valkey_server()) as server:
            log(f"private valkey at {server.url}")
            report = run(server.url, args.users, args.pops)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
