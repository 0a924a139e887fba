"""The API's operations: each one decodes nothing and holds no queue logic; it calls
``AsyncFairQueue`` and shapes the answer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from fairque.client.aio import AsyncFairQueue
from fairque.models import Task, TaskState, UserStats
from fairque.service import listing
from fairque.service.convert import (
    engine_errors,
    failure_from_outcome,
    invalid,
    iso,
    location,
    task_from_wire,
    task_out,
)
from fairque.service.media import ProblemError, convert, decode
from fairque.service.pullers import Pullers
from fairque.service.scope import EVERYTHING, Scope
from fairque.service.tenancy import (
    check_pushed,
    find,
    no_task,
    pushed_items,
    shown,
    stored_id,
)
from fairque.service.wire import (
    Pending,
    PurgeOut,
    QueueInfo,
    QueuesOut,
    ResultSuccess,
    StatsOut,
    TaskBatchIn,
    TaskBatchOut,
    TaskIn,
    TaskPage,
    UserLoad,
    UsersOut,
    WorkerOut,
    WorkersOut,
)
from fairque.tracing import sending

#: the longest a result request may wait, seconds
MAX_RESULT_WAIT = 60.0


@dataclass
class Ctx:
    """One request as the operations see it."""

    names: Sequence[str]
    path: Mapping[str, str]
    query: Mapping[str, str]
    body: Any = None
    queue: AsyncFairQueue | None = None
    #: set when the client hangs up before its answer (watched for the routes that wait)
    left: asyncio.Event = field(default_factory=asyncio.Event)
    #: the client's address, and the registry of pull workers it may be one of
    peer: str = ""
    pullers: Pullers | None = None
    #: the W3C trace context the request came with (a valid ``traceparent`` header)
    traceparent: str | None = None
    #: what the request's token may reach (``fairque.service.tenancy`` applies it)
    scope: Scope = EVERYTHING

    @property
    def q(self) -> AsyncFairQueue:
        assert self.queue is not None
        return self.queue


@dataclass
class Reply:
    """An operation's answer: status, body (a struct, or None for null), headers."""

    status: int
    value: Any
    headers: dict[str, str] = field(default_factory=dict)


Operation = Callable[[Ctx], Awaitable[Reply]]


async def until_left(work: Awaitable[Any], left: asyncio.Event) -> Any:
    """``work``'s answer, or None once ``left`` is set (``work`` is then canceled: only
    waits that change nothing on the server are given here)."""
    if left.is_set():
        close = getattr(work, "close", None)
        if close is not None:
            close()  # a coroutine never started
        return None
    job = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(left.wait())
    try:
        await asyncio.wait((job, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not job.done():
            job.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        return await job
    return None


def now() -> datetime:
    return datetime.now(timezone.utc)


def query_number(ctx: Ctx, name: str, default: float, low: float, high: float) -> float:
    raw = ctx.query.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise invalid(name, f"not a number: {raw!r}") from None
    if not low <= value <= high:
        raise invalid(name, f"must be between {low:g} and {high:g}")
    return value


def query_int(ctx: Ctx, name: str, default: int, low: int, high: int) -> int:
    """An integer query parameter (``47`` or ``47.0``), within ``low``..``high``."""
    value = query_number(ctx, name, default, low, high)
    if not float(value).is_integer():
        raise invalid(name, f"must be an integer, got {ctx.query.get(name)!r}")
    return int(value)


def query_bool(ctx: Ctx, name: str) -> bool:
    raw = ctx.query.get(name, "false").lower()
    if raw not in ("true", "false", "1", "0"):
        raise invalid(name, f"must be true or false, got {raw!r}")
    return raw in ("true", "1")


# ---- pushers ----------------------------------------------------------------------


async def push(ctx: Ctx) -> Reply:
    """POST /tasks: one task (201, or 200 when the id exists) or a batch (201)."""
    body = ctx.body
    if isinstance(body, TaskBatchIn):
        wire = await pushed_items(ctx.q, ctx.scope, body.tasks)
        items = [task_from_wire(item, f"tasks[{i}].") for i, item in enumerate(wire)]
        delays = [delay for _, delay in items]
        # the tasks continue the request's trace (fairque.tracing)
        with engine_errors(), sending(ctx.q.queue, len(items), None, ctx.traceparent):
            pushed = await ctx.q.push_many([task for task, _ in items], delays=delays)
        check_pushed(ctx.scope, pushed, pushed.created)
        return Reply(201, TaskBatchOut([_out(ctx, t) for t in pushed]))
    assert isinstance(body, TaskIn)
    [one] = await pushed_items(ctx.q, ctx.scope, [body])
    task, delay = task_from_wire(one)
    with engine_errors(), sending(ctx.q.queue, 1, task.user_id, ctx.traceparent):
        pushed = await ctx.q.push_many([task], delays=[delay])
    check_pushed(ctx.scope, pushed, pushed.created)
    stored = pushed[0]
    out = _out(ctx, stored)
    if not pushed.created[0]:
        # the id existed: the stored task (the engine says so in the push itself, so
        # of two racing pushes of one id exactly one gets 201)
        return Reply(200, out)
    return Reply(201, out, {"Location": location(ctx.q.queue, "tasks", out.task_id)})


def _out(ctx: Ctx, task: Task) -> Any:
    """A stored task as this request's token sees it."""
    return shown(ctx.scope, task_out(task, ctx.q.queue))


def decode_push(raw: bytes, media: str) -> TaskIn | TaskBatchIn:
    """A push body: a batch when it has ``tasks``, else one task."""
    obj: Any = decode(raw, media, Any)
    if isinstance(obj, dict) and "tasks" in obj:
        return convert(obj, TaskBatchIn)
    return convert(obj, TaskIn)


async def get_task(ctx: Ctx) -> Reply:
    """GET /tasks/{id}."""
    task = await find(ctx.q, ctx.scope, ctx.path["task_id"])
    if task is None:
        raise no_task_of(ctx)
    return Reply(200, _out(ctx, task))


async def list_tasks(ctx: Ctx) -> Reply:
    """GET /tasks?state=&user_id=&name=: one page, newest first (see ``listing``)."""
    raw_state = ctx.query.get("state")
    if raw_state is not None and raw_state.upper() not in TaskState.__members__:
        raise invalid("state", f"must be one of {', '.join(s.value for s in TaskState)}")
    limit = query_int(ctx, "limit", 50, 1, 500)
    for key in ("user_id", "name"):
        if ctx.query.get(key) == "":
            raise invalid(key, "must not be empty (leave it out for any)")
    user_id, name = ctx.query.get("user_id") or None, ctx.query.get("name") or None
    state = TaskState(raw_state.upper()) if raw_state is not None else None
    if user_id is not None and not ctx.scope.allows_tenant(user_id):
        return Reply(200, TaskPage([], None))  # as for a tenant with no tasks
    user_id = user_id or ctx.scope.own_tenant
    tasks, cursor = await listing.list_tasks(
        ctx.q, state, limit, ctx.query.get("cursor") or None, user_id, name
    )
    # a token of several tenants with no user named: its tenants' tasks of the page
    mine = [t for t in tasks if ctx.scope.allows_tenant(t.user_id)]
    return Reply(200, TaskPage([_out(ctx, t) for t in mine], cursor))


def no_task_of(ctx: Ctx, task_id: str | None = None) -> ProblemError:
    return no_task(ctx.q.queue, ctx.path["task_id"] if task_id is None else task_id)


async def get_result(ctx: Ctx) -> Reply:
    """GET /tasks/{id}/result: the outcome (200), still pending (202), or null (200)."""
    # one engine call reads the state, the result or failure and the end time together;
    # it blocks on the task's end signal, so nothing here polls
    wait = query_number(ctx, "wait_seconds", 0, 0, MAX_RESULT_WAIT)
    consume = query_bool(ctx, "consume")
    try:
        task_id = await stored_id(ctx.q, ctx.scope, ctx.path["task_id"])
    except ProblemError:
        return Reply(200, None)  # as for an unknown id
    # a client that hangs up ends the wait (nothing is consumed for nobody after that)
    out = await until_left(ctx.q.outcome(task_id, timeout=wait, consume=consume), ctx.left)
    if out is None:
        return Reply(200, None)  # unknown, expired or consumed
    if not out.ended:
        return Reply(202, Pending(out.state.value))
    if out.state is TaskState.FINISHED:
        if not out.has_result:
            return Reply(200, None)  # the task keeps no result
        result = out.result if ctx.scope.payloads else None  # (a token that reads none)
        return Reply(200, ResultSuccess(finished_at=iso(out.ended_at), result=result))
    return Reply(200, failure_from_outcome(out))


async def cancel_task(ctx: Ctx) -> Reply:
    """DELETE /tasks/{id}: cancel a task that has not ended (409 when it has)."""
    task_id = await stored_id(ctx.q, ctx.scope, ctx.path["task_id"])
    if not await ctx.q.cancel(task_id):
        task = await ctx.q.get(task_id)
        state = task.state.value if task is not None and task.state else None
        raise ProblemError(
            409, "already-ended", "Conflict", f"task {task_id!r} has already ended ({state})",
            task_state=state,
        )  # fmt: skip
    return await get_task(ctx)


async def retry_task(ctx: Ctx) -> Reply:
    """POST /tasks/{id}/retry: queue a FAILED or CANCELED task again."""
    await ctx.q.retry(ctx.path["task_id"])
    return await get_task(ctx)


async def list_queues(ctx: Ctx) -> Reply:
    """GET /v1/queues."""
    return Reply(200, QueuesOut([QueueInfo(name) for name in sorted(ctx.names)]))


async def queue_stats(ctx: Ctx) -> Reply:
    """GET /stats."""
    limit = query_int(ctx, "user_limit", 100, 0, 10_000)
    stats = await ctx.q.stats(user_limit=limit)
    return Reply(
        200,
        StatsOut(
            queue=stats.queue,
            counts={state.value: n for state, n in stats.counts.items()},
            counters=dict(stats.counters),
            users=[user_load(u) for u in stats.users],
            active_users=stats.active_users,
            capped_users=stats.capped_users,
            total=stats.total,
            fairness=stats.fairness,
        ),
    )


def user_load(user: UserStats) -> UserLoad:
    """A user's row of a stats snapshot as the API shows it."""
    return UserLoad(user.user_id, user.ready, user.in_flight, user.weight, user.max_in_flight)


async def list_users(ctx: Ctx) -> Reply:
    """GET /users: users with ready or in-flight work (ready, in flight, weight, cap)."""
    limit = query_int(ctx, "limit", 100, 1, 10_000)
    stats = await ctx.q.stats(user_limit=limit)
    mine = [u for u in stats.users if ctx.scope.allows_tenant(u.user_id)]
    return Reply(200, UsersOut([user_load(u) for u in mine]))


async def list_workers(ctx: Ctx) -> Reply:
    """GET /workers."""
    workers = [
        WorkerOut(
            worker_id=w.worker_id,
            queue=w.queue,
            host=w.host,
            pid=w.pid,
            started_at=iso(w.started_at) or "",
            concurrency=w.concurrency,
            in_flight=w.in_flight,
            processed=w.processed,
            failed=w.failed,
            last_seen_seconds=w.last_seen_seconds,
            kind=w.kind,
            names=w.names,
        )
        for w in await ctx.q.workers()
    ]
    return Reply(200, WorkersOut(workers))


async def purge(ctx: Ctx) -> Reply:
    """POST /purge: delete every key of the queue."""
    return Reply(200, PurgeOut(await ctx.q.purge()))
