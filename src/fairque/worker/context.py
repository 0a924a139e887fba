"""What a handler sees while it runs, and the exception that asks for a retry."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fairque.models import Task

if TYPE_CHECKING:
    from fairque.client.aio import AsyncFairQueue


class Retry(Exception):
    """Raised by a handler to retry its task (after ``delay`` seconds, else the backoff).

    The retry counts against the task's ``max_retries``; when none is left the task
    is FAILED with ``reason`` as its error.
    """

    def __init__(self, delay: float | None = None, reason: str = "retry requested") -> None:
        super().__init__(reason)
        if delay is not None and delay < 0:
            raise ValueError("Retry delay must not be negative")
        self.delay = delay
        self.reason = reason


class Fail(Exception):
    """Raised by a handler to fail its attempt with a message, a kind and details of
    its own choosing.

    ``retry=False`` fails the task for good at once; ``retry=True`` retries it (after
    the backoff) while its retry budget lasts, as any other exception would. ``kind``
    is kept as the task's ``failure_reason`` (e.g. ``"timeout"``) and ``details`` (any
    value the queue's serializer takes, else its ``repr``) beside the error.
    """

    def __init__(
        self, message: str, *, retry: bool = True, kind: str | None = None, details: Any = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retry = retry
        self.kind = kind
        self.details = details


@dataclass
class Context:
    """The running task, its attempt number, the queue and a logger bound to the task."""

    task: Task
    queue: AsyncFairQueue
    worker_id: str
    logger: logging.LoggerAdapter[logging.Logger]
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def cancelled(self) -> bool:
        """True once the worker stops this task's handler: the task was canceled
        (``cancel`` from any client reaches the worker at once), or its lease was
        lost. An async handler is cancelled as well (``asyncio.CancelledError``); a
        sync one should poll this (or sleep with ``wait_cancelled``) and return: its
        thread is given up ``cancel_grace_seconds`` later. Whatever it returns then
        is not recorded (the task is CANCELED, or another worker has it)."""
        return self._stop.is_set()

    def wait_cancelled(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking as soon as the handler is told to stop;
        answers ``cancelled`` (for sync handlers: a sleep a cancel cuts short)."""
        return self._stop.wait(seconds)

    @property
    def attempt(self) -> int:
        """1 for the first attempt, 2 for the first retry..."""
        return self.task.retry_count + 1

    @property
    def task_id(self) -> str:
        """The running task's id."""
        return self.task.task_id or ""

    @property
    def user_id(self) -> str:
        """The running task's user."""
        return self.task.user_id

    def progress(self, fraction: float, message: str = "") -> None:
        """Report how far the task got: ``fraction`` from 0 to 1 and a short ``message``.

        No round trip of its own: the worker's next heartbeat carries it (one every
        ``heartbeat_interval_seconds``, a third of the lease by default), and from then
        ``get()``, the HTTP API, ``fairque task`` and the dashboard show it. Callable
        from async and sync handlers alike; a later report replaces an earlier one not
        yet sent.

        Raises:
            ValidationError: ``fraction`` is not a number from 0 to 1, or ``message`` is
                too long (1,000 characters) or holds control characters.
        """
        self.task.report_progress(fraction, message)

    async def upstream_results(self) -> dict[str, Any]:
        """The results of the tasks this task depends on, by task id.

        Every upstream FINISHED before this task was released; a result that was
        not kept (or has expired) reads as None.
        """
        return {dep: await self.queue.result(dep) for dep in self.task.depends_on}


def task_logger(base: logging.Logger, task: Task, worker_id: str) -> logging.LoggerAdapter[Any]:
    """A logger adapter whose records carry the task, user and worker ids."""
    extra = {"task_id": task.task_id, "user_id": task.user_id, "worker_id": worker_id}
    return logging.LoggerAdapter(base, extra)
