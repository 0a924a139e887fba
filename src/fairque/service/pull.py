"""The pull workers' operations: lease (with the outcomes a request carries), outcomes,
heartbeats. Like every operation, each calls ``AsyncFairQueue`` and shapes the answer."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from fairque.errors import (
    CancelRequested,
    LeaseLost,
    PayloadTooLarge,
    SerializationError,
    ValidationError,
)
from fairque.models import Task, TaskState
from fairque.service.convert import (
    engine_errors,
    invalid,
    iso,
    lease_handle,
    leased_out,
    record_failure,
    record_success,
)
from fairque.service.handlers import Ctx, Reply, no_task_of, now, until_left
from fairque.service.media import ProblemError
from fairque.service.tenancy import lease_users
from fairque.service.wire_pull import (
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
    RequeueIn,
    RequeueItem,
    SuccessIn,
    SuccessItem,
)


async def lease(ctx: Ctx) -> Reply:
    """POST /leases: up to max_tasks tasks, waiting up to wait_seconds for the first.

    Outcomes carried by the request are recorded first; successes go in the same
    script as the lease (``complete_and_pop``).
    """
    body: LeaseIn = ctx.body
    q = ctx.q
    deadline = time.monotonic() + body.wait_seconds
    # a worker held to tenants leases theirs alone, whatever it asks for
    users = lease_users(ctx.scope, body.assigned_users, body.steal_targets)
    assigned, steal = users if users is not None else (None, None)
    common: dict[str, Any] = {
        "lease_seconds": body.lease_seconds, "assigned_users": assigned,
        "steal_targets": steal, "names": body.names,
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
        if encoded is not None and users is not None and isinstance(item, SuccessItem):
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
    # (none of the tenants it asked for is its own: its outcomes only, one at a time)
    while users is not None:
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
    # a lease carries its task's payload and its id as the queue keeps it (which the
    # worker reports back), whatever the token reads elsewhere
    leased = [leased_out(t, q.queue) for t in tasks]
    return Reply(200, LeasesOut(leased, [r for r in results if r is not None]))


async def _apply(ctx: Ctx, task_id: str, outcome: SuccessIn | FailureIn | RequeueIn) -> str:
    """Record one result message; a lease it does not hold is 409 with where the task
    is now, or 404 for a task the token may not see (as for an unknown id)."""
    q = ctx.q
    ran = None if isinstance(outcome, RequeueIn) else outcome.run_seconds
    handle = lease_handle(task_id, outcome.lease_token, ran)
    try:
        if isinstance(outcome, RequeueIn):
            given_back = await q.requeue(handle)
            if ctx.pullers is not None:
                await ctx.pullers.ended(q, task_id, failed=None)
            return given_back.value
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
        if task is None or not ctx.scope.allows_tenant(task.user_id):
            raise no_task_of(ctx, task_id) from None
        state_now = task.state.value if task.state else None
        raise ProblemError(409, "lease-lost", "Conflict", str(exc), task_state=state_now) from None
    if ctx.pullers is not None:
        await ctx.pullers.ended(q, task_id, failed=state is not TaskState.FINISHED)
    return state.value


async def outcome(ctx: Ctx) -> Reply:
    """POST /tasks/{id}/outcome: a worker's result message for a leased task."""
    body: OutcomeIn = ctx.body
    return Reply(200, OutcomeOut(await _apply(ctx, ctx.path["task_id"], body)))


async def _answer(ctx: Ctx, item: SuccessItem | FailureItem | RequeueItem) -> OutcomeItemOut:
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
            200, ExtendOut(lease_expires_at=iso(ended or now()) or "", cancel_requested=True)
        )
    except LeaseLost as exc:
        task = await ctx.q.get(task_id)
        if task is None or not ctx.scope.allows_tenant(task.user_id):
            raise no_task_of(ctx) from None
        state = task.state.value if task.state else None
        raise ProblemError(409, "lease-lost", "Conflict", str(exc), task_state=state) from None
    return Reply(200, ExtendOut(lease_expires_at=iso(deadline) or "", cancel_requested=False))
