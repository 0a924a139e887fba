"""The schedule endpoints under ``/v1/queues/{queue}/schedules``: their bodies and
operations. Each operation calls ``AsyncFairQueue``'s schedule methods; the route
table (``fairque.service.routes``) says who may call them (producers read, admins
change)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from fairque.common.taskspec import BY_NAME
from fairque.errors import ScheduleExists, ScheduleNotFound
from fairque.models import Priority as EnginePriority
from fairque.schedules.model import Schedule
from fairque.service.convert import engine_errors, iso, location, parse_time, wire_priority
from fairque.service.handlers import Ctx, Reply
from fairque.service.media import ProblemError
from fairque.service.wire import (
    ScheduleId,
    Timestamp,
    spec_default,
    spec_type,
)

Misfire = Literal["skip", "run_once", "catch_up"]


#: the task template of a schedule: these fields of the outward task, as ``TaskIn`` has them
TEMPLATE = ("name", "user_id", "payload", "priority", "max_retries", "timeout_seconds",
            "keep_result", "result_ttl_seconds", "cost")  # fmt: skip
#: how a schedule fires
TIMING: list[tuple[str, Any, Any]] = [
    ("cron", Annotated[str, Meta(min_length=1, max_length=256)] | None, None),
    ("interval_seconds", Annotated[float, Meta(ge=0.1, le=315_360_000)] | None, None),
    ("timezone", Annotated[str, Meta(min_length=1, max_length=64)], "UTC"),
    ("start_at", Timestamp | None, None),
    ("enabled", bool, True),
    ("misfire", Misfire, "run_once"),
    ("misfire_grace_seconds", Annotated[float, Meta(ge=0, le=315_360_000)], 60.0),
    ("catch_up_limit", Annotated[int, Meta(ge=1, le=10_000)], 100),
]


def _schedule_struct(name: str, doc: str, id_required: bool) -> Any:
    """A schedule body: its id, the task template (``TEMPLATE``) and ``TIMING``."""
    schedule_id: tuple[Any, ...] = (
        ("schedule_id", ScheduleId) if id_required else ("schedule_id", ScheduleId | None, None)
    )
    template = [
        (f.name, spec_type(f)) if f.required else (f.name, spec_type(f), spec_default(f))
        for f in (BY_NAME[n] for n in TEMPLATE)
    ]
    kind = msgspec.defstruct(
        name, [schedule_id, *template, *TIMING], kw_only=True, forbid_unknown_fields=True,
        module=__name__,
    )  # fmt: skip
    kind.__doc__ = doc
    return kind


#: A schedule: a task template, a cron expression or an interval, a misfire policy.
ScheduleIn: Any = _schedule_struct(
    "ScheduleIn",
    "A schedule: a task template, a cron expression or an interval, a misfire policy.",
    id_required=False,
)
#: A schedule to add: its id is required (``PUT`` takes it from the path).
ScheduleAddIn: Any = _schedule_struct(
    "ScheduleAddIn",
    "A schedule to add: its id is required (``PUT`` takes it from the path).",
    id_required=True,
)


class ScheduleOut(Struct, kw_only=True):
    """A stored schedule and its state."""

    schedule_id: str
    queue: str
    name: str
    user_id: str
    payload: Any
    priority: int | Literal["critical"]
    max_retries: int | None
    timeout_seconds: float | None
    keep_result: bool
    result_ttl_seconds: int | None
    cost: int
    cron: str | None
    interval_seconds: float | None
    timezone: str
    start_at: Timestamp | None
    enabled: bool
    misfire: str
    misfire_grace_seconds: float
    catch_up_limit: int
    next_fire_at: Timestamp | None
    last_fire_at: Timestamp | None
    fired: int
    skipped: int
    created_at: Timestamp | None
    updated_at: Timestamp | None
    revision: int


class SchedulesOut(Struct):
    """The queue's schedules, the soonest next slot first (paused ones last)."""

    schedules: list[ScheduleOut]


class ScheduleRemoved(Struct):
    """A schedule removed."""

    schedule_id: str
    removed: bool


def schedule_out(s: Schedule, queue: str) -> ScheduleOut:
    return ScheduleOut(
        schedule_id=s.schedule_id, queue=queue, name=s.name, user_id=s.user_id,
        payload=s.payload, priority=wire_priority(s.priority), max_retries=s.max_retries,
        timeout_seconds=s.timeout, keep_result=s.keep_result, result_ttl_seconds=s.result_ttl,
        cost=s.cost, cron=s.cron, interval_seconds=s.interval_seconds, timezone=s.timezone,
        start_at=iso(s.start_at), enabled=s.enabled, misfire=s.misfire,
        misfire_grace_seconds=s.misfire_grace_seconds, catch_up_limit=s.catch_up_limit,
        next_fire_at=iso(s.next_fire_at), last_fire_at=iso(s.last_fire_at), fired=s.fired,
        skipped=s.skipped, created_at=iso(s.created_at), updated_at=iso(s.updated_at),
        revision=s.revision,
    )  # fmt: skip


def schedule_from_wire(item: ScheduleIn, schedule_id: str) -> Schedule:
    """The engine's Schedule for a request body (``ProblemError`` 422 when invalid)."""
    start_at = None if item.start_at is None else parse_time(item.start_at, "start_at")
    with engine_errors():
        return Schedule(
            schedule_id=schedule_id, name=item.name, user_id=item.user_id,
            payload=item.payload,
            priority=EnginePriority.CRITICAL if item.priority == "critical" else item.priority,
            max_retries=item.max_retries, timeout=item.timeout_seconds,
            keep_result=item.keep_result, result_ttl=item.result_ttl_seconds, cost=item.cost,
            cron=item.cron,
            interval_seconds=item.interval_seconds, timezone=item.timezone, start_at=start_at,
            enabled=item.enabled, misfire=item.misfire,
            misfire_grace_seconds=item.misfire_grace_seconds,
            catch_up_limit=item.catch_up_limit,
        )  # fmt: skip


@contextlib.contextmanager
def schedule_errors() -> Iterator[None]:
    """The schedule errors as problems (404, 409), then the engine's (``engine_errors``)."""
    with engine_errors():
        try:
            yield
        except ScheduleNotFound as exc:
            raise ProblemError(404, "schedule-not-found", "Not Found", str(exc)) from None
        except ScheduleExists as exc:
            raise ProblemError(409, "schedule-exists", "Conflict", str(exc)) from None


def _not_found(ctx: Ctx) -> ProblemError:
    schedule_id = ctx.path["schedule_id"]
    return ProblemError(
        404, "schedule-not-found", "Not Found", f"no schedule {schedule_id} in {ctx.q.queue}"
    )


async def list_schedules(ctx: Ctx) -> Reply:
    """GET /schedules."""
    with schedule_errors():
        found = await ctx.q.schedules()
    return Reply(200, SchedulesOut([schedule_out(s, ctx.q.queue) for s in found]))


async def add_schedule(ctx: Ctx) -> Reply:
    """POST /schedules: 201 added, 200 when the same definition is there already."""
    body: ScheduleAddIn = ctx.body
    if body.schedule_id is None:  # pragma: no cover - the body type requires it
        raise ProblemError(
            422, "validation", "Unprocessable Content", "schedule_id: required when adding"
        )
    schedule = schedule_from_wire(body, body.schedule_id)
    with schedule_errors():
        before = await ctx.q.get_schedule(schedule.schedule_id)
        stored = await ctx.q.add_schedule(schedule)
    out = schedule_out(stored, ctx.q.queue)
    if before is not None and before.revision == stored.revision:
        return Reply(200, out)
    where = location(ctx.q.queue, "schedules", stored.schedule_id)
    return Reply(201, out, {"Location": where})


async def get_schedule(ctx: Ctx) -> Reply:
    """GET /schedules/{schedule_id}."""
    with schedule_errors():
        found = await ctx.q.get_schedule(ctx.path["schedule_id"])
    if found is None:
        raise _not_found(ctx)
    return Reply(200, schedule_out(found, ctx.q.queue))


async def put_schedule(ctx: Ctx) -> Reply:
    """PUT /schedules/{schedule_id}: replace it (200), or add it (201)."""
    body: ScheduleIn = ctx.body
    schedule_id = ctx.path["schedule_id"]
    if body.schedule_id not in (None, schedule_id):
        raise ProblemError(
            422, "validation", "Unprocessable Content",
            f"schedule_id: the body names {body.schedule_id}, the path {schedule_id}",
        )  # fmt: skip
    schedule = schedule_from_wire(body, schedule_id)
    with schedule_errors():
        try:
            stored = await ctx.q.update_schedule(schedule)
        except ScheduleNotFound:
            stored = await ctx.q.add_schedule(schedule)
            where = location(ctx.q.queue, "schedules", stored.schedule_id)
            return Reply(201, schedule_out(stored, ctx.q.queue), {"Location": where})
    return Reply(200, schedule_out(stored, ctx.q.queue))


async def remove_schedule(ctx: Ctx) -> Reply:
    """DELETE /schedules/{schedule_id}."""
    with schedule_errors():
        removed = await ctx.q.remove_schedule(ctx.path["schedule_id"])
    if not removed:
        raise _not_found(ctx)
    return Reply(200, ScheduleRemoved(ctx.path["schedule_id"], True))


async def pause_schedule(ctx: Ctx) -> Reply:
    """POST /schedules/{schedule_id}/pause."""
    with schedule_errors():
        stored = await ctx.q.pause_schedule(ctx.path["schedule_id"])
    return Reply(200, schedule_out(stored, ctx.q.queue))


async def resume_schedule(ctx: Ctx) -> Reply:
    """POST /schedules/{schedule_id}/resume."""
    with schedule_errors():
        stored = await ctx.q.resume_schedule(ctx.path["schedule_id"])
    return Reply(200, schedule_out(stored, ctx.q.queue))
