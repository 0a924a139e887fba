"""Slots: the one count of what a worker holds, and the gate its handlers pass.

A worker runs at most ``max_concurrent_tasks`` handlers at once (its *slots*), and may
hold up to ``lease_ahead`` more tasks, leased but not started (at most one per slot),
so that a slot's next task is at hand the moment its handler ends instead of one
round trip to the server later. A task is leased ahead only for a slot whose handler
is expected to end within about two round trips (from the runs of that user's tasks
of that name this worker has seen, ``Executor.ending_within``; a slot of tasks
shorter than that may take several): a slot busy with a long task, or with one of a
kind never seen, takes nothing ahead, so a leased task never waits on a busy worker
while an idle one could run it; so does a slot running a task that holds a slot of an
in-flight cap (``Task.lease_capped``: the cap frees only when it ends). Every leased
task takes a *place* from its lease until its handler ends (or it is given back); a
handler starts only once a slot is free, in the order the tasks were leased. A handler
thread the worker gave up on (a sync handler past its timeout) keeps its slot until it
returns.

Leased-ahead tasks are leased like any other: they count toward their users' caps
and their constraints, the heartbeat keeps their leases alive, and since a time-fair
queue charges a tenant the run its worker reports, their wait is not charged. A stop
gives them back at once, without counting an attempt.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable


class Slots:
    """Places and slots of one worker.

    Args:
        size: handlers that may run at once (``max_concurrent_tasks``).
        ahead: tasks that may wait for a slot, leased ahead (``lease_ahead``).
        stuck: how many handler threads still run for tasks the worker gave up on.
    """

    def __init__(self, size: int, ahead: int, stuck: Callable[[], int]) -> None:
        self.size = size
        self.ahead = ahead
        self._stuck = stuck
        #: leased tasks whose handler has not ended: waiting, starting or running
        self.held = 0
        #: of those, the ones past the gate (their handler starts or runs)
        self.running = 0
        self._waiting: deque[asyncio.Future[bool]] = deque()

    @property
    def waiting(self) -> int:
        """Leased tasks waiting for a slot."""
        return len(self._waiting)

    def to_lease(self, ending: int) -> int:
        """How many more tasks the worker may hold: free slots, and a place ahead for
        each of the ``ending`` handler ends expected soon (at most ``ahead``)."""
        return max(0, self.size + min(self.ahead, ending) - self.held - self._stuck())

    def to_run(self) -> int:
        """How many more tasks could start at once (an idle worker asks for no more)."""
        return max(0, self.size - self.held - self._stuck())

    def take(self) -> None:
        """A leased task takes a place."""
        self.held += 1

    def give(self, ran: bool) -> None:
        """A task's place is free (its handler ended, or it was given back); ``ran``:
        it held a slot too, which passes to the next waiting task."""
        self.held -= 1
        if ran:
            self.running -= 1
        self.pass_on()

    async def enter(self) -> bool:
        """Wait for a slot (at once when one is free and nobody waits); False when the
        worker stops first: the task is given back without running."""
        if not self._waiting and self.running + self._stuck() < self.size:
            self.running += 1
            return True
        turn: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        try:
            return await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled() and turn.result():
                self.running -= 1  # let in, then cancelled before it could start
                self.pass_on()
            elif turn in self._waiting:
                self._waiting.remove(turn)
            raise

    def pass_on(self) -> None:
        """Let waiting tasks in while a slot is free (a handler ended, a stuck thread
        returned)."""
        while self._waiting and self.running + self._stuck() < self.size:
            turn = self._waiting.popleft()
            if not turn.done():
                self.running += 1
                turn.set_result(True)

    def release_waiting(self) -> int:
        """The worker stops: every waiting task is let go without a slot (it is given
        back). Returns how many."""
        released = 0
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(False)
                released += 1
        return released
