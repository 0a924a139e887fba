"""One leased task on a worker (``Execution``), where it is (``Stage``), and the timer
that keeps the execution timeouts of the running async handlers (``Watchdog``)."""

from __future__ import annotations

import asyncio
import enum
import math
import time
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from fairque.client.aio import AsyncFairQueue
from fairque.models import Task
from fairque.tracing import current, processing, settled
from fairque.worker.acker import Acknowledger, Answer, Report
from fairque.worker.context import Context

if TYPE_CHECKING:
    from fairque.worker.executor import Executor


class Stage(enum.Enum):
    """Where an execution is; the first three hold a place, the next two a slot."""

    WAITING = "waiting"  # leased (ahead), waiting for a slot
    STARTING = "starting"  # the before_task hooks run
    HANDLING = "handling"  # inside its handler: a stop or a lost lease cancels it
    REPORTING = "reporting"  # the handler ended; the outcome waits for the queue's answer


class Execution:
    """One leased task on this worker, the queue it came from and where its outcome goes."""

    __slots__ = (
        "acker", "begun", "canceled", "ctx", "error", "executor", "job", "queue", "report",
        "result", "run_from", "span", "stage", "stopped", "task", "timed_out", "took",
    )  # fmt: skip

    def __init__(
        self, executor: Executor, task: Task, queue: AsyncFairQueue, acker: Acknowledger
    ) -> None:
        self.executor = executor
        self.task = task
        self.queue = queue
        self.acker = acker
        self.stage = Stage.WAITING
        #: when its handler started (monotonic; None: not yet)
        self.run_from: float | None = None
        #: the asyncio task that runs it (then the one that runs its after_task hooks)
        self.job: asyncio.Task[None] | None = None
        #: its asyncio task has begun to run (a task cancelled before that never runs)
        self.begun = False
        #: the handler's context; None for a task given back without running
        self.ctx: Context | None = None
        #: cancelled by the worker (a stop, a lost lease): the task is given back
        self.stopped = False
        #: its task was canceled while this worker held it (``cancel``)
        self.canceled = False
        #: cancelled by the watchdog: the handler ran past its execution timeout
        self.timed_out = False
        #: what was filed with the acknowledger, and how long the handler took
        self.report: Report | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.took = 0.0
        #: its handler's consumer span (``fairque.tracing``; None: tracing off)
        self.span: Any = None

    def stamp_run(self) -> None:
        """Set the task's ``run_seconds`` to its handler's run so far (0 before it
        starts; a filed report carries its final run already)."""
        if self.stage is Stage.REPORTING:
            return
        start = self.run_from
        self.task.run_seconds = 0.0 if start is None else time.monotonic() - start

    def traced(self) -> AbstractContextManager[Any]:
        """Start the span of its handler's run (tracing on) and make it the current
        span while the handler runs; the answer ends it."""
        self.span = span = processing(self.queue.queue, self.task)
        return current(span)

    def answered(self, answer: Answer) -> None:
        """The acknowledger's answer to the report (see ``Executor._answered``)."""
        if self.span is not None:
            settled(self.span, answer.value)
            self.span = None
        self.executor._answered(self, answer)


class Watchdog:
    """The execution timeouts of the running async handlers, kept by one timer.

    A timer per handler (``asyncio.timeout``) costs a timer and its cancellation per
    task; here a handler costs a dict entry, and the one timer is set for the nearest
    deadline. When it fires, it cancels every handler past its deadline (marking the
    execution ``timed_out``) and is set again for the nearest one left.
    """

    def __init__(self) -> None:
        self._due: dict[Execution, float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._at = math.inf

    def watch(self, execution: Execution, deadline: float) -> None:
        """Cancel ``execution``'s handler at loop time ``deadline`` unless forgotten."""
        self._due[execution] = deadline
        if deadline < self._at:
            self._set(deadline)

    def forget(self, execution: Execution) -> None:
        """``execution``'s handler ended."""
        self._due.pop(execution, None)

    def close(self) -> None:
        """Stop the timer."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._at = None, math.inf

    def _set(self, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._at = at
        self._timer = asyncio.get_running_loop().call_at(at, self._fire)

    def _fire(self) -> None:
        self._timer, self._at = None, math.inf
        # a timer may fire up to the clock's resolution early
        now = asyncio.get_running_loop().time() + 1e-6
        nearest = math.inf
        for execution, deadline in list(self._due.items()):
            if deadline <= now:
                del self._due[execution]
                job = execution.job
                if job is not None and execution.stage is Stage.HANDLING:
                    execution.timed_out = True
                    job.cancel()
            elif deadline < nearest:
                nearest = deadline
        if nearest < math.inf:
            self._set(nearest)
