"""The worker: leases tasks fairly, runs their handlers, heartbeats, shuts down cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import logging
import os
import signal
import socket
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

from fairque.aio import AsyncFairQueue
from fairque.config import WorkerConfig
from fairque.errors import LeaseLost, SerializationError
from fairque.models import Task, TaskState, WorkerInfo
from fairque.ops import EncodedResult
from fairque.worker.context import Context, Retry, task_logger
from fairque.worker.hooks import Hooks, Outcome
from fairque.worker.registry import Handler, Registry, default_registry

log = logging.getLogger("fairque.worker")


class UnknownTaskError(Exception):
    """No handler is registered for the task's name."""


class ExecutionTimeout(Exception):
    """A handler ran longer than its task's execution timeout."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"timeout after {seconds:g}s")
        self.seconds = seconds


#: ``asyncio.timeout`` (Python 3.11+), which bounds a handler inside the running task.
_TIMEOUT_SCOPE: Any = getattr(asyncio, "timeout", None)


class Worker:
    """Runs registered handlers for the tasks of one queue.

    Async handlers run on the worker's event loop; sync handlers in a thread pool
    with the caller's context variables. Leases of in-flight tasks are extended
    by a heartbeat; each task has an execution timeout. ``SIGTERM``/``SIGINT`` stop
    fetching and let in-flight tasks finish within ``shutdown_grace_seconds``; tasks
    still running then are given back without counting a failure. A second signal
    gives everything back at once.

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
        self._running: dict[asyncio.Task[None], Task] = {}
        self._executing: set[asyncio.Task[None]] = set()
        self._acks: list[tuple[Task, Any, asyncio.Future[bool]]] = []
        self._stopping: asyncio.Event | None = None
        self._wakeup: asyncio.Event | None = None
        self._want_work: asyncio.Event | None = None
        self._fetch: asyncio.Task[None] | None = None
        self._reserved = 0  # free slots an idle fetch may fill
        self._signals = 0
        self._closing = False
        self._threads: set[Future[Any]] = set()
        self._pool = ThreadPoolExecutor(
            max_workers=self.config.max_concurrent_tasks, thread_name_prefix="fairque-handler"
        )

    # ------------------------------------------------------------------ control
    @property
    def threads_busy(self) -> int:
        """Sync handlers still running in threads (their tasks may have been given back)."""
        return sum(1 for f in list(self._threads) if not f.done())

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
        if self._signals >= 2:
            log.warning("worker %s: second stop request, giving back in-flight tasks", self.id)
            for job in list(self._executing):
                job.cancel()

    def run(self) -> None:
        """Run until stopped by a signal (blocking; for sync callers and the CLI)."""
        asyncio.run(self.run_async(install_signals=True))

    async def run_async(self, *, install_signals: bool = False) -> None:
        """Serve the queue until ``request_stop`` (or a signal when ``install_signals``)."""
        loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._wakeup = asyncio.Event()
        self._want_work = asyncio.Event()
        if self._signals:
            self._stopping.set()
        if install_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.request_stop)
        await self._beat()
        helpers = [
            asyncio.create_task(self._heartbeat_loop()),
            asyncio.create_task(self._waker()),
        ]
        await self._hook("on_startup", self)
        log.info("worker %s serving queue %r", self.id, self.queue.queue)
        try:
            await self._drive()
        finally:
            await self._end_idle_fetch()
            await self._stop_helpers(helpers)
            await self._hook("on_shutdown", self)
            try:
                await self.queue.unregister_worker(self.id)
            except Exception:  # pragma: no cover - best effort on a dying connection
                log.exception("worker %s: could not unregister", self.id)
            if install_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
            self._pool.shutdown(wait=False, cancel_futures=True)
            log.info(
                "worker %s stopped (%d processed, %d failed)", self.id, self.processed, self.failed
            )

    async def _stop_helpers(self, helpers: list[asyncio.Task[None]]) -> None:
        """Stop the heartbeat and the waker, even if a cancellation gets lost.

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
    async def _drive(self) -> None:
        """Acknowledge finished tasks and lease new ones, one round trip per wave.

        Handlers that succeed hand their result to this loop, which sends every
        pending completion together with the request for more work
        (``complete_and_pop``). When nothing is ready the waker blocks on the
        queue's wake-up list; finishing handlers, the waker and stop requests all
        set ``_wakeup``.
        """
        assert self._stopping is not None
        assert self._wakeup is not None
        assert self._want_work is not None
        cfg = self.config
        grace_deadline: float | None = None
        while True:
            self._wakeup.clear()
            stopping = self._stopping.is_set()
            if stopping:
                if not self._running:
                    return
                if grace_deadline is None:
                    # end an idle fetch now, while its lease can find nothing we give back
                    await self._wake_idle_fetch()
                    grace_deadline = time.monotonic() + cfg.shutdown_grace_seconds
                    log.info(
                        "worker %s: waiting up to %.1fs for %d task(s)",
                        self.id, cfg.shutdown_grace_seconds, len(self._running),
                    )  # fmt: skip
            acks, self._acks = self._acks, []
            want = 0 if stopping else self._free_slots() - self._reserved
            if acks or want > 0:
                leased = await self._exchange(acks, want)
                for task in leased:
                    self._spawn(task)
                if leased or (acks and want == 0):
                    continue
            if want > 0:
                self._want_work.set()
            timeout = None if grace_deadline is None else max(grace_deadline - time.monotonic(), 0)
            if timeout == 0:
                for job in list(self._executing):
                    job.cancel()
                grace_deadline = float("inf")
                timeout = None
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout)

    async def _exchange(
        self, acks: list[tuple[Task, Any, asyncio.Future[bool]]], want: int
    ) -> list[Task]:
        """One ``complete_and_pop`` call; completions are put back if it fails."""
        cfg = self.config
        try:
            won, leased = await self.queue.complete_and_pop(
                [(task, result) for task, result, _ in acks],
                want,
                self.id,
                self.lease_seconds,
                assigned_users=cfg.assigned_users or None,
                steal_targets=cfg.steal_targets or None,
            )
        except Exception:
            log.exception("worker %s: queue call failed; retrying", self.id)
            self._acks[:0] = acks
            await asyncio.sleep(min(cfg.poll_interval_seconds, 1.0))
            return []
        for (_, _, future), ok in zip(acks, won, strict=True):
            if not future.done():
                future.set_result(ok)
        return leased

    def _spawn(self, task: Task) -> None:
        job = asyncio.create_task(self._execute(task))
        self._running[job] = task
        self._executing.add(job)
        job.add_done_callback(self._finished)

    def _free_slots(self) -> int:
        cfg = self.config
        return min(cfg.max_concurrent_tasks - len(self._executing), cfg.batch_size)

    async def _waker(self) -> None:
        """Fetch work for the free slots while the driver found nothing to do."""
        assert self._want_work is not None
        assert self._stopping is not None
        while not self._closing:
            await self._want_work.wait()
            self._want_work.clear()
            reserve = self._free_slots()
            if self._stopping.is_set() or reserve <= 0:
                continue
            # the fetch owns its leases until it has spawned them: a stop waits for it
            # (``_end_idle_fetch``) instead of cancelling it while a reply is on the way
            self._reserved = reserve
            self._fetch = asyncio.create_task(self._fetch_idle(reserve))
            await asyncio.shield(self._fetch)

    async def _fetch_idle(self, count: int) -> None:
        """Block on the wake-up list, then lease up to ``count`` tasks: one round trip."""
        assert self._wakeup is not None
        assert self._stopping is not None
        cfg = self.config
        leased: list[Task] = []
        try:
            timeout = cfg.poll_interval_seconds
            due = await self.queue.next_wakeup()
            if due is not None:
                timeout = min(timeout, max(due, 0.001))
            leased = await self.queue.wait_and_pop(
                timeout,
                count,
                self.id,
                self.lease_seconds,
                assigned_users=cfg.assigned_users or None,
                steal_targets=cfg.steal_targets or None,
            )
        except Exception:
            log.exception("worker %s: waiting for work failed", self.id)
            await asyncio.sleep(min(cfg.poll_interval_seconds, 1.0))
        finally:
            self._reserved = 0
        if self._stopping.is_set():
            for task in leased:
                await self._give_back(task)
        else:
            for task in leased:
                self._spawn(task)
        self._wakeup.set()

    async def _wake_idle_fetch(self) -> bool:
        """Wake an idle fetch in progress; False when there is none."""
        fetch = self._fetch
        if fetch is None or fetch.done():
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

    def _finished(self, job: asyncio.Task[None]) -> None:
        self._running.pop(job, None)
        self._executing.discard(job)
        if self._wakeup is not None:
            self._wakeup.set()

    # ------------------------------------------------------------------ heartbeat
    async def _beat(self) -> None:
        info = WorkerInfo(
            worker_id=self.id,
            queue=self.queue.queue,
            host=socket.gethostname(),
            pid=os.getpid(),
            started_at=self.started_at,
            concurrency=self.config.max_concurrent_tasks,
            in_flight=len(self._running),
            processed=self.processed,
            failed=self.failed,
        )
        await self.queue.register_worker(info, ttl_seconds=max(self.heartbeat_seconds * 5, 10))

    async def _heartbeat_loop(self) -> None:
        while not self._closing:
            await asyncio.sleep(self.heartbeat_seconds)
            try:
                await self._extend_all()
                await self._beat()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("worker %s: heartbeat failed", self.id)

    async def _extend_all(self) -> None:
        jobs = list(self._running.items())
        if not jobs:
            return
        held = await self.queue.extend_many([task for _, task in jobs], self.lease_seconds)
        for (job, task), ok in zip(jobs, held, strict=True):
            if ok or job not in self._executing:
                continue  # held, or finished (its completion is on the way or done)
            log.warning("task %s: lease lost (canceled or reclaimed); stopping it", task.task_id)
            task.lease_token = None
            job.cancel()

    # ------------------------------------------------------------------ execution
    async def _execute(self, task: Task) -> None:
        ctx = Context(task, self.queue, self.id, task_logger(log, task, self.id))
        handler = self.registry.get(task.name)
        await self._hook("before_task", ctx)
        outcome: Outcome
        try:
            if handler is None:
                raise UnknownTaskError(f"no handler registered for task name {task.name!r}")
            result = await self._invoke(handler, ctx, task)
        except asyncio.CancelledError:
            outcome = await self._give_back(task)
            await self._hook("after_task", ctx, outcome)
            raise
        except Retry as exc:
            outcome = await self._failed(task, exc, exc.reason, delay=exc.delay)
        except ExecutionTimeout as exc:
            outcome = await self._failed(task, exc, f"timeout after {exc.seconds:g}s")
        except Exception as exc:
            ctx.logger.warning("task %s failed: %r", task.task_id, exc)
            outcome = await self._failed(task, exc, f"{type(exc).__name__}: {exc}")
        else:
            outcome = await self._succeeded(task, result)
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
        if handler.is_async and _TIMEOUT_SCOPE is not None:
            # run in this task: no second task and no extra turn of the loop per call
            scope = _TIMEOUT_SCOPE(timeout)
            try:
                async with scope:
                    return await handler.func(*args)
            except TimeoutError:
                if scope.expired():
                    raise ExecutionTimeout(timeout) from None
                raise  # the handler's own TimeoutError
        running: asyncio.Future[Any]
        if handler.is_async:  # pragma: no cover - Python 3.10 has no asyncio.timeout
            running = asyncio.ensure_future(handler.func(*args))
        else:
            call = functools.partial(contextvars.copy_context().run, handler.func, *args)
            future = self._pool.submit(call)
            self._threads.add(future)
            future.add_done_callback(self._threads.discard)
            running = asyncio.wrap_future(future)
        try:
            done, _ = await asyncio.wait({running}, timeout=timeout)
        except asyncio.CancelledError:
            running.cancel()
            raise
        if not done:
            running.cancel()
            # the handler's own TimeoutError must not look like the execution timeout
            raise ExecutionTimeout(timeout)
        return running.result()

    async def _succeeded(self, task: Task, result: Any) -> Outcome:
        encoded: EncodedResult | None = None
        if result is not None:
            try:
                encoded = self.queue.ops.encode_result(result)  # once; sent as it is
            except SerializationError as exc:
                return await self._failed(task, exc, f"result not serializable: {exc}", retry=False)
        job = asyncio.current_task()
        if job is not None:
            self._executing.discard(job)
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
    ) -> Outcome:
        try:
            state = await self.queue.fail(task, reason, retry=retry, delay=delay)
        except LeaseLost:
            log.warning("task %s failed but its lease was lost", task.task_id)
            return Outcome(state=None, error=error, lease_lost=True)
        self.failed += 1
        return Outcome(state=state, error=error)

    async def _give_back(self, task: Task) -> Outcome:
        if task.lease_token is None:
            return Outcome(state=None, lease_lost=True)
        try:
            state = await asyncio.shield(self.queue.requeue(task))
        except LeaseLost:
            return Outcome(state=None, lease_lost=True)
        log.info("task %s given back (%s)", task.task_id, state.value)
        return Outcome(state=state)

    async def _hook(self, name: str, *args: Any) -> None:
        for hooks in self.hooks:
            try:
                result = getattr(hooks, name)(*args)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("hook %s.%s failed", type(hooks).__name__, name)
