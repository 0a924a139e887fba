"""Dashboard benchmark: how long each ``/ui`` page and ``/metrics`` take on a big queue.

Starts a private Valkey on a free port, loads ``--tasks`` tasks (default 1,000,000) over
``--users`` users (default 100,000, so every user has ready work) and 20 task names,
finishes and fails a few thousand of them, leaves some leased, registers a worker, then
serves the dashboard with uvicorn on a free port and times each page over HTTP (client
wall clock, median and p99 of ``--samples`` requests); then loads the tenants page until
its rolling scan has read every user's backlog, and times it (and ``/metrics``) again.
Prints one JSON document on stdout; progress goes to stderr.

Usage::

    uv run python benchmarks/ui.py [--quick] [--tasks N] [--users N] [--samples N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

import httpx
import redis
import uvicorn

from fairque import FairQueue, Task
from fairque.cli.embedded import EmbeddedServer
from fairque.models import WorkerInfo
from fairque.service.app import Service, create_app
from fairque.service.settings import ServerSettings

NAMES = 20
BATCH = 10_000
QUEUE = "ui-bench"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load(q: FairQueue, tasks: int, users: int) -> float:
    started = time.perf_counter()
    for start in range(0, tasks, BATCH):
        batch = [
            Task(user_id=f"user{i % users}", name=f"job{i % NAMES}", payload={"i": i},
                 task_id=f"t{i}")
            for i in range(start, min(start + BATCH, tasks))
        ]  # fmt: skip
        for attempt in range(5):
            try:
                q.push_many(batch)  # ids are given, so a resend after a timeout is a no-op
                break
            except redis.TimeoutError:
                if attempt == 4:
                    raise
                log("push timed out (a busy machine); sending the batch again")
        if start % 100_000 == 0:
            log(f"loaded {start + BATCH:,}")
    return time.perf_counter() - started


def work(q: FairQueue, finish: int, fail: int, hold: int) -> None:
    """Finish ``finish`` tasks, fail ``fail`` and leave ``hold`` leased."""
    for count, outcome in ((finish, "finish"), (fail, "fail")):
        done = 0
        while done < count:
            tasks = q.pop_batch(min(500, count - done), "bench", lease_seconds=600)
            if not tasks:
                break
            for task in tasks:
                if outcome == "finish":
                    q.complete(task, {"ok": True})
                else:
                    q.fail(task, "Traceback (most recent call last):\n  boom", retry=False)
            done += len(tasks)
    q.pop_batch(hold, "bench", lease_seconds=3600)
    q.register_worker(
        WorkerInfo(
            worker_id="bench", queue=q.queue, host="localhost", pid=1,
            started_at=datetime.now(timezone.utc), concurrency=hold,
        ),
        ttl_seconds=3600,
    )  # fmt: skip


class Server:
    """The service on a free loopback port, on a background thread."""

    def __init__(self, url: str) -> None:
        app = create_app(Service(url, [QUEUE], ServerSettings()))
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.base = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def timed(http: httpx.Client, url: str, samples: int) -> dict[str, Any]:
    times, size = [], 0
    for _ in range(samples):
        started = time.perf_counter()
        response = http.get(url)
        times.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise RuntimeError(f"{url}: {response.status_code} {response.text[:300]}")
        size = len(response.content)
    times.sort()
    return {
        "median_ms": round(statistics.median(times), 1),
        "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 1),
        "bytes": size,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="20,000 tasks, 2,000 users")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.users, args.samples = 20_000, 2_000, 5
    with EmbeddedServer() as embedded:
        q = FairQueue.from_url(embedded.url, QUEUE)
        seconds = load(q, args.tasks, args.users)
        log("working some tasks")
        work(q, finish=5000, fail=1000, hold=50)
        some = q.list_tasks("QUEUED", limit=1).tasks[0]
        failed = q.list_tasks("FAILED", limit=1).tasks[0]
        server = Server(embedded.url)
        base = f"{server.base}/ui/q/{QUEUE}"
        pages = {
            "overview": base,
            "tenants (top 50 by backlog)": f"{base}/tenants",
            "tenants page 100": f"{base}/tenants?page=100",
            "tenants sorted by served": f"{base}/tenants?sort=served",
            "tenants one user": f"{base}/tenants?user=user7",
            "tasks QUEUED": f"{base}/tasks?state=QUEUED",
            "tasks QUEUED of one user": f"{base}/tasks?state=QUEUED&user=user7",
            "tasks QUEUED of one name": f"{base}/tasks?state=QUEUED&name=job3",
            "tasks FAILED": f"{base}/tasks?state=FAILED",
            "task (queued, why waiting)": f"{base}/task?id={quote(some.task_id or '')}",
            "task (failed)": f"{base}/task?id={quote(failed.task_id or '')}",
            "user": f"{base}/user?id=user7",
            "workers": f"{base}/workers",
            "bulk confirmation (FAILED)": f"{base}/bulk?state=FAILED&action=retry",
            "metrics": f"{server.base}/metrics",
        }
        results: dict[str, Any] = {}
        learned: dict[str, Any] = {}
        try:
            with httpx.Client(timeout=120) as http:
                for label, url in pages.items():
                    log(f"timing {label}")
                    timed(http, url, 1)  # warm up
                    results[label] = timed(http, url, args.samples)
                # the rolling scan learns 1,000 more users per load: go round the ring,
                # then time the tenants page with every user's backlog known
                log("loading the tenants page until the scan has gone round the ring")
                started, loads = time.perf_counter(), 0
                while "users have ready work" in http.get(f"{base}/tenants").text:
                    loads += 1
                    if loads > 2 * args.users // 1000 + 10:
                        raise RuntimeError("the rolling scan did not cover the ring")
                learned = {
                    "loads_to_cover_the_ring": loads + 1,
                    "seconds": round(time.perf_counter() - started, 1),
                    "tenants (every user known)": timed(http, f"{base}/tenants", args.samples),
                    "tenants sorted by served (every user known)": timed(
                        http, f"{base}/tenants?sort=served", args.samples
                    ),
                    "metrics (every user known)": timed(
                        http, f"{server.base}/metrics", args.samples
                    ),
                }
        finally:
            server.stop()
        report = {
            "tasks": args.tasks,
            "users": args.users,
            "samples": args.samples,
            "load_seconds": round(seconds, 1),
            "server": "valkey (embedded), one uvicorn worker, same machine",
            "pages": results,
            "after_the_scan_covered_the_ring": learned,
        }
        print(json.dumps(report, indent=2))
        q.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
