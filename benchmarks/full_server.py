"""A server at its memory limit: how a worker drains it and when pushes come back.

Starts a private server (the embedded Valkey, or ``redis-server`` with ``--server
redis``) with ``maxmemory`` (24 MB by default) and ``maxmemory-policy noeviction``,
then, as a platform would meet it:

1. **fill**: 20 tenants push 300-byte tasks in batches of 200 until the server refuses
   one (``ServerFull``); it prints how many were accepted and checks that the refused
   batch wrote nothing;
2. **drain**: ``fairque worker --concurrency 8 --burst`` runs them at the limit; each run
   appends its task's id to a file (a handler at the limit cannot write to the server),
   so every task is counted once or more;
3. **recover**: a push of another tenant is tried every 0.1 s until the server takes
   it again. With the queue's defaults (a day's result TTL) it is taken as soon as the
   drain is done: a finished task keeps its result, not its payload, in a compact
   record (``--result-ttl`` sets a TTL instead; ``--wait`` caps the wait).

Prints one JSON document: the tasks accepted, run, run twice and lost, the drain's
seconds and rate, the memory before and after, and the seconds until a push was taken
again after the drain.

Usage::

    uv run python benchmarks/full_server.py [--server valkey|redis] [--maxmemory 24mb]
        [--result-ttl SECONDS] [--wait 60] [--concurrency 8] [--tenants 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import redis

from fairque import FairQueue, ServerFull, Task
from fairque.cli.embedded import EmbeddedServer, find_valkey_server

HANDLERS = """
import os
from fairque import task

OUT = os.environ["FULL_SERVER_RUNS"]

@task(name="work")
def work(payload):
    with open(OUT, "a") as f:
        f.write(payload["id"] + "\\n")
"""


def fill(q: FairQueue, tenants: int, batch: int) -> tuple[int, bool]:
    """Push until refused; how many were taken, and whether the refusal wrote nothing."""
    accepted = 0
    blob = "x" * 300
    while True:
        tasks = [
            Task(
                user_id=f"tenant-{(accepted + i) % tenants}",
                name="work",
                payload={"id": str(accepted + i), "blob": blob},
            )
            for i in range(batch)
        ]
        try:
            q.push_many(tasks)
        except ServerFull:
            return accepted, q.stats().total == accepted
        accepted += batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--server", choices=("valkey", "redis"), default="valkey")
    parser.add_argument("--maxmemory", default="24mb")
    parser.add_argument(
        "--result-ttl",
        type=float,
        default=None,
        help="the queue's result TTL (default: the queue's own, a day)",
    )
    parser.add_argument("--wait", type=float, default=60.0,
                        help="seconds to keep trying a push after the drain")  # fmt: skip
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--tenants", type=int, default=20)
    args = parser.parse_args()

    binary = find_valkey_server() if args.server == "valkey" else shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server not found")
    work = Path(tempfile.mkdtemp(prefix="full-server-"))
    server = EmbeddedServer(
        Path(binary),
        workdir=work / "server",
        extra_args=["--maxmemory", args.maxmemory, "--maxmemory-policy", "noeviction"],
    )
    server.start()
    out: dict[str, Any] = {"server": args.server, "maxmemory": args.maxmemory}
    try:
        raw = redis.Redis.from_url(server.url)
        options = {} if args.result_ttl is None else {"result_ttl_seconds": args.result_ttl}
        q = FairQueue.from_url(server.url, "full", **options)
        started = time.perf_counter()
        accepted, clean = fill(q, args.tenants, 200)
        out.update(
            accepted=accepted,
            refused_batch_wrote_nothing=clean,
            fill_seconds=round(time.perf_counter() - started, 2),
            memory_full_bytes=int(raw.info("memory")["used_memory"]),
        )
        (work / "full_handlers.py").write_text(HANDLERS)
        runs = work / "runs.txt"
        env = {**os.environ, "FULL_SERVER_RUNS": str(runs), "PYTHONPATH": str(work)}
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "fairque", "worker", "--url", server.url, "--queue", "full",
             "--concurrency", str(args.concurrency), "--import", "full_handlers", "--burst",
             "--log-level", "WARNING"],
            env=env, check=True, timeout=900,
        )  # fmt: skip
        drained = time.perf_counter()
        seen = Counter(runs.read_text().split())
        out.update(
            drain_seconds=round(drained - started, 2),
            drain_tasks_per_second=round(accepted / (drained - started)),
            run=len(seen),
            run_twice=sum(1 for c in seen.values() if c > 1),
            lost=accepted - sum(1 for i in range(accepted) if str(i) in seen),
            memory_drained_bytes=int(raw.info("memory")["used_memory"]),
        )
        first = None
        while time.perf_counter() - drained < args.wait:
            try:
                q.enqueue("work", {"id": "again"}, user_id="late")
            except ServerFull:
                time.sleep(0.1)
                continue
            first = time.perf_counter() - drained
            break
        out.update(
            push_taken_after_drain_seconds=None if first is None else round(first, 2),
            memory_recovered_bytes=int(raw.info("memory")["used_memory"]),
        )
        q.close()
        raw.close()
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
