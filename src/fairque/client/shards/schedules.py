"""Schedules on a sharded queue.

A schedule is stored in the shard of its tenant (``user_id``) when it is added, and
fires there: ``fire_schedule`` is one script in that shard's slot, which writes the
slot's task beside the schedule's cursor, so a firing still happens exactly once. A
schedule stays in the shard it was added to (a resize moves no schedule: it goes on
firing there, and workers serve every shard). Schedule ids are looked up across the
shards, so an id names one schedule as on a plain queue.

The leading scheduler holds the lock of every shard (taken in shard order, so two
schedulers never hold a part each for long), and each firing is fenced by the lock of
its shard. The flows here choose shards and merge answers; the clients drive them.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from fairque.client.base import Flow, QueueBase
from fairque.core.shards import shard_of
from fairque.schedules.codec import DueSchedules, FireOutcome, StoredSchedule
from fairque.schedules.model import Schedule

if TYPE_CHECKING:
    from fairque.client.shards.placement import Partition

_EPOCH = datetime.min.replace(tzinfo=timezone.utc)
#: Due schedules remembered with the shard they were read from (``fire_schedule``).
REMEMBERED = 4096


def _listed(schedule: Schedule) -> tuple[bool, bool, datetime, str]:
    """The order ``schedules()`` lists in: to be planned, soonest slot, paused last."""
    when = schedule.next_fire_at or _EPOCH
    return (not schedule.enabled, schedule.next_fire_at is not None, when, schedule.schedule_id)


class ShardedSchedules:
    """The schedule flows of a sharded queue (``Shards`` mixes them in)."""

    _parts: tuple[Partition, ...]
    _count: int
    #: schedule id -> the shard the last read of due schedules found it in
    _due_at: dict[str, int]

    if TYPE_CHECKING:

        def each(self, build: Any) -> Flow[list[Any]]: ...

    def _find_flow(self, schedule_id: str) -> Flow[tuple[int, Schedule | None]]:
        """The shard holding ``schedule_id`` and the schedule (shard 0 and None: none)."""
        found: list[Schedule | None] = yield from self.each(
            lambda p: p.ops.schedule_codec.get_schedule(schedule_id)
        )
        for shard, schedule in enumerate(found):
            if schedule is not None:
                return shard, schedule
        return 0, None

    def find_schedule(self, schedule_id: str) -> Flow[tuple[QueueBase, Schedule | None]]:
        shard, found = yield from self._find_flow(schedule_id)
        return self._parts[shard], found

    def add_schedule(self, schedule: Schedule) -> Flow[Schedule]:
        """Store a new schedule in its tenant's shard (in the shard that holds its id
        already, where the script answers as on a plain queue)."""
        self._parts[0].ops.add_schedule(schedule)  # checked first, as on a plain queue
        shard, found = yield from self._find_flow(schedule.schedule_id)
        if found is None:
            shard = shard_of(schedule.user_id, self._count)
        added: Schedule = yield self._parts[shard].ops.add_schedule(schedule)
        return added

    def remove_schedule(self, schedule_id: str) -> Flow[bool]:
        removed: list[bool] = yield from self.each(lambda p: p.ops.remove_schedule(schedule_id))
        return any(removed)

    def schedules(self, limit: int) -> Flow[list[Schedule]]:
        found: list[list[Schedule]] = yield from self.each(lambda p: p.ops.schedules(limit))
        merged = sorted((s for one in found for s in one), key=_listed)
        return merged[:limit]

    def due_schedules(self, limit: int) -> Flow[DueSchedules]:
        """Every shard's due schedules: ``now_ms`` is the earliest of the shards' clocks
        (a slot due on one clock but not another waits for the next pass), and each
        schedule's shard is remembered for ``fire_schedule``."""
        reads: list[DueSchedules] = yield from self.each(lambda p: p.ops.due_schedules(limit))
        where = self._due_at
        due: list[StoredSchedule] = []
        for shard, read in enumerate(reads):
            for stored in read.due:
                where[stored.schedule.schedule_id] = shard
                due.append(stored)
        while len(where) > REMEMBERED:
            del where[next(iter(where))]
        nexts = [r.next_ms for r in reads if r.next_ms is not None]
        return DueSchedules(min(r.now_ms for r in reads), min(nexts) if nexts else None, due)

    def fire(self, stored: StoredSchedule, now_ms: int, token: str) -> Flow[FireOutcome]:
        """Fire ``stored`` in the shard it was read from (looked up when unknown)."""
        schedule_id = stored.schedule.schedule_id
        shard = self._due_at.get(schedule_id)
        if shard is None or shard >= len(self._parts):
            shard, _ = yield from self._find_flow(schedule_id)
        part = self._parts[shard]
        fired: FireOutcome = yield from part._push_flow(
            lambda: part.ops.fire_schedule(stored, now_ms, token)
        )
        return fired

    def acquire_lock(self, token: str, ttl: float) -> Flow[tuple[bool, float]]:
        """Take the lock of every shard in shard order; stop at the first held by
        another scheduler (the ones taken lapse unless this token takes them again)."""
        first = ttl
        for shard, part in enumerate(self._parts):
            acquired, seconds = yield part.ops.acquire_scheduler_lock(token, ttl)
            if not acquired:
                return False, seconds
            if shard == 0:
                first = seconds
        return True, first

    def renew_lock(self, token: str, ttl: float) -> Flow[bool]:
        renewed: list[bool] = yield from self.each(lambda p: p.ops.renew_scheduler_lock(token, ttl))
        return all(renewed)

    def release_lock(self, token: str) -> Flow[bool]:
        """Release in reverse order: shard 0's release (which wakes a waiting
        scheduler) comes last, when the other shards are free."""
        released = False
        for shard in reversed(range(len(self._parts))):
            released = bool((yield self._parts[shard].ops.release_scheduler_lock(token)))
        return released
