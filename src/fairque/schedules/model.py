"""Schedules: cron and interval definitions, their slots and the misfire policies.

A schedule fires a task built from its template at each *slot*: a moment given by a
cron expression in the schedule's time zone, or by a fixed interval. The queue keeps
every schedule in its keyspace with a *cursor*: every slot at or before the cursor
has been handled (fired or skipped). One scheduler at a time, the leader
(``fairque.schedules.leader``), reads the due schedules and fires the slots after the
cursor in one script that also moves the cursor, so a slot is handled once. The task
of a slot has the id ``<schedule id>@<slot time>``; a slot can never enqueue twice.

Cron and the wall clock. A cron expression reads the local wall clock of the
schedule's ``timezone`` (croniter syntax; default UTC). Each local time it names
fires once:

- a local time that does not exist (the hour skipped when clocks go forward) fires
  at the same distance past the change: ``30 2 * * *`` in Europe/Berlin fires at
  03:30 CEST on the day of the change (01:30 UTC). Two such times that land on one
  instant fire once;
- a local time that happens twice (the hour repeated when clocks go back) fires at
  its first occurrence only, in summer time: ``30 2 * * *`` fires at 02:30 CEST
  (00:30 UTC) and not again at 02:30 CET. A schedule that fires every few minutes
  therefore pauses during the repeated hour.

An interval schedule fires every ``interval_seconds`` of real time, whatever the
wall clock does: its slots are ``anchor + k * interval``, the anchor being
``start_at`` or else the time the schedule was added (or last re-timed).

Misfires. When the leader finds several slots due at once (it was down, a failover
took a while, a cron run was missed), the schedule's ``misfire`` policy decides:

- ``run_once`` (default): fire the latest due slot, skip the others;
- ``skip``: fire the latest due slot only if it is at most ``misfire_grace_seconds``
  late, skip everything else;
- ``catch_up``: fire every due slot, oldest first, at most ``catch_up_limit`` of
  them (the latest ones); older ones are skipped.

Skipped slots are counted on the schedule (``skipped``) and in the queue's
``schedule_skipped`` counter, and logged by the scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson
import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fairque.core.checks import MAX_COST, MAX_SECONDS, MAX_TASK_ID, identifier_problem
from fairque.errors import ValidationError, pydantic_message
from fairque.models import Priority, Task

__all__ = ["MisfirePolicy", "Schedule", "slot_task_id"]

MisfirePolicy = Literal["skip", "run_once", "catch_up"]
#: Longest schedule id: its tasks' ids add ``@`` and a slot time (at most 24 characters).
MAX_SCHEDULE_ID = MAX_TASK_ID - 32
#: Shortest interval accepted.
MIN_INTERVAL = 0.1
#: At most this many due slots of one schedule are looked at in one pass; slots
#: beyond it are skipped without being counted one by one.
MAX_SLOTS_PER_PASS = 10_000
#: The fields that define a schedule (what add and update compare); the rest is state.
TIMING_FIELDS = ("cron", "interval_seconds", "timezone", "start_at")
DEFINITION_FIELDS = (
    "name", "user_id", "priority", "max_retries", "timeout", "keep_result", "result_ttl",
    "cost", *TIMING_FIELDS, "misfire", "misfire_grace_seconds", "catch_up_limit",
)  # fmt: skip


def _problems(exc: pydantic.ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'schedule'}: {pydantic_message(err)}"
        for err in exc.errors()
    )


@lru_cache(maxsize=256)
def zone(name: str) -> ZoneInfo:
    """The time zone ``name`` (IANA name, e.g. ``Europe/Berlin``).

    Raises:
        ValueError: no such time zone.
    """
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"unknown time zone {name!r}") from None


def _croniter() -> Any:
    try:
        from croniter import croniter  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - the scheduler extra is missing
        from fairque.extras import install_hint

        raise ValidationError(
            f"cron schedules need croniter: {install_hint('scheduler')}"
        ) from None
    return croniter


class Schedule(BaseModel):
    """A cron or interval schedule that enqueues a task at each slot.

    The task template: ``name``, ``user_id``, ``payload``, ``priority``,
    ``max_retries``, ``timeout``, ``keep_result``, ``result_ttl`` and ``cost``, checked
    as a ``Task`` checks them. The timing: exactly one of ``cron`` (croniter syntax, read
    in ``timezone``) and ``interval_seconds`` (at least 0.1), with an optional
    ``start_at`` (no slot before it; an interval's first slot). ``misfire``,
    ``misfire_grace_seconds`` and ``catch_up_limit``: what happens to slots found
    late (see ``fairque.schedules.model``). ``enabled``: False keeps the schedule paused.

    The queue fills the rest: ``next_fire_at`` (the next slot; None while paused),
    ``last_fire_at`` (the latest slot fired), ``fired`` and ``skipped`` (slots so far),
    ``created_at``, ``updated_at`` and ``revision`` (grows with every change).

    Raises:
        ValidationError: a field is invalid; the message names it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    schedule_id: str = Field(strict=True)
    name: str = Field(strict=True)
    user_id: str = Field(strict=True)
    payload: Any = None
    priority: Priority = Priority.NORMAL
    max_retries: int | None = Field(default=None, ge=0, le=1000, strict=True)
    timeout: float | None = Field(
        default=None, gt=0, le=MAX_SECONDS, allow_inf_nan=False, strict=True
    )
    keep_result: bool = Field(default=True, strict=True)
    result_ttl: int | None = Field(default=None, ge=0, le=MAX_SECONDS, strict=True)
    cost: int = Field(default=1, ge=1, le=MAX_COST, strict=True)
    cron: str | None = Field(default=None, strict=True)
    interval_seconds: float | None = Field(
        default=None, ge=MIN_INTERVAL, le=MAX_SECONDS, allow_inf_nan=False, strict=True
    )
    timezone: str = Field(default="UTC", strict=True)
    start_at: datetime | None = None
    enabled: bool = Field(default=True, strict=True)
    misfire: MisfirePolicy = "run_once"
    misfire_grace_seconds: float = Field(
        default=60.0, ge=0, le=MAX_SECONDS, allow_inf_nan=False, strict=True
    )
    catch_up_limit: int = Field(default=100, ge=1, le=MAX_SLOTS_PER_PASS, strict=True)
    # filled by the queue
    next_fire_at: datetime | None = None
    last_fire_at: datetime | None = None
    fired: int = 0
    skipped: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None
    revision: int = 0

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except pydantic.ValidationError as exc:
            raise ValidationError(f"invalid schedule: {_problems(exc)}") from None

    @field_validator("schedule_id")
    @classmethod
    def _schedule_id(cls, value: str) -> str:
        problem = identifier_problem(value, "schedule_id", MAX_SCHEDULE_ID)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("priority", mode="before")
    @classmethod
    def _priority(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 6:
            raise ValueError(f"priority must be an integer 1..5 or 6 (CRITICAL), got {value!r}")
        return Priority(value)

    @field_validator("interval_seconds", "timeout", "misfire_grace_seconds", mode="before")
    @classmethod
    def _int_seconds(cls, value: Any) -> Any:
        # a whole number of seconds is a number of seconds, not a type error
        if type(value) is int:
            return float(value)
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        zone(value)
        return value

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = " ".join(value.split())
        if not value or len(value) > 256 or not _croniter().is_valid(value):
            raise ValueError(f"not a valid cron expression: {value!r}")
        return value

    @field_validator("start_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value

    @model_validator(mode="after")
    def _whole(self) -> Schedule:
        if (self.cron is None) == (self.interval_seconds is None):
            raise ValueError("give exactly one of cron and interval_seconds")
        try:  # the template is checked as the task it becomes
            Task(
                user_id=self.user_id, name=self.name, payload=self.payload,
                priority=self.priority, max_retries=self.max_retries, timeout=self.timeout,
                keep_result=self.keep_result, result_ttl=self.result_ttl, cost=self.cost,
            )  # fmt: skip
        except ValidationError as exc:
            raise ValueError(str(exc).removeprefix("invalid task: ")) from None
        return self

    # what the queue stores -------------------------------------------------------
    def definition(self) -> str:
        """The definition as canonical JSON (the payload and ``enabled`` apart; a cost
        of 1 is left out, as definitions stored before costs existed have it)."""
        data = self.model_dump(mode="json", include=set(DEFINITION_FIELDS))
        if data["cost"] == 1:
            del data["cost"]
        return orjson.dumps(data, option=orjson.OPT_SORT_KEYS).decode()

    def timing(self) -> str:
        """The fields that place the slots, as canonical JSON."""
        data = self.model_dump(mode="json", include=set(TIMING_FIELDS))
        return orjson.dumps(data, option=orjson.OPT_SORT_KEYS).decode()

    # slots -------------------------------------------------------------------------
    def slots_after(
        self, after_ms: int, anchor_ms: int, until_ms: int | None, limit: int
    ) -> list[int]:
        """Up to ``limit`` slots (ms since the epoch) after ``after_ms``, in order,
        none later than ``until_ms`` (None: no bound).

        ``anchor_ms`` is the interval grid's origin when ``start_at`` is unset.
        """
        start_ms = None if self.start_at is None else round(self.start_at.timestamp() * 1000)
        if start_ms is not None:
            after_ms = max(after_ms, start_ms - 1)
        if self.interval_seconds is not None:
            step = round(self.interval_seconds * 1000)
            origin = start_ms if start_ms is not None else anchor_ms
            k = 0 if after_ms < origin else (after_ms - origin) // step + 1
            out: list[int] = []
            while len(out) < limit:
                slot = origin + k * step
                if until_ms is not None and slot > until_ms:
                    break
                out.append(slot)
                k += 1
            return out
        return self._cron_slots(after_ms, until_ms, limit)

    def _cron_slots(self, after_ms: int, until_ms: int | None, limit: int) -> list[int]:
        tz = zone(self.timezone)
        here = datetime.fromtimestamp(after_ms / 1000, tz)
        local = here.replace(tzinfo=None, microsecond=0)
        if here.fold:
            # the repeated hour's second pass reads as the first pass's wall time:
            # start one shift earlier so no wall time in between is passed over
            # (slots not after after_ms are dropped below)
            shift = here.replace(fold=0).utcoffset() or _ZERO
            local -= abs(shift - (here.utcoffset() or _ZERO))
        it = _croniter()(self.cron, local)
        out: list[int] = []
        previous = after_ms
        for _ in range(limit + 4000):
            try:
                wall: datetime = it.get_next(datetime)
            except Exception:  # croniter gives up on an expression that never fires again
                break
            # fold=0: a time in a gap lands past the change, a repeated one on its first pass
            slot = round(wall.replace(tzinfo=tz, fold=0).timestamp() * 1000)
            if slot <= previous:
                continue
            if until_ms is not None and slot > until_ms:
                break
            out.append(slot)
            previous = slot
            if len(out) >= limit:
                break
        return out

    def next_slot(self, after_ms: int, anchor_ms: int) -> int | None:
        """The first slot after ``after_ms`` (None: the expression never fires again)."""
        slots = self.slots_after(after_ms, anchor_ms, None, 1)
        return slots[0] if slots else None


_ZERO = datetime(2000, 1, 1) - datetime(2000, 1, 1)


def slot_task_id(schedule_id: str, slot_ms: int) -> str:
    """The id of the task a schedule's slot enqueues: ``<schedule id>@<UTC slot time>``."""
    when = datetime.fromtimestamp(slot_ms / 1000, timezone.utc)
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    if slot_ms % 1000:
        text += f".{slot_ms % 1000:03d}"
    return f"{schedule_id}@{text}Z"


@dataclass(frozen=True)
class FirePlan:
    """What one pass does with a schedule: the slots it fires, how many it skips,
    the new cursor and the next slot after it (None: none)."""

    fire: list[int]
    skipped: int
    cursor: int
    next_ms: int | None


def plan(schedule: Schedule, cursor_ms: int, anchor_ms: int, now_ms: int) -> FirePlan:
    """Apply the schedule's misfire policy to the slots due at ``now_ms``.

    At most ``MAX_SLOTS_PER_PASS`` due slots are looked at; when more are due, this
    pass skips them all and moves the cursor past them (the next slot is then due at
    once), so the policy is applied to the latest ones only.
    """
    due = schedule.slots_after(cursor_ms, anchor_ms, now_ms, MAX_SLOTS_PER_PASS)
    if not due:
        return FirePlan([], 0, cursor_ms, schedule.next_slot(cursor_ms, anchor_ms))
    cursor = due[-1]
    if len(due) == MAX_SLOTS_PER_PASS:  # far behind: the latest slots come next pass
        fire: list[int] = []
    elif schedule.misfire == "catch_up":
        fire = due[-schedule.catch_up_limit :]
    elif schedule.misfire == "run_once":
        fire = due[-1:]
    else:
        late = now_ms - due[-1]
        fire = due[-1:] if late <= schedule.misfire_grace_seconds * 1000 else []
    return FirePlan(fire, len(due) - len(fire), cursor, schedule.next_slot(cursor, anchor_ms))
