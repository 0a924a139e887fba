"""What each dashboard page shows, gathered from one queue (no HTML here).

Each function returns a plain dict the page's template renders. Figures the engine does
not keep are derived from the client's bounded reads (``recent_starts``, ``user_loads``,
``wait_place``...) and labelled on the page with what they cover; none is estimated
beyond that.
"""

from __future__ import annotations

import asyncio
import heapq
import json
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from fairque.client.aio import AsyncFairQueue
from fairque.models import StartedTask, Task, TaskState, TenantReport, WorkerInfo
from fairque.service import listing
from fairque.service.ui import ranking
from fairque.service.ui.fairness import (
    histogram_quantile,
    jain,
    jain_norm,
    percentile,
    weighted_shares,
)
from fairque.service.ui.history import History
from fairque.service.ui.served import served_in

#: the windows the tenants page offers, seconds
WINDOWS = (60, 300, 900, 3600)
#: tenants per page
PAGE = 50
#: the engine's counters shown on the overview
COUNTERS = ("pushed", "popped", "finished", "failed", "canceled", "retried", "reclaimed",
            "requeued", "lease_lost")  # fmt: skip
#: states whose latest start is an attempt not yet counted in retry_count
_ATTEMPTED = frozenset({TaskState.STARTED, TaskState.FINISHED, TaskState.FAILED})
#: the sort orders of the tenants page
SORTS = ("backlog", "in_flight", "served", "wait", "user")


def ago(now_ms: int, then_ms: int | None) -> float | None:
    """Seconds from ``then_ms`` to ``now_ms`` (None when unknown)."""
    return None if then_ms is None else max(0.0, (now_ms - then_ms) / 1000)


def pretty(value: Any) -> str:
    """A payload or result as indented JSON text (escaped by the template)."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        return repr(value)


async def _overview_reads(
    q: AsyncFairQueue,
) -> tuple[list[WorkerInfo], int, int | None, list[StartedTask], str | None]:
    return await asyncio.gather(
        q.workers(), q.server_time_ms(), q.oldest_queued_ms(), q.recent_starts(), q.server_memory()
    )


async def overview(q: AsyncFairQueue, history: History | None = None) -> dict[str, Any]:
    """Counts, throughput and waits per minute, the oldest waiting task, workers, memory.

    The per-minute chart comes from ``history`` (the scripts' counters sampled while the
    server runs) once it holds two snapshots, else from the most recent task starts.
    """
    (stats, engine), (workers, now, oldest, served, mem) = await asyncio.gather(
        asyncio.gather(q.stats(user_limit=1), q.metrics()),
        _overview_reads(q),
    )
    ended = [s for s in served if s.ended is not None]
    span = ago(now, min(s.started for s in served)) if served else None
    minutes: dict[int, dict[str, Any]] = {}
    for s in ended:
        minute = (now - s.ended) // 60_000 if s.ended is not None else 0
        if minute >= 60:
            continue
        slot = minutes.setdefault(int(minute), {"finished": 0, "failed": 0, "waits": []})
        slot["finished" if s.state == "FINISHED" else "failed"] += 1
        slot["waits"].append(s.wait_seconds)
    chart = []
    for minute in range(min(60, int((span or 0) // 60) + 1) - 1, -1, -1):
        slot = minutes.get(minute, {"finished": 0, "failed": 0, "waits": []})
        chart.append(
            {
                "minute": minute,
                "finished": slot["finished"],
                "failed": slot["failed"],
                "p50": percentile(slot["waits"], 50),
                "p95": percentile(slot["waits"], 95),
            }
        )
    chart_source = "sample"
    sampled = history.minutes(q.queue) if history is not None else []
    if sampled:
        chart, chart_source = sampled, "history"
    waits = [s.wait_seconds for s in served]
    return {
        "counts": {state.value: stats.counts.get(state, 0) for state in TaskState},
        "counters": {key: getattr(engine, key) for key in COUNTERS},
        "hist": {
            label: {
                "p50": histogram_quantile(h.bounds, h.counts, 0.5),
                "p95": histogram_quantile(h.bounds, h.counts, 0.95),
                "count": h.count,
                "mean": h.sum / h.count if h.count else None,
            }
            for label, h in (("wait", engine.wait_time), ("run", engine.run_time))
        },
        "active_users": stats.active_users,
        "capped_users": stats.capped_users,
        "workers": len(workers),
        "oldest_age": ago(now, oldest),
        "memory": mem,
        "sample": len(served),
        "sample_span": span,
        "wait_p50": percentile(waits, 50),
        "wait_p95": percentile(waits, 95),
        "chart": chart,
        "chart_source": chart_source,
        "history_span": history.covered(q.queue) if history is not None else None,
        "chart_max": max([c["finished"] + c["failed"] for c in chart] + [1]),
        "wait_max": max([c["p95"] or 0 for c in chart] + [0.001]),
    }


async def tenants(
    q: AsyncFairQueue, window: int, sort: str, page: int, user: str | None
) -> dict[str, Any]:
    """One page of tenants ranked by ``sort``, with service in the last ``window`` seconds.

    Candidates are the users whose backlog the rolling scan knows (``ranking.ranking``:
    ``ranking.SCAN_USERS`` more ring users per call, kept ``ranking.MAX_AGE`` seconds), the
    capped users, the users holding leases and those served in the window; they are
    ranked and only the page's rows are read in full. "Served" counts the leases in the
    window from the server's per-tenant counters (``served.served_in``: since each user's
    first lease until the dashboard has watched a whole window); a user's fair share is
    its weighted max-min share of those leases given its demand (leases plus backlog), so
    a tenant that got all it asked for is at its share. Waits come from the
    ``ranking.SAMPLE`` most recent starts; when that sample is shorter than the window
    the page says so.
    """
    now = await q.server_time_ms()
    capped, served, stats, window_served = await asyncio.gather(
        q.capped_users(), q.recent_starts(), q.stats(user_limit=200), served_in(q, window)
    )
    since = now - window * 1000
    in_window = [s for s in served if s.started >= since]
    covered = ago(now, min(s.started for s in served)) if served else None
    truncated = len(served) >= ranking.SAMPLE and (covered or 0) < window
    # leases per user from the server's counters (the wait figures from the sample of
    # recent starts, which may cover less than the window: the page says so)
    served_by: Counter[str] = Counter(window_served.leases)
    waits_by: dict[str, list[float]] = defaultdict(list)
    for s in in_window:
        waits_by[s.user_id].append(s.wait_seconds)
    holders = [u.user_id for u in stats.users if u.in_flight]
    # one user asked for: no scan step, the fairness summary uses what is known
    ranked = await ranking.ranking(
        q, [user] if user else [*capped, *holders, *served_by], scan=not user
    )
    lanes = ranked.backlogs
    candidates = list(dict.fromkeys([*lanes, *capped, *holders, *served_by]))
    if user:
        candidates = [user]
    in_flight_hint = {u.user_id: u.in_flight for u in stats.users}
    # plain dicts and comprehensions: this runs over every known user (100,000). A user
    # the counters name has its backlog read now; the others', from the rolling scan
    backlog_of = {u: c + n for u, (c, n) in lanes.items()}
    backlog_of.update(window_served.backlog)
    backlog, served_of, flying = backlog_of.get, served_by.get, in_flight_hint.get

    # fairness over every user with demand in the window: its leases there (in flight
    # included) plus what still waits; max-min fair shares of the leases handed out
    demand_users = [u for u in candidates if backlog(u, 0) or served_of(u, 0)]
    known_weights = window_served.weights
    unknown = [u for u in demand_users if u not in known_weights]
    looked_up = dict(zip(unknown, await q.user_weights(unknown), strict=True))
    weights = [float(known_weights.get(u) or looked_up.get(u, 1)) for u in demand_users]
    served_list = [float(served_of(u, 0)) for u in demand_users]
    demands = [s + backlog(u, 0) for u, s in zip(demand_users, served_list, strict=True)]
    capacity = float(sum(served_list))
    shares = weighted_shares(capacity, demands, weights)
    fair = dict(zip(demand_users, shares, strict=True))
    p95 = {u: percentile(w, 95) or 0.0 for u, w in waits_by.items()}
    keys: dict[str, Callable[[str], Any]] = {
        "backlog": lambda u: (-backlog(u, 0), u),
        "in_flight": lambda u: (-flying(u, 0), -backlog(u, 0), u),
        "served": lambda u: (-served_of(u, 0), u),
        "wait": lambda u: (-p95.get(u, 0.0), u),
        "user": lambda u: (u,),
    }
    pages = max(1, -(-len(candidates) // PAGE))
    page = min(max(page, 1), pages)
    # only the rows up to this page are ordered (a partial sort)
    top = heapq.nsmallest(page * PAGE, candidates, key=keys.get(sort, keys["backlog"]))
    shown = top[(page - 1) * PAGE : page * PAGE]
    rows = []
    for load in await q.user_loads(shown):
        share = served_by[load.user_id] / capacity if capacity else None
        fair_share = fair.get(load.user_id, 0.0) / capacity if capacity else None
        rows.append(
            {
                "load": load,
                "served": served_by[load.user_id],
                "share": share,
                "fair_share": fair_share,
                "ratio": (share / fair_share) if share is not None and fair_share else None,
                "oldest_age": ago(now, load.oldest_ms),
                "p95_wait": percentile(waits_by[load.user_id], 95),
            }
        )
    return {
        "rows": rows,
        "window": window,
        "windows": WINDOWS,
        "sort": sort if sort in keys else "backlog",
        "sorts": SORTS,
        "page_no": page,
        "pages": pages,
        "user": user,
        "ring_size": ranked.ring_size,
        "known": len(lanes),
        "scan_step": ranking.SCAN_USERS,
        "ranking_age": ranked.age,
        "capped": len(capped),
        "candidates": len(candidates),
        "served_total": int(capacity),
        "covered": covered,
        "served_span": window_served.span,
        "ranking_sample": ranking.SAMPLE,
        "truncated": truncated,
        "jain": jain(served_list) if len(served_list) >= 2 else None,
        "jain_norm": jain_norm(served_list, demands, weights, shares),
        "demand_users": len(demand_users),
    }


#: users the tenants page names in its worker-time table (the most recently leased)
TENANT_ROWS = 20


async def worker_time(q: AsyncFairQueue, report: TenantReport) -> dict[str, Any]:
    """The tenants page's worker-time table: each named user's share of the worker time
    the queue's leases held, next to its demand-aware fair share (``fair_shares``), from
    the counters the scripts keep (since each user's first lease); and the named users'
    groups, with their limits and backlogs."""
    rows = []
    for t, fair in zip(report.tenants, report.fair_shares(), strict=True):
        share = report.share(t)
        rows.append(
            {
                "tenant": t,
                "share": share if report.busy_seconds > 0 else None,
                "fair_share": fair if report.busy_seconds > 0 else None,
                "ratio": share / fair if fair > 0 else None,
                "mean_wait": t.wait_time.sum / t.wait_time.count if t.wait_time.count else None,
            }
        )
    others = report.others
    # the named users' groups, each with its members' worker time (groups first, then
    # their tenants: a group's share is what its members got together)
    groups: dict[str, dict[str, Any]] = {}
    for t in report.tenants:
        if t.group:
            g = groups.setdefault(t.group, {"group": t.group, "tenants": [], "busy": 0.0})
            g["tenants"].append(t.user_id)
            g["busy"] += t.busy_seconds
    for g, load in zip(groups.values(), await q.group_loads(groups), strict=True):
        g["share"] = g["busy"] / report.busy_seconds if report.busy_seconds > 0 else None
        g["load"] = load
    return {
        "mode": report.fairness,
        "rows": rows,
        "groups": sorted(groups.values(), key=lambda g: -g["busy"]),
        "others": others if others.started or others.busy_seconds else None,
        "others_share": report.share(others),
        "busy_seconds": report.busy_seconds,
        "users_known": report.users_known,
    }


async def task_list(
    q: AsyncFairQueue,
    state: TaskState | None,
    user: str | None,
    name: str | None,
    cursor: str | None,
    limit: int,
) -> dict[str, Any]:
    """One page of a state's tasks, newest first."""
    tasks, next_cursor = await listing.list_tasks(q, state, limit, cursor, user, name)
    return {"tasks": tasks, "next_cursor": next_cursor}


async def matching_ids(
    q: AsyncFairQueue, state: TaskState | None, user: str | None, name: str | None, cap: int
) -> tuple[list[str], bool]:
    """Ids of up to ``cap`` tasks matching a filter, and whether more match."""
    ids: list[str] = []
    cursor: str | None = None
    while len(ids) < cap:
        tasks, cursor = await listing.list_tasks(q, state, 500, cursor, user, name)
        ids.extend(t.task_id for t in tasks if t.task_id)
        if cursor is None:
            return ids[:cap], len(ids) > cap
    return ids[:cap], True


async def task_page(q: AsyncFairQueue, task: Task) -> dict[str, Any]:
    """Everything about one task, and why it waits when it does."""
    assert task.task_id is not None
    task_id = task.task_id
    finished = task.state is TaskState.FINISHED
    now, (blocks, waiting), out = await asyncio.gather(
        q.server_time_ms(), q.task_links(task_id), q.outcome(task_id) if finished else _none()
    )
    has_result = out is not None and out.has_result
    upstream = list(task.depends_on)
    states = await asyncio.gather(*(q.get(t) for t in upstream))
    return {
        "task": task,
        "payload": pretty(task.payload),
        "result": pretty(out.result) if has_result and out is not None else None,
        "upstream": [
            (t, s.state.value if s is not None and s.state else "expired")
            for t, s in zip(upstream, states, strict=True)
        ],
        "downstream": blocks,
        "waiting_for": waiting,
        # retry_count counts the failed attempts; the running or last one is one more
        "attempt": task.retry_count
        + (1 if task.started_at is not None and task.state in _ATTEMPTED else 0),
        "why": await why(q, task, waiting),
        "now": datetime.fromtimestamp(now / 1000, tz=timezone.utc),
    }


async def _none() -> None:
    return None


async def why(q: AsyncFairQueue, task: Task, waiting_for: list[str]) -> dict[str, Any] | None:
    """Why a task that has not started waits: lane place, cap, ring place, delay, upstreams."""
    state = task.state
    if state is TaskState.SCHEDULED:
        return {"kind": "delayed", "due": task.execute_after}
    if state is TaskState.DEFERRED:
        return {"kind": "upstream", "waiting_for": sorted(waiting_for)}
    if state is not TaskState.QUEUED:
        return None
    place, (load,), found = await asyncio.gather(
        q.wait_place(task), q.user_loads([task.user_id]), q.workers()
    )
    constraints = [
        {"bucket": b.bucket, "in_use": b.in_use, "frees_in": b.frees_in, "parked": b.parked}
        for b in place.buckets
    ]
    return {
        "kind": "queued",
        "lane": place.lane,
        "ahead": place.ahead,
        "load": load,
        "at_cap": load.cap is not None and load.in_flight >= load.cap,
        "ring_rank": place.ring_rank,
        "ring_size": place.ring_size,
        "constraints": constraints,
        "parked": next((b.bucket for b in place.buckets if b.parked), None),
        "set_aside": place.set_aside,
        # the live workers that lease its name (a worker that names none takes any)
        "handled_by": sorted(w.worker_id for w in found if not w.names or task.name in w.names),
    }


async def workers(q: AsyncFairQueue) -> dict[str, Any]:
    """The registered workers, most recently seen first."""
    found = await q.workers()
    found.sort(key=lambda w: (w.last_seen_seconds is None, w.last_seen_seconds or 0))
    return {"workers": found}
