"""What the inspection reads answer (``FairQueue.recent_starts``, ``user_loads``,
``wait_place``...): plain records for the dashboard, /metrics and the CLI (also
importable from ``fairque.models``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["BucketUse", "GroupLoad", "StartedTask", "UserLoad", "WaitPlace"]


@dataclass(frozen=True)
class StartedTask:
    """A task that started recently: who, what, when (server ms), how it ended."""

    task_id: str
    user_id: str
    name: str
    state: str
    #: its push (or its due time when it was delayed)
    waiting_since: int
    started: int
    ended: int | None

    @property
    def wait_seconds(self) -> float:
        """From waiting to its latest start."""
        return max(0, self.started - self.waiting_since) / 1000

    @property
    def run_seconds(self) -> float | None:
        """From its latest start to its end (None: still running)."""
        return None if self.ended is None else max(0, self.ended - self.started) / 1000


@dataclass(frozen=True)
class UserLoad:
    """One user's load now: lanes, leases in flight, limits, place in the ring."""

    user_id: str
    critical: int = 0
    normal: int = 0
    in_flight: int = 0
    weight: int = 1
    cap: int | None = None
    #: place in the ring (0: served next); None: not in the ring
    ring_rank: int | None = None
    #: held out of the ring by its cap
    capped: bool = False
    #: push time (ms) of its oldest waiting task, among the heads of its lanes
    oldest_ms: int | None = None
    #: its backlog: tasks in QUEUED, SCHEDULED or DEFERRED (what its quota counts)
    queued: int = 0
    #: its own backlog quota (None: the queue's default applies)
    max_queued: int | None = None
    #: the bytes its tasks hold (payloads, what ended records keep), under a byte quota
    bytes: int = 0
    #: its own byte quota (None: the queue's default applies)
    max_bytes: int | None = None

    @property
    def ready(self) -> int:
        """Tasks waiting in its lanes."""
        return self.critical + self.normal


@dataclass(frozen=True)
class GroupLoad:
    """A group's limits (``set_group_limits``) and its backlog now."""

    group_id: str
    weight: int = 1
    floor: float | None = None
    ceiling: float | None = None
    max_in_flight: int | None = None
    max_queued: int | None = None
    #: its tenants' tasks in QUEUED, SCHEDULED or DEFERRED together (what its quota
    #: counts): kept while a group of the queue has a quota (0 otherwise)
    queued: int = 0
    #: the weights of its tenants with ready work in the ring (time mode; on a queue
    #: with groups or shares), over which its weight is shared
    active: int = 0


@dataclass(frozen=True)
class BucketUse:
    """A constraint bucket a task counts in, as the task sees it now."""

    bucket: str
    #: unexpired leases in the bucket
    in_use: int
    #: seconds until the bucket's limit frees (None: not at its limit)
    frees_in: float | None
    #: the task is parked in this bucket (passed over while it is at its limit)
    parked: bool


@dataclass(frozen=True)
class WaitPlace:
    """Where a QUEUED task waits: tasks ahead of it in its user's lanes, its user's
    place in the ring, and the constraint buckets it counts in."""

    lane: Literal["critical", "normal"]
    #: tasks before it in its user's lanes (None: not found in its lane)
    ahead: int | None
    ring_rank: int | None
    ring_size: int
    buckets: list[BucketUse]
    #: its name, when it waits set aside because the workers that leased it do not
    #: handle that name (it goes back when one that does leases)
    set_aside: str | None = None
