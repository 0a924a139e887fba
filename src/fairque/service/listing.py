"""Listing a queue's tasks, newest first, with a cursor: the engine's ``list_tasks``.

The engine walks a state's registry, or the per-user and per-name indexes its scripts
keep (see ``FairQueue.list_tasks``), so a page stays fast on a queue of 1,000,000
tasks. A filtered page examines a bounded number of entries and may hold fewer tasks
than asked for: follow ``next_cursor`` until it is null.
"""

from __future__ import annotations

from fairque.client.aio import AsyncFairQueue
from fairque.models import Task, TaskState
from fairque.service.convert import engine_errors


async def list_tasks(
    q: AsyncFairQueue,
    state: TaskState | None,
    limit: int,
    cursor: str | None,
    user_id: str | None,
    name: str | None,
) -> tuple[list[Task], str | None]:
    """One page of tasks, newest first, and the cursor of the next page.

    Raises:
        ProblemError: 422 for a bad filter or cursor (no state, user or name given).
    """
    with engine_errors():
        page = await q.list_tasks(state, user_id, name, limit, cursor)
    return page.tasks, page.next_cursor
