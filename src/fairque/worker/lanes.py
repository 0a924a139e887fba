"""Serving several queues: one lane per queue, and the share of free slots each gets.

A worker keeps one *lane* per queue it serves. A lane holds what belongs to that
queue alone: its connection state (``Link``: on a cluster, its node may be down while
the others answer), its lease calls (``Leasing``), its reports (``Acknowledger``), its
idle wait (``Park``), its heartbeat, registration and maintenance (``Upkeep``), and
whether its last lease request came back full (then more may be ready).

Fairness across queues is round robin over the lanes that may have ready work: each
turn of the worker's loop splits its free slots evenly among them, and the lane that
gets the odd slot rotates, so a queue with a flood of work and a queue with a
trickle each get half of the slots that free up while both have work. Inside each
request, the queue's own fair pop (round robin over its users) decides which tasks
come. A lane whose last request came back short is parked, or, when the worker
serves several queues, watched (see ``park``): the watch ends when that queue
signals work, and the lane takes part in the next split.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from fairque.client.aio import AsyncFairQueue
from fairque.worker.acker import Acknowledger
from fairque.worker.leasing import Leasing
from fairque.worker.link import Link
from fairque.worker.park import Park
from fairque.worker.upkeep import Upkeep


class Lane:
    """What a worker keeps for one of its queues.

    Args:
        queue: the queue.
        link: its connection state (the worker's own when it serves one queue).
        leasing: its lease calls.
        acker: its reports.
        park: its idle wait.
        upkeep: its heartbeat, registration and maintenance.
    """

    def __init__(
        self,
        queue: AsyncFairQueue,
        link: Link,
        leasing: Leasing,
        acker: Acknowledger,
        park: Park,
        upkeep: Upkeep,
    ) -> None:
        self.queue = queue
        self.link = link
        self.leasing = leasing
        self.acker = acker
        self.park = park
        self.upkeep = upkeep
        #: the last lease request got every task it asked for: more may be ready
        self.more_ready = True
        #: a held wave is sent again from then (monotonic time; the link's backoff)
        self.resting_until = 0.0
        #: its waves at the server, and the tasks they asked for (slots held meanwhile)
        self.waves: set[asyncio.Task[None]] = set()
        self.asked = 0
        #: a wave's round trip (seconds, a moving average; 0: none yet)
        self.round_trip = 0.0

    def timed(self, seconds: float) -> None:
        """A wave came back after ``seconds``."""
        trip = self.round_trip
        self.round_trip = seconds if not trip else trip * 0.8 + seconds * 0.2

    @property
    def name(self) -> str:
        """The queue's name."""
        return self.queue.queue


class Rotation:
    """Splits free slots among lanes, round robin (see the module's docstring)."""

    def __init__(self, lanes: Sequence[Lane]) -> None:
        self.lanes = list(lanes)
        self._first = 0  # the lane that gets the next odd slot (if it wants one)

    def share(self, free: int, now: float) -> list[int]:
        """How many tasks to ask each lane for (in the lanes' order) out of ``free``.

        Only lanes that may have ready work and are not resting at monotonic time
        ``now`` get slots; an uneven split gives the odd slots to the next lanes in
        rotation, and the rotation moves past them.
        """
        n = len(self.lanes)
        wanted = [0] * n
        order = [(self._first + i) % n for i in range(n)]
        ready = [
            i for i in order if self.lanes[i].more_ready and self.lanes[i].resting_until <= now
        ]
        if not free or not ready:
            return wanted
        base, odd = divmod(free, len(ready))
        for rank, i in enumerate(ready):
            wanted[i] = base + (1 if rank < odd else 0)
        if odd:
            self._first = (ready[odd - 1] + 1) % n
        return wanted
