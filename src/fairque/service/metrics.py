"""``GET /metrics``: the served queues in the Prometheus text format.

Gauges are read from Redis at scrape time with bounded work: per-user series only for
the ``top`` users with the largest backlog the rolling scan knows (``ranking.ranking``
reads ``ranking.SCAN_USERS`` more users of the ring per scrape), so the label set and
the work stay bounded with 100,000 users. Counters and the wait-time and run-time
histograms are the ones the scripts keep in the same transition (``metrics()``).
Each user's service (``fairque_tenant_*``: leases, outcomes, worker time, its wait
histogram, its weight) is shown for the ``tenants`` most recently leased users of a
queue (``tenants()``), the rest summed under ``user_id=""``: a user that enters the
named set takes its counts out of that sum, which a rate over it reads as a reset.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.registry import Collector

from fairque.client.aio import AsyncFairQueue
from fairque.memory import MemoryReport
from fairque.models import (
    HISTOGRAM_BOUNDS_SECONDS,
    Histogram,
    QueueMetrics,
    TaskState,
    TenantReport,
)
from fairque.service.ui import ranking

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
#: users with their own ready / in-flight series, per queue
TOP_USERS = 50
#: queues read at once by one scrape
SCRAPE_CONCURRENCY = 4

#: the bounds of the per-user wait histograms when ``metrics_buckets`` is not set: every
#: fourth kept bound (a factor 2, 1 ms to 70 min), so 20 users cost 24 series each
TENANT_BOUNDS = list(range(0, len(HISTOGRAM_BOUNDS_SECONDS), 4))

#: ``QueueMetrics`` counter -> (metric name without _total, help)
COUNTERS: dict[str, tuple[str, str]] = {
    "pushed": ("fairque_tasks_pushed", "Tasks pushed (new ids only)."),
    "popped": ("fairque_tasks_leased", "Leases handed out (a task leased again counts again)."),
    "finished": ("fairque_tasks_finished", "Tasks that ended FINISHED."),
    "failed": ("fairque_tasks_failed", "Tasks that ended FAILED (retries used up or not retried)."),
    "canceled": ("fairque_tasks_canceled", "Tasks that ended CANCELED."),
    "retried": ("fairque_tasks_retried", "Failed attempts scheduled for another attempt."),
    "reclaimed": ("fairque_tasks_reclaimed", "Expired leases taken back (a failed attempt each)."),
    "lease_lost": (
        "fairque_leases_lost",
        "complete, fail or extend calls refused because the lease was no longer held.",
    ),
    "requeued": (
        "fairque_tasks_requeued",
        "Leased tasks given back without a failure (a stopping worker's, no handler).",
    ),
    "schedule_fired": ("fairque_schedule_tasks_fired", "Tasks pushed by schedules."),
    "schedule_skipped": (
        "fairque_schedule_slots_skipped",
        "Missed schedule slots that a misfire policy skipped.",
    ),
}


class _Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return iter(self.families)


async def _queue_figures(q: AsyncFairQueue, top: int, tenants: int) -> dict[str, Any]:
    stats, workers, now, oldest, capped, service = await asyncio.gather(
        q.stats(user_limit=top),
        q.workers(),
        q.server_time_ms(),
        q.oldest_queued_ms(),
        q.capped_users(),
        q.tenants(max(tenants, 1)),
    )
    known = await ranking.ranking(q, [*capped, *(u.user_id for u in stats.users)])
    lanes = known.backlogs
    ranked = sorted(lanes, key=lambda u: (-sum(lanes[u]), u))[:top]
    held = {u.user_id for u in stats.users if u.in_flight}
    shown = list(dict.fromkeys([*ranked, *sorted(held)[:top]]))
    loads = await q.user_loads(shown)
    engine_metrics = await q.metrics()
    named = [] if service is None else [t.group for t in service.tenants if t.group]
    return {
        "groups": await q.group_loads(named) if tenants > 0 else [],
        "stats": stats,
        "workers": len(workers),
        "oldest": None if oldest is None else max(0.0, (now - oldest) / 1000),
        "loads": loads,
        "metrics": engine_metrics,
        "tenants": service if tenants > 0 else None,
    }


HISTOGRAMS = (
    ("wait_time", "fairque_task_wait_seconds",
     "Time from entering QUEUED to the lease (ready -> leased)."),
    ("run_time", "fairque_task_run_seconds",
     "Time from the lease to FINISHED or FAILED (reclaimed leases are not timed)."),
)  # fmt: skip


def exported_bounds(wanted: Sequence[float] | None) -> list[int]:
    """Which of the scripts' bucket bounds ``/metrics`` shows: every one (``None``), or
    for each bound ``wanted`` (seconds) the largest kept bound at or under it, so each
    ``le`` count is exact. The answer is indexes into ``HISTOGRAM_BOUNDS_SECONDS``."""
    if wanted is None:
        return list(range(len(HISTOGRAM_BOUNDS_SECONDS)))
    found = {
        max(0, bisect.bisect_right(HISTOGRAM_BOUNDS_SECONDS, bound * (1 + 1e-9)) - 1)
        for bound in wanted
    }
    return sorted(found)


def _add_histogram(family: HistogramMetricFamily, labels: list[str], hist: Histogram,
                   shown: Sequence[int]) -> None:  # fmt: skip
    cumulative = hist.cumulative
    buckets = [(_le(hist.bounds[i]), float(cumulative[i])) for i in shown]
    buckets.append(("+Inf", float(hist.count)))
    family.add_metric(labels, buckets, sum_value=float(hist.sum))


#: ``TenantService`` counter -> (metric name without _total, help)
TENANT_COUNTERS: dict[str, tuple[str, str]] = {
    "started": ("fairque_tenant_tasks_started", "Leases handed out to the user's tasks."),
    "finished": ("fairque_tenant_tasks_finished", "The user's attempts that completed."),
    "failed": (
        "fairque_tenant_tasks_failed",
        "The user's attempts that failed (an expired lease counts).",
    ),
    "busy_seconds": (
        "fairque_tenant_worker_seconds",
        "Worker time the user's leases held (lease to its end, or to an expired deadline).",
    ),
}


def tenant_families(figures: Mapping[str, dict[str, Any]], shown: Sequence[int]) -> list[Metric]:
    """The per-user service families: each queue's named users and the rest
    (``user_id=""``), with the weight each user has now."""
    labels = ["queue", "user_id"]
    counters = {
        key: CounterMetricFamily(name, doc, labels=labels)
        for key, (name, doc) in TENANT_COUNTERS.items()
    }
    wait = HistogramMetricFamily(
        "fairque_tenant_wait_seconds", "The user's tasks' time from QUEUED to the lease.",
        labels=labels,
    )  # fmt: skip
    weight = GaugeMetricFamily(
        "fairque_tenant_weight",
        "The user's weight now (its fair share is its weight over the busy users' weights).",
        labels=labels,
    )
    group = GaugeMetricFamily(
        "fairque_tenant_group_info",
        "1 for each named user in a group (join on queue and user_id to sum by group).",
        labels=[*labels, "group"],
    )
    group_weight = GaugeMetricFamily(
        "fairque_group_weight", "The weight of a named user's group now.",
        labels=["queue", "group"],
    )  # fmt: skip
    group_backlog = GaugeMetricFamily(
        "fairque_group_tasks_waiting",
        "A named user's group's tasks queued, scheduled or deferred (kept from the queue's"
        " first group quota on).",
        labels=["queue", "group"],
    )
    group_quota = GaugeMetricFamily(
        "fairque_group_backlog_quota", "A named user's group's backlog quota, if it has one.",
        labels=["queue", "group"],
    )  # fmt: skip
    for queue, f in figures.items():
        report: TenantReport | None = f.get("tenants")
        if report is None:
            continue
        for tenant in [*report.tenants, report.others]:
            for key, family in counters.items():
                family.add_metric([queue, tenant.user_id], float(getattr(tenant, key)))
            _add_histogram(wait, [queue, tenant.user_id], tenant.wait_time, shown)
            if tenant.user_id:
                weight.add_metric([queue, tenant.user_id], tenant.weight)
            if tenant.group:
                group.add_metric([queue, tenant.user_id, tenant.group], 1.0)
        for load in f.get("groups", ()):
            group_weight.add_metric([queue, load.group_id], load.weight)
            group_backlog.add_metric([queue, load.group_id], load.queued)
            if load.max_queued:
                group_quota.add_metric([queue, load.group_id], load.max_queued)
    return [*counters.values(), wait, weight, group, group_weight, group_backlog, group_quota]


def _le(bound: float) -> str:
    return f"{bound:.6g}"


def families(
    figures: Mapping[str, dict[str, Any]], buckets: Sequence[float] | None = None
) -> list[Metric]:
    """Metric families of every queue's figures: one family per metric, each queue's
    samples in it (a family block appears once in the text, whatever the queues)."""
    tasks = GaugeMetricFamily("fairque_tasks", "Tasks per state now.", labels=["queue", "state"])
    ready = GaugeMetricFamily(
        "fairque_user_ready_tasks",
        "Ready tasks of the users with the largest backlog, per lane.",
        labels=["queue", "user_id", "lane"],
    )
    in_flight = GaugeMetricFamily(
        "fairque_user_in_flight_tasks",
        "Unexpired leases of the users shown in fairque_user_ready_tasks and of lease holders.",
        labels=["queue", "user_id"],
    )
    held_bytes = GaugeMetricFamily(
        "fairque_user_payload_bytes",
        "Bytes the shown users' tasks hold (payloads, results kept), counted under a byte"
        " quota (max_bytes).",
        labels=["queue", "user_id"],
    )
    byte_quota = GaugeMetricFamily(
        "fairque_user_byte_quota", "A shown user's own byte quota, if it has one.",
        labels=["queue", "user_id"],
    )  # fmt: skip
    oldest = GaugeMetricFamily(
        "fairque_oldest_waiting_seconds", "Age of the task QUEUED longest (0: none).",
        labels=["queue"],
    )  # fmt: skip
    workers = GaugeMetricFamily(
        "fairque_workers_alive", "Registered workers with a recent heartbeat.", labels=["queue"]
    )
    users = GaugeMetricFamily(
        "fairque_users_ready", "Users with ready work in the ring.", labels=["queue"]
    )
    capped = GaugeMetricFamily(
        "fairque_users_capped", "Users with ready work held out by their cap.", labels=["queue"]
    )
    counters = {
        key: CounterMetricFamily(name, doc, labels=["queue"])
        for key, (name, doc) in COUNTERS.items()
    }
    shown = exported_bounds(buckets)
    hists = {attr: HistogramMetricFamily(name, doc, labels=["queue"])
             for attr, name, doc in HISTOGRAMS}  # fmt: skip
    for queue, f in figures.items():
        stats = f["stats"]
        for state in TaskState:
            tasks.add_metric([queue, state.value], stats.counts.get(state, 0))
        for load in f["loads"]:
            ready.add_metric([queue, load.user_id, "critical"], load.critical)
            ready.add_metric([queue, load.user_id, "normal"], load.normal)
            in_flight.add_metric([queue, load.user_id], load.in_flight)
            held_bytes.add_metric([queue, load.user_id], load.bytes)
            if load.max_bytes:
                byte_quota.add_metric([queue, load.user_id], load.max_bytes)
        oldest.add_metric([queue], f["oldest"] or 0.0)
        workers.add_metric([queue], f["workers"])
        users.add_metric([queue], stats.active_users)
        capped.add_metric([queue], stats.capped_users)
        engine_metrics: QueueMetrics = f["metrics"]
        values = {key: int(getattr(engine_metrics, key)) for key in COUNTERS}
        for attr, hist in hists.items():
            _add_histogram(hist, [queue], getattr(engine_metrics, attr), shown)
        for key, family in counters.items():
            family.add_metric([queue], float(values.get(key, 0)))
    gauges = [tasks, ready, in_flight, held_bytes, byte_quota, oldest, workers, users, capped]
    busy = CounterMetricFamily(
        "fairque_worker_seconds", "Worker time every lease of the queue held.", labels=["queue"]
    )
    for queue, f in figures.items():
        report: TenantReport | None = f.get("tenants")
        if report is not None:
            busy.add_metric([queue], report.busy_seconds)
    tenant_shown = shown if buckets is not None else TENANT_BOUNDS
    return [*gauges, *counters.values(), busy, *hists.values(),
            *tenant_families(figures, tenant_shown)]  # fmt: skip


def server_families(report: MemoryReport | None) -> list[Metric]:
    """The queue server's memory per node (``node=""``: a standalone server): in use,
    the limit, their ratio (an alert can fire before the limit), and whether its
    eviction policy would drop tasks at the limit."""
    labels = ["node"]
    used = GaugeMetricFamily(
        "fairque_server_memory_used_bytes", "Memory the queue server uses.", labels=labels
    )
    limit = GaugeMetricFamily(
        "fairque_server_memory_max_bytes",
        "The queue server's maxmemory (0: no limit).",
        labels=labels,
    )
    ratio = GaugeMetricFamily(
        "fairque_server_memory_used_ratio",
        "Memory in use over maxmemory (nodes with a limit); pushes are refused at 1.",
        labels=labels,
    )
    evicting = GaugeMetricFamily(
        "fairque_server_evicting",
        "1 when the server's maxmemory-policy drops keys at the limit (tasks would be lost).",
        labels=[*labels, "policy"],
    )
    for node in report.nodes if report is not None else ():
        used.add_metric([node.node], node.used_bytes)
        limit.add_metric([node.node], node.max_bytes)
        if node.share is not None:
            ratio.add_metric([node.node], node.share)
        evicting.add_metric([node.node, node.policy], 1.0 if node.evicting else 0.0)
    return [used, limit, ratio, evicting]


def media_type(accept: str | None) -> str:
    """The exposition format a scraper asked for: OpenMetrics when its ``Accept`` names
    it (Prometheus does), else the text format 0.0.4."""
    if accept and "application/openmetrics-text" in accept:
        return OPENMETRICS_TYPE
    return CONTENT_TYPE


async def scrape(
    queues: Mapping[str, AsyncFairQueue],
    top: int = TOP_USERS,
    buckets: Sequence[float] | None = None,
    media: str = CONTENT_TYPE,
    tenants: int = 20,
) -> bytes:
    """``queues`` in the exposition format ``media`` (``media_type``), with the service
    of ``tenants`` users per queue (``tenant_families``)."""
    names = list(queues)
    # a few queues at a time: the shared connection pool serves the requests meanwhile
    gate = asyncio.Semaphore(SCRAPE_CONCURRENCY)

    async def figures(name: str) -> dict[str, Any]:
        async with gate:
            return await _queue_figures(queues[name], top, tenants)

    found = await asyncio.gather(*(figures(n) for n in names))
    # one server behind every queue: its memory once per scrape
    report = await queues[names[0]].memory_report() if names else None
    return exposition(
        [
            up_family(True),
            *families(dict(zip(names, found, strict=True)), buckets),
            *server_families(report),
        ],
        media,
    )


def up_family(up: bool) -> Metric:
    """``fairque_server_up``: 1 when the queue server answered the scrape. While it
    does not, ``/metrics`` still answers (200) with this family alone at 0, so an alert
    can tell a server outage from a service outage (the scrape itself failing)."""
    return GaugeMetricFamily(
        "fairque_server_up",
        "1 when the queue server answered this scrape; 0 when it did not (no other family).",
        value=1.0 if up else 0.0,
    )


def exposition(found: list[Metric], media: str = CONTENT_TYPE) -> bytes:
    """``found`` in the exposition format ``media``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(found))
    if media == OPENMETRICS_TYPE:
        data: bytes = openmetrics.generate_latest(registry)  # type: ignore[no-untyped-call]
        return data
    return generate_latest(registry)
