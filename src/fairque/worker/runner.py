"""The worker: leases tasks fairly, runs their handlers, heartbeats, shuts down cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import random
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

from fairque.aio import AsyncFairQueue
from fairque.config import WorkerConfig
from fairque.errors import LeaseLost, SerializationError
from fairque.models import Task, TaskState, WorkerInfo
from fairque.ops import EncodedResult, request_id
from fairque.worker.context import Context, Retry, task_logger
from fairque.worker.hooks import Hooks, Outcome
from fairque.worker.link import CONNECTION_ERRORS, ErrorLog, Link, describe
from fairque.worker.registry import Handler, Registry, default_registry
from fairque.worker.threads import ExecutionTimeout, HandlerThreads

log = logging.getLogger("fairque.worker")
T = TypeVar("T")

#: Seconds a stopping worker keeps resending held outcomes after its grace period.
OUTCOME_PATIENCE = 10.0
#: Maintenance bounds: DEFERRED tasks examined per script call, calls per round, and the
#: batch of registry entries and worker records ``maintain`` looks at per call.
CLEANUP_BATCH = 500
CLEANUP_STEPS = 10
MAINTAIN_BATCH = 1000

Ack = tuple[Task, Any, "asyncio.Future[bool]"]


class UnknownTaskError(Exception):
    """No handler is registered for the task's name."""


#: ``asyncio.timeout`` (Python 3.11+), which bounds a handler inside the running task.
_TIMEOUT_SCOPE: Any = getattr(asyncio, "timeout", None)


async def _wait_event(event: asyncio.Event, timeout: float | None) -> None:
    """Wait until ``event`` is set, at most ``timeout`` seconds (None: no limit).

    Without a timeout (the driver's usual case) no task is created.
    """
    if event.is_set():
        return
    if timeout is None:
        await event.wait()
        return
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=timeout)
    finally:
        waiter.cancel()


class Worker:
    """Runs registered handlers for the tasks of one queue.

    Async handlers run on the worker's event loop; sync handlers in a thread pool
    with the caller's context variables. Leases of in-flight tasks are extended
    by a heartbeat; each task has an execution timeout, counted from the moment its
    handler starts. ``SIGTERM``/``SIGINT`` stop fetching and let in-flight tasks
    finish within ``shutdown_grace_seconds``; tasks still running then are given
    back without counting a failure. A second signal gives everything back at once.

    A sync handler over its timeout cannot be interrupted: its thread stays busy
    until the function returns, and the worker leases that many fewer tasks
    meanwhile (``threads_stuck``, also in the worker's registered info).

    When the server cannot be reached the worker waits (capped exponential backoff
    with jitter), holds the outcomes it could not report and sends them when the
    server is back; at start it waits up to ``wait_for_server_seconds`` for it.

    Args:
        queue: the queue to serve.
        registry: the handlers (default: the registry behind ``fairque.task``).
        config: worker settings (defaults when None).
        hooks: objects whose hook methods are called around the worker's life.
    """

    def __init__(
        self,
        queue: AsyncFairQueue,
        registry: Registry | None = None,
        config: WorkerConfig | None = None,
        hooks: Sequence[Hooks] = (),
    ) -> None:
        self.queue = queue
        self.registry = registry if registry is not None else default_registry
        self.config = config or WorkerConfig()
        self.hooks = list(hooks)
        self.id = self.config.id
        lease = self.config.lease_seconds or queue.options.lease_seconds
        self.lease_seconds = lease
        self.heartbeat_seconds = self.config.heartbeat_interval_seconds or max(lease / 3, 0.05)
        self.processed = 0
        self.failed = 0
        self.started_at = datetime.now(timezone.utc)
        #: the supervisor's pid: the worker stops when its parent is no longer that process
        self.parent_pid: int | None = None
        self.link = Link(f"worker {self.id}", log)
        self._errors = ErrorLog(log)
        # the id of a lease request whose reply a connection error swallowed: the next
        # lease request resends it, so the server returns what it leased then
        self._lost_request: str | None = None
        # every job until it ends / jobs holding a slot / jobs inside their handler
        self._running: dict[asyncio.Task[None], Task] = {}
        self._executing: set[asyncio.Task[None]] = set()
        self._handling: set[asyncio.Task[None]] = set()
        self._acks: list[Ack] = []
        self._stopping: asyncio.Event | None = None
        self._wakeup: asyncio.Event | None = None
        self._poke = asyncio.Event()  # replaced on each stop request: ends backoff pauses
        self._fetch: asyncio.Task[None] | None = None
        self._reserved = 0  # slots an open idle fetch may fill
        self._signals = 0
        self._closing = False
        self._grace_deadline: float | None = None
        self._give_up_at = float("inf")
        self._threads = HandlerThreads(self.config.max_concurrent_tasks, self._thread_returned)
        self._cleanup_offset = 0  # where the next maintenance round resumes its walk

    # ------------------------------------------------------------------ control
    @property
    def threads_busy(self) -> int:
        """Sync handlers still running in threads (their tasks may have been given back)."""
        return self._threads.busy

    @property
    def threads_stuck(self) -> int:
        """Handler threads still running for tasks the worker gave up on (timeout, stop)."""
        return self._threads.stuck

    @property
    def in_flight(self) -> int:
        """Tasks currently running."""
        return len(self._running)

    def request_stop(self) -> None:
        """First call: stop fetching and drain gracefully. Second call: stop at once."""
        self._signals += 1
        if self._stopping is not None:
            self._stopping.set()
        if self._wakeup is not None:
            self._wakeup.set()
        poke, self._poke = self._poke, asyncio.Event()
        poke.set()
        if self._signals >= 2:
            log.warning("worker %s: second stop request, giving back in-flight tasks", self.id)
            self._give_up_at = min(self._give_up_at, time.monotonic() + 1.0)
            self._interrupt_handlers()

    def run(self, stop_signals: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGINT)) -> None:
        """Run until stopped by one of ``stop_signals`` (blocking; for the CLI)."""
        asyncio.run(self.run_async(install_signals=True, stop_signals=stop_signals))

    async def run_async(
        self,
        *,
        install_signals: bool = False,
        stop_signals: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGINT),
    ) -> None:
        """Serve the queue until ``request_stop`` (or a signal when ``install_signals``).

        Raises:
            redis.ConnectionError: the server could not be reached within
                ``wait_for_server_seconds`` of the start.
        """
        loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._wakeup = asyncio.Event()
        self._threads.bind(loop)
        if self._signals:
            self._stopping.set()
        installed = list(stop_signals) if install_signals else []
        for sig in installed:
            loop.add_signal_handler(sig, self.request_stop)
        try:
            if not await self._connect():
                return
            helpers = [
                asyncio.create_task(self._heartbeat_loop()),
                asyncio.create_task(self._maintenance_loop()),
            ]
            await self._hook("on_startup", self)
            log.info("worker %s serving queue %r", self.id, self.queue.queue)
            try:
                await self._drive()
            finally:
                await self._end_idle_fetch()
                await self._stop_helpers(helpers)
                await self._hook("on_shutdown", self)
                await self._unregister()
                log.info(
                    "worker %s stopped (%d processed, %d failed)",
                    self.id, self.processed, self.failed,
                )  # fmt: skip
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
            self._threads.shutdown()

    async def _connect(self) -> bool:
        """Register, waiting up to ``wait_for_server_seconds`` for the server; False if stopped."""
        assert self._stopping is not None
        deadline = time.monotonic() + self.config.wait_for_server_seconds
        while not self._stopping.is_set():
            try:
                await self._beat()
            except CONNECTION_ERRORS as exc:
                wait = self.config.wait_for_server_seconds
                first = f"cannot reach the server; waiting up to {wait:g}s"
                delay = self.link.failed(exc, first=first)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    log.error(
                        "worker %s: the server did not answer in time (%s)", self.id, describe(exc)
                    )
                    raise
                await self._pause(min(delay, remaining))
                continue
            self.link.ok()
            return True
        return False

    async def _unregister(self) -> None:
        try:
            await self.queue.unregister_worker(self.id)
        except CONNECTION_ERRORS as exc:
            log.warning("worker %s: could not unregister (%s)", self.id, describe(exc))
        except Exception as exc:  # pragma: no cover - a dying connection
            self._errors.error(f"worker {self.id}: could not unregister", exc)

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less when a stop is requested meanwhile."""
        await _wait_event(self._poke, seconds)

    async def _stop_helpers(self, helpers: list[asyncio.Task[None]]) -> None:
        """Stop the heartbeat and maintenance, even if a cancellation gets lost.

        A cancel that lands while redis-py is sending a command can be swallowed on
        Python < 3.12, so the loops also watch ``_closing`` and the cancel is repeated.
        """
        self._closing = True
        pending = {h for h in helpers if not h.done()}
        for _ in range(50):
            if not pending:
                break
            for helper in pending:
                helper.cancel()
            _, pending = await asyncio.wait(pending, timeout=0.2)
        if pending:  # pragma: no cover - a helper stuck in a call that never returns
            log.warning("worker %s: abandoning %d background task(s)", self.id, len(pending))
        for helper in helpers:
            if helper.done() and not helper.cancelled() and helper.exception() is not None:
                log.warning("worker %s: background task failed: %r", self.id, helper.exception())

    # ------------------------------------------------------------------ driving
    def _free_slots(self) -> int:
        """Tasks the worker can start now and has not asked for yet (never negative).

        A slot is taken by a task whose handler runs or whose failure is being
        reported, by a handler thread the worker gave up on, and by an idle fetch
        that may still bring tasks.
        """
        cfg = self.config
        busy = len(self._executing) + self._threads.stuck + self._reserved
        return max(0, min(cfg.max_concurrent_tasks - busy, cfg.batch_size))

    async def _drive(self) -> None:
        """Acknowledge finished tasks and lease new ones, one round trip per wave.

        Each turn sends every pending completion together with the request for as
        many tasks as there are free slots (``complete_and_pop``). When that finds
        nothing, an idle fetch blocks on the queue's wake-up list for the same
        slots. Finishing handlers, the idle fetch and stop requests set
        ``_wakeup``; a call that cannot reach the server is retried after the
        link's backoff, with its completions held.
        """
        assert self._stopping is not None
        assert self._wakeup is not None
        while True:
            self._wakeup.clear()
            stopping = self._stopping.is_set()
            if stopping and not await self._draining():
                return
            acks, self._acks = self._acks, []
            want = 0 if stopping else self._free_slots()
            if acks or want:
                leased = await self._exchange(acks, want)
                if leased is None:
                    await self._pause(self._until_deadline(self.link.delay()))
                    continue
                for task in leased:
                    self._spawn(task)
                if leased or (acks and not want):
                    continue  # more may be ready, or more acks came in meanwhile
                free = self._free_slots()  # an idle fetch may have ended meanwhile
                if free and not self._fetching:
                    self._start_idle_fetch(free)
            await self._wait_for_wakeup()

    async def _draining(self) -> bool:
        """One turn of a graceful stop; False when the worker may return."""
        if not self._running:
            return False
        now = time.monotonic()
        if self._grace_deadline is None:
            # end an idle fetch now, while its lease can find nothing we give back
            await self._wake_idle_fetch()
            grace = self.config.shutdown_grace_seconds
            self._grace_deadline = now + grace
            self._give_up_at = min(self._give_up_at, self._grace_deadline + OUTCOME_PATIENCE)
            log.info(
                "worker %s: waiting up to %.1fs for %d task(s)", self.id, grace, len(self._running)
            )
        elif now >= self._grace_deadline and self._handling:
            self._interrupt_handlers()
        if now >= self._give_up_at:
            held = len(self._running)
            log.warning(
                "worker %s: could not report %d outcome(s) before exiting; their leases will "
                "expire and the tasks will run again",
                self.id, held,
            )  # fmt: skip
            for job in list(self._running):
                job.cancel()
            await asyncio.wait(set(self._running), timeout=1.0)
            self._acks.clear()
            return False
        return True

    def _until_deadline(self, seconds: float) -> float:
        """``seconds``, shortened to end at the stop's next deadline (grace, giving up)."""
        now = time.monotonic()
        ends = [t - now for t in (self._grace_deadline, self._give_up_at) if t and t > now]
        return min([seconds, *ends])

    async def _wait_for_wakeup(self) -> None:
        assert self._wakeup is not None
        timeout: float | None = None
        if self._grace_deadline is not None:
            now = time.monotonic()
            ends = [t for t in (self._grace_deadline, self._give_up_at) if t > now]
            timeout = min(ends) - now if ends else 0.05
        await _wait_event(self._wakeup, timeout)

    def _interrupt_handlers(self) -> None:
        """Cancel every running handler: its task is given back without a failure."""
        for job in list(self._handling):
            job.cancel()

    async def _exchange(self, acks: list[Ack], want: int) -> list[Task] | None:
        """One ``complete_and_pop`` call; None (completions held) when it failed."""
        cfg = self.config
        req = self._lease_request() if want > 0 else None
        try:
            won, leased = await self.queue.complete_and_pop(
                [(task, result) for task, result, _ in acks],
                want,
                self.id,
                self.lease_seconds,
                assigned_users=cfg.assigned_users or None,
                steal_targets=cfg.steal_targets or None,
                request_id=req,
            )
        except CONNECTION_ERRORS as exc:
            self._acks[:0] = acks
            self._lost_request = req or self._lost_request
            self.link.failed(exc)
            return None
        except Exception as exc:
            self._acks[:0] = acks
            self._errors.error(f"worker {self.id}: queue call failed; retrying", exc)
            self.link.failures += 1  # back off as for an outage
            return None
        self.link.ok()
        for (_, _, future), ok in zip(acks, won, strict=True):
            if not future.done():
                future.set_result(ok)
        return leased

    def _spawn(self, task: Task) -> None:
        job = asyncio.create_task(self._execute(task))
        self._running[job] = task
        self._executing.add(job)
        job.add_done_callback(self._finished)

    def _finished(self, job: asyncio.Task[None]) -> None:
        self._running.pop(job, None)
        self._executing.discard(job)
        self._handling.discard(job)
        if self._wakeup is not None:
            self._wakeup.set()

    def _thread_returned(self) -> None:
        """A handler thread the worker had given up on returned: its slot is free again."""
        log.info(
            "worker %s: a stuck handler thread returned (%d still stuck)",
            self.id,
            self.threads_stuck,
        )
        if self._wakeup is not None:
            self._wakeup.set()

    # ------------------------------------------------------------------ idle fetch
    @property
    def _fetching(self) -> bool:
        return self._fetch is not None and not self._fetch.done()

    def _start_idle_fetch(self, count: int) -> None:
        # the fetch owns its leases until it has spawned them: a stop waits for it
        # (``_end_idle_fetch``) instead of cancelling it while a reply is on the way
        self._reserved = count
        self._fetch = asyncio.create_task(self._fetch_idle(count))

    async def _fetch_idle(self, count: int) -> None:
        """Block on the wake-up list, then lease up to ``count`` tasks: one round trip."""
        assert self._wakeup is not None
        assert self._stopping is not None
        cfg = self.config
        leased: list[Task] = []
        req: str | None = None
        try:
            timeout = cfg.poll_interval_seconds
            due = await self.queue.next_wakeup()
            if due is not None:
                timeout = min(timeout, max(due, 0.001))
            req = self._lease_request()
            leased = await self.queue.wait_and_pop(
                timeout,
                count,
                self.id,
                self.lease_seconds,
                assigned_users=cfg.assigned_users or None,
                steal_targets=cfg.steal_targets or None,
                request_id=req,
            )
        except CONNECTION_ERRORS as exc:
            self._lost_request = req or self._lost_request
            await self._pause(self.link.failed(exc))
        except Exception as exc:
            self._errors.error(f"worker {self.id}: waiting for work failed", exc)
            await self._pause(min(cfg.poll_interval_seconds, 1.0))
        else:
            self.link.ok()
        finally:
            self._reserved = 0
        if self._stopping.is_set():
            for task in leased:
                await self._give_back(task)
        else:
            for task in leased:
                self._spawn(task)
        self._wakeup.set()

    def _lease_request(self) -> str:
        """The id of the next lease request: the one a connection error left unanswered,
        taken by one call only, or a new one."""
        req, self._lost_request = self._lost_request or request_id(), None
        return req

    async def _wake_idle_fetch(self) -> bool:
        """Wake an idle fetch in progress; False when there is none."""
        if not self._fetching:
            return False
        with contextlib.suppress(Exception):
            await self.queue.wake(1)  # another idle worker may take the token: hence the wait
        return True

    async def _end_idle_fetch(self) -> None:
        """Let an idle fetch in progress end: wake it, then wait for its reply."""
        fetch = self._fetch
        if not await self._wake_idle_fetch() or fetch is None:
            return
        _, pending = await asyncio.wait({fetch}, timeout=self.config.poll_interval_seconds + 1)
        if pending:  # pragma: no cover - the server did not answer within the wait's bound
            fetch.cancel()
            await asyncio.wait(pending, timeout=1.0)

    # ------------------------------------------------------------------ heartbeat
    def info(self) -> WorkerInfo:
        """What the worker registers about itself."""
        return WorkerInfo(
            worker_id=self.id,
            queue=self.queue.queue,
            host=socket.gethostname(),
            pid=os.getpid(),
            started_at=self.started_at,
            concurrency=self.config.max_concurrent_tasks,
            in_flight=len(self._running),
            processed=self.processed,
            failed=self.failed,
            threads_stuck=self.threads_stuck,
        )

    async def _beat(self) -> None:
        ttl = max(self.heartbeat_seconds * 5, 10)
        await self.queue.register_worker(self.info(), ttl_seconds=ttl)

    async def _heartbeat_loop(self) -> None:
        while not self._closing:
            await asyncio.sleep(self.heartbeat_seconds)
            if self.parent_pid is not None and os.getppid() != self.parent_pid:
                log.warning("worker %s: its supervisor is gone; stopping", self.id)
                self.parent_pid = None
                self.request_stop()
            await self._background("heartbeat", self._heartbeat)

    async def _heartbeat(self) -> None:
        await self._extend_all()
        await self._beat()

    async def _background(self, what: str, call: Callable[[], Awaitable[Any]]) -> None:
        """Run a background call; an outage or an error is logged, never raised."""
        try:
            await call()
        except asyncio.CancelledError:
            raise
        except CONNECTION_ERRORS as exc:
            self.link.failed(exc)
        except Exception as exc:
            self._errors.error(f"worker {self.id}: {what} failed", exc)
        else:
            self.link.ok()

    async def _extend_all(self) -> None:
        jobs = list(self._running.items())
        if not jobs:
            return
        held = await self.queue.extend_many([task for _, task in jobs], self.lease_seconds)
        for (job, task), ok in zip(jobs, held, strict=True):
            if ok or job not in self._handling:
                continue  # held, or its handler ended (its outcome is on the way or sent)
            log.warning("task %s: lease lost (canceled or reclaimed); stopping it", task.task_id)
            task.lease_token = None
            job.cancel()

    async def _maintenance_loop(self) -> None:
        """Bounded clean-ups nothing else runs, every ``maintenance_interval_seconds``."""
        interval = self.config.maintenance_interval_seconds
        if not interval:
            return
        await asyncio.sleep(interval * random.uniform(0.5, 1.0))  # workers do not run in step
        while not self._closing:
            await self._background("maintenance", self.maintain)
            await asyncio.sleep(interval * random.uniform(0.9, 1.1))

    async def maintain(self) -> int:
        """One round of queue maintenance; returns how many items it repaired or trimmed.

        Cancels dependents of upstreams whose data expired, walking at most
        ``CLEANUP_STEPS`` batches of the DEFERRED registry per round (the next round
        resumes where this one stopped), then trims expired ids from the finished/
        failed/canceled registries and prunes dead workers (``maintain``). Every
        script call is bounded.
        """
        canceled = 0
        for _ in range(CLEANUP_STEPS):
            call = self.queue.ops.cleanup_dependencies(self._cleanup_offset, CLEANUP_BATCH)
            _, n, self._cleanup_offset = await self.queue._run(call)
            canceled += n
            if self._cleanup_offset == 0:
                break
        trimmed = await self.queue.maintain(batch=MAINTAIN_BATCH)
        if canceled or trimmed:
            log.info(
                "worker %s: maintenance canceled %d orphaned dependent(s), trimmed %d item(s)",
                self.id, canceled, trimmed,
            )  # fmt: skip
        return canceled + trimmed

    # ------------------------------------------------------------------ execution
    async def _execute(self, task: Task) -> None:
        ctx = Context(task, self.queue, self.id, task_logger(log, task, self.id))
        handler = self.registry.get(task.name)
        await self._hook("before_task", ctx)
        job = asyncio.current_task()
        assert job is not None
        budget = handler.max_retries if handler is not None else None
        outcome: Outcome
        self._handling.add(job)
        try:
            try:
                if handler is None:
                    raise UnknownTaskError(f"no handler registered for task name {task.name!r}")
                result = await self._invoke(handler, ctx, task)
            finally:
                self._handling.discard(job)
        except asyncio.CancelledError:
            outcome = await self._give_back(task)
            await self._hook("after_task", ctx, outcome)
            raise
        except Retry as exc:
            outcome = await self._failed(task, exc, exc.reason, delay=exc.delay, budget=budget)
        except ExecutionTimeout as exc:
            reason = f"timeout after {exc.seconds:g}s"
            outcome = await self._failed(task, exc, reason, budget=budget)
        except Exception as exc:
            ctx.logger.warning("task %s failed: %r", task.task_id, exc)
            reason = f"{type(exc).__name__}: {exc}"
            outcome = await self._failed(task, exc, reason, budget=budget)
        else:
            outcome = await self._succeeded(task, result, job)
        await self._hook("after_task", ctx, outcome)

    def _timeout(self, handler: Handler | None, task: Task) -> float:
        if task.timeout is not None:
            return task.timeout
        if handler is not None and handler.timeout is not None:
            return handler.timeout
        return self.config.task_timeout_seconds

    async def _invoke(self, handler: Handler, ctx: Context, task: Task) -> Any:
        args = handler.arguments(ctx, task.payload)
        timeout = self._timeout(handler, task)
        if not handler.is_async:
            return await self._threads.run(handler.func, args, timeout, self._abandoned(task))
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
            cfg = self.config
            log.warning(
                "worker %s: the handler of task %s (%s) still runs in its thread after it was "
                "given up; %d thread(s) stuck, %d of %d slot(s) usable until they return",
                self.id, task.task_id, task.name, self.threads_stuck,
                max(cfg.max_concurrent_tasks - self.threads_stuck, 0), cfg.max_concurrent_tasks,
            )  # fmt: skip

        return warn

    async def _succeeded(self, task: Task, result: Any, job: asyncio.Task[None]) -> Outcome:
        encoded: EncodedResult | None = None
        if result is not None:
            try:
                encoded = self.queue.ops.encode_result(result)  # once; sent as it is
            except SerializationError as exc:
                reason = f"result not serializable: {exc}"
                return await self._failed(task, exc, reason, retry=False)
        self._executing.discard(job)  # the slot is free while the ack waits for its wave
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._acks.append((task, encoded, future))
        assert self._wakeup is not None
        self._wakeup.set()
        if not await future:
            log.warning("task %s finished but its lease was lost; result discarded", task.task_id)
            return Outcome(state=None, result=result, lease_lost=True)
        self.processed += 1
        return Outcome(state=TaskState.FINISHED, result=result)

    async def _failed(
        self,
        task: Task,
        error: BaseException,
        reason: str,
        *,
        delay: float | None = None,
        retry: bool = True,
        budget: int | None = None,
    ) -> Outcome:
        """Report a failure (retry or FAILED), resending it through outages."""
        try:
            state = await self._resend(
                f"failure of task {task.task_id}",
                lambda: self.queue.fail(task, reason, retry, delay, max_retries=budget),
            )
        except LeaseLost:
            log.warning("task %s failed but its lease was lost", task.task_id)
            return Outcome(state=None, error=error, lease_lost=True)
        if state is None:
            return Outcome(state=None, error=error, lease_lost=True)
        self.failed += 1
        return Outcome(state=state, error=error)

    async def _give_back(self, task: Task) -> Outcome:
        if task.lease_token is None:
            return Outcome(state=None, lease_lost=True)
        try:
            state = await asyncio.shield(
                self._resend(f"give-back of task {task.task_id}", lambda: self.queue.requeue(task))
            )
        except LeaseLost:
            return Outcome(state=None, lease_lost=True)
        if state is None:
            return Outcome(state=None, lease_lost=True)
        log.info("task %s given back (%s)", task.task_id, state.value)
        return Outcome(state=state)

    async def _resend(self, what: str, call: Callable[[], Awaitable[T]]) -> T | None:
        """Run ``call`` until it reaches the server; None when the worker gave up on it.

        The scripts are replay-safe, so a call whose reply was lost may be sent again.
        """
        while True:
            try:
                value = await call()
            except CONNECTION_ERRORS as exc:
                delay = self.link.failed(exc)
                if time.monotonic() + delay >= self._give_up_at:
                    log.warning(
                        "worker %s: gave up reporting the %s (%s)", self.id, what, describe(exc)
                    )
                    return None
                await self._pause(delay)
                continue
            self.link.ok()
            return value

    async def _hook(self, name: str, *args: Any) -> None:
        for hooks in self.hooks:
            try:
                result = getattr(hooks, name)(*args)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("hook %s.%s failed", type(hooks).__name__, name)
