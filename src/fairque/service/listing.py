"""Listing a queue's tasks by state, newest first, with a cursor.

The engine has no listing call yet; this reads the state registries that
``fairque.keys`` names (sorted sets scored by time) and the tasks through
``AsyncFairQueue.get``. A page costs O(log N + page) in Redis whatever the queue's
size (the cursor's entry is found by rank). With ``user_id`` or ``name`` filters a
page examines at most ``SCAN_LIMIT`` entries, so it may hold fewer tasks than asked
for: follow ``next_cursor`` until it is null.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from fairque.aio import AsyncFairQueue
from fairque.models import Task, TaskState
from fairque.service.convert import invalid

#: registry entries one filtered page examines at most
SCAN_LIMIT = 1000


def registry(q: AsyncFairQueue, state: TaskState) -> str:
    """The registry key of ``state`` (see ``fairque.keys``)."""
    keys = q.ops.keys
    return {
        TaskState.SCHEDULED: keys.delayed, TaskState.DEFERRED: keys.deferred,
        TaskState.QUEUED: keys.queued, TaskState.STARTED: keys.leases,
        TaskState.FINISHED: keys.finished, TaskState.FAILED: keys.failed,
        TaskState.CANCELED: keys.canceled,
    }[state]  # fmt: skip


def make_cursor(score: float, task_id: str) -> str:
    raw = f"{int(score)}\n{task_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def read_cursor(cursor: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        score, task_id = raw.split("\n", 1)
        return int(score), task_id
    except ValueError:
        raise invalid("cursor", "not a cursor this server returned") from None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def _entries(
    q: AsyncFairQueue, key: str, after: tuple[int, str] | None, count: int
) -> list[tuple[str, int]]:
    """Up to ``count`` (id, score) entries after the cursor, newest first.

    The cursor's entry is found by rank (O(log N)), so a page costs the same however
    many entries share its time (a batch pushed in one call shares one). When that
    entry has left the registry since, the page resumes after its time.
    """
    client: Any = q.client
    if after is None:
        found = await client.zrange(key, 0, count - 1, desc=True, withscores=True)
    else:
        score, last = after
        rank = await client.zrevrank(key, last)
        if rank is not None:
            found = await client.zrange(key, rank + 1, rank + count, desc=True, withscores=True)
        else:
            found = await client.zrange(
                key, f"({score}", "-inf", desc=True, byscore=True, offset=0, num=count,
                withscores=True,
            )  # fmt: skip
    return [(_text(member), int(score)) for member, score in found]


async def list_tasks(
    q: AsyncFairQueue,
    state: TaskState,
    limit: int,
    cursor: str | None,
    user_id: str | None,
    name: str | None,
) -> tuple[list[Task], str | None]:
    """One page of ``state``'s tasks, newest first, and the cursor of the next page."""
    key = registry(q, state)
    after = read_cursor(cursor) if cursor else None
    filtered = user_id is not None or name is not None
    budget = SCAN_LIMIT if filtered else limit
    found: list[Task] = []
    last: tuple[str, int] | None = None
    while budget > 0 and len(found) < limit:
        chunk = 250 if filtered else limit - len(found)
        entries = await _entries(q, key, after, min(budget, chunk))
        if not entries:
            return found, None
        budget -= len(entries)
        tasks = await asyncio.gather(*(q.get(task_id) for task_id, _ in entries))
        for (task_id, score), task in zip(entries, tasks, strict=True):
            last = (task_id, score)
            if task is None or task.state is not state:
                continue  # ended or moved since the registry was read
            if (user_id is None or task.user_id == user_id) and (name is None or task.name == name):
                found.append(task)
                if len(found) == limit:
                    break
        if last is not None:
            after = (last[1], last[0])
    if last is None:
        return found, None
    return found, make_cursor(last[1], last[0])
