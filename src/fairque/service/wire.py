"""The HTTP API's bodies: msgspec structs, the same for JSON and MessagePack.

Field names are the Python API's (``user_id``, ``payload``, ``max_retries``...); times
are ISO 8601 UTC text in both encodings, so a client decodes them the same way
whichever it asked for.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from fairque.common.taskspec import FIELDS, SpecField
from fairque.models import MAX_LEAD

#: no control character (the engine's rule for ids and names)
NO_CONTROL = "^[^\\u0000-\\u001f\\u007f]+$"
#: the ids' character rule, in the document only: the engine checks it (with the words of
#: the command line), and a regular expression per id would cost a batch push 0.5 us a task
_DOCUMENTED = {"pattern": NO_CONTROL}
#: a task id, user id or task name
Identifier = Annotated[str, Meta(min_length=1, max_length=256, extra_json_schema=_DOCUMENTED)]
#: a schedule id (its tasks' ids add a slot to it)
ScheduleId = Annotated[str, Meta(min_length=1, max_length=224, extra_json_schema=_DOCUMENTED)]
#: a constraint id (path parameter: the document's rule; the engine checks it)
ConstraintId = Annotated[str, Meta(pattern="^[A-Za-z0-9_.-]{1,128}$")]
#: a queue name: no braces or white space, at most 128 characters (path parameter: the
#: document's rule; the server checks it)
QueueName = Annotated[
    str, Meta(min_length=1, max_length=128, pattern="^[^{}\\s\\u001c-\\u001f\\u0085]+$")
]
#: a worker id: any text of at most 256 characters
WorkerId = Annotated[str, Meta(min_length=1, max_length=256)]
#: a length of time the engine keeps in milliseconds
Seconds = Annotated[float, Meta(ge=0.001, le=315_360_000)]
Priority = Annotated[int, Meta(ge=1, le=5)] | Literal["critical"]
Timestamp = Annotated[str, Meta(description="ISO 8601, UTC")]
#: a handler's run as its worker measured it
RunSeconds = Annotated[
    float,
    Meta(
        ge=0,
        le=315_360_000,
        description=(
            "How long the handler ran for this attempt (so far, in a heartbeat), in "
            "seconds, by the worker's own clock. A time-fair queue charges the tenant "
            "this run, never more than the lease's span on the server's clock; "
            "without it, the span (trips to and from the worker included)."
        ),
    ),
]


def spec_type(spec: SpecField) -> Any:
    """The msgspec type of one field of the outward task (``fairque.common.taskspec``)."""
    kind: Any
    if spec.kind == "id":
        kind = Identifier
    elif spec.kind == "any":
        return Annotated[Any, Meta(description=spec.description)]
    elif spec.kind == "priority":
        kind = Priority
    elif spec.kind == "seconds":
        kind = Annotated[float, Meta(ge=spec.low, le=spec.high)]
    elif spec.kind == "integer":
        kind = Annotated[int, Meta(ge=spec.low, le=spec.high)]
    elif spec.kind == "boolean":
        kind = bool
    elif spec.kind == "time":
        kind = Timestamp
    elif spec.kind == "ids":
        kind = Annotated[list[Identifier], Meta(max_length=int(spec.high or 0) or None)]
    else:
        kind = Literal[spec.choices]
    if not spec.required and spec.default is None:
        kind = kind | None
    return Annotated[kind, Meta(description=spec.description)]


def spec_default(spec: SpecField) -> Any:
    if isinstance(spec.default, tuple):
        return msgspec.field(default_factory=list)
    return spec.default


def _optional(spec: SpecField) -> tuple[str, Any, Any]:
    kind = spec_type(spec)
    if spec.required:  # (described where a reader looks first, beside its null)
        kind = Annotated[kind | None, Meta(description=spec.description)]
    return spec.name, kind, spec_default(spec)


#: One task to enqueue: the outward task of ``fairque.common.taskspec``, field for field
#: (``user_id`` may be left out by a token of one tenant: ``fairque.service.tenancy``).
TaskIn: Any = msgspec.defstruct(
    "TaskIn",
    [
        (f.name, spec_type(f)) if f.required and f.name != "user_id" else _optional(f)
        for f in FIELDS
    ],
    kw_only=True,
    forbid_unknown_fields=True,
    module=__name__,
)


class TaskBatchIn(Struct, forbid_unknown_fields=True):
    """Several tasks enqueued at once, all or nothing."""

    tasks: Annotated[list[TaskIn], Meta(min_length=1, max_length=10_000)]


class TaskOut(Struct, kw_only=True):
    """A stored task."""

    task_id: Annotated[str, Meta(description="The task's id (given at push, or made then)")]
    queue: Annotated[str, Meta(description="The queue that holds it")]
    user_id: Annotated[str, Meta(description="Its tenant")]
    name: Annotated[str, Meta(description="The task name a worker's handler is chosen by")]
    payload: Annotated[Any, Meta(description="The argument given to the handler")]
    priority: Annotated[
        int | Literal["critical"],
        Meta(description="1 (lowest) to 5, or 'critical' (the critical lane)"),
    ]
    state: Annotated[
        str,
        Meta(description="SCHEDULED, DEFERRED, QUEUED, STARTED, FINISHED, FAILED or CANCELED"),
    ]
    retry_count: Annotated[
        int, Meta(description="Failed attempts so far, counted against max_retries")
    ]
    #: deprecated: the same value as ``retry_count``; removed in the next release
    attempts: Annotated[
        int,
        Meta(
            description="Deprecated: the same value as retry_count (failed attempts, not "
            "runs); removed in the next release",
            extra_json_schema={"deprecated": True},
        ),
    ]
    max_retries: Annotated[
        int | None, Meta(description="Retries allowed (null: the queue's default)")
    ]
    created_at: Annotated[Timestamp | None, Meta(description="When it was pushed")]
    execute_after: Annotated[
        Timestamp | None, Meta(description="When it becomes ready (a delay or a retry's backoff)")
    ]
    started_at: Annotated[Timestamp | None, Meta(description="Its latest lease")]
    ended_at: Annotated[
        Timestamp | None, Meta(description="When it finished, failed or was canceled")
    ]
    depends_on: Annotated[list[str], Meta(description="Upstream task ids it waits for")]
    timeout_seconds: Annotated[
        float | None, Meta(description="Execution timeout (null: the worker's default)")
    ]
    keep_result: Annotated[bool, Meta(description="Whether its result is kept")]
    result_ttl_seconds: Annotated[
        int | None, Meta(description="How long a kept result lives (null: the queue's default)")
    ]
    cost: Annotated[int, Meta(description="Its slots and rate tokens (fair share: runs x cost)")]
    dedup_key: Annotated[str | None, Meta(description="Its dedup key (see dedup_mode)")]
    dedup_mode: Annotated[str | None, Meta(description="keep, replace or debounce")]
    debounce_seconds: Annotated[float | None, Meta(description="Its debounce window")]
    debounce_max_seconds: Annotated[float | None, Meta(description="Its debounce's bound")]
    traceparent: Annotated[str | None, Meta(description="W3C trace context it was pushed in")]
    progress: Annotated[float | None, Meta(description="How far its handler got, 0 to 1")]
    progress_message: Annotated[str | None, Meta(description="The progress report's message")]
    error: Annotated[str | None, Meta(description="The last failure's message")]
    worker_id: Annotated[
        str | None,
        Meta(
            description="The worker holding its lease, or the last one that held it "
            "(null: never leased)"
        ),
    ]


class TaskBatchOut(Struct):
    """The tasks of a batch, in the order they were sent."""

    tasks: list[TaskOut]


class TaskPage(Struct):
    """One page of a listing, newest first; ``next_cursor`` is null on the last page."""

    tasks: list[TaskOut]
    next_cursor: str | None


class Problem(Struct, kw_only=True, omit_defaults=True):
    """An RFC 9457 problem details object."""

    type: str
    title: str
    status: int
    detail: str
    errors: list[FieldError] | None = None
    task_state: str | None = None


class FieldError(Struct):
    """One failing field of a request."""

    field: str
    message: str


class ResultSuccess(Struct, tag="success", tag_field="type"):
    """A finished task's outcome, in the worker result message's shape."""

    finished_at: Timestamp | None
    result: Any


class ResultFailure(Struct, tag="failure", tag_field="type", kw_only=True):
    """A failed or canceled task's outcome."""

    reason: Literal["other", "timeout", "canceled"]
    finished_at: Timestamp | None
    should_retry: bool
    error: Any
    message: str


class Pending(Struct):
    """The task has not ended yet."""

    state: str


class QueueInfo(Struct):
    """One queue the service serves."""

    name: str


class QueuesOut(Struct):
    """The queues the service serves."""

    queues: list[QueueInfo]


class UserLoad(Struct):
    """One user's load in a queue, with its weight and in-flight cap."""

    user_id: str
    ready: int
    in_flight: int
    weight: int
    max_in_flight: int | None


class StatsOut(Struct, kw_only=True):
    """A snapshot of one queue."""

    queue: str
    counts: dict[str, int]
    counters: dict[str, int]
    users: list[UserLoad]
    active_users: int
    capped_users: int
    total: int
    #: what the queue is fair by: worker time ("time") or turns ("count")
    fairness: Literal["time", "count"] = "time"


class FairnessIn(Struct, forbid_unknown_fields=True, kw_only=True):
    """Fair by worker time or turns; how far a tenant may be ahead (s, time mode)."""

    mode: Literal["time", "count"]
    max_lead_seconds: Annotated[float, Meta(gt=0, le=MAX_LEAD)] | None = None


class FairnessOut(Struct, kw_only=True):
    """What the queue is fair by now, and before the call that set it."""

    queue: str
    mode: Literal["time", "count"]
    previous: Literal["time", "count"]
    max_lead_seconds: float


class TenantOut(Struct, kw_only=True):
    """What one user was served since its first lease (user_id "": the users not named)."""

    user_id: str
    weight: int
    started: int
    finished: int
    failed: int
    #: worker time its leases held
    busy_seconds: float
    #: its part of the queue's worker time
    share: float
    #: its weight over the weights of the users named (0 for the rest)
    fair_share: float
    #: its mean wait from QUEUED to the lease (null: never leased)
    mean_wait_seconds: float | None
    #: its last lease (ISO 8601; null for the rest)
    last_lease: str | None
    #: its group and share of worker time (null: none)
    group: str | None = None
    floor: float | None = None
    ceiling: float | None = None


class TenantsOut(Struct, kw_only=True):
    """The most recently leased users of a queue and the rest, by worker time."""

    queue: str
    fairness: Literal["time", "count"]
    busy_seconds: float
    users_known: int
    tenants: list[TenantOut]
    others: TenantOut


class UsersOut(Struct):
    """Users with ready or in-flight work."""

    users: list[UserLoad]


class WorkerOut(Struct, kw_only=True):
    """A registered worker."""

    worker_id: str
    queue: str
    host: str
    pid: int
    started_at: Timestamp
    concurrency: int
    in_flight: int
    processed: int
    failed: int
    last_seen_seconds: float | None
    #: "process" (a worker process, with its pid) or "http" (a pull worker: pid 0, host
    #: its address)
    kind: str = "process"
    #: the task names it leases (empty: any name)
    names: list[str] = []


class WorkersOut(Struct):
    """The workers registered on a queue."""

    workers: list[WorkerOut]


class PurgeOut(Struct):
    """How many keys a purge deleted."""

    deleted: int
