"""Simulated fairness across shards under the lease rule of a sharded queue.

Every tenant is backlogged, of weight 1, and its tasks all cost one unit of worker time.
Tenants are placed on shards by the client's own hash (``fairque.core.shards.shard_of``).
Within a shard the ring is exact (start-time fair queuing: the head's start tag moves
one unit per round of the shard's tenants). Each of ``--workers`` workers leases in turn
by the client's rule (``fairque.client.shards.spread``): of the pair (the shard it leased from
last, one other drawn at random) it takes the shard whose ring head stands lower.

Reports, for each (shards, tenants) pair: the tenants per shard (fewest, most), and each
tenant's service over its fair share (leases / (all leases / tenants)): the largest
deviation and the mean absolute one, and Jain's index over tenants' service. Prints one
JSON document.

    uv run python benchmarks/shard_sim.py [--cases 6x60,6x600,64x1000000] [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from typing import Any

from fairque.core.shards import shard_of


def placement(shards: int, tenants: int) -> list[int]:
    """How many of ``tenants`` (ids ``t0``, ``t1``...) each shard holds."""
    counts = [0] * shards
    for i in range(tenants):
        counts[shard_of(f"t{i}", shards)] += 1
    return counts


def simulate(counts: Sequence[int], leases: int, workers: int, seed: int) -> list[int]:
    """Leases served by each shard under the pair rule."""
    rng = random.Random(seed)
    live = [s for s, n in enumerate(counts) if n > 0]
    served = [0] * len(counts)
    last = [rng.choice(live) for _ in range(workers)]

    def head(s: int) -> int:  # the ring head's start tag: whole rounds served
        return served[s] // counts[s]

    for lease in range(leases):
        w = lease % workers
        mine = last[w]
        other = rng.choice(live)
        while other == mine and len(live) > 1:
            other = rng.choice(live)
        target = mine if head(mine) <= head(other) else other
        served[target] += 1
        last[w] = target
    return served


def report(shards: int, tenants: int, rounds: int, workers: int, seed: int) -> dict[str, Any]:
    counts = placement(shards, tenants)
    leases = rounds * tenants
    served = simulate(counts, leases, workers, seed)
    fair = leases / tenants
    ratios = [(served[s] / n) / fair for s, n in enumerate(counts) if n]
    weights = [n for n in counts if n]
    total = sum(r * n for r, n in zip(ratios, weights, strict=True))
    squares = sum(r * r * n for r, n in zip(ratios, weights, strict=True))
    mean_abs = sum(abs(r - 1) * n for r, n in zip(ratios, weights, strict=True)) / tenants
    return {
        "shards": shards,
        "tenants": tenants,
        "leases": leases,
        "tenants_per_shard": [min(weights), max(weights)],
        "max_deviation": round(max(abs(r - 1) for r in ratios), 4),
        "mean_abs_deviation": round(mean_abs, 5),
        "jain": round(total * total / (tenants * squares), 6),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="6x60,6x600,64x1000000",
                        help="shards x tenants, comma-separated")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=20, help="leases per tenant")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    cases = [tuple(int(x) for x in c.split("x")) for c in args.cases.split(",") if c]
    doc = {
        "benchmark": "shard_sim",
        "rounds": args.rounds,
        "workers": args.workers,
        "cases": [report(s, t, args.rounds, args.workers, args.seed) for s, t in cases],
    }
    json.dump(doc, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
