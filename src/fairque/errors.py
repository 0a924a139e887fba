"""The fairque exception hierarchy and the table of script error codes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pydantic
from redis.exceptions import ResponseError


def pydantic_message(error: Mapping[str, Any]) -> str:
    """One entry of a pydantic ``ValidationError.errors()`` as a plain message.

    pydantic prefixes the message of a validator's ``ValueError`` with ``Value error, ``;
    the reader needs only the message.
    """
    return str(error["msg"]).removeprefix("Value error, ")


class FairqueError(Exception):
    """Base class of every error fairque raises."""


class ConfigError(FairqueError, ValueError):
    """A queue or worker option has an invalid value."""


class ValidationError(FairqueError, ValueError):
    """A task or call argument is invalid; nothing was written.

    ``problems`` holds one ``(field, message)`` pair per failing field, for callers that
    show them apart (the HTTP API's ``errors``, the command line's ``line: field:
    message``); the field is ``""`` when the problem is not about one field.
    """

    def __init__(
        self,
        message: str = "",
        problems: Iterable[tuple[str, str]] | None = None,
        *,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        if problems is None:
            rest = message
            if field is not None and message.startswith(field):
                rest = message[len(field) :].removeprefix(":").strip() or message
            problems = [(field or "", rest)]
        self.problems: tuple[tuple[str, str], ...] = tuple(problems)


class SerializationError(ValidationError):
    """A payload or result cannot be serialized or deserialized."""


class PayloadTooLarge(ValidationError):
    """A serialized payload exceeds the queue's ``max_payload_bytes``."""


class TaskNotFound(FairqueError, KeyError):
    """No task with this id exists (never pushed, or expired)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "task not found"


class DuplicateTask(FairqueError):
    """A task with this id already exists and duplicates were asked to raise."""


class LeaseLost(FairqueError):
    """The task's lease expired or was taken over; this worker no longer owns it."""


class CancelRequested(LeaseLost):
    """The task was canceled while this lease held it: stop working on it."""


class InvalidTransition(FairqueError):
    """The task is not in a state that allows the requested operation."""


class TaskFailed(FairqueError):
    """``result()`` of a task that FAILED; the message holds the stored error."""


class TaskCanceled(FairqueError):
    """``result()`` of a task that was CANCELED; the message holds the reason."""


class ResultTimeout(FairqueError, TimeoutError):
    """``result()`` gave up waiting: the task had not ended within the timeout."""


class DependencyCycleError(ValidationError):
    """The dependencies of a batch form a cycle."""


class DependencyNotFound(ValidationError):
    """A task depends on an id that does not exist."""


class ServerError(FairqueError, ResponseError):
    """The server refused a command (out of memory, read-only replica...): its reply."""


class ServerFull(ServerError):
    """The server is at its memory limit and refused to take more work; nothing was
    written. Workers keep draining the queue meanwhile, so memory comes back."""


class QuotaExceeded(FairqueError):
    """A push would take a tenant past its backlog quota (``max_queued``), or its group
    past the group's, or its byte quota (``max_bytes``, ``kind == "bytes"``); nothing
    was written. ``user_id``, ``quota`` and ``queued`` (the backlog now, or the bytes
    its tasks hold) say whose and how far; ``group_id`` names the
    group when it was the group's quota (None: the tenant's own)."""

    def __init__(
        self,
        message: str,
        user_id: str = "",
        quota: int = 0,
        queued: int = 0,
        group_id: str | None = None,
        kind: str = "tasks",
    ) -> None:
        super().__init__(message)
        self.user_id = user_id
        self.quota = quota
        self.queued = queued
        self.group_id = group_id
        self.kind = kind


class ScheduleNotFound(FairqueError, KeyError):
    """No schedule with this id exists."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "schedule not found"


class ScheduleExists(FairqueError):
    """A schedule with this id exists with another definition (update it instead)."""


class NotLeader(FairqueError):
    """This scheduler does not hold the scheduler lock (another one leads)."""


class ConstraintNotFound(FairqueError, KeyError):
    """No constraint with that id is defined on the queue."""


class StaleConstraints(FairqueError):
    """The queue's constraints changed since this client read them (it reloads them)."""


#: Numeric error codes returned by Lua scripts, mapped to exception classes.
SCRIPT_ERRORS: dict[int, type[FairqueError]] = {
    -1: LeaseLost,
    -2: TaskNotFound,
    -3: DuplicateTask,
    -4: InvalidTransition,
    -5: DependencyNotFound,
    -6: DependencyCycleError,
    -7: CancelRequested,
    -21: ScheduleNotFound,
    -22: ScheduleExists,
    -23: NotLeader,
    -31: ConstraintNotFound,
    -32: StaleConstraints,
    -33: ValidationError,
    -34: QuotaExceeded,
    -35: QuotaExceeded,
}


def script_error(code: int, detail: str) -> FairqueError:
    """Build the exception for a script's numeric error code."""
    cls = SCRIPT_ERRORS.get(code, FairqueError)
    if code == -35:
        return bytes_exceeded(detail)
    if cls is QuotaExceeded:
        return quota_exceeded(detail)
    return cls(detail)


def bytes_exceeded(detail: str) -> QuotaExceeded:
    """``QuotaExceeded`` (``kind == "bytes"``) from a script's ``<quota> <bytes> <user>``."""
    quota, held, user = [*detail.split(" ", 2), "", ""][:3]
    try:
        limit, have = int(quota), int(held)
    except ValueError:
        return QuotaExceeded(detail, kind="bytes")
    return QuotaExceeded(
        f"tenant {user!r} has {have} bytes in its tasks (payloads, kept results); its"
        f" byte quota is {limit}: nothing was pushed",
        user_id=user, quota=limit, queued=have, kind="bytes",
    )  # fmt: skip


def quota_exceeded(detail: str) -> QuotaExceeded:
    """``QuotaExceeded`` from a script's ``<quota> <backlog> <user>`` (``...
    <user>\\t<group>`` for a group's quota)."""
    quota, queued, who = [*detail.split(" ", 2), "", ""][:3]
    user, _, group = who.partition("\t")  # ids hold no control characters
    try:
        limit, have = int(quota), int(queued)
    except ValueError:
        return QuotaExceeded(detail)
    if group:
        return QuotaExceeded(
            f"group {group!r} (of tenant {user!r}) has {have} tasks waiting (queued,"
            f" scheduled or deferred); its backlog quota is {limit}: nothing was pushed",
            user_id=user,
            quota=limit,
            queued=have,
            group_id=group,
        )
    return QuotaExceeded(
        f"tenant {user!r} has {have} tasks waiting (queued, scheduled or deferred);"
        f" its backlog quota is {limit}: nothing was pushed",
        user_id=user,
        quota=limit,
        queued=have,
    )


def invalid_model(exc: pydantic.ValidationError, what: str = "task") -> ValidationError:
    """A model's errors (``what``: "task"...) as one ``ValidationError``, a problem per
    field."""
    problems = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"])
        # a validator's message names its field ("priority must be..."): said once
        problems.append((field, pydantic_message(err).removeprefix(f"{field} ")))
    text = "; ".join(f"{field or what}: {message}" for field, message in problems)
    return ValidationError(f"invalid {what}: {text}", problems)
