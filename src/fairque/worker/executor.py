"""Running tasks: one execution per leased task, from its lease to its settled outcome.

An execution calls the ``before_task`` hooks, runs the task's handler (async ones on
the event loop, sync ones in a pool thread) under its execution timeout, and turns
however the handler ended into a report for the acknowledger:

- it returned: ``Finished`` with the result, encoded once (a result that cannot be
  encoded fails the task for good: it would fail the same way again);
- it raised, timed out or raised ``Retry``: ``Failed``, judged by the handler's
  retry budget;
- it was cancelled (the worker stops, or its lease was lost): ``GivenBack``.

A task whose name has no handler in this worker is given back for another worker
without running, ready again after ``unknown_task_delay_seconds`` (the worker warns
once per name), or, with ``unknown_tasks: fail``, failed as a raising handler would.

Each execution logs one line when its handler starts and one when its outcome is
settled (task id, name, user, attempt, the handler's duration); a failure's line
carries its traceback, cut to ``TRACEBACK_CHARS``. The traceback of a raising
handler is also kept with the task (``Task.traceback``, ``STORED_FRAMES`` frames).

The task's slot is free as soon as the handler has ended; the execution then waits
for the queue's answer and calls the ``after_task`` hooks with the outcome. A task
leased while the worker is stopping is given back without running.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from fairque.aio import AsyncFairQueue
from fairque.config import WorkerConfig
from fairque.errors import SerializationError
from fairque.models import Task, TaskState
from fairque.worker.acker import (
    Acknowledger,
    Failed,
    Finished,
    GivenBack,
    Report,
)
from fairque.worker.context import Context, Retry, task_logger
from fairque.worker.hooks import Hooks, Outcome, call_hooks
from fairque.worker.registry import Handler, Registry
from fairque.worker.threads import ExecutionTimeout, HandlerThreads

log = logging.getLogger("fairque.worker")

#: The most frames and characters of a failure's traceback in its log line (the
#: innermost are kept: a runaway recursion must not flood the log).
TRACEBACK_FRAMES = 30
TRACEBACK_CHARS = 8000

#: The most frames of a failure's traceback kept with the task (the queue keeps its
#: last 64 KiB).
STORED_FRAMES = 100

#: ``asyncio.timeout`` (Python 3.11+), which bounds a handler inside the running task.
_TIMEOUT_SCOPE: Any = getattr(asyncio, "timeout", None)


class UnknownTaskError(Exception):
    """No handler is registered for the task's name."""


class Stage(enum.Enum):
    """Where an execution is; the first two hold one of the worker's slots."""

    STARTING = "starting"  # leased; the before_task hooks run
    HANDLING = "handling"  # inside its handler: a stop or a lost lease cancels it
    REPORTING = "reporting"  # the handler ended; the outcome waits for the queue's answer


class Execution:
    """One leased task on this worker, the queue it came from and where its outcome goes."""

    __slots__ = ("acker", "queue", "stage", "task")

    def __init__(self, task: Task, queue: AsyncFairQueue, acker: Acknowledger) -> None:
        self.task = task
        self.queue = queue
        self.acker = acker
        self.stage = Stage.STARTING


class Executor:
    """Starts executions and keeps track of them until their outcomes are settled.

    Each task is started with the queue it came from (its handler sees that queue
    in its context) and the acknowledger of that queue (where its outcome goes).

    Args:
        registry: the handlers.
        config: the worker's settings (the default execution timeout).
        worker_id: the worker's id.
        hooks: the worker's hook objects (read at each call: they may be added later).
        threads: the pool that runs sync handlers.
        stopping: True once the worker stops.
        on_end: called when an execution has ended.
    """

    def __init__(
        self,
        registry: Registry,
        config: WorkerConfig,
        worker_id: str,
        hooks: Sequence[Hooks],
        threads: HandlerThreads,
        stopping: Callable[[], bool],
        on_end: Callable[[], None],
    ) -> None:
        self.registry = registry
        self.config = config
        self.worker_id = worker_id
        self.hooks = hooks
        self.threads = threads
        self._stopping = stopping
        self._on_end = on_end
        self._executions: dict[asyncio.Task[None], Execution] = {}
        self._unknown_names: set[str] = set()  # warned about once each
        #: executions holding a slot: not started yet, or inside their handler
        self.slots_taken = 0
        #: tasks the queues accepted as finished / failed attempts they recorded, by queue
        self.processed_in: Counter[str] = Counter()
        self.failed_in: Counter[str] = Counter()

    # ------------------------------------------------------------------ bookkeeping
    @property
    def in_flight(self) -> int:
        """Executions whose outcome is not settled yet."""
        return len(self._executions)

    @property
    def processed(self) -> int:
        """Tasks the queues accepted as finished."""
        return sum(self.processed_in.values())

    @property
    def failed(self) -> int:
        """Failed attempts the queues recorded (retried or FAILED)."""
        return sum(self.failed_in.values())

    def in_flight_in(self, queue: str) -> int:
        """Executions of tasks from ``queue`` whose outcome is not settled yet."""
        return sum(1 for e in self._executions.values() if e.queue.queue == queue)

    @property
    def handling(self) -> bool:
        """True while any handler runs."""
        return any(e.stage is Stage.HANDLING for e in self._executions.values())

    def held(
        self, queue: AsyncFairQueue | None = None
    ) -> list[tuple[asyncio.Task[None], Execution]]:
        """Every execution (each task whose lease this worker holds) of ``queue`` (None:
        of every queue), with the asyncio task that runs it."""
        return [
            (job, e) for job, e in self._executions.items() if queue is None or e.queue is queue
        ]

    def start(self, task: Task, queue: AsyncFairQueue, acker: Acknowledger) -> None:
        """Run ``task``, leased from ``queue``, in its own asyncio task; its outcome is
        reported to ``acker``."""
        execution = Execution(task, queue, acker)
        job = asyncio.create_task(self._execute(execution))
        self._executions[job] = execution
        self.slots_taken += 1
        job.add_done_callback(self._ended)

    def lease_lost(self, job: asyncio.Task[None]) -> None:
        """The heartbeat found the lease of ``job``'s task lost: stop its handler."""
        execution = self._executions.get(job)
        if execution is None or execution.stage is not Stage.HANDLING:
            return  # its handler ended: the queue will answer its report with the loss
        task = execution.task
        log.warning("task %s: lease lost (canceled or reclaimed); stopping it", task.task_id)
        task.lease_token = None
        job.cancel()

    def interrupt(self) -> None:
        """Cancel every running handler: its task is given back without a failure."""
        for job, execution in list(self._executions.items()):
            if execution.stage is Stage.HANDLING:
                job.cancel()

    async def end_all(self, timeout: float) -> None:
        """Let every execution end within ``timeout`` seconds (the worker gives up).

        Call after the acknowledger gave up: executions waiting for an answer have it
        and end by themselves; the others are cancelled.
        """
        for job, execution in list(self._executions.items()):
            if execution.stage is not Stage.REPORTING:
                job.cancel()
        if self._executions:
            await asyncio.wait(set(self._executions), timeout=timeout)

    def _free_slot(self, execution: Execution) -> None:
        if execution.stage is not Stage.REPORTING:
            execution.stage = Stage.REPORTING
            self.slots_taken -= 1

    def _ended(self, job: asyncio.Task[None]) -> None:
        execution = self._executions.pop(job, None)
        if execution is not None:
            self._free_slot(execution)
        if not job.cancelled() and job.exception() is not None:  # pragma: no cover - a bug
            log.error("worker %s: an execution failed", self.worker_id, exc_info=job.exception())
        self._on_end()

    # ------------------------------------------------------------------ one execution
    async def _execute(self, execution: Execution) -> None:
        task = execution.task
        if self._stopping():  # leased as the worker began to stop
            await self._settle(execution, GivenBack(task))
            return
        if task.name not in self.registry and self.config.unknown_tasks == "give_back":
            self._warn_unknown(task.name)
            self._free_slot(execution)  # the wave that gives it back may fill the slot
            delay = self.config.unknown_task_delay_seconds
            await self._settle(execution, GivenBack(task, delay=delay, unknown=True))
            return
        ctx = Context(task, execution.queue, self.worker_id, task_logger(log, task, self.worker_id))
        await call_hooks(self.hooks, "before_task", ctx)
        ctx.logger.info(
            "task %s started: %s for user %s, attempt %d",
            task.task_id, task.name, task.user_id, ctx.attempt,
        )  # fmt: skip
        began = time.monotonic()
        try:
            report, result, error = await self._handle(execution, ctx)
        except asyncio.CancelledError:
            took = time.monotonic() - began
            outcome = await self._settle(execution, GivenBack(task))
            _log_end(ctx, GivenBack(task), outcome, took)
            await call_hooks(self.hooks, "after_task", ctx, outcome)
            raise
        took = time.monotonic() - began
        outcome = await self._settle(execution, report, result, error)
        _log_end(ctx, report, outcome, took)
        await call_hooks(self.hooks, "after_task", ctx, outcome)

    def _warn_unknown(self, name: str) -> None:
        if name in self._unknown_names:
            return
        self._unknown_names.add(name)
        handles = ", ".join(sorted(self.registry)) or "none"
        log.warning(
            "task name %r has no handler in worker %s (handles: %s); its tasks are given "
            "back for other workers",
            name, self.worker_id, handles,
        )  # fmt: skip

    async def _handle(
        self, execution: Execution, ctx: Context
    ) -> tuple[Report, Any, BaseException | None]:
        """Run the handler; how it ended as (report, result, error)."""
        task = execution.task
        handler = self.registry.get(task.name)
        budget = handler.max_retries if handler is not None else None
        execution.stage = Stage.HANDLING
        try:
            if handler is None:
                raise UnknownTaskError(f"no handler registered for task name {task.name!r}")
            result = await self._invoke(handler, ctx, task)
        except Retry as exc:
            return Failed(task, exc.reason, delay=exc.delay, budget=budget), None, exc
        except ExecutionTimeout as exc:
            reason = f"timeout after {exc.seconds:g}s"
            return Failed(task, reason, budget=budget, kind="timeout"), None, exc
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
            return Failed(task, reason, budget=budget, traceback=stored_traceback(exc)), None, exc
        finally:
            self._free_slot(execution)
        if result is None:
            return Finished(task), None, None
        try:
            encoded = execution.queue.ops.encode_result(result)  # once; sent as it is
        except SerializationError as exc:
            reason = f"result not serializable: {exc}"
            return Failed(task, reason, retry=False), None, exc
        return Finished(task, encoded), result, None

    async def _settle(
        self,
        execution: Execution,
        report: Report,
        result: Any = None,
        error: BaseException | None = None,
    ) -> Outcome:
        """File ``report`` and turn the queue's answer into the task's outcome."""
        # a cancel while this waits leaves the report with the acknowledger: it is sent
        answer = await execution.acker.report(report)
        if isinstance(answer, TaskState):
            if isinstance(report, Finished):
                self.processed_in[execution.queue.queue] += 1
            elif isinstance(report, Failed):
                self.failed_in[execution.queue.queue] += 1
            return Outcome(state=answer, result=result, error=error)
        return Outcome(state=None, result=result, error=error, lease_lost=True)

    def _timeout(self, handler: Handler, task: Task) -> float:
        if task.timeout is not None:
            return task.timeout
        if handler.timeout is not None:
            return handler.timeout
        return self.config.task_timeout_seconds

    async def _invoke(self, handler: Handler, ctx: Context, task: Task) -> Any:
        args = handler.arguments(ctx, task.payload)
        timeout = self._timeout(handler, task)
        if not handler.is_async:
            return await self.threads.run(handler.func, args, timeout, self._abandoned(task))
        if _TIMEOUT_SCOPE is not None:
            # run in this task: no second task and no extra turn of the loop per call
            scope = _TIMEOUT_SCOPE(timeout)
            try:
                async with scope:
                    return await handler.func(*args)
            except TimeoutError:
                if scope.expired():
                    raise ExecutionTimeout(timeout) from None
                raise  # the handler's own TimeoutError
        running = asyncio.ensure_future(handler.func(*args))  # pragma: no cover - Python 3.10
        try:  # pragma: no cover
            done, _ = await asyncio.wait({running}, timeout=timeout)
        except asyncio.CancelledError:  # pragma: no cover
            running.cancel()
            raise
        if not done:  # pragma: no cover
            running.cancel()
            raise ExecutionTimeout(timeout)
        return running.result()  # pragma: no cover

    def _abandoned(self, task: Task) -> Callable[[], None]:
        def warn() -> None:
            size, stuck = self.config.max_concurrent_tasks, self.threads.stuck
            log.warning(
                "worker %s: the handler of task %s (%s) still runs in its thread after it was "
                "given up; %d thread(s) stuck, %d of %d slot(s) usable until they return",
                self.worker_id, task.task_id, task.name, stuck, max(size - stuck, 0), size,
            )  # fmt: skip

        return warn


def _log_end(ctx: Context, report: Report, outcome: Outcome, took: float) -> None:
    """The line that ends a task's execution on this worker."""
    task = ctx.task
    about = f"{task.name} for user {task.user_id}, attempt {ctx.attempt}, {took:.3f}s"
    state = outcome.state
    if state is None:  # the lease was lost, or the stopping worker gave up reporting
        what = {Finished: "finished", Failed: "failed"}.get(type(report), "was given back")
        ctx.logger.warning(
            "task %s %s (%s) but the queue did not record it (its lease was lost, or the "
            "worker left before reporting it)",
            task.task_id, what, about,
        )  # fmt: skip
    elif isinstance(report, Finished):
        ctx.logger.info("task %s finished (%s)", task.task_id, about)
    elif isinstance(report, GivenBack):
        ctx.logger.info("task %s given back (%s), now %s", task.task_id, about, state.value)
    else:
        error = outcome.error
        level = logging.ERROR if state is TaskState.FAILED else logging.WARNING
        then = "failed for good" if state is TaskState.FAILED else f"will retry ({state.value})"
        if isinstance(error, Retry) and state is not TaskState.FAILED:
            level = logging.INFO  # the handler asked for it
        if isinstance(error, (Retry, ExecutionTimeout)) or error is None:
            ctx.logger.log(level, "task %s %s: %s (%s)", task.task_id, then, report.reason, about)
        else:
            ctx.logger.log(
                level, "task %s %s: %s (%s)\n%s",
                task.task_id, then, report.reason, about, bounded_traceback(error),
            )  # fmt: skip


def bounded_traceback(error: BaseException) -> str:
    """``error``'s traceback, its innermost ``TRACEBACK_FRAMES`` frames, at most
    ``TRACEBACK_CHARS`` characters (the end is kept)."""
    lines = traceback.format_exception(
        type(error), error, error.__traceback__, limit=-TRACEBACK_FRAMES
    )
    text = "".join(lines).rstrip("\n")
    if len(text) > TRACEBACK_CHARS:
        text = "...\n" + text[-TRACEBACK_CHARS:]
    return text


def stored_traceback(error: BaseException) -> str:
    """``error``'s traceback as kept with its task: its innermost ``STORED_FRAMES``
    frames, causes included, as ``traceback.format_exc()`` writes it."""
    lines = traceback.format_exception(
        type(error), error, error.__traceback__, limit=-STORED_FRAMES
    )
    return "".join(lines).rstrip("\n")
