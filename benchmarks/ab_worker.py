"""A/B of the worker on a real handler: two source trees, interleaved, one server.

    uv run python benchmarks/ab_worker.py --tree new=src --tree old=/tmp/old/src
        [--rounds 3] [-n 20000] [--concurrency 50] [--fairness count] [--handler real|noop]

Each source tree is a ``src`` directory (another version: ``git worktree add /tmp/old
<commit>``). For every round and tree in turn: the queue is emptied, ``n`` tasks over
100 users are pushed in bulk with that tree's client, then ``python -m fairque worker``
of that tree drains them with its default settings (``--concurrency`` if given) and
its default logging, to a file. The ``real`` handler makes one Redis round trip per task
(``INCR``) with an asyncio client, as most tasks read or write one key; it also stamps
the first and the last execution, so the rate runs from the first to the last task
(start-up excluded). Prints JSON: per tree, every round's rate and the median, the
worker's CPU per task (``wait4``, start-up included) and the server's CPU per task
(``INFO cpu``, push included). Interleaving is what makes two trees comparable on a
shared machine: read the ratio of medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import redis

from fairque.cli.embedded import EmbeddedServer

HERE = Path(__file__).resolve().parent
USERS = 100

HANDLERS = """
import os, time
import redis.asyncio as aioredis
from fairque import task

_N = int(os.environ["AB_N"])
_client = None
_done = 0


async def _stamp(done):
    if done == 1:
        await _client.set("ab:first", repr(time.time()))
    elif done == _N:
        await _client.set("ab:last", repr(time.time()))


@task(name="real")
async def real(payload):
    global _client
    if _client is None:
        _client = aioredis.Redis.from_url(os.environ["AB_URL"])
    await _stamp(await _client.incr("ab:done"))


@task(name="noop")
async def noop(payload):
    global _client, _done
    if _client is None:
        _client = aioredis.Redis.from_url(os.environ["AB_URL"])
    _done += 1
    if _done in (1, _N):
        await _stamp(_done)
"""

PUSH = """
import os, sys
from fairque import FairQueue, Task
q = FairQueue.from_url(os.environ["AB_URL"], sys.argv[1])
if os.environ.get("AB_FAIRNESS"):
    q.set_fairness(os.environ["AB_FAIRNESS"])
n, name = int(os.environ["AB_N"]), sys.argv[2]
users = int(os.environ["AB_USERS"])
tasks = [Task(user_id=f"u{i % users}", name=name, payload={"i": i}) for i in range(n)]
for start in range(0, n, 5000):
    q.push_many(tasks[start : start + 5000])
"""


def server_cpu(client: redis.Redis) -> float:
    cpu: dict[str, Any] = client.info("cpu")
    return float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])


def one_run(
    url: str, src: str, work: Path, args: argparse.Namespace, client: redis.Redis
) -> dict[str, float]:
    client.flushall()
    queue = "ab-" + uuid.uuid4().hex[:8]
    env = {
        **os.environ,
        "PYTHONPATH": f"{src}{os.pathsep}{work}",
        "AB_URL": url,
        "AB_N": str(args.n),
        "AB_FAIRNESS": args.fairness or "",
        "AB_USERS": str(USERS),
    }
    before = server_cpu(client)
    subprocess.run([sys.executable, str(work / "ab_push.py"), queue, args.handler], env=env,
                   check=True)  # fmt: skip
    command = [sys.executable, "-m", "fairque", "--url", url, "--queue", queue, "worker",
               "--import", "ab_handlers"]  # fmt: skip
    if args.concurrency:
        command += ["--concurrency", str(args.concurrency)]
    with (work / "worker.log").open("w") as log:
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=log)
        while not client.exists("ab:last"):
            if proc.poll() is not None:
                raise SystemExit(f"the worker of {src} exited: see {work / 'worker.log'}")
            time.sleep(0.05)
        proc.terminate()
        _, _, usage = os.wait4(proc.pid, 0)
    first, last = float(client.get("ab:first") or 0), float(client.get("ab:last") or 0)
    return {
        "per_s": round((args.n - 1) / (last - first)),
        "worker_cpu_us": round((usage.ru_utime + usage.ru_stime) / args.n * 1e6, 1),
        "server_cpu_us": round((server_cpu(client) - before) / args.n * 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", required=True, help="name=path/to/src")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-n", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=0, help="0: the default")
    parser.add_argument("--fairness", choices=["time", "count"], default=None)
    parser.add_argument("--handler", choices=["real", "noop"], default="real")
    args = parser.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="fairque-ab-") as tmp, EmbeddedServer() as srv:
        work = Path(tmp)
        (work / "ab_handlers.py").write_text(HANDLERS)
        (work / "ab_push.py").write_text(PUSH)
        client = redis.Redis.from_url(srv.url)
        for round_no in range(args.rounds):
            for name, src in trees.items():
                run = one_run(srv.url, str(Path(src).resolve()), work, args, client)
                runs[name].append(run)
                print(f"round {round_no + 1} {name}: {run}", file=sys.stderr, flush=True)
    out = {
        "handler": args.handler,
        "tasks": args.n,
        "concurrency": args.concurrency or "default",
        "fairness": args.fairness or "as the tree's default",
        "trees": {
            name: {
                "median_per_s": round(statistics.median(r["per_s"] for r in rs)),
                "runs": rs,
            }
            for name, rs in runs.items()
        },
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
