"""Acknowledging: every outcome of a task reaches the queue along one path.

An execution never talks to the queue about its outcome itself. It files a *report*
with the worker's ``Acknowledger``, which calls it back with the queue's answer (a
plain call, not a future: an answer costs no turn of the event loop):

- ``Finished``: the handler returned; complete the task with its result;
- ``Failed``: the handler raised, timed out or asked for a retry; the queue schedules
  a retry or fails the task for good;
- ``GivenBack``: the worker stopped the handler (a stop, a lost lease), or has no
  handler for the task's name; the task goes back to the queue without counting a
  failure (after a delay for an unknown name, so that it does not spin).

A report whose lease the worker already knows to be lost is answered at once, with
no call. The others wait for the worker's loop to start a *wave*, which sends every
report pending at its start: failures and give-backs first, concurrently, one call
each (``fail``, ``requeue``), because a failure may free its user's in-flight slot
for the lease request that follows; then the successes, together with the worker's
request for as many tasks as it has free slots, in one ``complete_and_pop``. That
call is a busy worker's usual round trip; with no tasks wanted it only completes.

A wave that cannot reach the server keeps its reports; the next wave, after the
link's backoff, sends them again (every script is safe to resend). A stopping worker
that runs out of time gives up on what it still holds: the leases of those tasks
expire and the tasks run again.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from fairque.client.aio import AsyncFairQueue
from fairque.core.records import EncodedResult
from fairque.errors import LeaseLost, ServerError
from fairque.models import Task, TaskState
from fairque.worker.leasing import Leasing
from fairque.worker.link import CONNECTION_ERRORS, ErrorLog, Link

log = logging.getLogger("fairque.worker")


@dataclass(frozen=True, slots=True)
class Finished:
    """The handler returned: complete the task, keeping ``result`` (already encoded)."""

    what: ClassVar[str] = "completion"
    task: Task
    result: EncodedResult | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    """The attempt failed: retry after ``delay`` (None: the backoff), or fail for good.

    ``budget`` is the retry budget to judge by instead of the task's own (a handler's
    ``max_retries``); ``traceback`` is kept with the task (a raising handler's), and
    ``kind`` as its ``failure_reason`` (``"timeout"`` for an execution timeout), and
    ``details`` (a handler's ``Fail(details=...)``) beside the error.
    """

    what: ClassVar[str] = "failure"
    task: Task
    reason: str
    retry: bool = True
    delay: float | None = None
    budget: int | None = None
    traceback: str | None = None
    kind: str | None = None
    details: Any = None


@dataclass(frozen=True, slots=True)
class GivenBack:
    """The task goes back without counting a failure, ready again after ``delay``
    seconds: the worker stopped its handler, or has no handler for its name
    (``unknown``)."""

    what: ClassVar[str] = "give-back"
    task: Task
    delay: float = 0.0
    unknown: bool = False


Report: TypeAlias = Finished | Failed | GivenBack


class NotApplied(enum.Enum):
    """Why the queue did not apply a report."""

    #: the queue refused it: the lease expired, or the task was canceled or taken over
    LEASE_LOST = "lease lost"
    #: it never reached the queue: the stopping worker gave up sending it
    GAVE_UP = "gave up"


#: The queue's answer to a report: the task's new state, or why nothing changed.
Answer: TypeAlias = TaskState | NotApplied
#: Called once with the answer to a report.
OnAnswer: TypeAlias = Callable[[Answer], None]
#: A report and whom to tell its answer.
Filed: TypeAlias = tuple[Report, OnAnswer]


class Acknowledger:
    """Holds the reports of one worker and sends them in waves.

    Args:
        queue: the queue the reports go to.
        leasing: the worker's lease requests (a wave may ask for tasks).
        link: the worker's connection state.
        errors: where unexpected errors are logged.
        on_report: called when a report is filed (the worker's loop sends it).
    """

    def __init__(
        self,
        queue: AsyncFairQueue,
        leasing: Leasing,
        link: Link,
        errors: ErrorLog,
        on_report: Callable[[], None],
    ) -> None:
        self.queue = queue
        self.leasing = leasing
        self.link = link
        self.errors = errors
        self._on_report = on_report
        self._pending: list[Filed] = []
        self._given_up = False

    @property
    def pending(self) -> int:
        """Reports waiting for a wave."""
        return len(self._pending)

    @property
    def worker_id(self) -> str:
        return self.leasing.worker_id

    def report(self, report: Report) -> asyncio.Future[Answer]:
        """File ``report``; the future resolves with the queue's answer."""
        answer: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self.file(report, functools.partial(_resolve, answer))
        return answer

    def file(self, report: Report, on_answer: OnAnswer) -> None:
        """File ``report``; ``on_answer`` is called once with the queue's answer (at
        once when the worker already knows the lease lost, or gave up reporting)."""
        if report.task.lease_token is None:  # a lost lease the worker already knows of
            self._answer(on_answer, NotApplied.LEASE_LOST)
        elif self._given_up:
            self._give_up_on(report, on_answer)
        else:
            self._pending.append((report, on_answer))
            self._on_report()

    async def send(self, wanted: int) -> list[Task] | None:
        """One wave: send every pending report, and ask for up to ``wanted`` tasks.

        Returns:
            The leased tasks; None when the server could not be reached or refused
            the call: what was not sent waits for the next wave, which the caller
            starts after the link's backoff.
        """
        wave, self._pending = self._pending, []
        finished: list[tuple[Finished, OnAnswer]] = []
        others: list[tuple[Failed | GivenBack, OnAnswer]] = []
        for report, answer in wave:
            if report.task.lease_token is None:  # lost while it waited (the heartbeat saw it)
                self._answer(answer, NotApplied.LEASE_LOST)
            elif isinstance(report, Finished):
                finished.append((report, answer))
            else:
                others.append((report, answer))
        if others:
            if len(others) == 1:  # the usual case: no task to gather
                sent = [await self._send_one(*others[0])]
            else:
                sent = await asyncio.gather(*(self._send_one(r, a) for r, a in others))
            held = [item for item, done in zip(others, sent, strict=True) if not done]
            if held:  # the server is away: the successes wait with them
                self._pending[:0] = [*held, *finished]
                return None
        if not finished and not wanted:
            return []
        return await self._complete_and_lease(finished, wanted)

    def give_up(self) -> int:
        """Stop sending: every held report, and every later one, is answered GAVE_UP.

        Returns:
            How many held reports were given up.
        """
        self._given_up = True
        held, self._pending = self._pending, []
        for report, answer in held:
            self._give_up_on(report, answer)
        return len(held)

    async def _send_one(self, report: Failed | GivenBack, answer: OnAnswer) -> bool:
        """Send a failure or a give-back; False when it must be sent again."""
        task = report.task
        try:
            if isinstance(report, Failed):
                state = await self.queue.fail(
                    task, report.reason, report.retry, report.delay,
                    max_retries=report.budget, traceback=report.traceback, reason=report.kind,
                    details=report.details,
                )  # fmt: skip
            else:
                state = await self.queue.requeue(task, delay=report.delay)
        except LeaseLost:
            self._answer(answer, NotApplied.LEASE_LOST)
        except Exception as exc:
            if self._holds(exc, f"could not report the {report.what} of task {task.task_id}"):
                return False
            self._give_up_on(report, answer)
        else:
            self.link.ok()
            if isinstance(report, GivenBack):
                # the execution logs it (an unknown name: once per name)
                log.debug("task %s given back (%s)", task.task_id, state.value)
            self._answer(answer, state)
        return True

    async def _complete_and_lease(
        self, finished: list[tuple[Finished, OnAnswer]], wanted: int
    ) -> list[Task] | None:
        """Complete the successes and lease up to ``wanted`` tasks: one round trip."""
        try:
            won, leased = await self.leasing.complete_and_lease(
                [(r.task, r.result) for r, _ in finished], wanted
            )
        except Exception as exc:
            if self._holds(exc, "queue call failed; retrying"):
                self._pending[:0] = finished
                return None
            for report, answer in finished:
                self._give_up_on(report, answer)
            return []
        self.link.ok()
        for (_, answer), ok in zip(finished, won, strict=True):
            self._answer(answer, TaskState.FINISHED if ok else NotApplied.LEASE_LOST)
        return leased

    def _holds(self, exc: Exception, what: str) -> bool:
        """Whether a call that raised ``exc`` is worth sending again (and logs it).

        Outages and refusals by the server (out of memory, a read-only replica) pass;
        anything else would fail the same way again.
        """
        if isinstance(exc, CONNECTION_ERRORS):
            self.link.failed(exc)
            return True
        self.errors.error(f"worker {self.worker_id}: {what}", exc)
        if isinstance(exc, ServerError):
            self.link.failures += 1  # back off as for an outage
            return True
        return False

    def _give_up_on(self, report: Report, answer: OnAnswer) -> None:
        log.warning(
            "worker %s: gave up reporting the %s of task %s; its lease will expire and it "
            "will run again",
            self.worker_id, report.what, report.task.task_id,
        )  # fmt: skip
        self._answer(answer, NotApplied.GAVE_UP)

    def _answer(self, on_answer: OnAnswer, value: Answer) -> None:
        """Tell an answer; a callback that raises does not stop the others."""
        try:
            on_answer(value)
        except Exception as exc:  # pragma: no cover - a bug in the callback
            self.errors.error(f"worker {self.worker_id}: handling an answer failed", exc)


def _resolve(answer: asyncio.Future[Answer], value: Answer) -> None:
    """Resolve a future with an answer (its waiter may have been cancelled meanwhile)."""
    if not answer.done():
        answer.set_result(value)
