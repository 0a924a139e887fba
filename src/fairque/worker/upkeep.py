"""The worker's upkeep beside its loop: the heartbeat, the wait for cancels and the
maintenance rounds.

The heartbeat, every ``heartbeat_seconds``, extends the leases of every task the
worker holds (one ``extend_many``), stops a handler whose lease turns out lost, and
refreshes the worker's registration. The wait for cancels blocks on the worker's
stop list (``wait_for_cancel``): a ``cancel`` of a task this worker runs, sent by any
client, stops its handler at once, not at the next heartbeat. Between heartbeats the
registration is refreshed every ``COUNTS_SECONDS`` when its counts changed, so the
dashboard's and ``fairque status``'s figures lag the worker by seconds, not by a
heartbeat. Maintenance, every ``maintenance_interval_seconds``, runs the bounded
clean-ups nothing else runs. None of them ever raises: an outage or an error is
logged and the next round tries again.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

from fairque.client.aio import AsyncFairQueue
from fairque.common.pauses import pass_on_cancellation
from fairque.config import WorkerConfig
from fairque.models import WorkerInfo
from fairque.worker.executor import Executor
from fairque.worker.link import CONNECTION_ERRORS, ErrorLog, Link, describe

log = logging.getLogger("fairque.worker")

#: Maintenance bounds: DEFERRED tasks examined per script call, calls per round, and the
#: batch of registry entries and worker records ``maintain`` looks at per call.
#: Seconds between refreshes of a worker's registered counts (processed, failed, in
#: flight) when they changed, between heartbeats; one small write per worker at most.
COUNTS_SECONDS = 2.0
#: Longest single wait for a cancel (short: on Python 3.11 a cancellation of the
#: worker that lands while the wait is sent is swallowed until the wait ends), and the
#: pause after a failed wait (the heartbeat reports an outage)
STOP_WAIT_SECONDS = 1.0
STOP_RETRY_SECONDS = 1.0
CLEANUP_BATCH = 500
CLEANUP_STEPS = 10
MAINTAIN_BATCH = 1000


class Upkeep:
    """Runs the heartbeat and the maintenance of one worker.

    Args:
        queue: the worker's queue.
        config: the worker's settings.
        worker_id: the worker's id.
        heartbeat_seconds: seconds between heartbeats.
        lease_seconds: how far each heartbeat extends the leases.
        executor: the worker's executions (the leases of those from ``queue``).
        info: what the worker registers about itself.
        link: the worker's connection state.
        errors: where unexpected errors are logged.
        before_beat: called before each heartbeat (the worker checks its supervisor).
    """

    def __init__(
        self,
        queue: AsyncFairQueue,
        config: WorkerConfig,
        worker_id: str,
        heartbeat_seconds: float,
        lease_seconds: float,
        executor: Executor,
        info: Callable[[], WorkerInfo],
        link: Link,
        errors: ErrorLog,
        before_beat: Callable[[], None],
    ) -> None:
        self.queue = queue
        self.config = config
        self.worker_id = worker_id
        self.heartbeat_seconds = heartbeat_seconds
        self.lease_seconds = lease_seconds
        self.executor = executor
        self.info = info
        self.link = link
        self.errors = errors
        self.before_beat = before_beat
        self._loops: list[asyncio.Task[None]] = []
        self._closing = False
        self._registered: tuple[int, int, int] | None = None  # the counts last written

    def start(self) -> None:
        """Start the heartbeat and maintenance loops."""
        self._closing = False
        self._loops = [
            asyncio.create_task(self._heartbeat_loop()),
            asyncio.create_task(self._maintenance_loop()),
            asyncio.create_task(self._stop_loop()),
        ]

    async def stop(self) -> None:
        """Stop both loops, even if a cancellation gets lost.

        A cancel that lands while redis-py is sending a command can be swallowed on
        Python < 3.12. From 3.11 the loops raise it again after the call (see
        ``fairque.common.pauses``); 3.10 counts no cancels, so they also watch ``_closing``, and
        the cancel is repeated.
        """
        self._closing = True
        pending = {loop for loop in self._loops if not loop.done()}
        for _ in range(50):
            if not pending:
                break
            for loop in pending:
                loop.cancel()
            _, pending = await asyncio.wait(pending, timeout=0.2)
        if pending:  # pragma: no cover - a loop stuck in a call that never returns
            log.warning("worker %s: abandoning %d background task(s)", self.worker_id, len(pending))
        for loop in self._loops:
            if loop.done() and not loop.cancelled() and loop.exception() is not None:
                log.warning(
                    "worker %s: background task failed: %r", self.worker_id, loop.exception()
                )

    async def register(self) -> None:
        """Register the worker (or refresh its registration); raises on an outage."""
        ttl = max(self.heartbeat_seconds * 5, 10)
        info = self.info()
        await self.queue.register_worker(info, ttl_seconds=ttl)
        self._registered = (info.processed, info.failed, info.in_flight)

    def _counts(self) -> tuple[int, int, int]:
        """The counts the registration would show now (as ``register`` writes them)."""
        name = self.queue.queue
        executor = self.executor
        return executor.processed_in[name], executor.failed_in[name], executor.in_flight_in(name)

    async def maintain(self) -> int:
        """One round of queue maintenance; returns how many items it repaired or trimmed.

        Cancels dependents of upstreams whose data expired, walking at most
        ``CLEANUP_STEPS`` batches of the DEFERRED registry per round (the next round
        resumes where this one stopped), then trims expired ids from the finished/
        failed/canceled registries and prunes dead workers (``maintain``). Every
        script call is bounded.
        """
        canceled = await self.queue.cleanup_dependencies(CLEANUP_BATCH, passes=CLEANUP_STEPS)
        trimmed = await self.queue.maintain(batch=MAINTAIN_BATCH)
        if canceled or trimmed:
            log.info(
                "worker %s: maintenance canceled %d orphaned dependent(s), trimmed %d item(s)",
                self.worker_id, canceled, trimmed,
            )  # fmt: skip
        return canceled + trimmed

    async def unregister(self) -> None:
        """Flush the worker's counts and take it out of the queue's registry (an outage
        is logged; a flush that fails is kept by the client for its next call)."""
        try:
            await self.queue.flush_metrics()
            await self.queue.unregister_worker(self.worker_id)
        except CONNECTION_ERRORS as exc:
            log.warning("worker %s: could not unregister (%s)", self.worker_id, describe(exc))
        except Exception as exc:  # pragma: no cover - a dying connection
            log.error("worker %s: could not unregister (%s)", self.worker_id, describe(exc))

    async def _heartbeat_loop(self) -> None:
        clock = asyncio.get_running_loop().time
        beat = clock() + self.heartbeat_seconds
        while not self._closing:
            await asyncio.sleep(max(min(COUNTS_SECONDS, beat - clock()), 0))
            if clock() >= beat:
                beat = clock() + self.heartbeat_seconds
                self.before_beat()
                await self._guarded("heartbeat", self._heartbeat)
            elif self._registered is not None and self._counts() != self._registered:
                await self._guarded("registration", self.register)

    async def _heartbeat(self) -> None:
        await self._extend_leases()
        await self.register()

    async def _extend_leases(self) -> None:
        held = self.executor.held(self.queue)
        if not held:
            return
        for execution in held:  # each sends its handler's run so far (0: not started)
            execution.stamp_run()
        tasks = [execution.task for execution in held]
        extended = await self.queue.extend_many(tasks, self.lease_seconds)
        for execution, ok in zip(held, extended, strict=True):
            if not ok:
                self.executor.lease_lost(execution)

    async def _stop_loop(self) -> None:
        """Wait for cancels of this worker's leases; stop each handler concerned.

        A failed wait is retried after a pause, quietly: the heartbeat reports an
        outage, and finds any cancel this loop missed (``extend`` answers it)."""
        while not self._closing:
            try:
                stop = await self.queue.wait_for_cancel(self.worker_id, STOP_WAIT_SECONDS)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("worker %s: waiting for cancels failed (%s)", self.worker_id, exc)
                await asyncio.sleep(STOP_RETRY_SECONDS)
                continue
            if stop is not None:
                self.executor.canceled(self.queue, stop.task_id, stop.lease_token)
            pass_on_cancellation()

    async def _maintenance_loop(self) -> None:
        interval = self.config.maintenance_interval_seconds
        if not interval:
            return
        await asyncio.sleep(interval * random.uniform(0.5, 1.0))  # workers do not run in step
        while not self._closing:
            await self._guarded("maintenance", self.maintain)
            await asyncio.sleep(interval * random.uniform(0.9, 1.1))

    async def _guarded(self, what: str, call: Callable[[], Awaitable[Any]]) -> None:
        """Run a background call; an outage or an error is logged, never raised (a
        cancellation is, even one the call swallowed)."""
        try:
            await call()
        except asyncio.CancelledError:
            raise
        except CONNECTION_ERRORS as exc:
            self.link.failed(exc)
        except Exception as exc:
            self.errors.error(f"worker {self.worker_id}: {what} failed", exc)
        else:
            self.link.ok()
        pass_on_cancellation()
