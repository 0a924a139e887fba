"""Rate-limit benchmark: is a rate exact, and do the workers reach it?

Defines ``rate`` tokens per second with ``burst`` on a queue, loads it with more tasks
(each of ``cost`` tokens) than the run can start, and drains it with ``workers``
workers of 10 slots each in this process for ``seconds``. Prints one JSON document:

* ``max_in_window``: the most starts in any window [t, t + W) for W of 1 s and 0.5 s,
  by the server's start times (``Task.started_at``), against what the limit allows
  (the whole tasks that fit in W * rate + burst - 1 + cost - 1 tokens: a task dearer
  than the burst starts once the schedule has come to now);
* ``max_tokens_in_window``: the most tokens the starts of any such window took, against
  ``allowed_tokens`` (W * rate + burst - 1 + cost - 1: the last start may be dear);
  with ``--mixed`` this is the measure (``allowed`` counts whole tasks of ``cost``);
* ``utilisation``: tokens per second over the run (first to last start) as a fraction
  of the rate.

Starts a private Valkey unless ``--url`` is given.

Usage::

    uv run python benchmarks/rate_limit.py [--rate 20] [--burst 1] [--cost 1]
        [--seconds 20] [--workers 3] [--url URL]

``--rate 10 --cost 5``: the issue's "10 tokens a second, tasks of cost 5" (at most two
starts in any second). ``--mixed 4 --cost 4``: every fourth task costs 4 tokens, the
rest 1 (the tokens a second still reach the rate).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import uuid
from typing import Any

from fairque import AsyncFairQueue, Context, Registry, Task, Worker, WorkerConfig
from fairque.cli.embedded import EmbeddedServer


def max_in_window(starts: list[float], window: float) -> int:
    """Most starts in any window [t, t + ``window``)."""
    starts = sorted(starts)
    best, hi = 0, 0
    for lo, t in enumerate(starts):
        while hi < len(starts) and starts[hi] < t + window:
            hi += 1
        best = max(best, hi - lo)
    return best


def max_tokens_in_window(tokens: dict[float, int], window: float) -> int:
    """Most tokens taken by the starts of any window [t, t + ``window``)."""
    times = sorted(tokens)
    best, hi, held = 0, 0, 0
    for t in times:
        while hi < len(times) and times[hi] < t + window:
            held += tokens[times[hi]]
            hi += 1
        best = max(best, held)
        held -= tokens[t]
    return best


async def run(
    url: str, rate: int, burst: int, seconds: float, workers: int, cost: int = 1,
    mixed: int = 1,
) -> dict[str, Any]:  # fmt: skip
    q = AsyncFairQueue.from_url(url, f"bench-rate-{uuid.uuid4().hex[:8]}")
    reg = Registry()
    starts: list[float] = []
    tokens: dict[float, int] = {}

    @reg.task(name="limited")
    async def limited(ctx: Context) -> None:
        assert ctx.task.started_at is not None
        at = ctx.task.started_at.timestamp()
        starts.append(at)
        tokens[at] = tokens.get(at, 0) + ctx.task.cost

    def cost_of(i: int) -> int:  # every ``mixed``-th task costs ``cost``, the rest 1
        return cost if i % mixed == 0 else 1

    await q.define_constraint(id="r", name="limited", rate=rate, per=1.0, burst=burst)
    load = int(seconds * rate * 1.5 / cost) + 50
    await q.push_many(
        [Task(user_id=f"u{i % 5}", name="limited", cost=cost_of(i)) for i in range(load)]
    )
    config = WorkerConfig(max_concurrent_tasks=10)
    running = [Worker(q, reg, config) for _ in range(workers)]
    jobs = [asyncio.create_task(w.run_async()) for w in running]
    await asyncio.sleep(seconds)
    for w in running:
        w.request_stop()
    await asyncio.gather(*jobs, return_exceptions=True)
    await q.purge()
    await q.close()
    first = min(starts)
    kept = sorted(s for s in starts if s - first < seconds)
    span = kept[-1] - kept[0]

    def allowed(window: float) -> int:
        return int((math.ceil(window * rate) + burst - 1 + cost - 1) // cost)

    def allowed_tokens(window: float) -> int:
        return math.ceil(window * rate) + burst - 1 + cost - 1

    taken = {t: tokens[t] for t in dict.fromkeys(kept)}
    # tokens taken after the first start, over the run's span (a start's own tokens
    # are paid for by the interval before it)
    spent = sum(tokens[t] for t in dict.fromkeys(kept)) - tokens[kept[0]]

    return {
        "rate": rate,
        "burst": burst,
        "cost": cost,
        "mixed": mixed,
        "seconds": seconds,
        "workers": workers,
        "starts": len(kept),
        "max_in_window": {
            "1s": max_in_window(kept, 1.0),
            "0.5s": max_in_window(kept, 0.5),
        },
        "allowed": {"1s": allowed(1.0), "0.5s": allowed(0.5)},
        "max_tokens_in_window": {
            "1s": max_tokens_in_window(taken, 1.0),
            "0.5s": max_tokens_in_window(taken, 0.5),
        },
        "allowed_tokens": {"1s": allowed_tokens(1.0), "0.5s": allowed_tokens(0.5)},
        "utilisation": round(spent / span / rate, 4) if span > 0 else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=int, default=20)
    parser.add_argument("--burst", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--cost", type=int, default=1, help="tokens each task takes")
    parser.add_argument("--mixed", type=int, default=1,
                        help="only every N-th task costs --cost, the rest 1")  # fmt: skip
    parser.add_argument("--url", default=None, help="a server to use instead of a private one")
    args = parser.parse_args()
    server = None if args.url else EmbeddedServer()
    if server is not None:
        server.start()
    try:
        url = args.url or (server.url if server else "")
        doc = run(url, args.rate, args.burst, args.seconds, args.workers, args.cost, args.mixed)
        print(json.dumps(asyncio.run(doc)))
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
