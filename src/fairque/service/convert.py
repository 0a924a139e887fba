"""Between the engine's models and the wire structs; engine errors as problems."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any, Literal
from urllib.parse import quote

import msgspec
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from fairque.client.aio import AsyncFairQueue
from fairque.common import taskspec
from fairque.common.taskspec import outward, task_of
from fairque.errors import (
    DuplicateTask,
    FairqueError,
    InvalidTransition,
    LeaseLost,
    PayloadTooLarge,
    QuotaExceeded,
    SerializationError,
    ServerFull,
    TaskNotFound,
    ValidationError,
)
from fairque.models import Priority, Task, TaskOutcome, TaskState
from fairque.service.media import ProblemError
from fairque.service.outage import CURRENT
from fairque.service.pullers import Pullers
from fairque.service.wire import (
    ResultFailure,
    TaskOut,
)
from fairque.service.wire_pull import (
    LeasedTask,
)


def iso(value: datetime | None) -> str | None:
    """ISO 8601 in UTC with a ``Z`` (milliseconds), or None."""
    if value is None:
        return None
    value = value.astimezone(timezone.utc)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def parse_time(value: str, field: str) -> datetime:
    """An ISO 8601 time (UTC when it names no zone), or ``ProblemError`` 422."""
    try:
        return taskspec.parse_time(value, field)
    except ValidationError as exc:
        raise wire_problems(exc) from None


def invalid(field: str, message: str) -> ProblemError:
    """A 422 problem naming one failing field."""
    return invalid_fields([(field, message)])


def invalid_fields(problems: list[tuple[str, str]]) -> ProblemError:
    """A 422 problem naming each failing field."""
    from fairque.service.wire import (
        FieldError,
    )

    return ProblemError(
        422, "validation", "Unprocessable Content",
        "; ".join(f"{field}: {message}" for field, message in problems),
        errors=[FieldError(field=field, message=message) for field, message in problems],
    )  # fmt: skip


def wire_problems(exc: ValidationError, where: str = "") -> ProblemError:
    """The engine's problems with its field names as the API spells them (under
    ``where``, e.g. ``tasks[3].``; a problem of no single field is the body's)."""
    named = []
    for field, message in exc.problems:
        name = outward(field)
        named.append((where + name if name else where.rstrip(".") or "body", message))
    return invalid_fields(named)


def location(queue: str, kind: str, item_id: str) -> str:
    """The ``Location`` of a created task or schedule: its path with the names
    percent-encoded (a header carries Latin-1 only; an id may hold any character)."""
    return f"/v1/queues/{quote(queue, safe='')}/{kind}/{quote(item_id, safe='')}"


def wire_priority(priority: int) -> int | Literal["critical"]:
    """A priority as the API writes it: 1..5, or "critical"."""
    return "critical" if priority == Priority.CRITICAL else int(priority)


def task_from_wire(item: Any, where: str = "") -> tuple[Task, float | None]:
    """The engine's Task for a request item (a ``TaskIn``), and its delay in seconds."""
    try:
        return task_of(msgspec.structs.asdict(item))
    except ValidationError as exc:
        raise wire_problems(exc, where) from None


def task_out(task: Task, queue: str) -> TaskOut:
    """A stored task as the API shows it."""
    assert task.task_id is not None
    return TaskOut(**_fields(task, queue))


def _fields(task: Task, queue: str) -> dict[str, Any]:
    dedup = task.dedup
    return {
        "task_id": task.task_id,
        "queue": queue,
        "user_id": task.user_id,
        "name": task.name,
        "payload": task.payload,
        "priority": wire_priority(task.priority),
        "state": task.state.value if task.state else "QUEUED",
        "retry_count": task.retry_count,
        "attempts": task.retry_count,
        "max_retries": task.max_retries,
        "created_at": iso(task.created_at),
        "execute_after": iso(task.execute_after),
        "started_at": iso(task.started_at),
        "ended_at": iso(task.ended_at),
        "depends_on": list(task.depends_on),
        "timeout_seconds": task.timeout,
        "keep_result": task.keep_result,
        "result_ttl_seconds": task.result_ttl,
        "cost": task.cost,
        "dedup_key": dedup.key if dedup else None,
        "dedup_mode": dedup.mode if dedup else None,
        "debounce_seconds": dedup.window if dedup else None,
        "debounce_max_seconds": dedup.max_wait if dedup else None,
        "traceparent": task.trace_context,
        "progress": task.progress,
        "progress_message": task.progress_message,
        "error": task.error,
        "worker_id": task.worker_id,
    }


def leased_out(task: Task, queue: str) -> LeasedTask:
    """A leased task with its lease token, deadline and attempt number (1 = first)."""
    assert task.lease_token is not None
    return LeasedTask(
        **_fields(task, queue),
        lease_token=task.lease_token,
        lease_expires_at=iso(task.lease_deadline) or "",
        attempt=task.retry_count + 1,
    )


def lease_handle(task_id: str, lease_token: str, run_seconds: float | None = None) -> Task:
    """A Task naming only an id, a lease token and the handler's run as the worker
    reported it: what complete/fail/extend/requeue read."""
    try:
        task = Task(user_id="-", name="-", task_id=task_id, lease_token=lease_token)
    except ValidationError as exc:
        raise invalid("task_id", str(exc)) from None
    task.run_seconds = run_seconds  # checked by the body's schema
    return task


#: marks a stored error written from a worker's failure message, so it reads back whole
_FAILURE_MARK = "fairque-failure:"


async def record_failure(
    q: AsyncFairQueue, task: Task, reason: str, message: str, error: Any, *, retry: bool
) -> TaskState:
    """Fail ``task`` with a worker's failure message, its reason, message and error
    kept as the task's own fields (``failure_reason``, ``error``, the details).

    Raises:
        LeaseLost: the lease is no longer held.
    """
    try:
        return await q.fail(task, message, retry=retry, reason=reason, details=error)
    except SerializationError:  # e.g. bytes from MessagePack under a JSON queue;
        # raised before anything was sent
        return await q.fail(task, message, retry=retry, reason=reason, details=repr(error))


async def record_success(
    q: AsyncFairQueue, task: Task, result: Any, pullers: Pullers | None
) -> TaskState:
    """Finish ``task`` with a worker's ``result``. A result the queue refuses (not
    serializable, over the size limit) fails the task at once, the refusal as its error
    (retried by its policy), and is answered as the problem it is, with where the task
    went (a resend fails nothing twice: the failure replays by its lease token).

    Raises:
        LeaseLost: the lease is no longer held.
        ProblemError: the result was refused.
    """
    try:
        if not await q.complete(task, result):
            raise LeaseLost(f"task {task.task_id!r}: the lease is no longer held")
    except (SerializationError, PayloadTooLarge) as exc:
        state = await q.fail(task, f"result refused: {exc}", reason="result-refused")
        if pullers is not None:
            await pullers.ended(q, task.task_id or "", failed=True)
        raise ProblemError(
            422, "result-refused", "Unprocessable Content", f"the result was refused: {exc}",
            task_state=state.value,
        ) from None  # fmt: skip
    return TaskState.FINISHED


def failure_from_outcome(out: TaskOutcome) -> ResultFailure:
    """A FAILED or CANCELED task's outcome in the worker result message's shape.

    The worker's reason, message and error are the task's own fields (``reason``,
    ``error``, ``details``); an error stored by an older version as marked JSON text
    is still read.
    """
    canceled = out.state is TaskState.CANCELED
    finished_at = iso(out.ended_at)
    if out.reason is None and out.details is None:
        return failure_from_error(out.error, finished_at, canceled=canceled)
    reason: Literal["other", "timeout", "canceled"] = (
        "canceled" if canceled else "timeout" if out.reason == "timeout" else "other"
    )
    return ResultFailure(
        reason=reason, finished_at=finished_at, should_retry=False, error=out.details,
        message=out.error or "",
    )  # fmt: skip


def failure_from_error(
    error: str | None, finished_at: str | None, *, canceled: bool
) -> ResultFailure:
    """A FAILED or CANCELED task's outcome in the worker result message's shape."""
    text = error or ""
    if text.startswith(_FAILURE_MARK):
        with contextlib.suppress(ValueError):
            stored = json.loads(text[len(_FAILURE_MARK) :])
            kept = stored.get("reason")
            return ResultFailure(
                reason="canceled" if canceled else "timeout" if kept == "timeout" else "other",
                finished_at=finished_at, should_retry=False,
                error=stored.get("error"), message=str(stored.get("message", "")),
            )  # fmt: skip
    reason: Literal["other", "timeout", "canceled"] = (
        "canceled" if canceled else "timeout" if "Timeout" in text[:40] else "other"
    )
    return ResultFailure(
        reason=reason, finished_at=finished_at, should_retry=False, error=text or None,
        message=text,
    )  # fmt: skip


#: seconds a producer refused by its tenant's quota is told to wait (workers drain the
#: backlog meanwhile)
QUOTA_RETRY_AFTER = 5
#: seconds a producer refused by a full server is told to wait
FULL_RETRY_AFTER = 10


@contextlib.contextmanager
def engine_errors() -> Iterator[None]:
    """Turn the engine's and the server's errors into problems (and tell the service's
    outage tracker, ``outage.CURRENT``, whether the server answered)."""
    try:
        yield
    except ProblemError:
        raise
    except PayloadTooLarge as exc:
        raise ProblemError(413, "payload-too-large", "Content Too Large", str(exc)) from None
    except TaskNotFound as exc:
        raise ProblemError(404, "task-not-found", "Not Found", str(exc)) from None
    except LeaseLost as exc:
        raise ProblemError(409, "lease-lost", "Conflict", str(exc)) from None
    except DuplicateTask as exc:
        raise ProblemError(409, "duplicate-task", "Conflict", str(exc)) from None
    except InvalidTransition as exc:
        raise ProblemError(409, "invalid-transition", "Conflict", str(exc)) from None
    except ValidationError as exc:
        raise wire_problems(exc) from None
    except QuotaExceeded as exc:
        raise ProblemError(
            429, "quota-exceeded", "Too Many Requests", str(exc),
            headers={"Retry-After": str(QUOTA_RETRY_AFTER)},
        ) from None  # fmt: skip
    except ServerFull as exc:
        raise ProblemError(
            503, "server-full", "Service Unavailable", str(exc),
            headers={"Retry-After": str(FULL_RETRY_AFTER)},
        ) from None  # fmt: skip
    except (RedisConnectionError, RedisTimeoutError, RedisClusterException, ResponseError) as exc:
        CURRENT.get().failed(exc)
        raise ProblemError(
            503, "unavailable", "Service Unavailable", f"the queue server is unavailable: {exc}",
            headers={"Retry-After": "1"},
        ) from None  # fmt: skip
    except FairqueError as exc:
        raise ProblemError(409, "conflict", "Conflict", str(exc)) from None
    else:
        CURRENT.get().answered()
