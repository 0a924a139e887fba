"""Ranking a queue's tenants by backlog with bounded work per page load or scrape.

The dashboard and ``/metrics`` show the users with the largest backlogs. Reading every
user's lanes at once would cost seconds with 100,000 users, so each call reads the
next ``SCAN_USERS`` users of the ring (a rolling scan that wraps around) and keeps what
it read for ``MAX_AGE`` seconds: successive calls cover the whole ring while none costs
more than a few thousand commands. The reads are the client's (``ring_users``,
``backlogs``); this module keeps only the scan's state.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from fairque.client.aio import AsyncFairQueue
from fairque.client.inspection import SAMPLE

__all__ = ["MAX_AGE", "SAMPLE", "SCAN_USERS", "Ranking", "ranking"]

#: users with ready work examined per call (a pipelined command costs the client some
#: 30 us, so ranking all of 100,000 users would take seconds)
SCAN_USERS = 1000
#: a backlog read longer ago than this is dropped from the ranking
MAX_AGE = 300.0


@dataclass
class Ranking:
    """Backlogs (critical, normal) known for a queue's users and how they were gathered."""

    backlogs: dict[str, tuple[int, int]]
    ring_size: int
    scanned_now: int
    #: seconds since the stalest backlog in ``backlogs`` was read
    age: float


@dataclass
class _Scan:
    backlogs: dict[str, tuple[int, int]] = field(default_factory=dict)
    read_at: dict[str, float] = field(default_factory=dict)
    offset: int = 0


#: rolling scans, per client and queue
_SCANS: dict[tuple[int, str], _Scan] = {}


async def ranking(q: AsyncFairQueue, extra: Iterable[str] = (), scan: bool = True) -> Ranking:
    """Backlogs for ranking users: the next ``SCAN_USERS`` users of the ring plus
    ``extra``, merged with what earlier calls read in the last ``MAX_AGE`` seconds.
    Users whose lanes are empty are dropped."""
    state = _SCANS.setdefault((id(q.client), q.queue), _Scan())
    users, size = await q.ring_users(limit=SCAN_USERS if scan else 0, offset=state.offset)
    if scan and not users and state.offset:
        state.offset = 0
        users, size = await q.ring_users(limit=SCAN_USERS)
    if scan:
        state.offset = state.offset + len(users) if state.offset + len(users) < size else 0
    fresh = await q.backlogs(list(dict.fromkeys([*users, *extra])))
    now = time.monotonic()
    for user, lanes in fresh.items():
        if sum(lanes):
            state.backlogs[user], state.read_at[user] = lanes, now
        else:
            state.backlogs.pop(user, None)
            state.read_at.pop(user, None)
    for user in [u for u, at in state.read_at.items() if now - at > MAX_AGE]:
        del state.backlogs[user], state.read_at[user]
    age = now - min(state.read_at.values()) if state.read_at else 0.0
    return Ranking(dict(state.backlogs), size, len(users), age)
