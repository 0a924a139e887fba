"""Running tasks: one execution per leased task, from its lease to its settled outcome.

An execution waits for one of the worker's slots (a task leased ahead waits for a
handler to end: ``slots``), calls the ``before_task`` hooks, runs the task's handler (async ones on
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

The handler's run is measured (a monotonic clock, from its start to its end) and
sent with the outcome as ``Task.run_seconds``, and with each heartbeat the run so far
(0 for a task that has not started): a time-fair queue charges the tenant that run,
not the trips to and from the server. The task's slot is free as soon as the handler
has ended; the execution then waits for the queue's answer and calls the
``after_task`` hooks with the outcome. A task leased while the worker is stopping is
given back without running.

What a task costs the worker is kept small, since a no-op task is all overhead: one
asyncio task runs the hooks and the handler and ends once the report is filed; the
answer settles the execution by a plain callback (no future, no further turn of the
loop); one timer (``Watchdog``) keeps the execution timeouts of every running async
handler; the two log lines skip logging's walk up the stack.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from fairque.client.aio import AsyncFairQueue
from fairque.config import WorkerConfig
from fairque.errors import PayloadTooLarge, SerializationError
from fairque.models import Task, TaskState
from fairque.worker.acker import (
    Acknowledger,
    Answer,
    Failed,
    Finished,
    GivenBack,
    Report,
)
from fairque.worker.context import Context, Fail, Retry, task_logger
from fairque.worker.execution import Execution, Stage, Watchdog
from fairque.worker.hooks import Hooks, Outcome, call_hooks
from fairque.worker.registry import Handler, Registry
from fairque.worker.slots import Slots
from fairque.worker.tasklog import log_end, log_line, stored_traceback
from fairque.worker.threads import ExecutionTimeout, HandlerThreads

log = logging.getLogger("fairque.worker")


#: (user, task name) pairs whose typical run an executor keeps at most
TYPICAL_KEPT = 10_000


class UnknownTaskError(Exception):
    """No handler is registered for the task's name."""


class Executor:
    """Starts executions and keeps track of them until their outcomes are settled.

    Each task is started with the queue it came from (its handler sees that queue
    in its context) and the acknowledger of that queue (where its outcome goes).

    An execution's asyncio task runs its hooks and its handler, files its report and
    ends; the acknowledger's answer settles the execution by a plain callback (and,
    with ``after_task`` hooks, in a task of its own that runs them).

    Args:
        registry: the handlers.
        config: the worker's settings (the default execution timeout).
        worker_id: the worker's id.
        hooks: the worker's hook objects (read at each call: they may be added later).
        threads: the pool that runs sync handlers.
        slots: the worker's places and slots (a handler starts in a free slot).
        stopping: True once the worker stops.
        on_end: called when an execution has ended, and when a running handler is
            about to end (``horizon`` seconds before it is expected to: the worker
            may lease its slot's next task ahead).
        horizon: how long before its expected end a handler counts as ending soon.
    """

    def __init__(
        self,
        registry: Registry,
        config: WorkerConfig,
        worker_id: str,
        hooks: Sequence[Hooks],
        threads: HandlerThreads,
        slots: Slots,
        stopping: Callable[[], bool],
        on_end: Callable[[], None],
        horizon: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.registry = registry
        self.config = config
        self.worker_id = worker_id
        self.hooks = hooks
        self.threads = threads
        self.slots = slots
        self._stopping = stopping
        self._on_end = on_end
        self.horizon = horizon
        # every execution not settled yet, in start order (a dict as an ordered set)
        self._executions: dict[Execution, None] = {}
        self._watchdog = Watchdog()
        self._all_settled: asyncio.Future[None] | None = None  # end_all waits on it
        self._unknown_names: set[str] = set()  # warned about once each
        #: a handler's run by (user, task name), a moving average (a tenant's tasks of one
        #: name tend to run alike; another tenant's may not); at most TYPICAL_KEPT kept
        self._typical: dict[tuple[str, str], float] = {}
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
        return sum(1 for e in self._executions if e.queue.queue == queue)

    @property
    def handling(self) -> bool:
        """True while any handler runs."""
        return any(e.stage is Stage.HANDLING for e in self._executions)

    def ending_within(self, horizon: float) -> int:
        """How many handler ends the running handlers are expected to reach within
        ``horizon`` seconds, judged by the runs of their user's tasks of that name seen
        so far (none seen, or one holding a slot of a cap, ``Task.lease_capped``: no end
        expected); a short handler's slot may end several times (it runs the next too)."""
        now, typical, n = time.monotonic(), self._typical, 0
        for e in self._executions:
            start = e.run_from
            if start is not None and e.stage is Stage.HANDLING and not e.task.lease_capped:
                took = typical.get((e.task.user_id, e.task.name))
                if took is not None:
                    left = horizon - max(start + took - now, 0.0)
                    if left >= 0:
                        n += 1 + int(left / max(took, 1e-4))
        return n

    def held(self, queue: AsyncFairQueue | None = None) -> list[Execution]:
        """Every execution (each task whose lease this worker holds) of ``queue`` (None:
        of every queue)."""
        return [e for e in self._executions if queue is None or e.queue is queue]

    def start(self, task: Task, queue: AsyncFairQueue, acker: Acknowledger) -> None:
        """Run ``task``, leased from ``queue``, in its own asyncio task; its outcome is
        reported to ``acker``."""
        execution = Execution(self, task, queue, acker)
        self._executions[execution] = None
        self.slots.take()
        # the loop's own create_task (any task factory applies), without asyncio's wrapper
        execution.job = asyncio.get_running_loop().create_task(self._execute(execution))

    def lease_lost(self, execution: Execution, canceled: bool = False) -> None:
        """The lease of ``execution``'s task is lost (the heartbeat found it so), or a
        cancel took it away: stop its handler, or forget it while it waits for a slot."""
        if execution not in self._executions:
            return
        task = execution.task
        execution.canceled = canceled
        if execution.stage is Stage.WAITING:
            why = "was canceled" if canceled else "lost its lease"
            log.warning("task %s %s before it started; dropping it", task.task_id, why)
            task.lease_token = None
            self._cancel(execution)
            if not execution.begun:  # its task will never run: nothing to wait for
                self._settle(execution)
            return
        if execution.stage is not Stage.HANDLING:
            return  # its handler ended: the queue will answer its report with the loss
        if canceled:
            log.info("task %s was canceled; stopping its handler", task.task_id)
        else:
            log.warning("task %s: lease lost (canceled or reclaimed); stopping it", task.task_id)
        task.lease_token = None
        self._stop_handler(execution)

    def canceled(self, queue: AsyncFairQueue, task_id: str, lease_token: str) -> bool:
        """A cancel took the lease ``lease_token`` of ``task_id`` (from ``queue``) away: stop
        its handler if this worker still runs it under that lease."""
        for execution in self._executions:
            task = execution.task
            if task.task_id == task_id and execution.queue is queue:
                if task.lease_token != lease_token:
                    return False  # an earlier lease of the task (or already stopped)
                self.lease_lost(execution, canceled=True)
                return True
        return False

    def _stop_handler(self, execution: Execution) -> None:
        """Tell a running handler to stop (``ctx.cancelled``): an async one is cancelled
        at once; a sync one is given up ``cancel_grace_seconds`` later unless it returns."""
        ctx, grace = execution.ctx, self.config.cancel_grace_seconds
        handler = self.registry.get(execution.task.name)
        if ctx is None or handler is None or handler.is_async or not grace:
            self._cancel(execution)
            return
        ctx._stop.set()
        execution.stopped = True
        asyncio.get_running_loop().call_later(grace, self._give_up, execution)

    def _give_up(self, execution: Execution) -> None:  # its grace is over: give up its thread
        if execution in self._executions and execution.stage is Stage.HANDLING:
            self._cancel(execution)

    def give_back_waiting(self) -> int:
        """The worker stops: the tasks leased ahead are given back without running
        (no attempt counted). Returns how many."""
        return self.slots.release_waiting()

    def interrupt(self) -> None:
        """Cancel every running handler: its task is given back without a failure."""
        for execution in list(self._executions):
            if execution.stage is Stage.HANDLING:
                self._cancel(execution)

    async def end_all(self, timeout: float) -> None:
        """Let every execution end within ``timeout`` seconds (the worker gives up).

        Call after the acknowledger gave up: executions waiting for an answer have it
        and end by themselves; the others are cancelled.
        """
        for execution in list(self._executions):
            if execution.stage is not Stage.REPORTING:
                self._cancel(execution)
                if not execution.begun:  # its task will never run: nothing to wait for
                    self._settle(execution)
        if self._executions:
            waiter = self._all_settled = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait({waiter}, timeout=timeout)
            finally:
                self._all_settled = None
        self._watchdog.close()

    def _cancel(self, execution: Execution) -> None:
        execution.stopped = True
        if execution.ctx is not None:
            execution.ctx._stop.set()
        if execution.job is not None:
            execution.job.cancel()

    def _free_slot(self, execution: Execution) -> None:
        stage = execution.stage
        if stage is not Stage.REPORTING:
            execution.stage = Stage.REPORTING
            self.slots.give(ran=stage is not Stage.WAITING)

    def _file(
        self,
        execution: Execution,
        report: Report,
        result: Any = None,
        error: BaseException | None = None,
        took: float = 0.0,
    ) -> None:
        """Hand ``report`` to the acknowledger; its answer settles the execution."""
        execution.report, execution.result, execution.error = report, result, error
        execution.took = took
        self._free_slot(execution)
        execution.acker.file(report, execution.answered)

    def _answered(self, execution: Execution, answer: Answer) -> None:
        """Turn the queue's answer into the task's outcome: count it, log the line that
        ends the execution, run the after_task hooks, settle."""
        report = execution.report
        state = answer if isinstance(answer, TaskState) else None
        if state is not None:
            if isinstance(report, Finished):
                self.processed_in[execution.queue.queue] += 1
            elif isinstance(report, Failed):
                self.failed_in[execution.queue.queue] += 1
        ctx = execution.ctx
        if ctx is None or report is None:  # given back without running: no line, no hooks
            self._settle(execution)
            return
        log_end(ctx, report, state, execution.error, execution.took, execution.canceled)
        if not self.hooks:
            self._settle(execution)
            return
        outcome = Outcome(
            state=state, result=execution.result, error=execution.error, lease_lost=state is None
        )
        execution.job = asyncio.create_task(self._after(execution, ctx, outcome))

    async def _after(self, execution: Execution, ctx: Context, outcome: Outcome) -> None:
        try:
            await call_hooks(self.hooks, "after_task", ctx, outcome)
        finally:
            self._settle(execution)

    def _settle(self, execution: Execution) -> None:
        """``execution`` is over: forget it."""
        if execution not in self._executions:
            return
        del self._executions[execution]
        self._free_slot(execution)
        execution.job = None
        waiter = self._all_settled
        if waiter is not None and not self._executions and not waiter.done():
            waiter.set_result(None)
        self._on_end()

    # ------------------------------------------------------------------ one execution
    async def _execute(self, execution: Execution) -> None:
        execution.begun = True
        try:
            task = execution.task
            task.run_seconds = 0.0  # until its handler starts
            if self._stopping():  # leased as the worker began to stop
                self._file(execution, GivenBack(task))
                return
            handler = self.registry.get(task.name)
            if handler is None and self.config.unknown_tasks == "give_back":
                self._warn_unknown(task.name)
                delay = self.config.unknown_task_delay_seconds
                # the wave that gives it back may fill the slot
                self._file(execution, GivenBack(task, delay=delay, unknown=True))
                return
            if await self.slots.enter():
                execution.stage = Stage.STARTING  # it holds a slot
            if execution.stage is Stage.WAITING or self._stopping():  # a stop while it waited
                self._file(execution, GivenBack(task))
                return
            ctx = Context(
                task, execution.queue, self.worker_id, task_logger(log, task, self.worker_id)
            )
            if self.hooks:
                await call_hooks(self.hooks, "before_task", ctx)
            execution.ctx = ctx
            log_line(
                ctx.logger, logging.DEBUG, "task %s started: %s for user %s, attempt %d",
                task.task_id, task.name, task.user_id, task.retry_count + 1,
            )  # fmt: skip
            began = execution.run_from = time.monotonic()
            self._expect_end((task.user_id, task.name))
            try:
                with execution.traced():
                    report, result, error = await self._handle(execution, ctx, handler)
            except asyncio.CancelledError:
                task.run_seconds = took = time.monotonic() - began
                self._file(execution, GivenBack(task), took=took)
                raise
            task.run_seconds = took = time.monotonic() - began
            self._learn((task.user_id, task.name), took)
            self._file(execution, report, result, error, took)
        except Exception as exc:  # pragma: no cover - a bug
            log.error("worker %s: an execution failed", self.worker_id, exc_info=exc)
        finally:
            if execution.report is None:  # ended before it filed a report: nothing to wait for
                self._settle(execution)

    def _learn(self, kind: tuple[str, str], took: float) -> None:
        """A handler of ``kind`` (user, task name) ran ``took`` seconds."""
        typical = self._typical
        seen = typical.get(kind)
        if seen is None and len(typical) >= TYPICAL_KEPT:
            typical.clear()  # many tenants: start learning again rather than grow
        typical[kind] = took if seen is None else seen * 0.8 + took * 0.2

    def _expect_end(self, kind: tuple[str, str]) -> None:
        """A handler of ``kind`` (user, task name) started: tell the worker when it is
        about to end (now, for a short one), so it can lease that slot's next task
        ahead."""
        took = self._typical.get(kind)
        if took is None or not self.slots.ahead:
            return
        soon = took - self.horizon()
        if soon <= 0:
            self._on_end()
        else:
            asyncio.get_running_loop().call_later(soon, self._on_end)

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
        self, execution: Execution, ctx: Context, handler: Handler | None
    ) -> tuple[Report, Any, BaseException | None]:
        """Run the handler under its execution timeout; how it ended as (report,
        result, error)."""
        task = execution.task
        budget = handler.max_retries if handler is not None else None
        execution.stage = Stage.HANDLING
        try:
            if handler is None:
                raise UnknownTaskError(f"no handler registered for task name {task.name!r}")
            args = handler.arguments(ctx, task.payload)
            timeout = self._timeout(handler, task)
            if not handler.is_async:
                result = await self.threads.run(handler.func, args, timeout, self._abandoned(task))
            else:
                # in this task, under the watchdog: no timer and no second task per call
                watchdog = self._watchdog
                watchdog.watch(execution, asyncio.get_running_loop().time() + timeout)
                try:
                    result = await handler.func(*args)
                except asyncio.CancelledError:
                    if execution.timed_out and not execution.stopped and _uncancel(execution):
                        raise ExecutionTimeout(timeout) from None
                    raise
                finally:
                    watchdog.forget(execution)
        except Retry as exc:
            return Failed(task, exc.reason, delay=exc.delay, budget=budget), None, exc
        except Fail as exc:
            details = exc.details
            if details is not None:
                try:  # a value the serializer cannot take is kept as its repr
                    execution.queue.encode_result(details)
                except SerializationError:
                    details = repr(details)
            failed = Failed(task, exc.message, exc.retry, budget=budget, kind=exc.kind,
                            details=details)  # fmt: skip
            return failed, None, exc
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
            encoded = execution.queue.encode_result(result)  # once; sent as it is
        except (SerializationError, PayloadTooLarge) as exc:
            kind = "too large" if isinstance(exc, PayloadTooLarge) else "not serializable"
            return Failed(task, f"result {kind}: {exc}", retry=False), None, exc
        return Finished(task, encoded), result, None

    def _timeout(self, handler: Handler, task: Task) -> float:
        if task.timeout is not None:
            return task.timeout
        if handler.timeout is not None:
            return handler.timeout
        return self.config.task_timeout_seconds

    def _abandoned(self, task: Task) -> Callable[[], None]:
        def warn() -> None:
            size, stuck = self.config.max_concurrent_tasks, self.threads.stuck
            log.warning(
                "worker %s: the handler of task %s (%s) still runs in its thread after it was "
                "given up; %d thread(s) stuck, %d of %d slot(s) usable until they return",
                self.worker_id, task.task_id, task.name, stuck, max(size - stuck, 0), size,
            )  # fmt: skip

        return warn


def _uncancel(execution: Execution) -> bool:
    """Withdraw the watchdog's cancel of ``execution``'s task; False when another
    cancel is pending as well (that one wins). Python 3.10 counts no cancels."""
    uncancel = getattr(execution.job, "uncancel", None)
    return uncancel is None or uncancel() == 0
