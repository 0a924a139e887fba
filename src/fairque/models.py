"""Public data models: Task, Priority, TaskState and the stats snapshot."""

from __future__ import annotations

import enum
import math
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from fairque.common.fairshare import weighted_shares
from fairque.core.checks import (
    MAX_COST,
    MAX_DEPENDENCIES,
    MAX_PROGRESS_MESSAGE,
    MAX_SECONDS,
    MAX_TASK_ID,
    MAX_USER_ID,
    TRACEPARENT,
    identifier_problem,
    run_us_text,
)
from fairque.core.checks import MAX_LEAD as MAX_LEAD  # the HTTP layer's bound
from fairque.core.histogram import HISTOGRAM_BOUNDS_SECONDS, HISTOGRAM_STEPS_PER_DOUBLING
from fairque.dedup import Dedup
from fairque.errors import ValidationError, invalid_model
from fairque.reads import BucketUse, GroupLoad, StartedTask, UserLoad, WaitPlace

__all__ = [
    "HISTOGRAM_BOUNDS_SECONDS",
    "HISTOGRAM_STEPS_PER_DOUBLING",
    "BucketUse",
    "GroupLoad",
    "Histogram",
    "Priority",
    "QueueMetrics",
    "QueueStats",
    "StartedTask",
    "Task",
    "TaskOutcome",
    "TaskPage",
    "TaskState",
    "UserLoad",
    "UserStats",
    "WaitPlace",
    "WorkerInfo",
]


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


def _check_identifier(value: str, what: str, limit: int) -> str:
    if 0 < len(value) <= limit and value.isascii() and value.isprintable():
        return value  # the common case, inline: this runs for every task built
    problem = identifier_problem(value, what, limit)
    if problem is not None:
        raise ValueError(problem)
    return value


class Task(BaseModel):
    """One unit of work owned by a user (tenant).

    Fields the caller sets: ``user_id``, ``name``, ``payload``, ``priority``,
    ``task_id`` (generated when None), ``max_retries`` (queue default when None),
    ``execute_after``, ``depends_on``, ``timeout`` (seconds), ``keep_result``,
    ``result_ttl`` (seconds; queue default when None) and ``cost`` (the slots of its
    user's cap and of its concurrency limits, the tokens of its rate limits and the
    multiple of its run a time-fair queue charges; default 1).  The queue fills
    ``state``, ``created_at``, ``retry_count`` and, for a leased task, ``lease_token``,
    ``worker_id``, ``lease_deadline`` and ``lease_capped``.

    Numbers are taken as they are, never converted: ``True`` is not an integer and
    ``"3"`` is not a number. Limits (see ``fairque.core.checks``): ids and names up to 256
    characters of valid Unicode without control characters; ``timeout`` and
    ``result_ttl`` finite and at most 10 years; ``execute_after`` at most 10 years
    ahead; ``max_retries`` up to 1,000; ``cost`` 1 to 1,000; at most 1,000 ``depends_on``
    entries.

    Raises:
        ValidationError: a field is invalid (empty user id, priority out of range...);
            the message names the field.
    """

    # assignments are checked too: a field changed after construction cannot smuggle
    # a value in that the constructor would have rejected
    model_config = ConfigDict(
        frozen=False, extra="forbid", use_enum_values=False, validate_assignment=True
    )

    user_id: str = Field(strict=True)
    name: str = Field(strict=True)
    payload: Any = None
    priority: Priority = Priority.NORMAL
    task_id: str | None = Field(default=None, strict=True)
    retry_count: int = Field(default=0, ge=0, strict=True)
    max_retries: int | None = Field(default=None, ge=0, le=1000, strict=True)
    created_at: datetime | None = None
    execute_after: datetime | None = None
    state: TaskState | None = None
    depends_on: tuple[str, ...] = ()
    on_dependency_failure: Literal["cancel", "wait"] = "cancel"
    timeout: float | None = Field(
        default=None, gt=0, le=MAX_SECONDS, allow_inf_nan=False, strict=True
    )
    keep_result: bool = Field(default=True, strict=True)
    result_ttl: int | None = Field(default=None, ge=0, le=MAX_SECONDS, strict=True)
    cost: int = Field(default=1, ge=1, le=MAX_COST, strict=True)
    #: what a push does when its tenant has a task with the same key waiting (``Dedup``)
    dedup: Dedup | None = None
    #: the W3C ``traceparent`` of the span that pushed it (``fairque[otel]``): a
    #: worker's span of its run continues that trace
    trace_context: str | None = Field(default=None, strict=True)
    error: str | None = None
    lease_token: str | None = None
    worker_id: str | None = None
    lease_deadline: datetime | None = None
    #: its lease holds a slot of an in-flight cap (its user's or its group's): a
    #: worker leases nothing ahead for the slot running it, so the slot it frees
    #: can go to its user's next task
    lease_capped: bool = False
    started_at: datetime | None = None
    ended_at: datetime | None = None
    #: the last failed attempt's traceback and kind (e.g. ``"timeout"``), when given
    traceback: str | None = None
    failure_reason: str | None = None
    #: how far its handler got, as it last reported (``report_progress``): a fraction
    #: from 0 to 1 and a message
    progress: float | None = None
    progress_message: str | None = None
    _run_us: str = PrivateAttr(default="")  # run_seconds as a script takes it
    #: progress reported and not yet sent (the next heartbeat takes it): '' none
    _progress: str = PrivateAttr(default="")

    def report_progress(self, fraction: float, message: str = "") -> None:
        """Say how far the leased task got: ``fraction`` from 0 to 1 and a short
        ``message``. The next heartbeat (``extend``, or a worker's own) takes it to the
        server, where ``get()`` reads it as ``progress`` and ``progress_message``.

        Raises:
            ValidationError: ``fraction`` is not a number from 0 to 1, or ``message``
                is not a string of at most 1,000 characters without control characters.
        """
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise ValidationError(f"fraction must be a number from 0 to 1, got {fraction!r}")
        if not 0 <= fraction <= 1:  # (NaN fails this too)
            raise ValidationError(f"fraction must be from 0 to 1, got {fraction!r}")
        if not isinstance(message, str) or len(message) > MAX_PROGRESS_MESSAGE:
            raise ValidationError(
                f"message must be a string of at most {MAX_PROGRESS_MESSAGE} characters"
            )
        if message and identifier_problem(message, "message", MAX_PROGRESS_MESSAGE):
            raise ValidationError("message must be valid Unicode without control characters")
        self.progress, self.progress_message = float(fraction), message
        self._progress = f"{float(fraction)!r}\n{message}"

    @property
    def run_seconds(self) -> float | None:
        """The current attempt's handler run in seconds, as its worker measured it (None:
        not reported). ``complete``, ``fail``, ``requeue`` and ``extend`` send it; a
        time-fair queue charges it, never more than the lease's span on its own clock."""
        return int(self._run_us) / 1e6 if self._run_us else None

    @run_seconds.setter
    def run_seconds(self, seconds: float | None) -> None:
        self._run_us = run_us_text(seconds)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except pydantic.ValidationError as exc:
            raise invalid_model(exc) from None

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            super().__setattr__(name, value)
        except pydantic.ValidationError as exc:
            raise invalid_model(exc) from None

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

    @field_validator("trace_context")
    @classmethod
    def _trace(cls, value: str | None) -> str | None:
        if value is not None and not TRACEPARENT.fullmatch(value):
            raise ValueError("trace_context must be a W3C traceparent (version-trace-span-flags)")
        return value

    @field_validator("dedup", mode="before")
    @classmethod
    def _dedup(cls, value: Any) -> Any:
        if value is None or isinstance(value, Dedup):
            return value
        raise ValueError(f"dedup must be a Dedup, got {type(value).__name__}")

    @field_validator("priority", mode="before")
    @classmethod
    def _priority(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 6:
            raise ValueError(f"priority must be an integer 1..5 or 6 (CRITICAL), got {value!r}")
        return Priority(value)

    @field_validator("execute_after")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        value = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        try:
            late = value - datetime.now(timezone.utc) > timedelta(seconds=MAX_SECONDS)
            value.timestamp()
        except (OverflowError, ValueError, OSError):
            late = True
        if late:
            raise ValueError("execute_after must be at most 10 years in the future")
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
        unique = tuple(dict.fromkeys(value))
        if len(unique) > MAX_DEPENDENCIES:
            raise ValueError(
                f"depends_on names {len(unique)} tasks; the limit is {MAX_DEPENDENCIES}"
            )
        return unique


_ENDED = frozenset({"FINISHED", "FAILED", "CANCELED"})


class TaskOutcome(BaseModel):
    """How a task ended, read in one call (``outcome()``), or the state of one that
    has not ended yet.

    For a FINISHED task, ``has_result`` says whether a result is stored (a handler's
    ``None`` is a result too); it is False when the task keeps no result. For a
    FAILED or CANCELED one, ``error`` is the message, ``traceback``, ``reason`` and
    ``details`` (the failure's data, decoded) what the failing side gave. ``ended_at``
    is the end time; a task that has not ended has only its ``state``.
    """

    task_id: str
    state: TaskState
    result: Any = None
    has_result: bool = False
    error: str | None = None
    traceback: str | None = None
    reason: str | None = None
    details: Any = None
    ended_at: datetime | None = None

    @property
    def ended(self) -> bool:
        """Whether the task has ended (FINISHED, FAILED or CANCELED)."""
        return self.state.value in _ENDED


class TaskPage(BaseModel):
    """One page of ``list_tasks``: the tasks, newest first, and the next page's cursor.

    ``next_cursor`` is None when nothing follows. A filtered page examines a bounded
    number of entries, so it may hold fewer tasks than asked for (even none) while a
    next page still exists: follow ``next_cursor`` until it is None.
    """

    tasks: list[Task]
    next_cursor: str | None = None


#: How a queue shares its workers among users (``FairQueue.set_fairness``): ``"time"``
#: (the default) charges each user the worker time its tasks hold, in proportion to its
#: weight; ``"count"`` gives each user turns (``weight`` consecutive leases per round).
Fairness = Literal["time", "count"]
FAIRNESS_MODES: tuple[Fairness, ...] = ("time", "count")


class UserStats(BaseModel):
    """Per-user load in a stats snapshot, with the limits set by ``set_user_limits``."""

    user_id: str
    ready: int
    in_flight: int
    weight: int = 1  #: share against weight 1 (of worker time, or turns in count mode)
    max_in_flight: int | None = None  #: the in-flight cap (None: no cap)


class QueueStats(BaseModel):
    """A snapshot of one queue: counts per state, per-user load and counters."""

    queue: str
    counts: dict[TaskState, int]
    counters: dict[str, int]
    users: list[UserStats]
    active_users: int
    capped_users: int
    fairness: Fairness = "time"  #: what the queue is fair by (``set_fairness``)

    @property
    def total(self) -> int:
        """Tasks in any registry."""
        return sum(self.counts.values())


class Histogram(BaseModel):
    """Durations counted by bucket, as the scripts keep them (Prometheus-ready).

    ``counts[i]`` is the number of durations in bucket i: at most ``bounds[i]`` seconds
    and more than ``bounds[i - 1]``; the last entry (one more than ``bounds``) counts
    the durations above the last bound. ``sum`` is their total in seconds (kept in
    whole milliseconds), ``count`` how many there are.
    """

    bounds: tuple[float, ...] = HISTOGRAM_BOUNDS_SECONDS
    counts: list[int]
    sum: float
    count: int

    @property
    def cumulative(self) -> list[int]:
        """Counts of durations at most each bound, then the total: Prometheus's ``le``
        buckets (the last is ``+Inf``)."""
        out, total = [], 0
        for n in self.counts:
            total += n
            out.append(total)
        return out


class TenantService(BaseModel):
    """What one user of a queue was served since it was first leased (or the queue
    purged), as the scripts count it in each transition.

    ``last_lease``: its last lease, to within a second; ``started``: leases handed out;
    ``finished``: attempts completed; ``failed``: failed attempts (a reclaimed lease
    counts); ``busy_seconds``: worker time its leases held (lease to its end, or to the
    deadline of a reclaimed lease), in whichever fairness mode; ``wait_time``: ready ->
    leased. ``user_id`` is empty for the sum of the users
    a report does not name.
    """

    user_id: str
    weight: int = 1
    last_lease: datetime | None = None
    started: int = 0
    finished: int = 0
    failed: int = 0
    busy_seconds: float = 0.0
    wait_time: Histogram
    #: its tasks waiting now (QUEUED, SCHEDULED or DEFERRED): 0 means it was given all it
    #: asked for (0 for the sum of the others, whose backlog is not read)
    backlog: int = 0
    #: its group (``set_user_limits(group=)``) and share (``floor``, ``ceiling``), if any
    group: str | None = None
    floor: float | None = None
    ceiling: float | None = None


class TenantReport(BaseModel):
    """The most recently served users of a queue (``FairQueue.tenants``), the rest in
    one sum (``others``), and the queue's worker time, so each user's share of it can be
    set against its fair share (its weight over the weights of the users competing)."""

    queue: str
    fairness: Fairness
    tenants: list[TenantService]
    others: TenantService
    users_known: int  #: users leased at least once (the ones named and the rest)
    busy_seconds: float  #: worker time held by every lease of the queue

    def share(self, user: TenantService) -> float:
        """``user``'s part of the queue's worker time (0.0 when none was used)."""
        return user.busy_seconds / self.busy_seconds if self.busy_seconds > 0 else 0.0

    def fair_shares(self) -> list[float]:
        """Each named user's fair part of the queue's worker time, by its demand.

        Weighted max-min: a user with no backlog asked for what it got and is satisfied
        by it (its fair share is its own share); the users still waiting share the rest
        by weight; the others (``others``) count as satisfied. So a tenant that got all
        it asked for is never below its fair share, and a backlogged tenant's fair share
        is what an equal split by weight of the time left over would give it.
        """
        if self.busy_seconds <= 0:
            return [0.0] * len(self.tenants)
        used = [t.busy_seconds for t in self.tenants]
        demands = [
            u if t.backlog == 0 else math.inf for u, t in zip(used, self.tenants, strict=True)
        ]
        shares = weighted_shares(sum(used), demands, [float(t.weight) for t in self.tenants])
        return [s / self.busy_seconds for s in shares]


class QueueMetrics(BaseModel):
    """Counters and histograms since the queue was created (or last purged). ``popped``,
    ``finished`` and both histograms are counted by the processes that leased and
    ended the tasks and flushed at most once a second (``fairque.core.tally``); the
    others by the scripts in the transition itself.

    Counters: ``pushed`` (new tasks), ``popped`` (leases handed out), ``finished``,
    ``failed`` (finally), ``canceled``, ``retried`` (failed attempts scheduled again),
    ``reclaimed`` (expired leases taken back), ``lease_lost`` (complete, fail or extend
    calls refused because their lease was no longer held; a resend of a refused call
    counts again), ``requeued`` (leased tasks given back without a failure: a stopping
    worker's, one with no handler), ``schedule_fired`` (tasks schedules pushed) and
    ``schedule_skipped`` (missed slots a schedule's misfire policy skipped).
    Histograms: ``wait_time`` (ready -> leased: from the time a task entered QUEUED
    to its lease) and ``run_time`` (leased -> finished or failed; a reclaimed lease
    is not timed).
    """

    queue: str
    pushed: int = 0
    popped: int = 0
    finished: int = 0
    failed: int = 0
    canceled: int = 0
    retried: int = 0
    reclaimed: int = 0
    lease_lost: int = 0
    requeued: int = 0
    schedule_fired: int = 0
    schedule_skipped: int = 0
    wait_time: Histogram
    run_time: Histogram


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
    #: the users whose tasks the worker leases first, and those it may take from
    #: ('*': any user); both empty: the global ring
    assigned_users: list[str] = Field(default_factory=list)
    steal_targets: list[str] = Field(default_factory=list)
    #: every queue the worker serves (it registers in each); empty: ``queue`` alone
    queues: list[str] = Field(default_factory=list)
    #: "process": a worker process (``fairque worker``, ``Worker``); "http": a pull
    #: worker registered by ``fairque serve`` from its lease calls (pid 0, host its address)
    kind: Literal["process", "http"] = "process"
    #: the task names it leases (empty: any name)
    names: list[str] = Field(default_factory=list)
    last_seen_seconds: float | None = None
