"""Listing benchmark: ``list_tasks`` pages on a big queue, and what its indexes cost.

Starts a private Valkey on a free port, loads ``--tasks`` tasks (default 1,000,000) over
``--users`` users (default 100,000) and 20 task names, finishes 1 % of them, then times
pages of ``list_tasks`` (client wall clock, median and p99 of ``--samples`` pages):
by state, by user, by name, by user and name, and filtered by state as well. Then it
measures the server time the listing's indexes add to a push and a complete, and the
metrics (counters and histograms) to a pop and a complete: the same calls run with the
real scripts and with copies whose lines for those are removed, alternately, and
``INFO commandstats`` gives the server's microseconds per task.
Prints one JSON document on stdout; progress goes to stderr.

Usage::

    uv run python benchmarks/listing.py [--quick] [--tasks N] [--users N] [--samples N]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import redis

from fairque import FairQueue, Task
from fairque.cli.embedded import EmbeddedServer
from fairque.core.records import Call

NAMES = 20
BATCH = 10_000


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def timed(fn: Callable[[], Any], samples: int) -> dict[str, float]:
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {
        "median_ms": round(statistics.median(times), 3),
        "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 3),
    }


def load(q: FairQueue, tasks: int, users: int) -> float:
    started = time.perf_counter()
    for start in range(0, tasks, BATCH):
        q.push_many(
            Task(user_id=f"user{i % users}", name=f"job{i % NAMES}", payload={"i": i})
            for i in range(start, min(start + BATCH, tasks))
        )
        if start % 100_000 == 0:
            log(f"loaded {start + BATCH:,}")
    return time.perf_counter() - started


def finish_some(q: FairQueue, count: int) -> None:
    done = 0
    while done < count:
        tasks = q.pop_batch(min(1000, count - done), "bench", lease_seconds=600)
        if not tasks:
            return
        q.complete_and_pop([(t, None) for t in tasks], 0, "bench")
        done += len(tasks)


def pages(q: FairQueue, samples: int, users: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cases: dict[str, dict[str, Any]] = {
        "state=QUEUED": {"state": "QUEUED"},
        "state=FINISHED": {"state": "FINISHED"},
        "user": {"user_id": f"user{users // 2}"},
        "name": {"name": "job7"},
        "user+name": {"user_id": f"user{users // 2}", "name": f"job{(users // 2) % NAMES}"},
        "user+state=QUEUED": {"user_id": f"user{users // 2}", "state": "QUEUED"},
        "name+state=QUEUED": {"name": "job7", "state": "QUEUED"},
        "name+state=FINISHED": {"name": "job7", "state": "FINISHED"},
    }
    for label, filters in cases.items():
        first = q.list_tasks(limit=50, **filters)

        def first_page(f: dict[str, Any] = filters) -> Any:
            return q.list_tasks(limit=50, **f)

        figures: dict[str, Any] = dict(timed(first_page, samples))
        figures["tasks_on_first_page"] = len(first.tasks)
        # the tenth page, reached by following cursors (a deep page costs the same)
        cursor = first.next_cursor
        for _ in range(9):
            if cursor is None:
                break
            cursor = q.list_tasks(limit=50, cursor=cursor, **filters).next_cursor
        if cursor is not None:

            def deep_page(f: dict[str, Any] = filters, c: str = cursor) -> Any:
                return q.list_tasks(limit=50, cursor=c, **f)

            deep = timed(deep_page, samples)
            figures["page_11_median_ms"] = deep["median_ms"]
        out[label] = figures
        log(f"{label}: {figures}")
    return out


def script_usec(client: redis.Redis) -> tuple[int, int]:
    stats = client.info("commandstats")
    entry = stats.get("cmdstat_evalsha", {"calls": 0, "usec": 0})
    return int(entry["calls"]), int(entry["usec"])


def variant(client: redis.Redis, source: str, drop: tuple[str, ...], subs: dict[str, str]) -> str:
    """Load ``source`` without its lines holding one of ``drop`` and with each regex of
    ``subs`` replaced; its SHA."""
    lines = [line for line in source.splitlines() if not any(m in line for m in drop)]
    text = "\n".join(lines)
    for pattern, replacement in subs.items():
        text = re.sub(pattern, replacement, text)
    sha: str = client.script_load(text)
    return sha


def run_call(client: redis.Redis, call: Call[Any], sha: str) -> Any:
    return client.evalsha(sha, len(call.keys), *call.keys, *call.args)


#: what each experiment removes from which script: (lines to drop, regex substitutions)
EXPERIMENTS: dict[str, dict[str, tuple[tuple[str, ...], dict[str, str]]]] = {
    # the listing's indexes: push's two ZADDs; complete's owner read and 'ends' entry
    "indexes": {
        "push": (("'uidx:'", "'nidx:'"), {}),
        "complete": (("local owner", "local entry", "ttl_ms, entry)"), {}),
    },
    # the metrics: pop's ready-time read and wait histogram; complete's run histogram
    "metrics": {
        "pop": (("observe(K, 'wait'",), {r"redis\.call\('ZSCORE', K\[\d+\], id\)": "'0'"}),
        "complete": (("observe(K, 'run'",), {}),
    },
}


def cost(client: redis.Redis, url: str, per_round: int, rounds: int) -> dict[str, Any]:
    """Server microseconds per task of push, pop (batches of 100) and complete, with
    the real scripts and with each experiment's lines removed, alternately."""
    q = FairQueue.from_url(url, "cost")
    out: dict[str, Any] = {}
    n = 0
    for experiment, changed in EXPERIMENTS.items():
        shas: dict[str, tuple[str, str]] = {}
        for op in ("push", "pop", "complete"):
            source = q.ops.scripts[op].source
            real = client.script_load(source)
            drop, subs = changed.get(op, ((), {}))
            shas[op] = (real, variant(client, source, drop, subs) if op in changed else real)
        figures: dict[str, dict[str, list[float]]] = {
            op: {"real": [], "without": []} for op in changed
        }
        for _ in range(rounds):
            for label, pick in (("real", 0), ("without", 1)):
                timings: dict[str, float] = {}
                calls = []
                for start in range(0, per_round, 100):
                    batch = [
                        Task(user_id=f"u{(n + i) % 5000}", name=f"job{i % NAMES}")
                        for i in range(start, start + 100)
                    ]
                    n += 100
                    calls.append(q.ops.push_many(batch))
                client.config_resetstat()
                for call in calls:
                    run_call(client, call, shas["push"][pick])
                c, us = script_usec(client)
                timings["push"] = us / (c * 100)
                leased: list[Task] = []
                client.config_resetstat()
                while len(leased) < per_round:
                    pop = q.ops.pop(100, "bench", 600, None, None)
                    got = pop.parse(run_call(client, pop, shas["pop"][pick]))
                    if not got:
                        break
                    leased += got
                c, us = script_usec(client)
                timings["pop"] = us / max(len(leased), 1)
                client.config_resetstat()
                for task in leased:
                    run_call(client, q.ops.complete(task, None), shas["complete"][pick])
                c, us = script_usec(client)
                timings["complete"] = us / c
                for op in changed:
                    figures[op][label].append(timings[op])
        out[experiment] = {}
        for op, by_variant in figures.items():
            us_real = statistics.median(by_variant["real"])
            us_without = statistics.median(by_variant["without"])
            out[experiment][op] = {
                "server_us_per_task": round(us_real, 2),
                "server_us_without": round(us_without, 2),
                "extra_us": round(us_real - us_without, 2),
            }
        log(f"{experiment}: {out[experiment]}")
    q.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100,000 tasks, 10,000 users")
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.users = 100_000, 10_000
    report: dict[str, Any] = {"tasks": args.tasks, "users": args.users, "names": NAMES}
    with EmbeddedServer() as server:
        client = redis.Redis.from_url(server.url)
        # a 10,000-task batch can outlast redis-py's default 5 s socket timeout on a busy box
        q = FairQueue(redis.Redis.from_url(server.url, socket_timeout=120), "listing")
        before = int(client.info("memory")["used_memory"])
        report["load_s"] = round(load(q, args.tasks, args.users), 1)
        after = int(client.info("memory")["used_memory"])
        report["used_memory_bytes_per_task"] = round((after - before) / args.tasks)
        keys = q.ops.keys
        index_bytes = sum(
            int(client.memory_usage(keys.name_index(f"job{i}")) or 0) for i in range(NAMES)
        )
        sample = [int(client.memory_usage(keys.user_index(f"user{i}")) or 0) for i in range(1000)]
        index_bytes += round(statistics.mean(sample) * args.users)
        report["index_bytes_per_task"] = round(index_bytes / args.tasks)
        log("finishing 1 % ...")
        finish_some(q, args.tasks // 100)
        report["pages_limit_50"] = pages(q, args.samples, args.users)
        log("index and metrics cost ...")
        report["server_cost"] = cost(client, server.url, 2_000, 5)
        q.close()
        client.close()
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
