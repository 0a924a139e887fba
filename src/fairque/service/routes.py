"""The route table: one entry per endpoint, read by the app and by the OpenAPI builder."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fairque.models import TaskState
from fairque.service import constraints as con
from fairque.service import deadletters as dl
from fairque.service import handlers as h
from fairque.service import limits as lim
from fairque.service import pull
from fairque.service import schedules as sch
from fairque.service import tenants as ten
from fairque.service.auth import ADMINS, PRODUCERS, READERS, WORKERS
from fairque.service.settings import Role
from fairque.service.wire import (
    NO_CONTROL,
    FairnessIn,
    FairnessOut,
    Pending,
    PurgeOut,
    QueuesOut,
    ResultFailure,
    ResultSuccess,
    StatsOut,
    TaskBatchIn,
    TaskBatchOut,
    TaskIn,
    TaskOut,
    TaskPage,
    TenantsOut,
    UsersOut,
    WorkersOut,
)
from fairque.service.wire_pull import (
    ExtendIn,
    ExtendOut,
    LeaseIn,
    LeasesOut,
    OutcomeBatchIn,
    OutcomeBatchOut,
    OutcomeIn,
    OutcomeOut,
)


@dataclass(frozen=True)
class Query:
    """A query parameter: name, JSON schema, description."""

    name: str
    schema: dict[str, Any]
    description: str


@dataclass(frozen=True)
class Route:
    """One endpoint: method, path, who may call it, what it reads and answers."""

    method: str
    path: str
    operation: h.Operation
    roles: frozenset[Role]
    summary: str
    #: body type; ``push`` reads either of two (see ``handlers.decode_push``)
    body: Any = None
    responses: tuple[tuple[int, Any], ...] = ()
    query: tuple[Query, ...] = ()
    #: the extra error codes worth documenting for this route
    errors: tuple[int, ...] = ()
    #: whether the operation holds a tenant-scoped token to its tenants (else such a
    #: token is refused here: the route reads or changes the whole queue)
    per_tenant: bool = False

    @property
    def audited(self) -> bool:
        """Whether each call leaves an audit line (``fairque.service.audit``): every
        change but a push and a worker's own traffic (a refusal always does)."""
        return (
            self.method != "GET"
            and self.operation.__module__ not in _TRAFFIC
            and (self.operation.__name__ != "push")
        )

    @property
    def operation_id(self) -> str:
        return self.operation.__name__

    @property
    def query_names(self) -> frozenset[str]:
        """The query parameters the endpoint reads (any other is refused)."""
        return frozenset(q.name for q in self.query)

    @property
    def has_queue(self) -> bool:
        return "{queue}" in self.path


#: the modules whose changes are the service's traffic, not an operator's
_TRAFFIC = frozenset({"fairque.service.pull"})

#: a user id or task name in a query
ID_SCHEMA = {"type": "string", "minLength": 1, "maxLength": 256, "pattern": NO_CONTROL}

Q = "/v1/queues/{queue}"
T = Q + "/tasks/{task_id}"
S = Q + "/schedules"
C = Q + "/constraints"
NULL = type(None)

ROUTES: tuple[Route, ...] = (
    Route("POST", Q + "/tasks", h.push, PRODUCERS, "Enqueue one task or a batch (all or nothing)",
          body=TaskIn | TaskBatchIn, responses=((201, TaskOut | TaskBatchOut), (200, TaskOut)),
          errors=(404, 409, 413, 415, 422, 429), per_tenant=True),
    Route("GET", Q + "/tasks", h.list_tasks, READERS,
          "One page of tasks, newest first; follow next_cursor",
          responses=((200, TaskPage),),
          query=(Query("state", {"type": "string", "enum": [s.value for s in TaskState]},
                       "only tasks in this state (with no state, user_id or name: every task, "
                       "STARTED, QUEUED, DEFERRED, SCHEDULED, FAILED, CANCELED, then FINISHED)"),
                 Query("user_id", ID_SCHEMA, "only this user's tasks"),
                 Query("name", ID_SCHEMA, "only tasks of this name"),
                 Query("limit", {"type": "integer", "minimum": 1, "maximum": 500},
                       "at most this many tasks (default 50)"),
                 Query("cursor", {"type": "string", "pattern": "^[A-Za-z0-9_-]*$"},
                       "next_cursor of the previous page (no other value is valid; "
                       "empty or absent: the first page)")),
          errors=(404, 422), per_tenant=True),
    Route("GET", T, h.get_task, READERS, "Read a task", responses=((200, TaskOut),),
          errors=(404,), per_tenant=True),
    Route("GET", T + "/result", h.get_result, READERS,
          "A task's outcome (null when unknown, expired or consumed); waits server side",
          responses=((200, ResultSuccess | ResultFailure | None), (202, Pending)),
          query=(Query("wait_seconds", {"type": "number", "minimum": 0, "maximum": 60},
                       "wait up to this long for the task to end"),
                 Query("consume", {"type": "boolean"},
                       "discard the result once read (fetch once)")),
          errors=(404, 422), per_tenant=True),
    Route("DELETE", T, h.cancel_task, PRODUCERS, "Cancel a task that has not ended",
          responses=((200, TaskOut),), errors=(404, 409), per_tenant=True),
    Route("POST", T + "/retry", h.retry_task, ADMINS, "Queue a FAILED or CANCELED task again",
          responses=((200, TaskOut),), errors=(404, 409)),
    Route("POST", Q + "/dead-letters/retry", dl.retry_dead_letters, ADMINS,
          "Queue again every FAILED (or CANCELED) task a filter picks (dry run: count them)",
          body=dl.DeadLettersIn, responses=((200, dl.DeadLettersOut),),
          errors=(404, 413, 415, 422)),
    Route("POST", Q + "/dead-letters/delete", dl.delete_dead_letters, ADMINS,
          "Delete every FAILED (or CANCELED, or FINISHED) task a filter picks (dry run:"
          " count them)",
          body=dl.DeleteDeadLettersIn, responses=((200, dl.DeadLettersOut),),
          errors=(404, 413, 415, 422)),
    Route("GET", "/v1/queues", h.list_queues, READERS, "The queues this server serves",
          responses=((200, QueuesOut),), per_tenant=True),
    Route("GET", Q + "/stats", h.queue_stats, READERS, "Counts, counters and per-user load",
          responses=((200, StatsOut),),
          query=(Query("user_limit", {"type": "integer", "minimum": 0, "maximum": 10000},
                       "at most this many users in the answer"),),
          errors=(404, 422)),
    Route("GET", Q + "/users", h.list_users, READERS, "Users with ready or in-flight work",
          responses=((200, UsersOut),),
          query=(Query("limit", {"type": "integer", "minimum": 1, "maximum": 10000},
                       "at most this many users"),),
          errors=(404, 422), per_tenant=True),
    Route("PUT", Q + "/users/{user_id}/limits", lim.set_limits, ADMINS,
          "Set a user's weight (share of worker time, or turns), in-flight cap, backlog quota "
          "and group", body=lim.LimitsIn,
          responses=((200, lim.LimitsOut),), errors=(404, 413, 415, 422)),
    Route("PUT", Q + "/groups/{group_id}/limits", lim.set_group_limits, ADMINS,
          "Set a group's weight (its tenants' share of worker time together), share, "
          "in-flight cap and backlog quota",
          body=lim.GroupLimitsIn, responses=((200, lim.GroupLimitsOut),),
          errors=(404, 413, 415, 422)),
    Route("GET", Q + "/fairness", ten.get_fairness, READERS,
          "What the queue is fair by: worker time or turns", responses=((200, FairnessOut),),
          errors=(404,), per_tenant=True),
    Route("PUT", Q + "/fairness", ten.set_fairness, ADMINS,
          "Make the queue fair by worker time or by turns (workers follow at once)",
          body=FairnessIn, responses=((200, FairnessOut),), errors=(404, 413, 415, 422)),
    Route("GET", Q + "/tenants", ten.list_tenants, READERS,
          "What the most recently leased users were served: leases, worker time, share",
          responses=((200, TenantsOut),),
          query=(Query("limit", {"type": "integer", "minimum": 1, "maximum": 1000},
                       "at most this many users named (default 20; the rest summed)"),),
          errors=(404, 422)),
    Route("GET", Q + "/workers", h.list_workers, READERS, "Registered workers",
          responses=((200, WorkersOut),), errors=(404,)),
    Route("POST", Q + "/purge", h.purge, ADMINS, "Delete every task and key of the queue",
          responses=((200, PurgeOut),), errors=(404,)),
    Route("POST", Q + "/leases", pull.lease, WORKERS,
          "Lease up to max_tasks tasks, fairly; long-polls up to wait_seconds",
          body=LeaseIn, responses=((200, LeasesOut),), errors=(404, 413, 415, 422),
          per_tenant=True),
    Route("POST", T + "/outcome", pull.outcome, WORKERS,
          "A worker's result message for a leased task", body=OutcomeIn,
          responses=((200, OutcomeOut),), errors=(409, 413, 415, 422), per_tenant=True),
    Route("POST", Q + "/outcomes", pull.outcomes, WORKERS,
          "Several result messages; one answer per item", body=OutcomeBatchIn,
          responses=((200, OutcomeBatchOut),), errors=(404, 413, 415, 422), per_tenant=True),
    Route("POST", T + "/extend", pull.extend, WORKERS, "Extend a held lease (heartbeat)",
          body=ExtendIn, responses=((200, ExtendOut),), errors=(409, 413, 415, 422),
          per_tenant=True),
    Route("GET", S, sch.list_schedules, PRODUCERS,
          "The queue's schedules, the soonest next slot first",
          responses=((200, sch.SchedulesOut),)),
    Route("POST", S, sch.add_schedule, ADMINS,
          "Add a cron or interval schedule (the same definition again: 200, nothing changes)",
          body=sch.ScheduleAddIn, responses=((201, sch.ScheduleOut), (200, sch.ScheduleOut)),
          errors=(409,)),
    Route("GET", S + "/{schedule_id}", sch.get_schedule, PRODUCERS, "Read a schedule",
          responses=((200, sch.ScheduleOut),)),
    Route("PUT", S + "/{schedule_id}", sch.put_schedule, ADMINS,
          "Replace a schedule, or add it", body=sch.ScheduleIn,
          responses=((200, sch.ScheduleOut), (201, sch.ScheduleOut))),
    Route("DELETE", S + "/{schedule_id}", sch.remove_schedule, ADMINS,
          "Remove a schedule (tasks it enqueued stay)",
          responses=((200, sch.ScheduleRemoved),)),
    Route("POST", S + "/{schedule_id}/pause", sch.pause_schedule, ADMINS,
          "Pause a schedule", responses=((200, sch.ScheduleOut),)),
    Route("POST", S + "/{schedule_id}/resume", sch.resume_schedule, ADMINS,
          "Resume a paused schedule from now on", responses=((200, sch.ScheduleOut),)),
    Route("GET", C, con.list_constraints, READERS,
          "The queue's rate and concurrency constraints with their use",
          responses=((200, con.ConstraintsOut),)),
    Route("GET", C + "/{constraint_id}", con.get_constraint, READERS,
          "Read a constraint and its use per bucket", responses=((200, con.ConstraintOut),),
          errors=(422,)),
    Route("PUT", C + "/{constraint_id}", con.put_constraint, ADMINS,
          "Define a constraint, or replace its definition", body=con.ConstraintIn,
          responses=((200, con.ConstraintOut),)),
    Route("DELETE", C + "/{constraint_id}", con.remove_constraint, ADMINS,
          "Remove a constraint (its waiting tasks become ready)",
          responses=((200, con.ConstraintRemoved),), errors=(422,)),
)  # fmt: skip
