"""Listing a queue's tasks, newest first, with a cursor: the engine's ``list_tasks``.

The engine walks a state's registry, or the per-user and per-name indexes its scripts
keep (see ``FairQueue.list_tasks``), so a page stays fast on a queue of 1,000,000
tasks. A filtered page examines a bounded number of entries and may hold fewer tasks
than asked for: follow ``next_cursor`` until it is null.
"""

from __future__ import annotations

from fairque.client.aio import AsyncFairQueue
from fairque.models import Task, TaskState
from fairque.service.convert import engine_errors, invalid

#: the order of the "all tasks" view (no filter): what is running or due first
ALL_ORDER = (
    TaskState.STARTED, TaskState.QUEUED, TaskState.DEFERRED, TaskState.SCHEDULED,
    TaskState.FAILED, TaskState.CANCELED, TaskState.FINISHED,
)  # fmt: skip


async def list_tasks(
    q: AsyncFairQueue,
    state: TaskState | None,
    limit: int,
    cursor: str | None,
    user_id: str | None,
    name: str | None,
) -> tuple[list[Task], str | None]:
    """One page of tasks, newest first, and the cursor of the next page. With no
    state, user or name: every task, a state at a time in ``ALL_ORDER`` (its cursor is
    the state's place in that order, then the state's own cursor).

    Raises:
        ProblemError: 422 for a bad filter or cursor.
    """
    if state is None and user_id is None and name is None:
        return await _all_tasks(q, limit, cursor)
    with engine_errors():
        page = await q.list_tasks(state, user_id, name, limit, cursor)
    return page.tasks, page.next_cursor


async def _all_tasks(
    q: AsyncFairQueue, limit: int, cursor: str | None
) -> tuple[list[Task], str | None]:
    index, inner = 0, None
    if cursor:
        if not cursor[0].isdigit() or int(cursor[0]) >= len(ALL_ORDER):
            raise invalid("cursor", "not a cursor this listing gave")
        index, inner = int(cursor[0]), cursor[1:] or None
    found: list[Task] = []
    while index < len(ALL_ORDER) and len(found) < limit:
        tasks, after = await list_tasks(q, ALL_ORDER[index], limit - len(found), inner, None, None)
        found.extend(tasks)
        if after is None:
            index, inner = index + 1, None
        else:
            inner = after
    return found, None if index >= len(ALL_ORDER) else f"{index}{inner or ''}"
