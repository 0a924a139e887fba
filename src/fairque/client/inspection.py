"""The inspection methods of ``FairQueue`` and ``AsyncFairQueue``: bounded reads of a
queue's lanes, ring, leases and buckets for the dashboard, ``/metrics`` and the CLI.

Each read is built by ``fairque.core.ops.inspection`` over the key table and sent in
pipelined round trips of at most ``CHUNK`` commands; nothing here writes. The flows are
written once (``InspectionFlows``); the two clients only drive them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from fairque.memory import MemoryReport
from fairque.models import (
    BucketUse,
    Priority,
    StartedTask,
    Task,
    UserLoad,
    WaitPlace,
)

if TYPE_CHECKING:
    from fairque.client.base import Flow
    from fairque.client.shards.placement import Placement
    from fairque.core.ops import Operations
    from fairque.core.records import Call

T = TypeVar("T")

#: commands per pipelined round trip
CHUNK = 2000
#: most recently started tasks ``recent_starts`` reads by default
SAMPLE = 1000
#: users ``ring_users`` and ``capped_users`` return by default
USERS = 1000
#: above this many weights set, ``user_weights`` reads only the users asked for
WEIGHTS_WHOLE = 50_000


class InspectionFlows:
    """The reads as flows (see ``fairque.client.base``)."""

    ops: Operations

    if TYPE_CHECKING:

        def _pipeline(self, calls: tuple[Call[Any], ...]) -> Flow[list[Any]]: ...

        def _placed_flow(self) -> Flow[None]: ...

    def _reads(self, calls: Sequence[Call[Any]]) -> Flow[list[Any]]:
        """Send ``calls`` in pipelines of ``CHUNK``; their answers in order."""
        out: list[Any] = []
        for start in range(0, len(calls), CHUNK):
            out.extend((yield from self._pipeline(tuple(calls[start : start + CHUNK]))))
        return out

    def _server_memory_flow(self) -> Flow[str | None]:
        try:
            memory: str | None = yield self.ops.server_memory()
        except Exception:  # a server without INFO, or a proxy that forbids it
            return None
        return memory

    def _memory_report_flow(self) -> Flow[MemoryReport | None]:
        try:
            report: MemoryReport = yield self.ops.memory_report()
        except Exception:  # a server without INFO, or a proxy that forbids it
            return None
        return report

    def _recent_starts_flow(self, sample: int) -> Flow[list[StartedTask]]:
        heads = yield from self._reads(self.ops.recent_heads(sample))
        ids = list(dict.fromkeys(i for found in heads for i in found))
        rows = yield from self._reads([self.ops.started_task(i) for i in ids])
        started = [row for row in rows if row is not None]
        started.sort(key=lambda s: s.started, reverse=True)
        return started

    def _ring_users_flow(self, limit: int, offset: int) -> Flow[tuple[list[str], int]]:
        # (ZRANGE 0 -1 would be the whole ring); the calls are built (checked) first
        page = self.ops.ring_page(offset, limit) if limit > 0 else (self.ops.ring_size(),)
        yield from self._placed_flow()  # tasks pushed one at a time: their users join
        if limit <= 0:
            size: int = yield page[0]
            return [], size
        users, size = yield from self._reads(page)
        return users, size

    def _backlogs_flow(self, users: Sequence[str]) -> Flow[dict[str, tuple[int, int]]]:
        calls = [c for u in users for c in self.ops.lane_lengths(u)]
        yield from self._placed_flow()
        answers = yield from self._reads(calls)
        return {u: (answers[2 * i], answers[2 * i + 1]) for i, u in enumerate(users)}

    def _user_loads_flow(self, users: Iterable[str]) -> Flow[list[UserLoad]]:
        names = list(dict.fromkeys(users))
        if not names:
            return []
        yield from self._placed_flow()
        now: int = yield self.ops.server_time()
        per_user = [self.ops.user_load(u, now) for u in names]
        width = len(per_user[0])
        answers = yield from self._reads([c for calls in per_user for c in calls])
        rows = [answers[i * width : (i + 1) * width] for i in range(len(names))]
        heads = [row[-2] + row[-1] for row in rows]  # the lanes' first ids
        created = yield from self._reads([self.ops.created_ms(t) for ids in heads for t in ids])
        loads, at = [], 0
        for name, row, ids in zip(names, rows, heads, strict=True):
            known = [t for t in created[at : at + len(ids)] if t is not None]
            at += len(ids)
            loads.append(self.ops.load_from(name, row, min(known) if known else None))
        return loads

    def _user_weights_flow(self, users: Sequence[str]) -> Flow[list[int]]:
        size: int = yield self.ops.weights_size()
        if size <= WEIGHTS_WHOLE:
            known: dict[str, int] = yield self.ops.all_weights()
            return [known.get(u, 1) for u in users]
        out: list[int] = []
        for start in range(0, len(users), 1000):
            out.extend((yield self.ops.weights_of(users[start : start + 1000])))
        return out

    def _task_links_flow(self, task_id: str) -> Flow[tuple[list[str], list[str]]]:
        blocks, waits_for = yield from self._reads(self.ops.task_links(task_id))
        return blocks, waits_for

    def _oldest_queued_flow(self) -> Flow[int | None]:
        yield from self._placed_flow()
        oldest: int | None = yield self.ops.oldest_queued()
        return oldest

    def _wait_place_flow(self, task: Task) -> Flow[WaitPlace]:
        critical = task.priority is Priority.CRITICAL
        lane = self.ops.lane_place(task)  # built (checked) before anything is placed
        yield from self._placed_flow()
        now: int = yield self.ops.server_time()
        place, critical_len, rank, size = yield from self._reads(lane)
        buckets, parked, aside = yield self.ops.task_buckets(task.task_id or "")
        uses = yield from self._reads([c for b in buckets for c in self.ops.bucket_use(b, now)])
        if place is not None and not critical:
            place += critical_len  # the critical lane always goes first
        dues = [uses[2 * i + 1] for i in range(len(buckets))]
        return WaitPlace(
            set_aside=task.name if aside else None,
            lane="critical" if critical else "normal",
            ahead=place,
            ring_rank=rank,
            ring_size=size,
            buckets=[
                BucketUse(
                    bucket=bucket,
                    in_use=uses[2 * i],
                    frees_in=None if dues[i] is None else max(0.0, dues[i] - now) / 1000,
                    parked=bucket == parked,
                )
                for i, bucket in enumerate(buckets)
            ],
        )


# Generated by tools/unasync.py from AsyncInspectionMethods: edit that class, then run the tool.
class InspectionMethods(InspectionFlows):
    """The reads on the blocking client."""

    _place: Placement

    if TYPE_CHECKING:

        def _run(self, call: Call[T]) -> T: ...

        def _drive(self, flow: Flow[T]) -> T: ...

    def server_time_ms(self) -> int:
        """The server's clock in milliseconds (the clock the scripts use)."""
        return self._run(self.ops.server_time())

    def server_memory(self) -> str | None:
        """The server's used memory as it reports it (e.g. ``12.5M``), or None."""
        return self._drive(self._server_memory_flow())

    def memory_report(self) -> MemoryReport | None:
        """The server's memory in use, its limit and its eviction policy, per node
        (None: the server does not tell). ``warnings()`` names a policy that would
        drop tasks at the limit."""
        return self._drive(self._memory_report_flow())

    def recent_starts(self, sample: int = SAMPLE) -> list[StartedTask]:
        """The tasks started most recently, newest first: the ``sample`` newest FINISHED
        entries and a quarter as many FAILED and running ones, with their times."""
        return self._drive(self._place.recent_starts(sample))

    def ring_users(self, limit: int = USERS, offset: int = 0) -> tuple[list[str], int]:
        """Up to ``limit`` users of the ring from rank ``offset`` (served next first),
        and the ring's size."""
        return self._drive(self._place.ring_users(limit, offset))

    def capped_users(self, limit: int = USERS) -> list[str]:
        """Up to ``limit`` users with ready work held out of the ring by their cap."""
        users: list[str] = self._drive(self._place.capped_users(limit))
        return sorted(users)

    def backlogs(self, users: Sequence[str]) -> dict[str, tuple[int, int]]:
        """Critical and normal lane lengths of ``users``."""
        return self._drive(self._place.backlogs(users))

    def user_loads(self, users: Iterable[str]) -> list[UserLoad]:
        """Each user's load now: lanes, leases in flight, weight, cap, place in the
        ring, and its oldest waiting task among the heads of its lanes."""
        return self._drive(self._place.user_loads(users))

    def user_weights(self, users: Sequence[str]) -> list[int]:
        """The weights of ``users`` (1 when unset)."""
        return self._drive(self._place.user_weights(users))

    def oldest_queued_ms(self) -> int | None:
        """Push time (ms) of the task QUEUED longest, or None."""
        return self._drive(self._place.oldest_queued())

    def task_links(self, task_id: str) -> tuple[list[str], list[str]]:
        """The tasks ``task_id`` blocks, and the upstreams it still waits for."""
        return self._drive(self._place.task_links(task_id))

    def wait_place(self, task: Task) -> WaitPlace:
        """Where a QUEUED task waits: tasks ahead of it, its user's place in the ring,
        the constraint buckets it counts in."""
        return self._drive(self._place.wait_place(task))


class AsyncInspectionMethods(InspectionFlows):
    """The reads on the asyncio client."""

    _place: Placement

    if TYPE_CHECKING:

        async def _run(self, call: Call[T]) -> T: ...

        async def _drive(self, flow: Flow[T]) -> T: ...

    async def server_time_ms(self) -> int:
        """The server's clock in milliseconds (the clock the scripts use)."""
        return await self._run(self.ops.server_time())

    async def server_memory(self) -> str | None:
        """The server's used memory as it reports it (e.g. ``12.5M``), or None."""
        return await self._drive(self._server_memory_flow())

    async def memory_report(self) -> MemoryReport | None:
        """The server's memory in use, its limit and its eviction policy, per node
        (None: the server does not tell). ``warnings()`` names a policy that would
        drop tasks at the limit."""
        return await self._drive(self._memory_report_flow())

    async def recent_starts(self, sample: int = SAMPLE) -> list[StartedTask]:
        """The tasks started most recently, newest first: the ``sample`` newest FINISHED
        entries and a quarter as many FAILED and running ones, with their times."""
        return await self._drive(self._place.recent_starts(sample))

    async def ring_users(self, limit: int = USERS, offset: int = 0) -> tuple[list[str], int]:
        """Up to ``limit`` users of the ring from rank ``offset`` (served next first),
        and the ring's size."""
        return await self._drive(self._place.ring_users(limit, offset))

    async def capped_users(self, limit: int = USERS) -> list[str]:
        """Up to ``limit`` users with ready work held out of the ring by their cap."""
        users: list[str] = await self._drive(self._place.capped_users(limit))
        return sorted(users)

    async def backlogs(self, users: Sequence[str]) -> dict[str, tuple[int, int]]:
        """Critical and normal lane lengths of ``users``."""
        return await self._drive(self._place.backlogs(users))

    async def user_loads(self, users: Iterable[str]) -> list[UserLoad]:
        """Each user's load now: lanes, leases in flight, weight, cap, place in the
        ring, and its oldest waiting task among the heads of its lanes."""
        return await self._drive(self._place.user_loads(users))

    async def user_weights(self, users: Sequence[str]) -> list[int]:
        """The weights of ``users`` (1 when unset)."""
        return await self._drive(self._place.user_weights(users))

    async def oldest_queued_ms(self) -> int | None:
        """Push time (ms) of the task QUEUED longest, or None."""
        return await self._drive(self._place.oldest_queued())

    async def task_links(self, task_id: str) -> tuple[list[str], list[str]]:
        """The tasks ``task_id`` blocks, and the upstreams it still waits for."""
        return await self._drive(self._place.task_links(task_id))

    async def wait_place(self, task: Task) -> WaitPlace:
        """Where a QUEUED task waits: tasks ahead of it, its user's place in the ring,
        the constraint buckets it counts in."""
        return await self._drive(self._place.wait_place(task))
