"""The methods of a sharded queue's asyncio client (``AsyncShardedFairQueue``, made
by ``AsyncFairQueue.open`` and ``from_url`` for a queue of more than one shard): the ones that
span shards run the flows of ``fairque.client.sharding`` (constraints and schedules:
``shardrules`` and ``shardschedules``); the rest (workers, XCom, the queue registry, the
scheduler's hand-over) live in shard 0 as on a plain queue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import redis.asyncio as aredis

from fairque.client.base import Flow, QueueBase
from fairque.client.inspection import SAMPLE as SAMPLE_STARTS
from fairque.client.inspection import USERS
from fairque.client.shardcalls import lease_request, placed_count
from fairque.client.sharding import ShardedFlows
from fairque.constraints.api import constraint_from
from fairque.constraints.model import Constraint, ConstraintInfo, ConstraintSet
from fairque.core.ops import Operations
from fairque.core.ops.shards import Layout
from fairque.core.records import Call, Pushed
from fairque.models import (
    Fairness,
    Priority,
    QueueMetrics,
    QueueStats,
    StartedTask,
    Task,
    TaskOutcome,
    TaskPage,
    TaskState,
    TenantReport,
    UserLoad,
    WaitPlace,
)
from fairque.schedules.api import schedule_from
from fairque.schedules.codec import DueSchedules, FireOutcome, StoredSchedule
from fairque.schedules.model import Schedule

T = TypeVar("T")


class AsyncShardWaits(ShardedFlows):
    """The one wait that differs by flavour: on a cluster, the asyncio client waits on
    every shard at once (the blocking client takes them in turns)."""

    if TYPE_CHECKING:

        async def _run(self, call: Call[T]) -> T: ...

    _cluster: bool

    async def _wait_any(
        self, every: Callable[[list[Operations], float], Call[bool]],
        one: Callable[[Operations, float], Call[bool]], timeout: float,
    ) -> bool:  # fmt: skip
        """Block until ``every`` (one command over all shards) answers True, or on a
        cluster until ``one`` does on some shard (all at once), or ``timeout`` passes."""
        timeout = self._bounded(timeout)
        if not self._cluster:
            return await self._run(every([p.ops for p in self.parts], timeout))
        waits = [asyncio.ensure_future(self._run(one(p.ops, timeout))) for p in self.parts]
        try:
            for next_done in asyncio.as_completed(waits):
                if await next_done:
                    return True
            return False
        finally:
            for wait in waits:
                wait.cancel()


class AsyncShardedMethods(AsyncShardWaits):
    """The methods of a sharded queue's asyncio client that span shards (see
    ``FairQueue`` for each method's contract; docs/howto/shards.md for what stays exact
    across shards)."""

    if TYPE_CHECKING:

        async def _run(self, call: Call[T]) -> T: ...

        async def _drive(self, flow: Flow[T]) -> T: ...

    def __init__(
        self, client: aredis.Redis | aredis.RedisCluster, queue: str, layout: Layout,
        **options: Any,
    ) -> None:  # fmt: skip
        super().__init__(client, queue, **options)
        self._init_shards(client, layout, options)
        self._cluster = isinstance(client, aredis.RedisCluster)

    async def push(self, task: Task) -> Task:
        return await self._drive(self._push_one_flow(task))

    async def push_many(
        self, tasks: Iterable[Task], *, delays: Sequence[float | None] | None = None
    ) -> Pushed:
        return await self._drive(self._push_many_flow(tasks, delays))

    async def enqueue(
        self, name: str, payload: Any = None, *, user_id: str,
        priority: int = Priority.NORMAL, delay: float | timedelta | None = None,
        execute_after: datetime | None = None, depends_on: Sequence[str] = (),
        task_id: str | None = None, max_retries: int | None = None,
        timeout: float | None = None, keep_result: bool = True,
        result_ttl: int | None = None,
        on_dependency_failure: Literal["cancel", "wait"] = "cancel",
    ) -> Task:  # fmt: skip
        def build(part: QueueBase) -> Call[Task]:
            return part.ops.enqueue(
                name, payload, user_id=user_id, priority=priority, delay=delay,
                execute_after=execute_after, depends_on=depends_on, task_id=task_id,
                max_retries=max_retries, timeout=timeout, keep_result=keep_result,
                result_ttl=result_ttl, on_dependency_failure=on_dependency_failure,
            )  # fmt: skip

        return await self._drive(self._enqueue_flow(build, user_id))

    async def pop(
        self, worker_id: str = "", lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None, names: Sequence[str] | None = None,
    ) -> Task | None:  # fmt: skip
        request = lease_request(1, worker_id, lease_seconds, assigned_users, steal_targets, None,
                                names)  # fmt: skip
        _, leased = await self._drive(self._lease_flow(request))
        return leased[0] if leased else None

    async def pop_batch(
        self, count: int, worker_id: str = "", lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None, request_id: str | None = None,
        names: Sequence[str] | None = None,
    ) -> list[Task]:  # fmt: skip
        request = lease_request(count, worker_id, lease_seconds, assigned_users, steal_targets,
                                request_id, names)  # fmt: skip
        return (await self._drive(self._lease_flow(request)))[1]

    async def complete_and_pop(
        self, done: Sequence[tuple[Task, Any]], count: int = 1, worker_id: str = "",
        lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None, request_id: str | None = None,
        names: Sequence[str] | None = None,
    ) -> tuple[list[bool], list[Task]]:  # fmt: skip
        request = lease_request(count, worker_id, lease_seconds, assigned_users, steal_targets,
                                request_id, names)  # fmt: skip
        acks, leased = await self._drive(self._lease_flow(request, done))
        return acks, leased

    async def complete(self, task: Task, result: Any = None) -> bool:
        shard, task = self._route(task)
        return await self._run(self.parts[shard].ops.complete(task, result))

    async def fail(
        self, task: Task, error: str | BaseException = "", retry: bool = True,
        delay: float | None = None, *, max_retries: int | None = None,
        traceback: str | None = None, reason: str | None = None, details: Any = None,
    ) -> TaskState:  # fmt: skip
        shard, task = self._route(task)
        ops = self.parts[shard].ops
        return await self._run(
            ops.fail(task, error, retry, delay, max_retries, traceback, reason, details)
        )

    async def extend(self, task: Task, seconds: float | None = None) -> datetime:
        shard, task = self._route(task)
        return await self._run(self.parts[shard].ops.extend(task, seconds))

    async def extend_many(self, tasks: Sequence[Task], seconds: float | None = None) -> list[bool]:
        return await self._drive(self._extend_many_flow(tasks, seconds)) if tasks else []

    async def requeue(self, task: Task, delay: float = 0) -> TaskState:
        shard, task = self._route(task)
        return await self._run(self.parts[shard].ops.requeue(task, delay))

    async def reclaim(self, limit: int = 1000) -> int:
        return await self._drive(self._sum_flow(lambda p: p.ops.reclaim(limit)))

    async def cancel(self, task_id: str) -> bool:
        return await self._drive(self._by_id_flow(task_id, lambda p: p.ops.cancel(task_id)))

    async def get(self, task_id: str) -> Task | None:
        return await self._drive(self._get_flow(task_id))

    async def retry(self, task_id: str) -> TaskState:
        return await self._drive(self._by_id_flow(task_id, lambda p: p.ops.retry(task_id)))

    async def result(self, task_id: str, timeout: float = 0, *, consume: bool = False) -> Any:
        return await self._drive(self._sharded_result_flow(task_id, timeout, consume))

    async def outcome(
        self, task_id: str, timeout: float = 0, *, consume: bool = False
    ) -> TaskOutcome | None:
        return await self._drive(self._sharded_outcome_flow(task_id, timeout, consume))

    async def list_tasks(
        self, state: TaskState | str | None = None, user_id: str | None = None,
        name: str | None = None, limit: int = 50, cursor: str | None = None,
    ) -> TaskPage:  # fmt: skip
        return await self._drive(self._list_all_flow(state, user_id, name, limit, cursor))

    async def cleanup_dependencies(self, batch: int = 500, *, passes: int | None = None) -> int:
        return await self._drive(self._cleanup_all_flow(batch, passes))

    async def next_wakeup(self) -> float | None:
        return await self._drive(self._next_wakeup_flow())

    async def maintain(self, batch: int = 1000) -> int:
        return await self._drive(self._sum_flow(lambda p: p.ops.maintain(batch)))

    async def place(self) -> int:
        return await self._drive(self._sum_flow(lambda p: placed_count(p.ops.place())))

    async def purge(self, batch: int = 1000) -> int:
        return await self._drive(self._purge_all_flow(batch))

    async def set_user_limits(
        self,
        user_id: str,
        *,
        weight: int | None = None,
        max_in_flight: int | None = None,
        max_queued: int | None = None,
    ) -> None:
        part = self._part(user_id)
        await self._run(part.ops.set_user_limits(user_id, weight, max_in_flight, max_queued))

    async def set_fairness(self, mode: Fairness) -> Fairness:
        was: list[Fairness] = await self._drive(self._each(lambda p: p.ops.set_fairness(mode)))
        return was[0]

    async def stats(self, user_limit: int = 100) -> QueueStats:
        return await self._drive(self._stats_flow(user_limit))

    async def wait_for_work(self, timeout: float) -> bool:
        return await self._wait_any(
            self.ops.wait_for_any, lambda ops, t: ops.wait_for_work(t), timeout
        )

    async def wait_and_pop(
        self, timeout: float, count: int = 1, worker_id: str = "",
        lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None, request_id: str | None = None,
        names: Sequence[str] | None = None,
    ) -> list[Task]:  # fmt: skip
        await self.wait_for_work(timeout)
        return await self.pop_batch(
            count, worker_id, lease_seconds, assigned_users=assigned_users,
            steal_targets=steal_targets, request_id=request_id, names=names,
        )  # fmt: skip

    async def metrics(self) -> QueueMetrics:
        return await self._drive(self._metrics_flow())

    async def tenants(self, limit: int = 20) -> TenantReport:
        return await self._drive(self._tenants_flow(limit))

    async def ring_users(self, limit: int = USERS, offset: int = 0) -> tuple[list[str], int]:
        return await self._drive(self._ring_users_all_flow(limit, offset))

    async def capped_users(self, limit: int = USERS) -> list[str]:
        return await self._drive(self._capped_all_flow(limit))

    async def backlogs(self, users: Sequence[str]) -> dict[str, tuple[int, int]]:
        return await self._drive(self._backlogs_all_flow(users))

    async def user_loads(self, users: Iterable[str]) -> list[UserLoad]:
        return await self._drive(self._user_loads_all_flow(users))

    async def user_weights(self, users: Sequence[str]) -> list[int]:
        return await self._drive(self._user_weights_all_flow(users))

    async def wait_place(self, task: Task) -> WaitPlace:
        return await self._drive(self._wait_place_all_flow(task))

    async def recent_starts(self, sample: int = SAMPLE_STARTS) -> list[StartedTask]:
        return await self._drive(self._recent_starts_all_flow(sample))

    async def task_links(self, task_id: str) -> tuple[list[str], list[str]]:
        return await self._drive(self._task_links_all_flow(task_id))

    async def oldest_queued_ms(self) -> int | None:
        return await self._drive(self._oldest_queued_all_flow())

    # constraints: every shard holds each one (global limits split in shares) --------
    async def define_constraint(
        self, constraint: Constraint | None = None, **fields: Any
    ) -> Constraint:
        found = constraint_from(constraint, fields)
        await self._drive(self._define_all_flow((found,)))
        return found

    async def remove_constraint(self, constraint_id: str) -> bool:
        return await self._drive(self._remove_all_flow(constraint_id))

    async def constraints(self) -> list[ConstraintInfo]:
        return await self._drive(self._constraints_all_flow())

    async def constraint(self, constraint_id: str) -> ConstraintInfo:
        return await self._drive(self._constraint_one_flow(constraint_id))

    async def apply_constraints(
        self, constraints: Iterable[Constraint], *, prune: bool = False
    ) -> ConstraintSet:
        return await self._drive(self._apply_all_flow(constraints, prune))

    # schedules: each in its tenant's shard -------------------------------------------
    async def add_schedule(self, schedule: Schedule | None = None, **fields: Any) -> Schedule:
        return await self._drive(self._add_schedule_flow(schedule_from(schedule, fields)))

    async def update_schedule(self, schedule: Schedule | None = None, **fields: Any) -> Schedule:
        found = schedule_from(schedule, fields)
        flow = self._on_schedule_flow(found.schedule_id, lambda p: p.ops.update_schedule(found))
        updated: Schedule = await self._drive(flow)
        return updated

    async def remove_schedule(self, schedule_id: str) -> bool:
        return await self._drive(self._remove_schedule_flow(schedule_id))

    async def pause_schedule(self, schedule_id: str) -> Schedule:
        flow = self._on_schedule_flow(schedule_id, lambda p: p.ops.pause_schedule(schedule_id))
        paused: Schedule = await self._drive(flow)
        return paused

    async def resume_schedule(self, schedule_id: str) -> Schedule:
        flow = self._on_schedule_flow(schedule_id, lambda p: p.ops.resume_schedule(schedule_id))
        resumed: Schedule = await self._drive(flow)
        return resumed

    async def schedules(self, limit: int = 1000) -> list[Schedule]:
        return await self._drive(self._schedules_all_flow(limit))

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        return (await self._drive(self._find_schedule_flow(schedule_id)))[1]

    async def due_schedules(self, limit: int = 100) -> DueSchedules:
        return await self._drive(self._due_all_flow(limit))

    async def fire_schedule(self, stored: StoredSchedule, now_ms: int, token: str) -> FireOutcome:
        return await self._drive(self._fire_flow(stored, now_ms, token))

    async def acquire_scheduler_lock(self, token: str, ttl: float = 10.0) -> tuple[bool, float]:
        return await self._drive(self._acquire_all_flow(token, ttl))

    async def renew_scheduler_lock(self, token: str, ttl: float = 10.0) -> bool:
        return await self._drive(self._renew_all_flow(token, ttl))

    async def release_scheduler_lock(self, token: str) -> bool:
        return await self._drive(self._release_all_flow(token))

    async def wait_for_schedules(self, timeout: float) -> bool:
        return await self._wait_any(
            self.ops.wait_for_any_schedule,
            lambda ops, t: ops.schedule_codec.wait_for_schedules(t),
            timeout,
        )
