"""What each tenant was served in a window, from the server's per-tenant counters.

The scripts count every lease in its user's tenant hash (``TenantService.started``, since
the user's first lease), and keep each user's backlog (tasks QUEUED, SCHEDULED or
DEFERRED) beside it. The dashboard keeps, per queue, snapshots of the most recently
leased users' counters, taken by its sampler while the service runs (``watch``, every
15 s) and when the tenants page is read (at most one per ``STEP`` seconds, as far back
as the longest window): the leases in a window are the difference
between now and the newest snapshot at least that old (``span``: how old it is). Until
the dashboard has watched that long, the counts run from each user's first lease
(``span`` None); the page states which.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from fairque.client.aio import AsyncFairQueue

__all__ = ["STEP", "USERS", "Served", "served_in", "watch"]

#: seconds between two snapshots of one queue
STEP = 5.0
#: users a snapshot reads (the most recently leased)
USERS = 1000
#: seconds of snapshots kept (the tenants page's longest window)
KEPT = 3600.0


@dataclass(frozen=True)
class Served:
    """Leases per user in a window, each user's backlog now and its weight."""

    leases: dict[str, int]
    backlog: dict[str, int]
    weights: dict[str, int]
    #: seconds the window covers (None: since each user's first lease)
    span: float | None


#: snapshots (monotonic seconds, user -> leases), oldest first, per client and queue
_SNAPSHOTS: dict[tuple[int, str], deque[tuple[float, dict[str, int]]]] = {}


async def served_in(q: AsyncFairQueue, window: float) -> Served:
    """The leases of the last ``window`` seconds (or as much as was watched) per user,
    from the server's counters, with each user's backlog and weight now."""
    report = await q.tenants(USERS)
    now = time.monotonic()
    counts = {t.user_id: t.started for t in report.tenants}
    snaps = _SNAPSHOTS.setdefault((id(q.client), q.queue), deque())
    base: tuple[float, dict[str, int]] | None = None
    for snap in snaps:
        if now - snap[0] < window:
            break
        base = snap
    if not snaps or now - snaps[-1][0] >= STEP:
        snaps.append((now, counts))
    while len(snaps) > 1 and now - snaps[1][0] >= KEPT:
        snaps.popleft()
    if base is None:
        leases, span = {u: c for u, c in counts.items() if c}, None
    else:
        before = base[1]
        leases = {u: c - before.get(u, 0) for u, c in counts.items() if c > before.get(u, 0)}
        span = now - base[0]
    return Served(
        leases=leases,
        backlog={t.user_id: t.backlog for t in report.tenants},
        weights={t.user_id: t.weight for t in report.tenants},
        span=span,
    )


async def watch(q: AsyncFairQueue) -> None:
    """Take a snapshot of ``q``'s counters when one is due: the dashboard's sampler calls
    this, so a window counts from when the service started watching the queue, not from
    the first read of the tenants page."""
    snaps = _SNAPSHOTS.get((id(q.client), q.queue))
    if snaps and time.monotonic() - snaps[-1][0] < STEP:
        return
    await served_in(q, 0.0)
