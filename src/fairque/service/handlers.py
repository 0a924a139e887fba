"""The API's operations: each one decodes nothing and holds no queue logic; it calls
``AsyncFairQueue`` and shapes the answer."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from fairque.client.aio import AsyncFairQueue
from fairque.errors import (
    CancelRequested,
    LeaseLost,
    PayloadTooLarge,
    SerializationError,
    ValidationError,
)
from fairque.models import Task, TaskState, UserStats
from fairque.service import listing
from fairque.service.convert import (
    engine_errors,
    failure_from_outcome,
    invalid,
    iso,
    lease_handle,
    leased_out,
    location,
    record_failure,
    record_success,
    task_from_wire,
    task_out,
)
from fairque.service.media import ProblemError, convert, decode
from fairque.service.pullers import Pullers
from fairque.service.wire import (
    ExtendIn,
    ExtendOut,
    FailureIn,
    FailureItem,
    LeaseIn,
    LeasesOut,
    OutcomeBatchIn,
    OutcomeBatchOut,
    OutcomeIn,
    OutcomeItemOut,
    OutcomeOut,
    Pending,
    PurgeOut,
    QueueInfo,
    QueuesOut,
    ResultSuccess,
    StatsOut,
    SuccessIn,
    SuccessItem,
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


def _now() -> datetime:
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
        items = [task_from_wire(item, f"tasks[{i}].") for i, item in enumerate(body.tasks)]
        delays = [delay for _, delay in items]
        # the tasks continue the request's trace (fairque.tracing)
        with engine_errors(), sending(ctx.q.queue, len(items), None, ctx.traceparent):
            pushed = await ctx.q.push_many([task for task, _ in items], delays=delays)
        return Reply(201, TaskBatchOut([task_out(t, ctx.q.queue) for t in pushed]))
    assert isinstance(body, TaskIn)
    task, delay = task_from_wire(body)
    with engine_errors(), sending(ctx.q.queue, 1, task.user_id, ctx.traceparent):
        pushed = await ctx.q.push_many([task], delays=[delay])
    stored = pushed[0]
    if not pushed.created[0]:
        # the id existed: the stored task (the engine says so in the push itself, so
        # of two racing pushes of one id exactly one gets 201)
        return Reply(200, task_out(stored, ctx.q.queue))
    where = location(ctx.q.queue, "tasks", stored.task_id or "")
    return Reply(201, task_out(stored, ctx.q.queue), {"Location": where})


def decode_push(raw: bytes, media: str) -> TaskIn | TaskBatchIn:
    """A push body: a batch when it has ``tasks``, else one task."""
    obj: Any = decode(raw, media, Any)
    if isinstance(obj, dict) and "tasks" in obj:
        return convert(obj, TaskBatchIn)
    return convert(obj, TaskIn)


async def get_task(ctx: Ctx) -> Reply:
    """GET /tasks/{id}."""
    task = await ctx.q.get(ctx.path["task_id"])
    if task is None:
        raise _no_task(ctx)
    return Reply(200, task_out(task, ctx.q.queue))


async def list_tasks(ctx: Ctx) -> Reply:
    """GET /tasks?state=&user_id=&name=: one page, newest first (see ``listing``)."""
    raw_state = ctx.query.get("state") or None
    if raw_state is not None and raw_state.upper() not in TaskState.__members__:
        raise invalid("state", f"must be one of {', '.join(s.value for s in TaskState)}")
    limit = query_int(ctx, "limit", 50, 1, 500)
    for key in ("user_id", "name"):
        if ctx.query.get(key) == "":
            raise invalid(key, "must not be empty (leave it out for any)")
    user_id, name = ctx.query.get("user_id") or None, ctx.query.get("name") or None
    state = TaskState(raw_state.upper()) if raw_state is not None else None
    tasks, cursor = await listing.list_tasks(
        ctx.q, state, limit, ctx.query.get("cursor") or None, user_id, name
    )
    return Reply(200, TaskPage([task_out(t, ctx.q.queue) for t in tasks], cursor))


def _no_task(ctx: Ctx, task_id: str | None = None) -> ProblemError:
    task_id = ctx.path["task_id"] if task_id is None else task_id
    return ProblemError(
        404, "task-not-found", "Not Found", f"no task {task_id!r} in queue {ctx.q.queue!r}"
    )


async def get_result(ctx: Ctx) -> Reply:
    """GET /tasks/{id}/result: the outcome (200), still pending (202), or null (200)."""
    # one engine call reads the state, the result or failure and the end time together;
    # it blocks on the task's end signal, so nothing here polls
    wait = query_number(ctx, "wait_seconds", 0, 0, MAX_RESULT_WAIT)
    consume = query_bool(ctx, "consume")
    # a client that hangs up ends the wait (nothing is consumed for nobody after that)
    out = await until_left(
        ctx.q.outcome(ctx.path["task_id"], timeout=wait, consume=consume), ctx.left
    )
    if out is None:
        return Reply(200, None)  # unknown, expired or consumed
    if not out.ended:
        return Reply(202, Pending(out.state.value))
    if out.state is TaskState.FINISHED:
        if not out.has_result:
            return Reply(200, None)  # the task keeps no result
        return Reply(200, ResultSuccess(finished_at=iso(out.ended_at), result=out.result))
    return Reply(200, failure_from_outcome(out))


async def cancel_task(ctx: Ctx) -> Reply:
    """DELETE /tasks/{id}: cancel a task that has not ended (409 when it has)."""
    task_id = ctx.path["task_id"]
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
    return Reply(200, UsersOut([user_load(u) for u in stats.users]))


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


# ---- pull workers -------------------------------------------------------------------


async def lease(ctx: Ctx) -> Reply:
    """POST /leases: up to max_tasks tasks, waiting up to wait_seconds for the first.

    Outcomes carried by the request are recorded first; successes go in the same
    script as the lease (``complete_and_pop``).
    """
    body: LeaseIn = ctx.body
    q = ctx.q
    deadline = time.monotonic() + body.wait_seconds
    common: dict[str, Any] = {
        "lease_seconds": body.lease_seconds, "assigned_users": body.assigned_users,
        "steal_targets": body.steal_targets, "names": body.names,
        "max_held": body.max_tasks,  # never more leases at once than it asks for
    }  # fmt: skip
    results: list[OutcomeItemOut | None] = [None] * len(body.outcomes)
    done: list[tuple[Task, Any]] = []
    done_at: list[int] = []
    for i, item in enumerate(body.outcomes):
        try:  # a result the queue refuses fails its task alone (_complete)
            encoded = q.encode_result(item.result) if isinstance(item, SuccessItem) else None
        except (SerializationError, PayloadTooLarge):
            encoded = None
        if encoded is not None:
            handle = lease_handle(item.task_id, item.lease_token, item.run_seconds)
            done.append((handle, encoded))
            done_at.append(i)
        else:
            results[i] = await _answer(ctx, item)
    attempt = 0
    tasks: list[Task] = []
    if done:
        req = None if body.request_id is None else f"{body.request_id}:0"
        acks, tasks = await q.complete_and_pop(
            done, body.max_tasks, body.worker_id, request_id=req, **common
        )
        for i, acked in zip(done_at, acks, strict=True):
            item = body.outcomes[i]
            if acked and ctx.pullers is not None:
                await ctx.pullers.ended(q, item.task_id, failed=False)
            results[i] = (
                OutcomeItemOut(task_id=item.task_id, status=200, state=TaskState.FINISHED.value)
                if acked
                else await _answer(ctx, item)  # the lease was lost: say how the task is now
            )
        attempt = 1
    while True:
        if attempt > 0 or done:
            # wait for a push's wake-up, unless the client hangs up first: a long poll
            # whose client left (a proxy's idle timeout) leases nothing
            remaining = deadline - time.monotonic()
            if tasks or remaining <= 0.001 or ctx.left.is_set():
                break
            await until_left(q.wait_for_work(remaining), ctx.left)
            if ctx.left.is_set():
                break
        # a resent request replays each step under the same derived id
        req = None if body.request_id is None else f"{body.request_id}:{attempt}"
        tasks = await q.pop_batch(body.max_tasks, body.worker_id, request_id=req, **common)
        attempt += 1
    if tasks and ctx.left.is_set():
        # leased as the client left: given back at once, no attempt spent
        for task in tasks:
            with contextlib.suppress(LeaseLost):  # already expired and reclaimed
                await q.requeue(task)
        tasks = []
    if ctx.pullers is not None and not ctx.left.is_set():
        lease_s = body.lease_seconds or q.options.lease_seconds
        await ctx.pullers.leased(
            q, body.worker_id, ctx.peer, body.max_tasks, body.assigned_users,
            body.steal_targets, lease_s, body.wait_seconds, tasks, names=body.names,
        )  # fmt: skip
    leased = [leased_out(t, q.queue) for t in tasks]
    return Reply(200, LeasesOut(leased, [r for r in results if r is not None]))


async def _apply(ctx: Ctx, task_id: str, outcome: SuccessIn | FailureIn) -> str:
    q = ctx.q
    handle = lease_handle(task_id, outcome.lease_token, outcome.run_seconds)
    try:
        if isinstance(outcome, SuccessIn):
            state = await record_success(q, handle, outcome.result, ctx.pullers)
        else:
            state = await record_failure(
                q, handle, outcome.reason, outcome.message, outcome.error,
                retry=outcome.should_retry,
            )  # fmt: skip
    except LeaseLost as exc:
        if ctx.pullers is not None:
            await ctx.pullers.ended(q, task_id, failed=None)
        task = await q.get(task_id)
        if task is None:
            raise _no_task(ctx, task_id) from None
        state_now = task.state.value if task.state else None
        raise ProblemError(409, "lease-lost", "Conflict", str(exc), task_state=state_now) from None
    if ctx.pullers is not None:
        await ctx.pullers.ended(q, task_id, failed=state is not TaskState.FINISHED)
    return state.value


async def outcome(ctx: Ctx) -> Reply:
    """POST /tasks/{id}/outcome: a worker's result message for a leased task."""
    body: OutcomeIn = ctx.body
    return Reply(200, OutcomeOut(await _apply(ctx, ctx.path["task_id"], body)))


async def _answer(ctx: Ctx, item: SuccessItem | FailureItem) -> OutcomeItemOut:
    """Record one outcome of a batch; its answer (a problem for this item alone)."""
    try:
        with engine_errors():
            state = await _apply(ctx, item.task_id, item)
        return OutcomeItemOut(task_id=item.task_id, status=200, state=state)
    except ProblemError as exc:
        return OutcomeItemOut(task_id=item.task_id, status=exc.problem.status, problem=exc.problem)


async def outcomes(ctx: Ctx) -> Reply:
    """POST /outcomes: several result messages; each gets its own answer."""
    body: OutcomeBatchIn = ctx.body
    return Reply(200, OutcomeBatchOut([await _answer(ctx, item) for item in body.outcomes]))


async def extend(ctx: Ctx) -> Reply:
    """POST /tasks/{id}/extend: a heartbeat that moves the lease's deadline."""
    body: ExtendIn = ctx.body
    task_id = ctx.path["task_id"]
    handle = lease_handle(task_id, body.lease_token, body.run_seconds)
    if body.progress is not None:
        try:
            handle.report_progress(body.progress, body.progress_message)
        except ValidationError as exc:  # (the schema checked the rest: its characters)
            raise invalid("progress_message", str(exc)) from None
    try:
        deadline = await ctx.q.extend(handle, body.seconds)
        if ctx.pullers is not None:
            seconds = body.seconds or ctx.q.options.lease_seconds
            await ctx.pullers.extended(ctx.q, task_id, seconds)
    except CancelRequested:
        # canceled while this lease held it: the lease ended with the task
        task = await ctx.q.get(task_id)
        ended = task.ended_at if task is not None else None
        return Reply(
            200, ExtendOut(lease_expires_at=iso(ended or _now()) or "", cancel_requested=True)
        )
    except LeaseLost as exc:
        task = await ctx.q.get(task_id)
        if task is None:
            raise _no_task(ctx) from None
        state = task.state.value if task.state else None
        raise ProblemError(409, "lease-lost", "Conflict", str(exc), task_state=state) from None
    return Reply(200, ExtendOut(lease_expires_at=iso(deadline) or "", cancel_requested=False))
