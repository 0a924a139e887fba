"""Dead letters in bulk: ``bulk_retry`` and ``bulk_delete`` of FAILED (or CANCELED)
tasks chosen by a filter, with a dry run that counts what a real run would move.

The filter picks tasks as ``list_tasks`` walks them (by state, and by name and user
where given; error text and age are checked on each task); the chosen ids then go to
their partitions in batches, each batch one script (``bulk_retry.lua``,
``bulk_delete.lua``) that acts on those still in the state, so a task that moved in
between is left alone and a resent batch acts once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from fairque.errors import ValidationError
from fairque.models import Task, TaskState

if TYPE_CHECKING:
    from fairque.client.base import Flow
    from fairque.client.shards.placement import Placement
    from fairque.core.ops import Operations
    from fairque.core.records import Call

T = TypeVar("T")

#: task ids per script call
BATCH = 500
#: tasks per listed page
PAGE = 500
#: the states a bulk retry takes tasks from
ENDED = (TaskState.FAILED, TaskState.CANCELED)
#: the states a bulk delete takes tasks from (a FINISHED record too, to make room)
DELETABLE = (*ENDED, TaskState.FINISHED)


@dataclass(frozen=True)
class DeadLetterFilter:
    """Which ended tasks a bulk action takes: all in ``state`` that match every filter
    given (``error``: a substring of the task's error; ages in seconds since it ended)."""

    state: TaskState
    name: str | None = None
    user_id: str | None = None
    error: str | None = None
    older_than: float | None = None
    newer_than: float | None = None

    @classmethod
    def of(
        cls,
        state: TaskState | str,
        name: str | None,
        user_id: str | None,
        error: str | None,
        older_than: float | None,
        newer_than: float | None,
        states: tuple[TaskState, ...] = ENDED,
    ) -> DeadLetterFilter:
        """A checked filter of tasks in one of ``states``.

        Raises:
            ValidationError: a state not in ``states``, or a bad filter.
        """
        try:
            wanted = TaskState(state)
        except ValueError:
            wanted = None
        if wanted not in states:
            allowed = " or ".join(s.value for s in states)
            raise ValidationError(f"state must be {allowed}, got {state!r}")
        for what, value in (("name", name), ("user_id", user_id), ("error", error)):
            if value is not None and (not isinstance(value, str) or not value):
                raise ValidationError(f"{what} must be a non-empty string or None")
        for what, age in (("older_than", older_than), ("newer_than", newer_than)):
            if age is not None and (
                isinstance(age, bool) or not isinstance(age, int | float) or not age >= 0
            ):
                raise ValidationError(f"{what} must be a number of seconds (>= 0) or None")
        assert wanted is not None
        return cls(wanted, name, user_id, error, older_than, newer_than)

    def matches(self, task: Task, now_ms: int) -> bool:
        """Whether ``task`` (listed in ``state``) passes the error and age filters."""
        if task.state != self.state:
            return False
        if self.error is not None and self.error not in (task.error or ""):
            return False
        if self.older_than is None and self.newer_than is None:
            return True
        if task.ended_at is None:
            return False
        age = now_ms / 1000 - task.ended_at.timestamp()
        if self.older_than is not None and age < self.older_than:
            return False
        return self.newer_than is None or age <= self.newer_than


def bulk_flow(
    place: Placement,
    chosen: DeadLetterFilter,
    act: Callable[[Operations, list[str]], Call[int]] | None,
) -> Flow[int]:
    """Walk the tasks ``chosen`` picks (across every partition of ``place``); with
    ``act`` None count them, else send them to ``act`` in batches per partition and
    answer how many it moved."""
    now: int = yield place.home.ops.server_time()
    picked: dict[int, tuple[Operations, list[str]]] = {}
    cursor: str | None = None
    while True:
        page = yield from place.list_tasks(chosen.state, chosen.user_id, chosen.name, PAGE, cursor)
        for task in page.tasks:
            if task.task_id and chosen.matches(task, now):
                part = place.for_user(task.user_id).ops
                picked.setdefault(id(part), (part, []))[1].append(task.task_id)
        cursor = page.next_cursor
        if cursor is None:
            break
    if act is None:
        return sum(len(ids) for _, ids in picked.values())
    moved = 0
    for part, ids in picked.values():
        for at in range(0, len(ids), BATCH):
            moved += yield act(part, ids[at : at + BATCH])
    return moved


def _retry(state: TaskState) -> Callable[[Operations, list[str]], Call[int]]:
    return lambda ops, ids: ops.bulk_retry(ids, state)


def _delete(state: TaskState) -> Callable[[Operations, list[str]], Call[int]]:
    return lambda ops, ids: ops.bulk_delete(ids, state)


# Generated by tools/unasync.py from AsyncDeadLetterMethods: edit that class, then run the tool.
class DeadLetterMethods:
    """Dead letters in bulk on the blocking client."""

    ops: Operations
    _place: Placement

    if TYPE_CHECKING:

        def _drive(self, flow: Flow[T]) -> T: ...

    def bulk_retry(
        self,
        *,
        state: TaskState | str = TaskState.FAILED,
        name: str | None = None,
        user_id: str | None = None,
        error: str | None = None,
        older_than: float | None = None,
        newer_than: float | None = None,
        dry_run: bool = False,
    ) -> int:
        """Re-queue every task in ``state`` (FAILED, or CANCELED) that matches the
        filters given, each with a fresh retry budget; answers how many (with
        ``dry_run``, how many match, and nothing changes).

        Args:
            state: the state to take tasks from: FAILED (default) or CANCELED.
            name: only tasks of this name.
            user_id: only this tenant's tasks.
            error: only tasks whose error holds this text.
            older_than: only tasks that ended at least this many seconds ago.
            newer_than: only tasks that ended at most this many seconds ago.
            dry_run: count the matches, change nothing.

        A task that leaves ``state`` between the count and the move is left alone, so
        a real run moves at most what its dry run counted then.

        Raises:
            ValidationError: a bad state or filter.
        """
        chosen = DeadLetterFilter.of(state, name, user_id, error, older_than, newer_than)
        act = None if dry_run else _retry(chosen.state)
        return self._drive(self._place.bulk(chosen, act))

    def bulk_delete(
        self,
        *,
        state: TaskState | str = TaskState.FAILED,
        name: str | None = None,
        user_id: str | None = None,
        error: str | None = None,
        older_than: float | None = None,
        newer_than: float | None = None,
        dry_run: bool = False,
    ) -> int:
        """Delete now every task in ``state`` (FAILED, CANCELED, or FINISHED) that matches
        the filters given, as its expiry would later; answers how many (with ``dry_run``,
        how many match, and nothing changes). The filters are ``bulk_retry``'s.

        Dependents still waiting for a deleted task (``on_dependency_failure="wait"``)
        are canceled by ``cleanup_dependencies``, as for an upstream that expired.

        Raises:
            ValidationError: a bad state or filter.
        """
        chosen = DeadLetterFilter.of(state, name, user_id, error, older_than, newer_than, DELETABLE)
        act = None if dry_run else _delete(chosen.state)
        return self._drive(self._place.bulk(chosen, act))


class AsyncDeadLetterMethods:
    """Dead letters in bulk on the asyncio client."""

    ops: Operations
    _place: Placement

    if TYPE_CHECKING:

        async def _drive(self, flow: Flow[T]) -> T: ...

    async def bulk_retry(
        self,
        *,
        state: TaskState | str = TaskState.FAILED,
        name: str | None = None,
        user_id: str | None = None,
        error: str | None = None,
        older_than: float | None = None,
        newer_than: float | None = None,
        dry_run: bool = False,
    ) -> int:
        """Re-queue every task in ``state`` (FAILED, or CANCELED) that matches the
        filters given, each with a fresh retry budget; answers how many (with
        ``dry_run``, how many match, and nothing changes).

        Args:
            state: the state to take tasks from: FAILED (default) or CANCELED.
            name: only tasks of this name.
            user_id: only this tenant's tasks.
            error: only tasks whose error holds this text.
            older_than: only tasks that ended at least this many seconds ago.
            newer_than: only tasks that ended at most this many seconds ago.
            dry_run: count the matches, change nothing.

        A task that leaves ``state`` between the count and the move is left alone, so
        a real run moves at most what its dry run counted then.

        Raises:
            ValidationError: a bad state or filter.
        """
        chosen = DeadLetterFilter.of(state, name, user_id, error, older_than, newer_than)
        act = None if dry_run else _retry(chosen.state)
        return await self._drive(self._place.bulk(chosen, act))

    async def bulk_delete(
        self,
        *,
        state: TaskState | str = TaskState.FAILED,
        name: str | None = None,
        user_id: str | None = None,
        error: str | None = None,
        older_than: float | None = None,
        newer_than: float | None = None,
        dry_run: bool = False,
    ) -> int:
        """Delete now every task in ``state`` (FAILED, CANCELED, or FINISHED) that matches
        the filters given, as its expiry would later; answers how many (with ``dry_run``,
        how many match, and nothing changes). The filters are ``bulk_retry``'s.

        Dependents still waiting for a deleted task (``on_dependency_failure="wait"``)
        are canceled by ``cleanup_dependencies``, as for an upstream that expired.

        Raises:
            ValidationError: a bad state or filter.
        """
        chosen = DeadLetterFilter.of(state, name, user_id, error, older_than, newer_than, DELETABLE)
        act = None if dry_run else _delete(chosen.state)
        return await self._drive(self._place.bulk(chosen, act))
