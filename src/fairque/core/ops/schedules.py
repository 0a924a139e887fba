"""Builders of the schedule calls; ``fairque.schedules.codec`` makes their arguments and
reads their replies."""

from __future__ import annotations

from fairque.core.ops.base import OperationsBase
from fairque.core.records import Call
from fairque.schedules.codec import DueSchedules, FireOutcome, ScheduleCodec, StoredSchedule
from fairque.schedules.model import Schedule


class ScheduleOperations(OperationsBase):
    """One builder per schedule script, named after it."""

    @property
    def schedule_codec(self) -> ScheduleCodec:
        """The schedule scripts' arguments and parsers (made on first use)."""
        codec: ScheduleCodec | None = self.__dict__.get("_schedule_codec")
        if codec is None:
            codec = self.__dict__["_schedule_codec"] = ScheduleCodec(
                self.keys, self.serializer, self.codec
            )
        return codec

    def add_schedule(self, schedule: Schedule) -> Call[Schedule]:
        """Store a new schedule (the same definition again is a no-op)."""
        return self._call("add_schedule", *self.schedule_codec.add_schedule(schedule))

    def update_schedule(self, schedule: Schedule) -> Call[Schedule]:
        """Replace a schedule's definition."""
        return self._call("update_schedule", *self.schedule_codec.update_schedule(schedule))

    def remove_schedule(self, schedule_id: str) -> Call[bool]:
        """Delete a schedule (False: there was none)."""
        return self._call("remove_schedule", *self.schedule_codec.remove_schedule(schedule_id))

    def pause_schedule(self, schedule_id: str) -> Call[Schedule]:
        """Stop a schedule from firing."""
        return self._call("pause_schedule", *self.schedule_codec.pause_schedule(schedule_id))

    def resume_schedule(self, schedule_id: str) -> Call[Schedule]:
        """Let a paused schedule fire again, from now on."""
        return self._call("resume_schedule", *self.schedule_codec.resume_schedule(schedule_id))

    def schedules(self, limit: int) -> Call[list[Schedule]]:
        """Up to ``limit`` schedules, soonest next slot first."""
        return self._call("schedules", *self.schedule_codec.schedules(limit))

    def due_schedules(self, limit: int) -> Call[DueSchedules]:
        """The leader's read: server time, due schedules, the next slot after them."""
        return self._call("due_schedules", *self.schedule_codec.due_schedules(limit))

    def fire_schedule(self, stored: StoredSchedule, now_ms: int, token: str) -> Call[FireOutcome]:
        """Fire a due schedule's slots as its misfire policy plans them at ``now_ms``."""
        built = self.schedule_codec.fire_schedule(
            stored, now_ms, token, self.options.ordering, self._horizon_us
        )
        return self._call("fire_schedule", *built)

    def acquire_scheduler_lock(self, token: str, ttl: float) -> Call[tuple[bool, float]]:
        """Take the scheduler lock for ``ttl`` seconds: (acquired, seconds it lasts)."""
        built = self.schedule_codec.acquire_scheduler_lock(token, ttl)
        return self._call("acquire_scheduler_lock", *built)

    def renew_scheduler_lock(self, token: str, ttl: float) -> Call[bool]:
        """Extend the scheduler lock held by ``token`` (False: it is lost)."""
        built = self.schedule_codec.renew_scheduler_lock(token, ttl)
        return self._call("renew_scheduler_lock", *built)

    def release_scheduler_lock(self, token: str) -> Call[bool]:
        """Give up the scheduler lock held by ``token`` (compare and delete)."""
        built = self.schedule_codec.release_scheduler_lock(token)
        return self._call("release_scheduler_lock", *built)
