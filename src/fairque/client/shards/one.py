"""The placement of a queue of one shard: every call goes to the client's own
partition, found with no call, so a plain queue sends the calls it always did."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from fairque.client.base import Flow, QueueBase
from fairque.client.shards.placement import Placement, Wait, flows_of, one_call
from fairque.constraints.model import Constraint, ConstraintInfo, ConstraintSet
from fairque.core.ops.plain import Stop
from fairque.core.ops.shards import Layout
from fairque.core.records import Call, Leased, LeaseRequest, Pushed
from fairque.errors import ValidationError
from fairque.models import (
    QueueMetrics,
    QueueStats,
    StartedTask,
    Task,
    TaskPage,
    TaskState,
    TenantReport,
    UserLoad,
)
from fairque.schedules.codec import DueSchedules, FireOutcome, StoredSchedule
from fairque.schedules.model import Schedule

T = TypeVar("T")


class OnePlace(Placement):
    """A queue of one shard: everything is the client's own partition, with no call
    beyond the one a method sends."""

    @property
    def shards(self) -> int:
        return 1

    @property
    def layout(self) -> Layout:
        return Layout(1, ())

    @property
    def parts(self) -> Sequence[QueueBase]:
        return (self.home,)

    def shard_of(self, user_id: str) -> int:
        return 0

    def adopt(self, layout: Layout) -> bool:
        return layout.count == 1 and not layout.tags

    def for_user(self, user_id: str) -> QueueBase:
        return self.home

    def for_task(self, task: Task) -> tuple[QueueBase, Task]:
        return self.home, task

    def locate(self, task_id: str) -> Flow[QueueBase]:
        return self.home
        yield  # a flow that sends nothing

    def each(self, build: Callable[[QueueBase], Call[T]]) -> Flow[list[T]]:
        return [(yield build(self.home))]

    def waits(self, schedules: bool) -> list[Wait[bool]]:
        ops = self.home.ops
        if schedules:
            return [ops.schedule_codec.wait_for_schedules]
        return [ops.wait_for_work]

    def stop_waits(self, worker_id: str) -> list[Wait[Stop | None]]:
        ops = self.home.ops
        return [lambda timeout: ops.wait_for_cancel(worker_id, timeout)]

    def push_many(
        self, tasks: Iterable[Task], delays: Sequence[float | None] | None
    ) -> Flow[Pushed]:
        home = self.home
        pushed: Pushed = yield from home._push_flow(lambda: home.ops.push_many(tasks, delays))
        return pushed

    def lease(
        self, request: LeaseRequest, done: Sequence[tuple[Task, Any]] | None = None
    ) -> Flow[tuple[list[bool], Leased]]:
        home = self.home
        if done is not None:
            acks, leased = yield home.ops.complete_and_pop(done, request)
        else:
            acks, leased = [], (yield home.ops.pop(request))
        if leased.undecodable:
            leased = yield from home._settle_flow(leased)
        return acks, leased

    def wait_and_lease(self, timeout: float, request: LeaseRequest) -> Flow[Leased] | None:
        return self.home._wait_and_pop_flow(timeout, request)

    def extend_many(self, tasks: Sequence[Task], seconds: float | None) -> Flow[list[bool]]:
        return one_call(self.home.ops.extend_many(tasks, seconds))

    def get(self, task_id: str) -> Flow[Task | None]:
        return one_call(self.home.ops.get(task_id))

    def purge_rest(self, batch: int) -> Flow[int]:
        return 0
        yield  # a flow that sends nothing

    def cleanup(self, batch: int, passes: int | None) -> Flow[int]:
        return self.home._cleanup_dependencies_flow(batch, passes)

    def next_wakeup(self) -> Flow[float | None]:
        return one_call(self.home.ops.next_wakeup())

    def list_tasks(
        self, state: TaskState | str | None, user_id: str | None, name: str | None,
        limit: int, cursor: str | None,
    ) -> Flow[TaskPage]:  # fmt: skip
        return self.home._list_tasks_flow(state, user_id, name, limit, cursor)

    def stats(self, user_limit: int) -> Flow[QueueStats]:
        return one_call(self.home.ops.stats(user_limit))

    def metrics(self) -> Flow[QueueMetrics]:
        return one_call(self.home.ops.metrics())

    def tenants(self, limit: int) -> Flow[TenantReport]:
        return one_call(self.home.ops.tenants(limit))

    def ring_users(self, limit: int, offset: int) -> Flow[tuple[list[str], int]]:
        return flows_of(self.home)._ring_users_flow(limit, offset)

    def capped_users(self, limit: int) -> Flow[list[str]]:
        return one_call(self.home.ops.capped_sample(limit))

    def backlogs(self, users: Sequence[str]) -> Flow[dict[str, tuple[int, int]]]:
        return flows_of(self.home)._backlogs_flow(users)

    def user_loads(self, users: Iterable[str]) -> Flow[list[UserLoad]]:
        return flows_of(self.home)._user_loads_flow(users)

    def user_weights(self, users: Sequence[str]) -> Flow[list[int]]:
        return flows_of(self.home)._user_weights_flow(users)

    def recent_starts(self, sample: int) -> Flow[list[StartedTask]]:
        return flows_of(self.home)._recent_starts_flow(sample)

    def oldest_queued(self) -> Flow[int | None]:
        return flows_of(self.home)._oldest_queued_flow()

    def constraints(
        self, constraint_id: str | None = None, usage: bool = True
    ) -> Flow[list[ConstraintInfo]]:
        ops = self.home.ops
        found, infos = yield ops.constraints(constraint_id, usage)
        infos_read: list[ConstraintInfo] = infos
        if constraint_id is None:
            ops.codec.constraints = found
        return infos_read

    def define(self, constraints: Sequence[Constraint]) -> Flow[list[ConstraintInfo]]:
        ops = self.home.ops
        for c in constraints:
            if not isinstance(c, Constraint):
                raise ValidationError(f"expected a Constraint, got {type(c).__name__}")
        for c in constraints:
            yield ops.define_constraint(c)
        return (yield from self.constraints(usage=False))

    def remove_constraint(self, constraint_id: str) -> Flow[bool]:
        removed: bool = yield self.home.ops.remove_constraint(constraint_id)
        yield from self.constraints(usage=False)
        return removed

    def apply(self, constraints: Iterable[Constraint], prune: bool) -> Flow[ConstraintSet]:
        ops = self.home.ops
        wanted = list(constraints)
        for c in wanted:
            yield ops.define_constraint(c)
        if prune:
            keep = {c.id for c in wanted}
            held: ConstraintSet = (yield ops.constraints(usage=False))[0]
            for c in held.constraints:
                if c.id not in keep:
                    yield ops.remove_constraint(c.id)
        found: ConstraintSet = (yield ops.constraints(usage=False))[0]
        ops.codec.constraints = found
        return found

    def find_schedule(self, schedule_id: str) -> Flow[tuple[QueueBase, Schedule | None]]:
        found: Schedule | None = yield self.home.ops.schedule_codec.get_schedule(schedule_id)
        return self.home, found

    def on_schedule(self, schedule_id: str, build: Callable[[QueueBase], Call[T]]) -> Flow[T]:
        return one_call(build(self.home))

    def add_schedule(self, schedule: Schedule) -> Flow[Schedule]:
        return one_call(self.home.ops.add_schedule(schedule))

    def remove_schedule(self, schedule_id: str) -> Flow[bool]:
        return one_call(self.home.ops.remove_schedule(schedule_id))

    def schedules(self, limit: int) -> Flow[list[Schedule]]:
        return one_call(self.home.ops.schedules(limit))

    def due_schedules(self, limit: int) -> Flow[DueSchedules]:
        return one_call(self.home.ops.due_schedules(limit))

    def fire(self, stored: StoredSchedule, now_ms: int, token: str) -> Flow[FireOutcome]:
        home = self.home
        return home._push_flow(lambda: home.ops.fire_schedule(stored, now_ms, token))

    def acquire_lock(self, token: str, ttl: float) -> Flow[tuple[bool, float]]:
        return one_call(self.home.ops.acquire_scheduler_lock(token, ttl))

    def renew_lock(self, token: str, ttl: float) -> Flow[bool]:
        return one_call(self.home.ops.renew_scheduler_lock(token, ttl))

    def release_lock(self, token: str) -> Flow[bool]:
        return one_call(self.home.ops.release_scheduler_lock(token))
