"""The pull workers' bodies: a lease request and its answer, result messages (one or a
batch), heartbeats. The same structs for JSON and MessagePack (``fairque.service.wire``
holds the rest of the API's)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from fairque.service.wire import (
    Identifier,
    Problem,
    RunSeconds,
    Seconds,
    TaskOut,
    Timestamp,
    WorkerId,
)


class LeaseIn(Struct, forbid_unknown_fields=True, kw_only=True):
    """A pull worker's request for tasks."""

    worker_id: WorkerId
    max_tasks: Annotated[int, Meta(ge=1, le=100)] = 1
    wait_seconds: Annotated[float, Meta(ge=0, le=20)] = 0
    lease_seconds: Seconds | None = None
    assigned_users: list[Identifier] | None = None
    steal_targets: list[Identifier] | None = None
    #: the task names this worker handles (null: any name); a task with another name is
    #: never leased to it, it waits for a worker that handles it
    names: Annotated[list[Identifier], Meta(min_length=1, max_length=1000)] | None = None
    #: the same id on a resent request returns the leases the first one got
    request_id: Annotated[str, Meta(min_length=1, max_length=128)] | None = None
    #: result messages of earlier tasks, recorded first (successes in the same
    #: round trip as the lease): one request per cycle instead of two
    outcomes: Annotated[list[SuccessItem | FailureItem | RequeueItem], Meta(max_length=100)] = []


class LeasedTask(TaskOut, kw_only=True):
    """A task handed to a worker, with its lease."""

    lease_token: Annotated[str, Meta(description="The lease's fencing token: send it back")]
    lease_expires_at: Annotated[Timestamp, Meta(description="When the lease ends unless extended")]
    attempt: Annotated[int, Meta(description="This run's number: 1 for the first run")]


class LeasesOut(Struct, omit_defaults=True):
    """The tasks leased (an empty list when the wait ended with nothing), and one
    answer per outcome the request carried."""

    tasks: list[LeasedTask]
    results: list[OutcomeItemOut] = []


class WorkerSuccess(Struct, tag="success", tag_field="type", kw_only=True):
    """A worker's result message for a task that succeeded."""

    finished_at: Timestamp | None = None
    result: Any = None


class WorkerFailure(Struct, tag="failure", tag_field="type", kw_only=True):
    """A worker's result message for a task that failed."""

    reason: Literal["other", "timeout"] = "other"
    finished_at: Timestamp | None = None
    should_retry: bool = True
    error: Any = None
    message: str = ""


class SuccessIn(WorkerSuccess, tag="success", forbid_unknown_fields=True, kw_only=True):
    """A success result message with the lease it answers for."""

    lease_token: Annotated[str, Meta(min_length=1, max_length=128)]
    run_seconds: RunSeconds | None = None


class FailureIn(WorkerFailure, tag="failure", forbid_unknown_fields=True, kw_only=True):
    """A failure result message with the lease it answers for."""

    lease_token: Annotated[str, Meta(min_length=1, max_length=128)]
    run_seconds: RunSeconds | None = None


class RequeueIn(Struct, tag="requeue", tag_field="type", forbid_unknown_fields=True, kw_only=True):
    """Give a leased task back unrun: QUEUED again, no attempt spent and nothing
    charged but the lease's time (a draining worker sends it for the tasks it has not
    started)."""

    lease_token: Annotated[str, Meta(min_length=1, max_length=128)]


OutcomeIn = SuccessIn | FailureIn | RequeueIn


class SuccessItem(SuccessIn, tag="success", kw_only=True):
    """One success in a batch of outcomes."""

    task_id: Identifier


class FailureItem(FailureIn, tag="failure", kw_only=True):
    """One failure in a batch of outcomes."""

    task_id: Identifier


class RequeueItem(RequeueIn, tag="requeue", kw_only=True):
    """One task given back in a batch of outcomes."""

    task_id: Identifier


class OutcomeBatchIn(Struct, forbid_unknown_fields=True):
    """Several outcomes at once; each is applied on its own."""

    outcomes: Annotated[
        list[SuccessItem | FailureItem | RequeueItem], Meta(min_length=1, max_length=1000)
    ]


class OutcomeOut(Struct):
    """Where the task went: FINISHED, SCHEDULED (a retry) or FAILED."""

    state: str


class OutcomeItemOut(Struct, kw_only=True, omit_defaults=True):
    """The answer for one outcome of a batch: its status code and state or problem."""

    task_id: str
    status: int
    state: str | None = None
    problem: Problem | None = None


class OutcomeBatchOut(Struct):
    """One answer per outcome, in order."""

    results: list[OutcomeItemOut]


class ExtendIn(Struct, forbid_unknown_fields=True, kw_only=True):
    """A lease heartbeat."""

    lease_token: Annotated[str, Meta(min_length=1, max_length=128)]
    seconds: Seconds | None = None
    run_seconds: RunSeconds | None = None
    #: how far the handler got (0 to 1), kept as the task's progress with the message
    progress: Annotated[float, Meta(ge=0, le=1)] | None = None
    progress_message: Annotated[
        str, Meta(max_length=1000, extra_json_schema={"pattern": "^[^\\u0000-\\u001f\\u007f]*$"})
    ] = ""


class ExtendOut(Struct):
    """The lease's new deadline."""

    lease_expires_at: Timestamp
    cancel_requested: bool
