"""How a request's token scope shapes the task operations (``fairque.service.scope``).

A tenant-scoped token pushes as its tenants alone, and every task of another tenant
answers it as an unknown id does: the same 404, the same ``null`` result, the same
fresh task for a pushed id. A token of the whole queue (and every request when no
tokens are configured) passes through unchanged, with no extra read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, TypeVar

import msgspec

from fairque.client.aio import AsyncFairQueue
from fairque.core.checks import MAX_TASK_ID
from fairque.models import Task
from fairque.service.convert import invalid
from fairque.service.media import ProblemError
from fairque.service.scope import Scope
from fairque.service.wire import (
    TaskOut,
)

Shown = TypeVar("Shown", bound=TaskOut)


def no_task(queue: str, task_id: str) -> ProblemError:
    """The answer for an id the queue does not hold (or the token may not see)."""
    return ProblemError(
        404, "task-not-found", "Not Found", f"no task {task_id!r} in queue {queue!r}"
    )


#: stored ids read at once when an id may name several (a token of many named tenants)
READ_AT_ONCE = 16


async def find(q: AsyncFairQueue, scope: Scope, task_id: str) -> Task | None:
    """The task ``task_id`` names for a token of ``scope``, or None: the first of its
    candidates (``Scope.candidates``) that exists and is the token's to see, the
    candidates read ``READ_AT_ONCE`` at a time."""
    candidates = scope.candidates(task_id)
    for at in range(0, len(candidates), READ_AT_ONCE):
        chunk = candidates[at : at + READ_AT_ONCE]
        found = await asyncio.gather(*(q.get(stored) for stored in chunk))
        for task in found:
            if task is not None and scope.allows_tenant(task.user_id):
                return task
    return None


async def stored_id(q: AsyncFairQueue, scope: Scope, task_id: str) -> str:
    """The stored id of the task ``task_id`` names for ``scope``; ``no_task`` 404 when
    the token may not see one (read only for a tenant-scoped token)."""
    if not scope.by_tenant:
        return task_id
    task = await find(q, scope, task_id)
    if task is None or task.task_id is None:
        raise no_task(q.queue, task_id)
    return task.task_id


def shown(scope: Scope, out: Shown) -> Shown:
    """A task as the API shows it (a ``TaskOut`` or ``LeasedTask``), with the ids this
    token chose as it chose them, and no payload for a token that reads none."""
    if not scope.payloads:
        out = msgspec.structs.replace(out, payload=None)
    if not scope.by_tenant:
        return out
    user = out.user_id
    return msgspec.structs.replace(
        out,
        task_id=scope.shown_id(out.task_id, user),
        depends_on=[scope.shown_id(d, user) for d in out.depends_on],
    )


def forbidden_tenant(user_id: str) -> ProblemError:
    return ProblemError(
        403, "forbidden-tenant", "Forbidden", f"this token may not act for tenant {user_id!r}",
        tenant=user_id,
    )  # fmt: skip


async def pushed_items(q: AsyncFairQueue, scope: Scope, items: Sequence[Any]) -> list[Any]:
    """The request's ``TaskIn`` items as a tenant-scoped token may push them: a missing
    ``user_id`` is its own tenant (422 when it has several), another tenant is 403, and
    the ids it chooses (the task's and its dependencies') are kept under the tenant."""
    if not scope.by_tenant:
        for i, item in enumerate(items):
            if item.user_id is None:
                where = f"tasks[{i}]." if len(items) > 1 else ""
                raise invalid(f"{where}user_id", "required: the tenant the task belongs to")
        return list(items)
    users: list[str] = []
    for i, item in enumerate(items):
        where = f"tasks[{i}]." if len(items) > 1 else ""
        user = item.user_id or scope.own_tenant
        if user is None:
            raise invalid(
                f"{where}user_id",
                "required: this token may act for several tenants, so say which",
            )
        if not scope.allows_tenant(user):
            raise forbidden_tenant(user)
        users.append(user)
    mine = {
        item.task_id: scope.stored_id(item.task_id, user)
        for item, user in zip(items, users, strict=True)
        if item.task_id is not None
    }
    out = []
    for i, (item, user) in enumerate(zip(items, users, strict=True)):
        where = f"tasks[{i}]." if len(items) > 1 else ""
        deps = [mine.get(d) or await _dependency(q, scope, d, user) for d in item.depends_on]
        task_id = None if item.task_id is None else mine[item.task_id]
        if task_id is not None and len(task_id) > MAX_TASK_ID:
            raise invalid(
                f"{where}task_id",
                f"too long: kept under its tenant it is {len(task_id)} characters, "
                f"the most is {MAX_TASK_ID}",
            )
        out.append(msgspec.structs.replace(item, user_id=user, task_id=task_id, depends_on=deps))
    return out


async def _dependency(q: AsyncFairQueue, scope: Scope, task_id: str, user: str) -> str:
    task = await find(q, scope, task_id)
    if task is not None and task.task_id is not None:
        return task.task_id
    return scope.stored_id(task_id, user)  # unknown: the push says so, in the token's id


def check_pushed(scope: Scope, pushed: Sequence[Task], created: Sequence[bool]) -> None:
    """A pushed id that names a task the token may not see (only a token of the whole
    queue can have pushed it under this token's stored form) is a conflict."""
    for task, new in zip(pushed, created, strict=True):
        if not new and not scope.allows_tenant(task.user_id):
            raise ProblemError(
                409, "task-id-taken", "Conflict",
                "the id is taken by a task this token may not see; choose another",
            )  # fmt: skip


def lease_users(
    scope: Scope, assigned: Sequence[str] | None, steal: Sequence[str] | None
) -> tuple[list[str] | None, list[str] | None] | None:
    """The users a lease may serve (``assigned_users``, ``steal_targets``) for a token
    of ``scope``: a tenant-scoped worker's request is narrowed to its tenants (the ones
    it names, or all of them), or None when none of them is left."""
    if not scope.by_tenant:
        return (None if assigned is None else list(assigned)), (
            None if steal is None else list(steal)
        )
    mine = scope.tenant_names
    chosen = [u for u in assigned if u in mine] if assigned else list(mine)
    if not chosen:
        return None
    wanted = set(steal or ())
    extra = [u for u in mine if u not in chosen and ("*" in wanted or u in wanted)]
    return chosen, extra
