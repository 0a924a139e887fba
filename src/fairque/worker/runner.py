"""The worker: leases tasks fairly, runs their handlers, reports how they ended.

How a worker serves its queue, top to bottom (a worker serving several queues keeps
one *lane* per queue and shares its free slots among them, round robin: ``lanes``):

1. ``run_async`` registers the worker (waiting for the server at start), starts its
   upkeep (heartbeat and maintenance, ``upkeep``) and its summary line (``summary``)
   and enters its loop, ``_serve``.
2. A turn of the loop that has outcomes to report sends them in one wave
   (``acker``), asking in the same round trip for as many tasks as the worker has
   room for (free slots, and places to lease ahead: ``slots``), and starts what came
   back (``executor``): a busy worker's usual turn is a single ``complete_and_pop``.
   While the queue fills every request, the next turn asks again. A queue may have
   two waves at the server at once (``WAVES_IN_FLIGHT``), each in its own asyncio
   task. The room a wave asks for is held until it is back.
3. Once the queue has fewer tasks than asked for (and no wave is out), the free
   slots *park* (``park``; an idle worker leases nothing ahead): the worker blocks
   on the queue's wake-up list until pushed work or a due time ends the wait, and
   leases in the same round trip. An idle worker's only calls are these waits (each
   until the next due time, at most its lease length) and its heartbeat.
4. Between turns the loop sleeps until something changes: a report is filed, a park
   ends, an execution ends, a stuck handler thread returns, a stop is requested.
5. A burst worker (``burst``) never parks: once nothing runs, no outcome waits to be
   reported and one more request to each queue brings nothing, it stops as if asked to.
6. A stop ends fetching, gives back the tasks leased ahead at once, lets running
   handlers finish within the grace period, gives the rest back, and reports every
   outcome before the worker leaves, or gives up on them once its patience is spent
   (a wave at the server is waited for: its call returns or fails by itself).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import socket
import time
from collections.abc import Sequence
from datetime import datetime, timezone

from fairque.client.aio import AsyncFairQueue
from fairque.common.pauses import pass_on_cancellation
from fairque.config import WorkerConfig
from fairque.models import Task, WorkerInfo
from fairque.worker.acker import Acknowledger
from fairque.worker.executor import Executor, UnknownTaskError
from fairque.worker.hooks import Hooks, call_hooks
from fairque.worker.lanes import Lane, Rotation
from fairque.worker.leasing import Leasing
from fairque.worker.link import CONNECTION_ERRORS, ErrorLog, Link, describe
from fairque.worker.park import WAKE_AGAIN_AFTER, Park
from fairque.worker.registry import Registry, default_registry
from fairque.worker.slots import Slots
from fairque.worker.stopping import OUTCOME_PATIENCE, Stop, wait_event
from fairque.worker.summary import Summary
from fairque.worker.threads import HandlerThreads
from fairque.worker.upkeep import Upkeep

log = logging.getLogger("fairque.worker")

#: Waves a queue may have at the server at once: while one is there, the worker runs
#: the tasks another brought, so the server's work and the worker's overlap.
WAVES_IN_FLIGHT = 2

__all__ = ["OUTCOME_PATIENCE", "UnknownTaskError", "Worker"]


class Worker:
    """Runs registered handlers for the tasks of one queue, or of several.

    A worker given several queues is fair across them as well as within each: the
    slots that free up are shared round robin among the queues with ready work (a
    flooded queue gets half of them while another has work too), and each request
    takes that queue's own fair pick of users. It registers, heartbeats and
    maintains in each queue, under the same id, and waits on every queue's wake-up
    list when idle.

    It leases only tasks whose names its registry handles (all, with
    ``unknown_tasks: fail``); the others wait for a worker that handles them.
    Async handlers run on the worker's event loop; sync handlers in a thread pool
    with the caller's context variables; each has an execution timeout from its
    handler's start (a sync handler over it keeps its thread busy and the worker
    leases that many fewer tasks meanwhile: ``threads_stuck``). Leases of in-flight
    tasks are extended by a heartbeat. ``SIGTERM``/``SIGINT`` stop fetching and let
    in-flight tasks finish within ``shutdown_grace_seconds``; tasks still running
    then are given back without counting a failure; a second signal gives all back.

    An idle worker does not poll: it waits on the queue's wake-up list, which a
    push, a retry or a give-back signals, and wakes by itself when a scheduled task
    comes due or a lease expires (``poll_interval_seconds`` has no effect). A
    ``burst`` worker stops instead, once nothing is ready, running or unreported.

    When the server cannot be reached the worker waits (capped exponential backoff
    with jitter), holds the outcomes it could not report and sends them when the
    server is back; at start it waits up to ``wait_for_server_seconds`` for it.

    Args:
        queue: the queue to serve, or several (distinct names; the first one's
            ``lease_seconds`` is the worker's default lease).
        registry: the handlers (default: the registry behind ``fairque.task``).
        config: worker settings (defaults when None).
        hooks: objects whose hook methods are called around the worker's life.
    """

    def __init__(
        self,
        queue: AsyncFairQueue | Sequence[AsyncFairQueue],
        registry: Registry | None = None,
        config: WorkerConfig | None = None,
        hooks: Sequence[Hooks] = (),
    ) -> None:
        queues = [queue] if isinstance(queue, AsyncFairQueue) else list(queue)
        names = [q.queue for q in queues]
        if not queues or len(set(names)) < len(names):
            raise ValueError(f"a worker serves one or more distinct queues, got {names}")
        #: the queues served, in the order given; ``queue`` is the first
        self.queues = queues
        self.queue = queues[0]
        self.registry = registry if registry is not None else default_registry
        self.config = cfg = config or WorkerConfig()
        self.hooks = list(hooks)
        self.id = cfg.id
        self.lease_seconds = lease = cfg.lease_seconds or self.queue.options.lease_seconds
        self.heartbeat_seconds = cfg.heartbeat_interval_seconds or max(lease / 3, 0.05)
        self.started_at = datetime.now(timezone.utc)
        #: the supervisor's pid: the worker stops when its parent is no longer that process
        self.parent_pid: int | None = None
        self.link = Link(f"worker {self.id}", log)
        errors = ErrorLog(log)
        # what the loop acts on changed: a report, a park's end, an execution's end,
        # a stuck thread's return, a stop request
        self._changed = asyncio.Event()
        self._stop = Stop()
        self._threads = HandlerThreads(cfg.max_concurrent_tasks, self._thread_returned)
        self._slots = Slots(cfg.max_concurrent_tasks, cfg.ahead, lambda: self._threads.stuck)
        self._executor = Executor(
            self.registry, cfg, self.id, self.hooks, self._threads, self._slots,
            stopping=lambda: self._stop.requested, on_end=self._changed.set, horizon=self._horizon,
        )  # fmt: skip
        self._summary = Summary(
            self.id, cfg.summary_interval_seconds,
            counts=lambda: (self.processed, self.failed), running=lambda: self.in_flight,
        )  # fmt: skip
        self._lanes = [self._lane(q, lease, errors) for q in queues]
        self._rotation = Rotation(self._lanes)
        # a burst worker asked every queue once more while idle (nothing came: it stops)
        self._burst_asked = False
        #: set once the loop has ended (a drained stop, or a cancellation): a wave that
        #: comes back later does not start what it leased
        self._left = False

    def _lane(self, queue: AsyncFairQueue, lease: float, errors: ErrorLog) -> Lane:
        cfg = self.config
        # one connection state per queue: on a cluster, queues on a node that is down
        # back off while the others carry on (and the log does not flap between them)
        link = self.link
        if len(self.queues) > 1:
            link = Link(f"worker {self.id} on queue {queue.queue!r}", log)
        leasing = Leasing(queue, self.id, lease, cfg.assigned_users, cfg.steal_targets, self._names)
        acker = Acknowledger(queue, leasing, link, errors, self._changed.set)
        park = Park(
            queue, leasing, link, errors, self._stop.pause,
            stopping=lambda: self._stop.requested, on_end=self._changed.set,
            room=lambda: self._free_slots(ahead=False) > 0,
            deliver=functools.partial(self._start, queue, acker),
        )  # fmt: skip
        upkeep = Upkeep(
            queue, cfg, self.id, self.heartbeat_seconds, lease, self._executor,
            lambda: self.info(queue.queue), link, errors, before_beat=self._check_supervisor,
        )  # fmt: skip
        return Lane(queue, link, leasing, upkeep=upkeep, acker=acker, park=park)

    # ------------------------------------------------------------------ what it reports
    @property
    def processed(self) -> int:
        """Tasks this worker finished."""
        return self._executor.processed

    @property
    def failed(self) -> int:
        """Failed attempts this worker reported (retried or FAILED)."""
        return self._executor.failed

    @property
    def in_flight(self) -> int:
        """Tasks leased by this worker whose outcome is not settled yet."""
        return self._executor.in_flight

    @property
    def threads_busy(self) -> int:
        """Sync handlers still running in threads (their tasks may have been given back)."""
        return self._threads.busy

    @property
    def threads_stuck(self) -> int:
        """Handler threads still running for tasks the worker gave up on (timeout, stop)."""
        return self._threads.stuck

    def info(self, queue: str | None = None) -> WorkerInfo:
        """What it registers in ``queue`` (default: its first); counts for that queue."""
        name = self.queue.queue if queue is None else queue
        executor = self._executor
        return WorkerInfo(
            worker_id=self.id,
            queue=name,
            host=socket.gethostname(),
            pid=os.getpid(),
            started_at=self.started_at,
            concurrency=self.config.max_concurrent_tasks,
            in_flight=executor.in_flight_in(name),
            processed=executor.processed_in[name],
            failed=executor.failed_in[name],
            threads_stuck=self.threads_stuck,
            assigned_users=list(self.config.assigned_users),
            steal_targets=list(self.config.steal_targets),
            queues=[lane.queue.queue for lane in self._lanes],
            names=list(self._names() or ()),
        )

    def _names(self) -> tuple[str, ...] | None:
        """The task names it leases (None: any; ``unknown_tasks: fail`` takes all)."""
        return self.registry.handled() if self.config.unknown_tasks == "give_back" else None

    async def maintain(self) -> int:
        """One round of maintenance of every queue served (see ``Upkeep.maintain``)."""
        return sum([await lane.upkeep.maintain() for lane in self._lanes])

    # ------------------------------------------------------------------ control
    def request_stop(self) -> None:
        """First call: stop fetching and drain gracefully. Second call: stop at once."""
        self._stop.request()
        self._changed.set()
        self._executor.give_back_waiting()
        if self._stop.requests >= 2:
            log.warning("worker %s: second stop request, giving back in-flight tasks", self.id)
            self._executor.interrupt()

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
        self._threads.bind(loop)
        installed = list(stop_signals) if install_signals else []
        for sig in installed:
            loop.add_signal_handler(sig, self.request_stop)
        self._left = False  # a worker run again after a cancellation starts what it leases
        try:
            if not await self._connect():
                return
            # before anything starts: a cancellation here leaves nothing running
            report = await self._lanes[0].queue.memory_report()
            if report is not None:
                report.log_to(log, f" (worker {self.id})")
            for lane in self._lanes:
                lane.upkeep.start()
            self._summary.start()
            await call_hooks(self.hooks, "on_startup", self)
            names = ", ".join(repr(lane.name) for lane in self._lanes)
            log.info("worker %s serving queue%s %s", self.id, "s"[: len(self._lanes) - 1], names)
            try:
                await self._serve()
            finally:
                self._left = True
                await self._summary.stop()
                for lane in self._lanes:
                    await lane.park.close()
                    await lane.upkeep.stop()
                await call_hooks(self.hooks, "on_shutdown", self)
                for lane in self._lanes:
                    await lane.upkeep.unregister()
                log.info(
                    "worker %s stopped (%d processed, %d failed)",
                    self.id, self.processed, self.failed,
                )  # fmt: skip
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
            self._threads.shutdown()

    # ------------------------------------------------------------------ the loop
    async def _serve(self) -> None:
        """Report outcomes, lease tasks and start them, one turn per change, until a
        stop has drained (see the module's docstring)."""
        lanes = self._lanes
        while True:
            # a cancellation swallowed by a call (registering, waking a park) ends the
            # loop here (see ``fairque.common.pauses``); the loop's own waits never swallow one
            pass_on_cancellation()
            self._changed.clear()
            for lane in lanes:
                parked = lane.park.collect()
                if parked is not None:
                    self._start(lane.queue, lane.acker, parked.tasks)
                    lane.more_ready = parked.filled
            if self._stop.requested and not await self._drain_turn():
                return
            free = 0 if self._stop.requested else self._free_slots()
            now = time.monotonic()
            wanted = self._rotation.share(free, now)
            sending = [
                (lane, n)
                for lane, n in zip(lanes, wanted, strict=True)
                if (lane.acker.pending or n)
                and lane.resting_until <= now
                and len(lane.waves) < WAVES_IN_FLIGHT
            ]
            if sending:
                for lane, n in sending:
                    self._launch(lane, n)
                continue
            if any(lane.waves for lane in lanes):  # what they bring decides what is next
                await self._wait_for_change()
                continue
            if not self.config.burst:
                self._open_parks(self._free_slots(ahead=False))
            elif free and self._idle():
                if self._burst_asked:  # every queue was asked once more: nothing came
                    log.info("worker %s: no task is ready (burst); stopping", self.id)
                    self.request_stop()
                    continue
                self._burst_asked = True  # ask each queue once more
                for lane in lanes:
                    lane.more_ready = True
                continue
            await self._wait_for_change()

    def _launch(self, lane: Lane, n: int) -> None:
        """Send a wave of ``lane`` in its own asyncio task (see ``_wave``); the slots
        it asks for are held until it is back."""
        lane.asked += n
        wave = asyncio.create_task(self._wave(lane, n))
        lane.waves.add(wave)
        wave.add_done_callback(functools.partial(self._wave_done, lane, n))

    def _wave_done(self, lane: Lane, n: int, wave: asyncio.Task[None]) -> None:
        lane.waves.discard(wave)
        lane.asked -= n
        self._changed.set()

    async def _wave(self, lane: Lane, n: int) -> None:
        """One wave of a lane: its reports, and a request for ``n`` tasks (its share of
        the free slots). A lane whose wave was held (its server is away) rests for its
        link's backoff, then sends again; the other lanes carry on."""
        sent = time.monotonic()
        leased = await lane.acker.send(n)
        if leased is None:
            lane.resting_until = time.monotonic() + lane.link.delay()
            return
        lane.timed(time.monotonic() - sent)
        if self._left:  # the worker was cancelled while this wave was at the server
            if leased:
                log.warning(
                    "worker %s: %d task(s) leased after it left were not started; their "
                    "leases will expire", self.id, len(leased),
                )  # fmt: skip
            return
        self._start(lane.queue, lane.acker, leased)
        if n:
            lane.more_ready = len(leased) >= n
        if leased:
            self._burst_asked = False

    def _open_parks(self, free: int) -> None:
        """Park the free slots of a single queue that came back short; watch each of
        several queues that came back short, whether or not a slot is free."""
        if len(self._lanes) == 1:
            lane = self._lanes[0]
            if free and not lane.park.open and not lane.more_ready:
                lane.park.start(free)
            return
        for lane in self._lanes:
            if not lane.more_ready and not lane.park.open:
                lane.park.start(0)

    def _idle(self) -> bool:
        """Nothing runs and no outcome waits to be reported."""
        return not (
            self._executor.in_flight
            or any(lane.acker.pending or lane.waves for lane in self._lanes)
        )

    def _free_slots(self, ahead: bool = True) -> int:
        """Tasks it has room for and has not asked for (free slots, and with ``ahead``
        places to lease ahead); an open park's and a wave's tasks count as taken."""
        slots = self._slots
        room = slots.to_run()
        if ahead and slots.ahead:
            room = slots.to_lease(self._executor.ending_within(self._horizon()))
        parked = sum(lane.park.slots + lane.asked for lane in self._lanes)
        return max(0, min(room - parked, self.config.batch_size))

    def _horizon(self) -> float:
        """A handler ending within two round trips (+1 ms) gets its next task ahead."""
        return 2 * max(lane.round_trip for lane in self._lanes) + 0.001

    def _start(self, queue: AsyncFairQueue, acker: Acknowledger, leased: list[Task]) -> None:
        """The one door of leased tasks: a wave's, a collected park's, a park's reply."""
        start = self._executor.start
        for task in leased:
            start(task, queue, acker)

    async def _wait_for_change(self) -> None:
        timeout: float | None = None
        if self._stop.requested:
            timeout = max(self._stop.until_deadline(WAKE_AGAIN_AFTER), 0.05)
        now = time.monotonic()
        rests = [lane.resting_until - now for lane in self._lanes if lane.resting_until > now]
        if rests:  # a lane sends again when its rest ends
            timeout = min([timeout or float("inf"), *rests])
        await wait_event(self._changed, timeout)

    async def _drain_turn(self) -> bool:
        """One turn of a stop; False when the worker may leave."""
        stop, executor = self._stop, self._executor
        if stop.grace_ends is None:
            stop.begin_drain(self.config.shutdown_grace_seconds)
            if executor.in_flight:
                log.info(
                    "worker %s: waiting up to %.1fs for %d task(s)",
                    self.id, self.config.shutdown_grace_seconds, executor.in_flight,
                )  # fmt: skip
        parks = [lane.park for lane in self._lanes if lane.park.open]
        for park in parks:
            await park.wake()  # its leases, if any, come back to be given back
        if not parks and self._idle():
            return False
        now = time.monotonic()
        assert stop.grace_ends is not None
        if now >= stop.grace_ends and executor.handling:
            executor.interrupt()
        if now < stop.give_up_at or any(lane.waves for lane in self._lanes):
            return True  # a wave at the server ends by itself (its call returns or fails)
        log.warning(
            "worker %s: could not report %d outcome(s) before exiting; their leases will "
            "expire and the tasks will run again",
            self.id, executor.in_flight,
        )  # fmt: skip
        for lane in self._lanes:
            lane.acker.give_up()
        await executor.end_all(timeout=1.0)
        return False

    # ------------------------------------------------------------------ around the loop
    async def _connect(self) -> bool:
        """Register, waiting up to ``wait_for_server_seconds`` for the server; False if stopped."""
        deadline = time.monotonic() + self.config.wait_for_server_seconds
        while not self._stop.requested:
            try:
                await self._open_shards()
                for lane in self._lanes:
                    await lane.upkeep.register()
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
                await self._stop.pause(min(delay, remaining))
                continue
            pass_on_cancellation()  # one the registration swallowed: do not serve
            self.link.ok()
            return True
        return False

    async def _open_shards(self) -> None:
        """Serve every shard of a queue whose client was opened while the server was down."""
        for queue in self.queues:
            await queue.refresh_layout()

    def _check_supervisor(self) -> None:
        if self.parent_pid is not None and os.getppid() != self.parent_pid:
            log.warning("worker %s: its supervisor is gone; stopping", self.id)
            self.parent_pid = None
            self.request_stop()

    def _thread_returned(self) -> None:
        """A handler thread the worker had given up on returned: its slot is free again."""
        stuck = self.threads_stuck
        self._slots.pass_on()
        log.info("worker %s: a stuck handler thread returned (%d still stuck)", self.id, stuck)
        self._changed.set()
