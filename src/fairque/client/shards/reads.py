"""The reads of a sharded queue that the dashboard, ``/metrics`` and the command line
make: each asks the shards that can answer (a user's shard, a task's, or all of them)
and merges their answers into the one a plain queue gives.

Written once as flows (``fairque.client.base``) of the ``Shards`` placement; the
clients only drive them. What a merged answer means across shards is in docs/howto/shards.md:
counts and histograms are sums, a user's figures come from its shard, a ring position
is a position in the user's shard.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from fairque.client.base import Flow
from fairque.core.shards import shard_of
from fairque.models import (
    Histogram,
    QueueMetrics,
    QueueStats,
    StartedTask,
    TenantReport,
    TenantService,
    UserLoad,
)

if TYPE_CHECKING:
    from fairque.client.shards.placement import Partition

T = TypeVar("T")
_EPOCH = datetime.min.replace(tzinfo=timezone.utc)


def add_histograms(parts: Sequence[Histogram]) -> Histogram:
    """The sum of histograms kept with the same bounds."""
    first = parts[0]
    return first.model_copy(
        update={
            "counts": [sum(h.counts[i] for h in parts) for i in range(len(first.counts))],
            "sum": sum(h.sum for h in parts),
            "count": sum(h.count for h in parts),
        }
    )


def add_services(parts: Sequence[TenantService]) -> TenantService:
    """The sum of what several users were served (``user_id`` empty: the rest)."""
    leases = [t.last_lease for t in parts if t.last_lease is not None]
    return TenantService(
        user_id="",
        last_lease=max(leases) if leases else None,
        started=sum(t.started for t in parts),
        finished=sum(t.finished for t in parts),
        failed=sum(t.failed for t in parts),
        busy_seconds=sum(t.busy_seconds for t in parts),
        wait_time=add_histograms([t.wait_time for t in parts]),
    )


class ShardedReads:
    """The merged reads; mixed into ``Shards``."""

    _parts: tuple[Partition, ...]
    _count: int

    if TYPE_CHECKING:

        def each(self, build: Callable[[Partition], Any]) -> Flow[list[Any]]: ...

    def _by_user(self, users: Iterable[str]) -> dict[int, list[str]]:
        """``users`` (once each, in order) grouped by the shard each lives in."""
        groups: dict[int, list[str]] = {}
        for user in dict.fromkeys(users):
            groups.setdefault(shard_of(user, self._count), []).append(user)
        return groups

    def metrics(self) -> Flow[QueueMetrics]:
        parts: list[QueueMetrics] = yield from self.each(lambda p: p.ops.metrics())
        counters = {
            name: sum(getattr(m, name) for m in parts)
            for name, field in QueueMetrics.model_fields.items()
            if field.annotation is int
        }
        return parts[0].model_copy(
            update={
                **counters,
                "wait_time": add_histograms([m.wait_time for m in parts]),
                "run_time": add_histograms([m.run_time for m in parts]),
            }
        )

    def tenants(self, limit: int) -> Flow[TenantReport]:
        """The ``limit`` most recently leased users over all shards, the rest summed."""
        reports: list[TenantReport] = yield from self.each(lambda p: p.ops.tenants(limit))
        named = sorted(
            (t for r in reports for t in r.tenants),
            key=lambda t: t.last_lease or _EPOCH,
            reverse=True,
        )
        rest = add_services([*(r.others for r in reports), *named[limit:]])
        return reports[0].model_copy(
            update={
                "tenants": named[:limit],
                "others": rest.model_copy(update={"last_lease": None}),
                "users_known": sum(r.users_known for r in reports),
                "busy_seconds": sum(r.busy_seconds for r in reports),
            }
        )

    def ring_users(self, limit: int, offset: int) -> Flow[tuple[list[str], int]]:
        """The rings of the shards one after another (each in its own order)."""
        sizes = []
        for part in self._parts:
            _, size = yield from part._ring_users_flow(0, 0)
            sizes.append(size)
        if limit <= 0:
            return [], sum(sizes)
        users: list[str] = []
        start = offset
        for part, size in zip(self._parts, sizes, strict=True):
            if len(users) >= limit:
                break
            if start >= size:
                start -= size
                continue
            page, _ = yield from part._ring_users_flow(limit - len(users), start)
            users.extend(page)
            start = 0
        return users, sum(sizes)

    def capped_users(self, limit: int) -> Flow[list[str]]:
        found: list[list[str]] = yield from self.each(lambda p: p.ops.capped_sample(limit))
        return sorted(u for users in found for u in users)[:limit]

    def backlogs(self, users: Sequence[str]) -> Flow[dict[str, tuple[int, int]]]:
        out: dict[str, tuple[int, int]] = {}
        for shard, mine in self._by_user(users).items():
            out.update((yield from self._parts[shard]._backlogs_flow(mine)))
        return out

    def user_loads(self, users: Iterable[str]) -> Flow[list[UserLoad]]:
        order = list(dict.fromkeys(users))
        loads: dict[str, UserLoad] = {}
        for shard, mine in self._by_user(order).items():
            for load in (yield from self._parts[shard]._user_loads_flow(mine)):
                loads[load.user_id] = load
        return [loads[u] for u in order if u in loads]

    def user_weights(self, users: Sequence[str]) -> Flow[list[int]]:
        weights: dict[str, int] = {}
        for shard, mine in self._by_user(users).items():
            found = yield from self._parts[shard]._user_weights_flow(mine)
            weights.update(zip(mine, found, strict=True))
        return [weights[u] for u in users]

    def recent_starts(self, sample: int) -> Flow[list[StartedTask]]:
        started: list[StartedTask] = []
        for part in self._parts:
            started.extend((yield from part._recent_starts_flow(sample)))
        started.sort(key=lambda s: s.started, reverse=True)
        return started

    def oldest_queued(self) -> Flow[int | None]:
        oldest = []
        for part in self._parts:
            found = yield from part._oldest_queued_flow()
            if found is not None:
                oldest.append(found)
        return min(oldest) if oldest else None

    def stats(self, user_limit: int) -> Flow[QueueStats]:
        parts: list[QueueStats] = yield from self.each(lambda p: p.ops.stats(user_limit))
        first = parts[0]
        counts = {s: sum(p.counts.get(s, 0) for p in parts) for s in first.counts}
        counters: dict[str, int] = {}
        for p in parts:
            for k, v in p.counters.items():
                counters[k] = counters.get(k, 0) + v
        users = sorted((u for p in parts for u in p.users), key=lambda u: (-u.ready, -u.in_flight))
        return first.model_copy(
            update={
                "counts": counts,
                "counters": counters,
                "users": users[:user_limit],
                "active_users": sum(p.active_users for p in parts),
                "capped_users": sum(p.capped_users for p in parts),
            }
        )

    def next_wakeup(self) -> Flow[float | None]:
        times: list[float | None] = yield from self.each(lambda p: p.ops.next_wakeup())
        known = [t for t in times if t is not None]
        return min(known) if known else None
