"""The schedule methods of ``FairQueue`` and ``AsyncFairQueue``.

Both clients inherit them from here; each method only sends the call that
``fairque.core.ops`` builds, so the two stay alike (the parity test holds them to it).
The leader's methods (``due_schedules``, ``fire_schedule`` and the lock) are what
``fairque.schedules.leader`` runs; applications use the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from fairque.schedules.codec import DueSchedules, FireOutcome, StoredSchedule
from fairque.schedules.model import Schedule

if TYPE_CHECKING:
    from collections.abc import Callable

    from fairque.client.base import Flow
    from fairque.core.ops import Operations
    from fairque.core.records import Call

T = TypeVar("T")


def schedule_from(schedule: Schedule | None, fields: dict[str, Any]) -> Schedule:
    """``schedule``, or one built from keyword fields."""
    if schedule is not None and fields:
        raise TypeError("give a Schedule or its fields as keywords, not both")
    return schedule if schedule is not None else Schedule(**fields)


class ScheduleMethods:
    """Schedules on the blocking client."""

    ops: Operations

    if TYPE_CHECKING:

        def _run(self, call: Call[T]) -> T: ...

        def _drive(self, flow: Flow[T]) -> T: ...

        def _push_flow(self, build: Callable[[], Call[T]]) -> Flow[T]: ...

        def _bounded(self, seconds: float) -> float: ...

    def add_schedule(self, schedule: Schedule | None = None, **fields: Any) -> Schedule:
        """Store a new schedule; give a ``Schedule`` or its fields as keywords.

        Adding a schedule whose id exists with the same definition and payload is a
        no-op that returns the stored one (whether it is paused or not), so a resend,
        or a deploy step run twice, changes nothing.

        Returns:
            The stored schedule, with ``next_fire_at`` filled.

        Raises:
            ValidationError: a field is invalid (nothing is written).
            ScheduleExists: the id holds a different definition (use ``update_schedule``).
        """
        return self._run(self.ops.add_schedule(schedule_from(schedule, fields)))

    def update_schedule(self, schedule: Schedule | None = None, **fields: Any) -> Schedule:
        """Replace a schedule's definition, payload and ``enabled`` flag.

        The same definition again changes nothing. A new timing (cron, interval, time
        zone or start) plans from now on: slots of the old timing not yet fired are
        dropped.

        Raises:
            ValidationError: a field is invalid (nothing is written).
            ScheduleNotFound: no schedule has this id.
        """
        return self._run(self.ops.update_schedule(schedule_from(schedule, fields)))

    def remove_schedule(self, schedule_id: str) -> bool:
        """Delete a schedule; False when there was none. Tasks it enqueued stay."""
        return self._run(self.ops.remove_schedule(schedule_id))

    def pause_schedule(self, schedule_id: str) -> Schedule:
        """Stop a schedule from firing until ``resume_schedule``.

        Raises:
            ScheduleNotFound: no schedule has this id.
        """
        return self._run(self.ops.pause_schedule(schedule_id))

    def resume_schedule(self, schedule_id: str) -> Schedule:
        """Let a paused schedule fire again; the slots that passed meanwhile do not fire.

        Raises:
            ScheduleNotFound: no schedule has this id.
        """
        return self._run(self.ops.resume_schedule(schedule_id))

    def schedules(self, limit: int = 1000) -> list[Schedule]:
        """Up to ``limit`` schedules: the soonest next slot first, paused ones last."""
        return self._run(self.ops.schedules(limit))

    def get_schedule(self, schedule_id: str) -> Schedule | None:
        """The schedule with this id, or None."""
        return self._run(self.ops.schedule_codec.get_schedule(schedule_id))

    # what the leading scheduler runs ------------------------------------------------
    def due_schedules(self, limit: int = 100) -> DueSchedules:
        """Server time, up to ``limit`` due schedules and the next slot after them."""
        return self._run(self.ops.due_schedules(limit))

    def fire_schedule(self, stored: StoredSchedule, now_ms: int, token: str) -> FireOutcome:
        """Fire the due slots of ``stored`` (read by ``due_schedules`` at ``now_ms``).

        The template is matched against the queue's constraints as a push is (read
        again when they changed).

        Raises:
            NotLeader: ``token`` does not hold the scheduler lock.
        """
        return self._drive(self._push_flow(lambda: self.ops.fire_schedule(stored, now_ms, token)))

    def acquire_scheduler_lock(self, token: str, ttl: float = 10.0) -> tuple[bool, float]:
        """Try to lead: (True, ttl) when ``token`` holds the lock now, else (False,
        seconds until the holder's lock expires unless renewed)."""
        return self._run(self.ops.acquire_scheduler_lock(token, ttl))

    def renew_scheduler_lock(self, token: str, ttl: float = 10.0) -> bool:
        """Extend the lock ``token`` holds to ``ttl`` seconds from now; False: lost."""
        return self._run(self.ops.renew_scheduler_lock(token, ttl))

    def release_scheduler_lock(self, token: str) -> bool:
        """Give up the lock if ``token`` holds it (compare and delete)."""
        return self._run(self.ops.release_scheduler_lock(token))

    def scheduler_holder(self) -> str | None:
        """The token of the leading scheduler (``host:pid:random``), or None."""
        return self._run(self.ops.schedule_codec.scheduler_holder())

    def wait_for_schedules(self, timeout: float) -> bool:
        """Block until a schedule changes (True) or ``timeout`` seconds pass."""
        return self._run(self.ops.schedule_codec.wait_for_schedules(self._bounded(timeout)))

    def wait_for_handover(self, timeout: float) -> bool:
        """Block until the leading scheduler releases its lock (True) or ``timeout``
        seconds pass: a waiting scheduler takes over at once."""
        return self._run(self.ops.schedule_codec.wait_for_handover(self._bounded(timeout)))


class AsyncScheduleMethods:
    """Schedules on the asyncio client (see ``ScheduleMethods`` for each contract)."""

    ops: Operations

    if TYPE_CHECKING:

        async def _run(self, call: Call[T]) -> T: ...

        async def _drive(self, flow: Flow[T]) -> T: ...

        def _push_flow(self, build: Callable[[], Call[T]]) -> Flow[T]: ...

        def _bounded(self, seconds: float) -> float: ...

    async def add_schedule(self, schedule: Schedule | None = None, **fields: Any) -> Schedule:
        """See ``FairQueue.add_schedule``."""
        return await self._run(self.ops.add_schedule(schedule_from(schedule, fields)))

    async def update_schedule(self, schedule: Schedule | None = None, **fields: Any) -> Schedule:
        """See ``FairQueue.update_schedule``."""
        return await self._run(self.ops.update_schedule(schedule_from(schedule, fields)))

    async def remove_schedule(self, schedule_id: str) -> bool:
        """See ``FairQueue.remove_schedule``."""
        return await self._run(self.ops.remove_schedule(schedule_id))

    async def pause_schedule(self, schedule_id: str) -> Schedule:
        """See ``FairQueue.pause_schedule``."""
        return await self._run(self.ops.pause_schedule(schedule_id))

    async def resume_schedule(self, schedule_id: str) -> Schedule:
        """See ``FairQueue.resume_schedule``."""
        return await self._run(self.ops.resume_schedule(schedule_id))

    async def schedules(self, limit: int = 1000) -> list[Schedule]:
        """See ``FairQueue.schedules``."""
        return await self._run(self.ops.schedules(limit))

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        """See ``FairQueue.get_schedule``."""
        return await self._run(self.ops.schedule_codec.get_schedule(schedule_id))

    async def due_schedules(self, limit: int = 100) -> DueSchedules:
        """See ``FairQueue.due_schedules``."""
        return await self._run(self.ops.due_schedules(limit))

    async def fire_schedule(self, stored: StoredSchedule, now_ms: int, token: str) -> FireOutcome:
        """See ``FairQueue.fire_schedule``."""
        return await self._drive(
            self._push_flow(lambda: self.ops.fire_schedule(stored, now_ms, token))
        )

    async def acquire_scheduler_lock(self, token: str, ttl: float = 10.0) -> tuple[bool, float]:
        """See ``FairQueue.acquire_scheduler_lock``."""
        return await self._run(self.ops.acquire_scheduler_lock(token, ttl))

    async def renew_scheduler_lock(self, token: str, ttl: float = 10.0) -> bool:
        """See ``FairQueue.renew_scheduler_lock``."""
        return await self._run(self.ops.renew_scheduler_lock(token, ttl))

    async def release_scheduler_lock(self, token: str) -> bool:
        """See ``FairQueue.release_scheduler_lock``."""
        return await self._run(self.ops.release_scheduler_lock(token))

    async def scheduler_holder(self) -> str | None:
        """See ``FairQueue.scheduler_holder``."""
        return await self._run(self.ops.schedule_codec.scheduler_holder())

    async def wait_for_schedules(self, timeout: float) -> bool:
        """See ``FairQueue.wait_for_schedules``."""
        return await self._run(self.ops.schedule_codec.wait_for_schedules(self._bounded(timeout)))

    async def wait_for_handover(self, timeout: float) -> bool:
        """See ``FairQueue.wait_for_handover``."""
        return await self._run(self.ops.schedule_codec.wait_for_handover(self._bounded(timeout)))
