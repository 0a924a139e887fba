"""The Node.js client's worker over HTTP: is it fair by handler time, and busy?

Starts a private Valkey and ``fairque serve`` (a separate process), fills a queue with
``slow`` tenant tasks of 100 ms and ``fast`` tenant tasks of 1 ms (more than the run
can take), and runs ``--workers`` Node workers of ``--concurrency`` slots
(``clients/node``) for ``--seconds``. Each handler's span is recorded by the worker;
over the middle of the run (the first and last fifth left out) it prints, as JSON: each
tenant's share of handler time (time mode promises 50/50), and how busy the slots were
(handler time over slots x time).

Usage::

    uv run python benchmarks/node_worker.py [--seconds 10] [--concurrency 4] [--workers 1]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from served import machine, start_service

from fairque import FairQueue, Task
from fairque.cli.embedded import EmbeddedServer, free_port

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    queue = f"bench-node-{uuid.uuid4().hex[:8]}"
    slots = args.concurrency * args.workers
    with EmbeddedServer() as valkey, tempfile.TemporaryDirectory() as tmp:
        q = FairQueue.from_url(valkey.url, queue)
        slow = int(args.seconds * slots * 10) + 100  # more than every slot could run
        fast = int(args.seconds * slots * 1000) + 1000
        for user, ms, count in (("slow", 100, slow), ("fast", 1, fast)):
            for start in range(0, count, 5000):
                q.push_many([Task(user_id=user, name="work", payload={"ms": ms})
                             for _ in range(min(5000, count - start))])  # fmt: skip
        port = free_port()
        service = start_service(valkey.url, port, queue)
        spans = Path(tmp) / "spans.jsonl"
        spans.touch()
        env = {**os.environ, "FAIRQUE_API": f"http://127.0.0.1:{port}", "FAIRQUE_QUEUE": queue,
               "CONCURRENCY": str(args.concurrency), "SPANS": str(spans)}  # fmt: skip
        workers = [
            subprocess.Popen(
                ["node", str(HERE / "node_worker.mjs")], env=env, stdout=subprocess.PIPE, text=True
            )
            for _ in range(args.workers)
        ]
        began = time.time() * 1000
        time.sleep(args.seconds)
        ended = time.time() * 1000
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.communicate(timeout=60)
        service.terminate()
        service.wait(timeout=15)
        q.purge()
        q.close()
        lines = [json.loads(line) for line in spans.read_text().splitlines()]
    lo = began + (ended - began) / 5
    hi = ended - (ended - began) / 5
    busy: dict[str, float] = {"slow": 0.0, "fast": 0.0}
    for user, start, end in lines:
        busy[user] += max(0.0, min(end, hi) - max(start, lo))
    total = sum(busy.values())
    report = {
        "benchmark": "node_worker",
        "settings": vars(args),
        "machine": machine(),
        "results": {
            "share_of_handler_time": {u: round(b / total, 4) for u, b in busy.items()},
            "slots_busy": round(total / (slots * (hi - lo)), 4),
            "tasks_run": {u: sum(1 for s in lines if s[0] == u) for u in busy},
        },
        "note": "time mode promises each saturated tenant half the handler time",
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
