"""``GET /metrics``: the served queues in the Prometheus text format.

Gauges are read from Redis at scrape time with bounded work: per-user series only for
the ``top`` users with the largest backlog the rolling scan knows (``ranking.ranking``
reads ``ranking.SCAN_USERS`` more users of the ring per scrape), so the label set and
the work stay bounded with 100,000 users. Counters and the wait-time and run-time
histograms are the ones the scripts keep in the same transition (``metrics()``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from fairque.client.aio import AsyncFairQueue
from fairque.models import QueueMetrics, TaskState
from fairque.service.ui import ranking

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: users with their own ready / in-flight series, per queue
TOP_USERS = 50

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


async def _queue_figures(q: AsyncFairQueue, top: int) -> dict[str, Any]:
    stats, workers, now, oldest, capped = await asyncio.gather(
        q.stats(user_limit=top),
        q.workers(),
        q.server_time_ms(),
        q.oldest_queued_ms(),
        q.capped_users(),
    )
    known = await ranking.ranking(q, [*capped, *(u.user_id for u in stats.users)])
    lanes = known.backlogs
    ranked = sorted(lanes, key=lambda u: (-sum(lanes[u]), u))[:top]
    held = {u.user_id for u in stats.users if u.in_flight}
    shown = list(dict.fromkeys([*ranked, *sorted(held)[:top]]))
    loads = await q.user_loads(shown)
    engine_metrics = await q.metrics()
    return {
        "stats": stats,
        "workers": len(workers),
        "oldest": None if oldest is None else max(0.0, (now - oldest) / 1000),
        "loads": loads,
        "metrics": engine_metrics,
    }


def _histograms(queue: str, engine_metrics: QueueMetrics) -> Iterator[Metric]:
    """The wait-time and run-time histograms the scripts keep."""
    for hist, name, doc in (
        (engine_metrics.wait_time, "fairque_task_wait_seconds",
         "Time from entering QUEUED to the lease (ready -> leased)."),
        (engine_metrics.run_time, "fairque_task_run_seconds",
         "Time from the lease to FINISHED or FAILED (reclaimed leases are not timed)."),
    ):  # fmt: skip
        cumulative = hist.cumulative
        buckets = [(_le(b), float(n)) for b, n in zip(hist.bounds, cumulative, strict=False)]
        buckets.append(("+Inf", float(hist.count)))
        family = HistogramMetricFamily(name, doc, labels=["queue"])
        family.add_metric([queue], buckets, sum_value=float(hist.sum))
        yield family


def _le(bound: float) -> str:
    return repr(bound) if bound != int(bound) else f"{bound:.1f}"


def families(figures: Mapping[str, dict[str, Any]]) -> list[Metric]:
    """Metric families of every queue's figures."""
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
    hists: list[Metric] = []
    for queue, f in figures.items():
        stats = f["stats"]
        for state in TaskState:
            tasks.add_metric([queue, state.value], stats.counts.get(state, 0))
        for load in f["loads"]:
            ready.add_metric([queue, load.user_id, "critical"], load.critical)
            ready.add_metric([queue, load.user_id, "normal"], load.normal)
            in_flight.add_metric([queue, load.user_id], load.in_flight)
        oldest.add_metric([queue], f["oldest"] or 0.0)
        workers.add_metric([queue], f["workers"])
        users.add_metric([queue], stats.active_users)
        capped.add_metric([queue], stats.capped_users)
        engine_metrics: QueueMetrics = f["metrics"]
        values = {key: int(getattr(engine_metrics, key)) for key in COUNTERS}
        hists.extend(_histograms(queue, engine_metrics))
        for key, family in counters.items():
            family.add_metric([queue], float(values.get(key, 0)))
    return [tasks, ready, in_flight, oldest, workers, users, capped, *counters.values(), *hists]


async def scrape(queues: Mapping[str, AsyncFairQueue], top: int = TOP_USERS) -> bytes:
    """The Prometheus text of ``queues``."""
    names = list(queues)
    found = await asyncio.gather(*(_queue_figures(queues[n], top) for n in names))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families(dict(zip(names, found, strict=True)))))
    return generate_latest(registry)
