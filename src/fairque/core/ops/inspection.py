"""Builders of the reading calls: task listings, stats, workers.

Everything an upper floor (dashboard, ``/metrics``, the CLI, the HTTP listing) reads
of a queue is built here or in ``fairque.core.ops.plain``, over the key table.
"""

from __future__ import annotations

import base64
from typing import Any

from fairque.core.checks import MAX_SCAN, MAX_TASK_ID, MAX_USER_ID, check_identifier
from fairque.core.checks import check_int as _check_int
from fairque.core.ops.base import OperationsBase
from fairque.core.records import Call
from fairque.core.taskhash import raw, text
from fairque.errors import ValidationError
from fairque.models import QueueStats, TaskPage, TaskState, UserStats, WorkerInfo

#: most tasks one ``list_tasks`` page holds
MAX_PAGE = 500
#: index entries one filtered ``list_tasks`` page examines at most
LIST_SCAN = 1000
_WALKS = frozenset("sunr")

#: stats.lua counts the registries in the order TaskState defines them
_STATE_ORDER = tuple(TaskState)


def make_cursor(walk: str, score: Any, task_id: str) -> str:
    """The opaque cursor of a ``list_tasks`` page: its walk, score and last id."""
    raw_cursor = f"{walk}\n{int(float(text(score)))}\n{task_id}".encode()
    return base64.urlsafe_b64encode(raw_cursor).decode().rstrip("=")


def read_cursor(cursor: str) -> tuple[str, int, str]:
    """The (walk, score, task id) in a cursor ``make_cursor`` made.

    Raises:
        ValidationError: ``cursor`` is not one.
    """
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        walk, score, task_id = base64.urlsafe_b64decode(padded).decode().split("\n", 2)
        if walk not in _WALKS or not task_id:
            raise ValueError(walk)
        return walk, int(score), task_id
    except (ValueError, TypeError):
        raise ValidationError("cursor: not a cursor list_tasks returned") from None


class InspectionOperations(OperationsBase):
    """Reads of a queue's registries and counters."""

    def list_tasks(
        self,
        state: TaskState | str | None,
        user_id: str | None,
        name: str | None,
        limit: int,
        cursor: str | None,
    ) -> Call[TaskPage]:
        """One page of tasks, newest first (see ``lua/list_tasks.lua`` for the order)."""
        if state is not None:
            try:
                state = TaskState(state.upper() if isinstance(state, str) else state)
            except ValueError:
                choices = ", ".join(s.value for s in TaskState)
                raise ValidationError(f"state must be one of {choices}, got {state!r}") from None
        if user_id is not None:
            check_identifier(user_id, "user_id", MAX_USER_ID)
        if name is not None:
            check_identifier(name, "name", MAX_TASK_ID)
        if state is None and user_id is None and name is None:
            raise ValidationError("list_tasks needs a state, a user_id or a name")
        _check_int(limit, "limit", 1, MAX_PAGE)
        walk, score, after = read_cursor(cursor) if cursor else ("", 0, "")
        codec = self.codec

        def parse(reply: list[Any]) -> TaskPage:
            tasks, next_walk, next_score, next_id = reply
            nxt = text(next_walk)
            return TaskPage(
                tasks=[codec.task_from_hash(flat) for flat in tasks],
                next_cursor=make_cursor(nxt, next_score, text(next_id)) if nxt else None,
            )

        args = [
            state.value if state is not None else "", user_id or "", name or "", limit,
            LIST_SCAN, walk, score, after,
        ]  # fmt: skip
        return self._call("list_tasks", args, parse)

    def workers(self) -> Call[list[WorkerInfo]]:
        """The registered workers, with the age of their last heartbeat."""

        def parse(reply: list[Any]) -> list[WorkerInfo]:
            out = []
            for i in range(0, len(reply), 2):
                info = WorkerInfo.model_validate_json(reply[i])
                out.append(info.model_copy(update={"last_seen_seconds": int(reply[i + 1]) / 1000}))
            return out

        return self._call("workers", [], parse)

    def stats(self, user_limit: int) -> Call[QueueStats]:
        """A snapshot of counts, counters and per-user load."""
        _check_int(user_limit, "user_limit", 0, MAX_SCAN)

        def parse(reply: list[Any]) -> QueueStats:
            counts, counters, users, active, capped = reply
            return QueueStats(
                queue=self.queue,
                counts={s: int(c) for s, c in zip(_STATE_ORDER, counts, strict=True)},
                # the histograms' buckets ('<name>:<bucket>') are metrics()'s business
                counters={
                    text(counters[i]): int(counters[i + 1])
                    for i in range(0, len(counters), 2)
                    if b":" not in raw(counters[i])
                },
                users=[
                    UserStats(
                        user_id=text(users[i]),
                        ready=int(users[i + 1]),
                        in_flight=int(users[i + 2]),
                        weight=int(users[i + 3]),
                        max_in_flight=int(users[i + 4]) or None,
                    )
                    for i in range(0, len(users), 5)
                ],
                active_users=int(active),
                capped_users=int(capped),
            )

        return self._call("stats", [max(user_limit, 1)], parse)
