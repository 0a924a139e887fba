"""Public data models: Task, Priority, TaskState and the stats snapshot."""

from __future__ import annotations

import enum
import re
from datetime import datetime, timezone
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator

from fairque.errors import ValidationError

#: Longest user id accepted.
MAX_USER_ID = 256
#: Longest task id / task name accepted.
MAX_TASK_ID = 256


class Priority(enum.IntEnum):
    """Task priority. ``CRITICAL`` selects the user's critical lane."""

    VERY_LOW = 1
    LOW = 2
    NORMAL = 3
    HIGH = 4
    VERY_HIGH = 5
    CRITICAL = 6


class TaskState(str, enum.Enum):
    """Where a task is in its life cycle; each state has a registry in Redis."""

    SCHEDULED = "SCHEDULED"
    DEFERRED = "DEFERRED"
    QUEUED = "QUEUED"
    STARTED = "STARTED"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def plain_identifier(value: object, limit: int) -> bool:
    """True for a string that ``_check_identifier`` accepts as it is."""
    return type(value) is str and 0 < len(value) <= limit and _CONTROL.search(value) is None


def _check_identifier(value: str, what: str, limit: int) -> str:
    if not value:
        raise ValueError(f"{what} must not be empty")
    if len(value) > limit:
        raise ValueError(f"{what} is longer than {limit} characters")
    if _CONTROL.search(value):
        raise ValueError(f"{what} must not contain control characters")
    return value


class Task(BaseModel):
    """One unit of work owned by a user (tenant).

    Fields the caller sets: ``user_id``, ``name``, ``payload``, ``priority``,
    ``task_id`` (generated when None), ``max_retries`` (queue default when None),
    ``execute_after``, ``depends_on``, ``timeout`` (seconds), ``keep_result`` and
    ``result_ttl`` (seconds; queue default when None).  The queue fills
    ``state``, ``created_at``, ``retry_count`` and, for a leased task, ``lease_token``,
    ``worker_id`` and ``lease_deadline``.

    Raises:
        ValidationError: a field is invalid (empty user id, priority out of range...).
    """

    model_config = ConfigDict(frozen=False, extra="forbid", use_enum_values=False)

    user_id: str
    name: str
    payload: Any = None
    priority: Priority = Priority.NORMAL
    task_id: str | None = None
    retry_count: int = Field(default=0, ge=0)
    max_retries: int | None = Field(default=None, ge=0, le=1000)
    created_at: datetime | None = None
    execute_after: datetime | None = None
    state: TaskState | None = None
    depends_on: tuple[str, ...] = ()
    on_dependency_failure: Literal["cancel", "wait"] = "cancel"
    timeout: float | None = Field(default=None, gt=0)
    keep_result: bool = True
    result_ttl: int | None = Field(default=None, ge=0)
    error: str | None = None
    lease_token: str | None = None
    worker_id: str | None = None
    lease_deadline: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'task'}: {err['msg']}"
                for err in exc.errors()
            )
            raise ValidationError(f"invalid task: {problems}") from None

    @field_validator("user_id")
    @classmethod
    def _user_id(cls, value: str) -> str:
        return _check_identifier(value, "user_id", MAX_USER_ID)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _check_identifier(value, "name", MAX_TASK_ID)

    @field_validator("task_id")
    @classmethod
    def _task_id(cls, value: str | None) -> str | None:
        return None if value is None else _check_identifier(value, "task_id", MAX_TASK_ID)

    @field_validator("priority", mode="before")
    @classmethod
    def _priority(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 6:
            raise ValueError(f"priority must be an integer 1..5 or 6 (CRITICAL), got {value!r}")
        return Priority(value)

    @field_validator("execute_after")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value

    @field_validator("depends_on", mode="before")
    @classmethod
    def _deps(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError("depends_on must be a sequence of task ids, not a string")
        return value

    @field_validator("depends_on")
    @classmethod
    def _dep_ids(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for dep in value:
            _check_identifier(dep, "depends_on entry", MAX_TASK_ID)
        return tuple(dict.fromkeys(value))


class UserStats(BaseModel):
    """Per-user load in a stats snapshot."""

    user_id: str
    ready: int
    in_flight: int


class QueueStats(BaseModel):
    """A snapshot of one queue: counts per state, per-user load and counters."""

    queue: str
    counts: dict[TaskState, int]
    counters: dict[str, int]
    users: list[UserStats]
    active_users: int
    capped_users: int

    @property
    def total(self) -> int:
        """Tasks in any registry."""
        return sum(self.counts.values())


class WorkerInfo(BaseModel):
    """A running worker as registered in Redis (refreshed by its heartbeat)."""

    worker_id: str
    queue: str
    host: str
    pid: int
    started_at: datetime
    concurrency: int
    in_flight: int = 0
    processed: int = 0
    failed: int = 0
    #: handler threads still running for tasks the worker gave up on (timeout, stop)
    threads_stuck: int = 0
    last_seen_seconds: float | None = None
