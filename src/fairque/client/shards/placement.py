"""The one seam between a client and the shards of its queue: a ``Placement``.

A client sends every call through the placement it holds: which partition a tenant's
writes go to, which one a leased task came from, where a task id lives, how a lease is
served and how whole-queue reads are merged. ``OnePlace`` is a queue of one shard (every
answer is the client's own partition, with no extra call); ``Shards``
(``fairque.client.shards.spread``) is a queue of several. A resize seen by a client
swaps its placement (``Placed._adopt_layout``); the client's class never changes.

Placements do no I/O: their flows yield calls (``fairque.client.base``) that the
client sends, so one placement serves the blocking and the asyncio client alike.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from fairque.client.base import Flow, QueueBase
from fairque.client.deadletters import DeadLetterFilter, bulk_flow
from fairque.client.inspection import InspectionFlows
from fairque.constraints.model import Constraint, ConstraintInfo, ConstraintSet
from fairque.core.ops.plain import Stop
from fairque.core.ops.shards import Layout
from fairque.core.records import Call, Leased, LeaseRequest, Pushed
from fairque.errors import ConstraintNotFound
from fairque.models import (
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
from fairque.schedules.codec import DueSchedules, FireOutcome, StoredSchedule
from fairque.schedules.model import Schedule

if TYPE_CHECKING:
    from fairque.client.shards.placed import Placed
    from fairque.core.ops import Operations

T = TypeVar("T")

W = TypeVar("W")

#: A blocking wait on one server: the call for a timeout in seconds.
Wait = Callable[[float], Call[W]]


class Partition(InspectionFlows, QueueBase):
    """One shard of a queue: its calls and flows (no I/O; a client sends them)."""


class Placement(ABC):
    """Where a queue's calls go: the protocol a client routes through.

    ``home`` is the client's own partition (shard 0, under the queue's own tag): what
    lives in one place on every queue (workers, XCom, the registry, the scheduler's
    hand-over) is read and written there by the client itself, not through here.
    """

    def __init__(self, home: Placed) -> None:
        self.home = home

    # where things are --------------------------------------------------------------
    @property
    @abstractmethod
    def shards(self) -> int:
        """How many shards tenants are placed on."""

    @property
    @abstractmethod
    def layout(self) -> Layout:
        """The shards as this placement knows them."""

    @property
    @abstractmethod
    def parts(self) -> Sequence[QueueBase]:
        """Every partition, shard 0 first (retired shards too: they may hold tasks)."""

    @abstractmethod
    def shard_of(self, user_id: str) -> int:
        """The shard ``user_id``'s new tasks go to."""

    @abstractmethod
    def adopt(self, layout: Layout) -> bool:
        """Serve ``layout`` from now on (a sharded placement grows); False when this
        placement cannot, and the client needs one of several shards."""

    @abstractmethod
    def for_user(self, user_id: str) -> QueueBase:
        """The partition ``user_id``'s writes go to."""

    @abstractmethod
    def for_task(self, task: Task) -> tuple[QueueBase, Task]:
        """The partition a leased task came from, and the task as it knows it."""

    @abstractmethod
    def locate(self, task_id: str) -> Flow[QueueBase]:
        """The partition holding ``task_id`` (shard 0's when none does: it answers as
        for an unknown id)."""

    def bulk(
        self,
        chosen: DeadLetterFilter,
        act: Callable[[Operations, list[str]], Call[int]] | None,
    ) -> Flow[int]:
        """A bulk action on the dead letters ``chosen`` picks, over every partition
        (``fairque.client.deadletters``): how many it counted (``act`` None) or moved."""
        return bulk_flow(self, chosen, act)

    @abstractmethod
    def each(self, build: Callable[[QueueBase], Call[T]]) -> Flow[list[T]]:
        """``build``'s call on every partition, in one pipeline; their answers."""

    @abstractmethod
    def waits(self, schedules: bool) -> list[Wait[bool]]:
        """The blocking waits for work (or, with ``schedules``, for a schedule change)
        whose first True ends the wait: one where one server can watch every shard."""

    @abstractmethod
    def stop_waits(self, worker_id: str) -> list[Wait[Stop | None]]:
        """The blocking waits for a cancel of one of ``worker_id``'s leases, whose
        first answer ends the wait: one where one server can watch every shard."""

    # flows written once over the primitives ---------------------------------------
    def by_id(self, task_id: str, build: Callable[[QueueBase], Call[T]]) -> Flow[T]:
        """``build``'s call on the partition holding ``task_id``."""
        part = yield from self.locate(task_id)
        answer: T = yield build(part)
        return answer

    def outcome(self, task_id: str, timeout: float, consume: bool) -> Flow[TaskOutcome | None]:
        part = yield from self.locate(task_id)
        return (yield from part._outcome_flow(task_id, timeout, consume))

    def result(self, task_id: str, timeout: float, consume: bool) -> Flow[Any]:
        part = yield from self.locate(task_id)
        return (yield from part._result_flow(task_id, timeout, consume))

    def task_links(self, task_id: str) -> Flow[tuple[list[str], list[str]]]:
        part = yield from self.locate(task_id)
        links: tuple[list[str], list[str]] = yield from flows_of(part)._task_links_flow(task_id)
        return links

    def wait_place(self, task: Task) -> Flow[WaitPlace]:
        place: WaitPlace = yield from flows_of(self.for_user(task.user_id))._wait_place_flow(task)
        return place

    def sum(self, build: Callable[[QueueBase], Call[int]]) -> Flow[int]:
        """The sum of ``build``'s answers over every partition."""
        return sum((yield from self.each(build)))

    def constraint(self, constraint_id: str) -> Flow[ConstraintInfo]:
        """One constraint with its use.

        Raises:
            ConstraintNotFound: no constraint has this id.
        """
        infos = yield from self.constraints(constraint_id)
        if not infos:
            raise ConstraintNotFound(f"no constraint {constraint_id}")
        return infos[0]

    def apply(self, constraints: Iterable[Constraint], prune: bool) -> Flow[ConstraintSet]:
        """``apply_constraints``: define ``constraints``; with ``prune``, remove the rest."""
        wanted = list(constraints)
        infos = yield from self.define(wanted)
        if prune:
            keep = {c.id for c in wanted}
            for info in infos:
                if info.constraint.id not in keep:
                    yield from self.remove_constraint(info.constraint.id)
            infos = yield from self.constraints(usage=False)
        return ConstraintSet(
            self.parts[0].ops.codec.constraints.version, tuple(i.constraint for i in infos)
        )

    def on_schedule(self, schedule_id: str, build: Callable[[QueueBase], Call[T]]) -> Flow[T]:
        """``build``'s call on the partition holding ``schedule_id`` (shard 0's when
        none does: the script answers that it is not found)."""
        part, _ = yield from self.find_schedule(schedule_id)
        answer: T = yield build(part)
        return answer

    # flows each placement writes -------------------------------------------------------
    @abstractmethod
    def push_many(
        self, tasks: Iterable[Task], delays: Sequence[float | None] | None
    ) -> Flow[Pushed]: ...

    @abstractmethod
    def lease(
        self, request: LeaseRequest, done: Sequence[tuple[Task, Any]] | None = None
    ) -> Flow[tuple[list[bool], Leased]]:
        """Finish ``done`` (None: a lease alone) and lease up to ``request.count`` tasks."""

    @abstractmethod
    def wait_and_lease(self, timeout: float, request: LeaseRequest) -> Flow[Leased] | None:
        """The wait for work with the lease pipelined behind it, when one round trip can
        carry both (None: wait, then lease)."""

    @abstractmethod
    def extend_many(self, tasks: Sequence[Task], seconds: float | None) -> Flow[list[bool]]: ...

    @abstractmethod
    def get(self, task_id: str) -> Flow[Task | None]: ...

    @abstractmethod
    def purge_rest(self, batch: int) -> Flow[int]:
        """Purge every partition but shard 0 (the client purges its own last)."""

    @abstractmethod
    def cleanup(self, batch: int, passes: int | None) -> Flow[int]: ...

    @abstractmethod
    def next_wakeup(self) -> Flow[float | None]: ...

    @abstractmethod
    def list_tasks(
        self, state: TaskState | str | None, user_id: str | None, name: str | None,
        limit: int, cursor: str | None,
    ) -> Flow[TaskPage]: ...  # fmt: skip

    @abstractmethod
    def stats(self, user_limit: int) -> Flow[QueueStats]: ...

    @abstractmethod
    def metrics(self) -> Flow[QueueMetrics]: ...

    @abstractmethod
    def tenants(self, limit: int) -> Flow[TenantReport]: ...

    @abstractmethod
    def ring_users(self, limit: int, offset: int) -> Flow[tuple[list[str], int]]: ...

    @abstractmethod
    def capped_users(self, limit: int) -> Flow[list[str]]: ...

    @abstractmethod
    def backlogs(self, users: Sequence[str]) -> Flow[dict[str, tuple[int, int]]]: ...

    @abstractmethod
    def user_loads(self, users: Iterable[str]) -> Flow[list[UserLoad]]: ...

    @abstractmethod
    def user_weights(self, users: Sequence[str]) -> Flow[list[int]]: ...

    @abstractmethod
    def recent_starts(self, sample: int) -> Flow[list[StartedTask]]: ...

    @abstractmethod
    def oldest_queued(self) -> Flow[int | None]: ...

    @abstractmethod
    def constraints(
        self, constraint_id: str | None = None, usage: bool = True
    ) -> Flow[list[ConstraintInfo]]:
        """The constraints with their use; the partitions match pushes against the set
        read (when all were read)."""

    @abstractmethod
    def define(self, constraints: Sequence[Constraint]) -> Flow[list[ConstraintInfo]]:
        """Define ``constraints``; the set held afterwards."""

    @abstractmethod
    def remove_constraint(self, constraint_id: str) -> Flow[bool]: ...

    @abstractmethod
    def find_schedule(self, schedule_id: str) -> Flow[tuple[QueueBase, Schedule | None]]: ...

    @abstractmethod
    def add_schedule(self, schedule: Schedule) -> Flow[Schedule]: ...

    @abstractmethod
    def remove_schedule(self, schedule_id: str) -> Flow[bool]: ...

    @abstractmethod
    def schedules(self, limit: int) -> Flow[list[Schedule]]: ...

    @abstractmethod
    def due_schedules(self, limit: int) -> Flow[DueSchedules]: ...

    @abstractmethod
    def fire(self, stored: StoredSchedule, now_ms: int, token: str) -> Flow[FireOutcome]: ...

    @abstractmethod
    def acquire_lock(self, token: str, ttl: float) -> Flow[tuple[bool, float]]: ...

    @abstractmethod
    def renew_lock(self, token: str, ttl: float) -> Flow[bool]: ...

    @abstractmethod
    def release_lock(self, token: str) -> Flow[bool]: ...


def flows_of(part: QueueBase) -> InspectionFlows:
    """``part`` as the inspection flows every partition (and every client) has."""
    assert isinstance(part, InspectionFlows)
    return part


def one_call(call: Call[T]) -> Flow[T]:
    """A flow of one call."""
    answer: T = yield call
    return answer
