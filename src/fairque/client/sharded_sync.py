"""The methods of a sharded queue's blocking client (``ShardedFairQueue``, made by
``FairQueue.open`` and ``from_url`` for a queue of more than one shard): the ones that
span shards run the flows of ``fairque.client.sharding`` (constraints and schedules:
``shardrules`` and ``shardschedules``); the rest (workers, XCom, the queue registry, the
scheduler's hand-over) live in shard 0 as on a plain queue.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import redis

from fairque.client.base import Flow, QueueBase
from fairque.client.inspection import SAMPLE as SAMPLE_STARTS
from fairque.client.inspection import USERS
from fairque.client.shardcalls import TURN_SECONDS, lease_request, placed_count
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


class ShardedMethods(ShardedFlows):
    """The methods of ``ShardedFairQueue`` that span shards (see ``FairQueue`` for each
    method's contract; docs/howto/shards.md for what stays exact across shards)."""

    if TYPE_CHECKING:

        def _run(self, call: Call[T]) -> T: ...

        def _drive(self, flow: Flow[T]) -> T: ...

    def __init__(
        self, client: redis.Redis | redis.RedisCluster, queue: str, layout: Layout,
        **options: Any,
    ) -> None:  # fmt: skip
        super().__init__(client, queue, **options)
        self._init_shards(client, layout, options)
        self._cluster = isinstance(client, redis.RedisCluster)

    def push(self, task: Task) -> Task:
        return self._drive(self._push_one_flow(task))

    def push_many(
        self, tasks: Iterable[Task], *, delays: Sequence[float | None] | None = None
    ) -> Pushed:
        return self._drive(self._push_many_flow(tasks, delays))

    def enqueue(
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

        return self._drive(self._enqueue_flow(build, user_id))

    def pop(
        self, worker_id: str = "", lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None, names: Sequence[str] | None = None,
    ) -> Task | None:  # fmt: skip
        request = lease_request(1, worker_id, lease_seconds, assigned_users, steal_targets, None,
                                names)  # fmt: skip
        _, leased = self._drive(self._lease_flow(request))
        return leased[0] if leased else None

    def pop_batch(
        self, count: int, worker_id: str = "", lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None, request_id: str | None = None,
        names: Sequence[str] | None = None,
    ) -> list[Task]:  # fmt: skip
        request = lease_request(count, worker_id, lease_seconds, assigned_users, steal_targets,
                                request_id, names)  # fmt: skip
        return self._drive(self._lease_flow(request))[1]

    def complete_and_pop(
        self, done: Sequence[tuple[Task, Any]], count: int = 1, worker_id: str = "",
        lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None, request_id: str | None = None,
        names: Sequence[str] | None = None,
    ) -> tuple[list[bool], list[Task]]:  # fmt: skip
        request = lease_request(count, worker_id, lease_seconds, assigned_users, steal_targets,
                                request_id, names)  # fmt: skip
        acks, leased = self._drive(self._lease_flow(request, done))
        return acks, leased

    def complete(self, task: Task, result: Any = None) -> bool:
        shard, task = self._route(task)
        return self._run(self.parts[shard].ops.complete(task, result))

    def fail(
        self, task: Task, error: str | BaseException = "", retry: bool = True,
        delay: float | None = None, *, max_retries: int | None = None,
        traceback: str | None = None, reason: str | None = None, details: Any = None,
    ) -> TaskState:  # fmt: skip
        shard, task = self._route(task)
        ops = self.parts[shard].ops
        return self._run(
            ops.fail(task, error, retry, delay, max_retries, traceback, reason, details)
        )

    def extend(self, task: Task, seconds: float | None = None) -> datetime:
        shard, task = self._route(task)
        return self._run(self.parts[shard].ops.extend(task, seconds))

    def extend_many(self, tasks: Sequence[Task], seconds: float | None = None) -> list[bool]:
        return self._drive(self._extend_many_flow(tasks, seconds)) if tasks else []

    def requeue(self, task: Task, delay: float = 0) -> TaskState:
        shard, task = self._route(task)
        return self._run(self.parts[shard].ops.requeue(task, delay))

    def reclaim(self, limit: int = 1000) -> int:
        return self._drive(self._sum_flow(lambda p: p.ops.reclaim(limit)))

    def cancel(self, task_id: str) -> bool:
        return self._drive(self._by_id_flow(task_id, lambda p: p.ops.cancel(task_id)))

    def get(self, task_id: str) -> Task | None:
        return self._drive(self._get_flow(task_id))

    def retry(self, task_id: str) -> TaskState:
        return self._drive(self._by_id_flow(task_id, lambda p: p.ops.retry(task_id)))

    def result(self, task_id: str, timeout: float = 0, *, consume: bool = False) -> Any:
        return self._drive(self._sharded_result_flow(task_id, timeout, consume))

    def outcome(
        self, task_id: str, timeout: float = 0, *, consume: bool = False
    ) -> TaskOutcome | None:
        return self._drive(self._sharded_outcome_flow(task_id, timeout, consume))

    def list_tasks(
        self, state: TaskState | str | None = None, user_id: str | None = None,
        name: str | None = None, limit: int = 50, cursor: str | None = None,
    ) -> TaskPage:  # fmt: skip
        return self._drive(self._list_all_flow(state, user_id, name, limit, cursor))

    def cleanup_dependencies(self, batch: int = 500, *, passes: int | None = None) -> int:
        return self._drive(self._cleanup_all_flow(batch, passes))

    def next_wakeup(self) -> float | None:
        return self._drive(self._next_wakeup_flow())

    def maintain(self, batch: int = 1000) -> int:
        return self._drive(self._sum_flow(lambda p: p.ops.maintain(batch)))

    def place(self) -> int:
        return self._drive(self._sum_flow(lambda p: placed_count(p.ops.place())))

    def purge(self, batch: int = 1000) -> int:
        return self._drive(self._purge_all_flow(batch))

    def set_user_limits(
        self,
        user_id: str,
        *,
        weight: int | None = None,
        max_in_flight: int | None = None,
        max_queued: int | None = None,
    ) -> None:
        part = self._part(user_id)
        self._run(part.ops.set_user_limits(user_id, weight, max_in_flight, max_queued))

    def set_fairness(self, mode: Fairness) -> Fairness:
        was: list[Fairness] = self._drive(self._each(lambda p: p.ops.set_fairness(mode)))
        return was[0]

    def stats(self, user_limit: int = 100) -> QueueStats:
        return self._drive(self._stats_flow(user_limit))

    def _wait_any(
        self, every: Callable[[list[Operations], float], Call[bool]],
        one: Callable[[Operations, float], Call[bool]], timeout: float,
    ) -> bool:  # fmt: skip
        """Block until ``every`` (one command over all shards) answers True, or on a
        cluster until ``one`` does on some shard (in turns), or ``timeout`` passes."""
        timeout = self._bounded(timeout)
        if not self._cluster:
            return self._run(every([p.ops for p in self.parts], timeout))
        deadline = time.monotonic() + timeout
        while True:
            for part in self.parts:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                if self._run(one(part.ops, min(left, TURN_SECONDS))):
                    return True

    def wait_for_work(self, timeout: float) -> bool:
        return self._wait_any(self.ops.wait_for_any, lambda ops, t: ops.wait_for_work(t), timeout)

    def wait_and_pop(
        self, timeout: float, count: int = 1, worker_id: str = "",
        lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None, request_id: str | None = None,
        names: Sequence[str] | None = None,
    ) -> list[Task]:  # fmt: skip
        self.wait_for_work(timeout)
        return self.pop_batch(
            count, worker_id, lease_seconds, assigned_users=assigned_users,
            steal_targets=steal_targets, request_id=request_id, names=names,
        )  # fmt: skip

    def metrics(self) -> QueueMetrics:
        return self._drive(self._metrics_flow())

    def tenants(self, limit: int = 20) -> TenantReport:
        return self._drive(self._tenants_flow(limit))

    def ring_users(self, limit: int = USERS, offset: int = 0) -> tuple[list[str], int]:
        return self._drive(self._ring_users_all_flow(limit, offset))

    def capped_users(self, limit: int = USERS) -> list[str]:
        return self._drive(self._capped_all_flow(limit))

    def backlogs(self, users: Sequence[str]) -> dict[str, tuple[int, int]]:
        return self._drive(self._backlogs_all_flow(users))

    def user_loads(self, users: Iterable[str]) -> list[UserLoad]:
        return self._drive(self._user_loads_all_flow(users))

    def user_weights(self, users: Sequence[str]) -> list[int]:
        return self._drive(self._user_weights_all_flow(users))

    def wait_place(self, task: Task) -> WaitPlace:
        return self._drive(self._wait_place_all_flow(task))

    def recent_starts(self, sample: int = SAMPLE_STARTS) -> list[StartedTask]:
        return self._drive(self._recent_starts_all_flow(sample))

    def task_links(self, task_id: str) -> tuple[list[str], list[str]]:
        return self._drive(self._task_links_all_flow(task_id))

    def oldest_queued_ms(self) -> int | None:
        return self._drive(self._oldest_queued_all_flow())

    # constraints: every shard holds each one (global limits split in shares) --------
    def define_constraint(self, constraint: Constraint | None = None, **fields: Any) -> Constraint:
        found = constraint_from(constraint, fields)
        self._drive(self._define_all_flow((found,)))
        return found

    def remove_constraint(self, constraint_id: str) -> bool:
        return self._drive(self._remove_all_flow(constraint_id))

    def constraints(self) -> list[ConstraintInfo]:
        return self._drive(self._constraints_all_flow())

    def constraint(self, constraint_id: str) -> ConstraintInfo:
        return self._drive(self._constraint_one_flow(constraint_id))

    def apply_constraints(
        self, constraints: Iterable[Constraint], *, prune: bool = False
    ) -> ConstraintSet:
        return self._drive(self._apply_all_flow(constraints, prune))

    # schedules: each in its tenant's shard -------------------------------------------
    def add_schedule(self, schedule: Schedule | None = None, **fields: Any) -> Schedule:
        return self._drive(self._add_schedule_flow(schedule_from(schedule, fields)))

    def update_schedule(self, schedule: Schedule | None = None, **fields: Any) -> Schedule:
        found = schedule_from(schedule, fields)
        flow = self._on_schedule_flow(found.schedule_id, lambda p: p.ops.update_schedule(found))
        return self._drive(flow)  # type: ignore[no-any-return]

    def remove_schedule(self, schedule_id: str) -> bool:
        return self._drive(self._remove_schedule_flow(schedule_id))

    def pause_schedule(self, schedule_id: str) -> Schedule:
        flow = self._on_schedule_flow(schedule_id, lambda p: p.ops.pause_schedule(schedule_id))
        return self._drive(flow)  # type: ignore[no-any-return]

    def resume_schedule(self, schedule_id: str) -> Schedule:
        flow = self._on_schedule_flow(schedule_id, lambda p: p.ops.resume_schedule(schedule_id))
        return self._drive(flow)  # type: ignore[no-any-return]

    def schedules(self, limit: int = 1000) -> list[Schedule]:
        return self._drive(self._schedules_all_flow(limit))

    def get_schedule(self, schedule_id: str) -> Schedule | None:
        return self._drive(self._find_schedule_flow(schedule_id))[1]

    def due_schedules(self, limit: int = 100) -> DueSchedules:
        return self._drive(self._due_all_flow(limit))

    def fire_schedule(self, stored: StoredSchedule, now_ms: int, token: str) -> FireOutcome:
        return self._drive(self._fire_flow(stored, now_ms, token))

    def acquire_scheduler_lock(self, token: str, ttl: float = 10.0) -> tuple[bool, float]:
        return self._drive(self._acquire_all_flow(token, ttl))

    def renew_scheduler_lock(self, token: str, ttl: float = 10.0) -> bool:
        return self._drive(self._renew_all_flow(token, ttl))

    def release_scheduler_lock(self, token: str) -> bool:
        return self._drive(self._release_all_flow(token))

    def wait_for_schedules(self, timeout: float) -> bool:
        return self._wait_any(
            self.ops.wait_for_any_schedule,
            lambda ops, t: ops.schedule_codec.wait_for_schedules(t),
            timeout,
        )
