"""Sans-IO side of schedules: the arguments of their scripts and the reading of replies.

``fairque.core.ops.Operations`` has one builder per schedule script, named after it; each
asks ``ScheduleCodec`` for the script's arguments and reply parser, so the schedule
format lives here and in ``fairque.schedules.model``. The calls that are one plain command
(reading one schedule, the leader's blocking wait) are built here whole.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import orjson

from fairque.core.checks import MAX_SCAN, check_wait, identifier_problem
from fairque.core.checks import check_int as _check_int
from fairque.core.codec import Serializer
from fairque.core.keys import QueueKeys
from fairque.core.records import Call, request_id
from fairque.core.taskhash import TaskCodec, ms_to_dt, raw, text
from fairque.errors import ValidationError
from fairque.schedules.model import MAX_SCHEDULE_ID, FirePlan, Schedule, plan, slot_task_id

T = TypeVar("T")
Built = tuple[list[Any], Callable[[Any], T]]


@dataclass(frozen=True)
class StoredSchedule:
    """A schedule as the leader reads it: the definition plus its cursor state."""

    schedule: Schedule
    cursor_ms: int
    anchor_ms: int
    revision: int


@dataclass(frozen=True)
class DueSchedules:
    """One read of the leader: the server's time, the due schedules and the next slot."""

    now_ms: int
    next_ms: int | None
    due: list[StoredSchedule]


@dataclass(frozen=True)
class FireOutcome:
    """What ``fire_schedule`` did: the task ids of the slots fired (each enqueued once,
    ``created`` of them by this call), the slots skipped, the next slot; ``stale``: the
    schedule changed since it was read and nothing was done."""

    task_ids: list[str]
    created: int
    skipped: int
    next_fire_at: datetime | None
    stale: bool = False


def new_token() -> str:
    """A scheduler lock token: ``<host>:<pid>:<random>``, unique per scheduler."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def check_schedule_id(schedule_id: str) -> str:
    """``schedule_id`` if it is a valid schedule id."""
    problem = identifier_problem(schedule_id, "schedule_id", MAX_SCHEDULE_ID)
    if problem is not None:
        raise ValidationError(problem)
    return schedule_id


def _check_token(token: str) -> str:
    if not isinstance(token, str) or not token or len(token) > 256:
        raise ValidationError("token must be a non-empty string of at most 256 characters")
    return token


def _ttl_ms(seconds: float) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise ValidationError(f"ttl must be a positive number of seconds, got {seconds!r}")
    return max(round(seconds * 1000), 1)


class ScheduleCodec:
    """Builds the schedule scripts' arguments and reads their replies, for one queue."""

    def __init__(self, keys: QueueKeys, serializer: Serializer, codec: TaskCodec) -> None:
        self.keys = keys
        self.serializer = serializer
        self.codec = codec

    # reading -----------------------------------------------------------------------
    def stored(self, flat: Sequence[Any] | Mapping[Any, Any]) -> StoredSchedule:
        """A schedule and its state from its hash (an HGETALL reply: list or mapping)."""
        if isinstance(flat, Mapping):
            h = {text(k): v for k, v in flat.items()}
        else:
            it = iter(flat)
            h = {text(k): v for k, v in zip(it, it, strict=True)}
        spec = orjson.loads(raw(h["spec"]))
        payload = self.serializer.loads(raw(h["payload"]))
        cursor, anchor = int(h["cursor"]), int(h["anchor"])
        enabled = text(h["enabled"]) == "1"
        schedule = Schedule(schedule_id=spec.pop("schedule_id", ""), payload=payload, **spec)
        next_raw = text(h.get("next", b""))
        if not enabled:
            next_ms = None
        elif next_raw:
            next_ms = int(next_raw)
        else:  # not planned yet: the first slot after the cursor
            next_ms = schedule.next_slot(cursor, anchor)
        state = {
            "enabled": enabled,
            "next_fire_at": None if next_ms is None else ms_to_dt(next_ms),
            "last_fire_at": ms_to_dt(h.get("last")),
            "fired": int(h.get("fired", 0)),
            "skipped": int(h.get("skipped", 0)),
            "created_at": ms_to_dt(h.get("created")),
            "updated_at": ms_to_dt(h.get("updated")),
            "revision": int(h["rev"]),
        }
        return StoredSchedule(schedule.model_copy(update=state), cursor, anchor, int(h["rev"]))

    def schedule(self, flat: Sequence[Any] | Mapping[Any, Any]) -> Schedule:
        """The Schedule a hash holds."""
        return self.stored(flat).schedule

    def _entries(self, reply: Sequence[Any]) -> list[StoredSchedule]:
        return [self.stored(reply[i + 1]) for i in range(0, len(reply), 2) if reply[i + 1]]

    # arguments -----------------------------------------------------------------------
    def _definition(self, schedule: Schedule) -> list[Any]:
        if not isinstance(schedule, Schedule):
            raise ValidationError(f"expected a Schedule, got {type(schedule).__name__}")
        spec = orjson.loads(schedule.definition())
        spec["schedule_id"] = schedule.schedule_id
        payload = self.codec.dump_payload(schedule.payload)
        return [
            schedule.schedule_id,
            orjson.dumps(spec, option=orjson.OPT_SORT_KEYS).decode(),
            schedule.timing(),
            payload,
            1 if schedule.enabled else 0,
        ]

    def add_schedule(self, schedule: Schedule) -> Built[Schedule]:
        """``add_schedule.lua``'s ARGV and reply parser."""
        return self._definition(schedule), self.schedule

    def update_schedule(self, schedule: Schedule) -> Built[Schedule]:
        """``update_schedule.lua``'s ARGV and reply parser."""
        return self._definition(schedule), self.schedule

    def remove_schedule(self, schedule_id: str) -> Built[bool]:
        """``remove_schedule.lua``'s ARGV and reply parser."""
        return [check_schedule_id(schedule_id), request_id()], lambda r: int(r) == 1

    def pause_schedule(self, schedule_id: str) -> Built[Schedule]:
        """``pause_schedule.lua``'s ARGV and reply parser."""
        return [check_schedule_id(schedule_id)], self.schedule

    def resume_schedule(self, schedule_id: str) -> Built[Schedule]:
        """``resume_schedule.lua``'s ARGV and reply parser."""
        return [check_schedule_id(schedule_id)], self.schedule

    def schedules(self, limit: int) -> Built[list[Schedule]]:
        """``schedules.lua``'s ARGV and reply parser."""
        _check_int(limit, "limit", 1, MAX_SCAN)
        return [limit], lambda r: [s.schedule for s in self._entries(r)]

    def due_schedules(self, limit: int) -> Built[DueSchedules]:
        """``due_schedules.lua``'s ARGV and reply parser."""
        _check_int(limit, "limit", 1, MAX_SCAN)

        def parse(reply: Sequence[Any]) -> DueSchedules:
            now_ms, next_ms, due = reply
            later = None if int(next_ms) < 0 else int(next_ms)
            return DueSchedules(int(now_ms), later, self._entries(due))

        return [limit], parse

    def fire_schedule(
        self, stored: StoredSchedule, now_ms: int, token: str, ordering: str, horizon_us: int
    ) -> Built[FireOutcome]:
        """``fire_schedule.lua``'s ARGV (the misfire plan for ``now_ms``) and parser."""
        schedule = stored.schedule
        p: FirePlan = plan(schedule, stored.cursor_ms, stored.anchor_ms, now_ms)
        ids = [slot_task_id(schedule.schedule_id, slot) for slot in p.fire]
        options = self.codec.options
        max_retries = options.max_retries if schedule.max_retries is None else schedule.max_retries
        ttl = options.result_ttl_seconds if schedule.result_ttl is None else schedule.result_ttl
        timeout = -1 if schedule.timeout is None else round(schedule.timeout * 1000)
        args: list[Any] = [
            request_id(), _check_token(token), schedule.schedule_id, stored.revision,
            stored.cursor_ms, p.cursor, -1 if p.next_ms is None else p.next_ms,
            p.fire[-1] if p.fire else -1, p.skipped, ordering, horizon_us,
            schedule.user_id, schedule.name, int(schedule.priority), max_retries, timeout,
            1 if schedule.keep_result else 0, round(ttl * 1000),
            self.codec.constraints.version,
            self.codec.constraints.buckets(schedule.name, schedule.payload, schedule.user_id),
            schedule.cost, len(ids), *ids,
        ]  # fmt: skip

        def parse(reply: Sequence[Any]) -> FireOutcome:
            if int(reply[0]) == 0:
                return FireOutcome([], 0, 0, None, stale=True)
            next_at = None if p.next_ms is None else ms_to_dt(p.next_ms)
            return FireOutcome(ids, int(reply[1]), p.skipped, next_at)

        return args, parse

    def acquire_scheduler_lock(self, token: str, ttl: float) -> Built[tuple[bool, float]]:
        """``acquire_scheduler_lock.lua``'s ARGV and parser: (acquired, seconds)."""
        return [_check_token(token), _ttl_ms(ttl)], lambda r: (int(r[0]) == 1, int(r[1]) / 1000)

    def renew_scheduler_lock(self, token: str, ttl: float) -> Built[bool]:
        """``renew_scheduler_lock.lua``'s ARGV and parser."""
        return [_check_token(token), _ttl_ms(ttl)], lambda r: int(r) == 1

    def release_scheduler_lock(self, token: str) -> Built[bool]:
        """``release_scheduler_lock.lua``'s ARGV and parser."""
        return [_check_token(token)], lambda r: int(r) == 1

    # plain commands --------------------------------------------------------------------
    def get_schedule(self, schedule_id: str) -> Call[Schedule | None]:
        """Read one schedule (a plain HGETALL); None when there is none."""
        key = self.keys.schedule(check_schedule_id(schedule_id))

        def parse(reply: Any) -> Schedule | None:
            if not isinstance(reply, Mapping):
                it = iter(reply)
                reply = dict(zip(it, it, strict=True))
            if not any(text(k) == "spec" for k in reply):
                return None  # absent, or a removed schedule's tombstone
            return self.schedule(reply)

        return Call(None, (key,), ("HGETALL",), parse)

    def wait_for_schedules(self, timeout: float) -> Call[bool]:
        """Block until a schedule changes (True) or ``timeout`` seconds pass."""
        wait = max(round(check_wait(timeout), 3), 0.001)
        key = self.keys.schedules_wake
        return Call(None, (key,), ("BLPOP", wait), lambda r: r is not None)

    def wait_for_handover(self, timeout: float) -> Call[bool]:
        """Block until a leader releases the lock (True) or ``timeout`` seconds pass."""
        wait = max(round(check_wait(timeout), 3), 0.001)
        key = self.keys.scheduler_handover
        return Call(None, (key,), ("BLPOP", wait), lambda r: r is not None)

    def scheduler_holder(self) -> Call[str | None]:
        """The token of the leading scheduler (a plain GET); None: no leader."""
        return Call(
            None,
            (self.keys.scheduler_lock,),
            ("GET",),
            lambda r: None if r is None else text(r),
        )
