"""The scheduler: fires a queue's schedules while it leads.

Any number of schedulers may run for one queue (``fairque scheduler``, or
``fairque worker --scheduler``); one leads at a time. The leader holds the queue's
scheduler lock, a key with a TTL (``lock_ttl``, 10 s by default) that it renews
every third of it; the others wait until the lock would expire and try again, so a
leader that dies is replaced within one TTL of its last renewal, well within two.
A leader that stops releases the lock (compare and delete) and pushes a hand-over
token that ends one waiting scheduler's wait, so that one takes over at once.

The leader sleeps until the next slot is due, waking early when a schedule changes
(the schedule scripts push a token to the list it blocks on) and to renew its lock.
Each firing is one script that checks the lock token and the schedule's cursor, so
a leader that lost its lock without knowing it fires nothing, and a slot is handled
once whatever the failovers and restarts; its task id is derived from the schedule
and the slot (``fairque.schedules.model.slot_task_id``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any

from redis.exceptions import RedisClusterException, RedisError, ResponseError

from fairque.client.aio import AsyncFairQueue
from fairque.common.pauses import pass_on_cancellation, pause_unless, pause_until_done
from fairque.errors import ConfigError, NotLeader, ServerError
from fairque.schedules.codec import new_token

log = logging.getLogger("fairque.scheduler")

#: Default lock TTL in seconds.
DEFAULT_LOCK_TTL = 10.0
#: How late a server may time a blocking wait out (a tick of hz 10, and a margin).
_TICK = 0.2


class Scheduler:
    """Fires the schedules of one queue while it holds the queue's scheduler lock.

    Args:
        queue: the queue's asyncio client.
        lock_ttl: seconds the lock lasts without renewal (renewed every third of it;
            a dead leader is replaced within this long).
        batch: due schedules read per pass.
        token: the lock token (default ``host:pid:random``).
    """

    def __init__(
        self,
        queue: AsyncFairQueue,
        *,
        lock_ttl: float = DEFAULT_LOCK_TTL,
        batch: int = 100,
        token: str | None = None,
    ) -> None:
        if isinstance(lock_ttl, bool) or not isinstance(lock_ttl, int | float):
            raise ConfigError(f"lock_ttl must be a number of seconds, got {lock_ttl!r}")
        if not 0.1 <= lock_ttl <= 3600:
            raise ConfigError(f"lock_ttl must be between 0.1 and 3600 seconds, got {lock_ttl}")
        self.queue = queue
        self.lock_ttl = float(lock_ttl)
        self.batch = batch
        self.token = token or new_token()
        self.leading = False
        self.fired = 0
        self.skipped = 0
        self._stop = asyncio.Event()
        self._renewed = 0.0

    def stop(self) -> None:
        """Ask ``run`` to return (it releases the lock first)."""
        self._stop.set()

    async def run(self) -> None:
        """Lead when possible and fire due schedules until ``stop``.

        An unreachable server is waited out (retried with a growing pause up to 5 s,
        logged); the lock decides afterwards whether this scheduler still leads.
        """
        self._renewed = 0.0
        pause = 0.0
        try:
            while not self._stop.is_set():
                pass_on_cancellation()
                try:
                    await self._step()
                    pause = 0.0
                except (RedisError, RedisClusterException, OSError) as exc:
                    if isinstance(exc, ResponseError) and not isinstance(exc, ServerError):
                        raise
                    pause = min(max(pause * 2, 0.1), 5.0)
                    log.warning(
                        "scheduler %s: the server is unreachable (%s); retrying in %.1f s",
                        self.token, exc, pause,
                    )  # fmt: skip
                    await self._sleep(pause)
        finally:
            if self.leading:
                with contextlib.suppress(RedisError, RedisClusterException, OSError):
                    await self.queue.release_scheduler_lock(self.token)
                self._lead(False)

    async def _step(self) -> None:
        """Take or keep the lead, fire what is due, wait for the next slot."""
        loop = asyncio.get_running_loop()
        if not self.leading:
            # a sharded queue's leader holds every shard's lock: know them all first
            await self.queue.refresh_layout()
            acquired, seconds = await self.queue.acquire_scheduler_lock(self.token, self.lock_ttl)
            if not acquired:
                # the holder's lock expires in `seconds` unless it renews; a holder
                # that stops hands over at once (its release wakes this wait)
                await self._wait(min(max(seconds, 0.01), self.lock_ttl), handover=True)
                return
            self._lead(True)
            self._renewed = loop.time()
        elif loop.time() - self._renewed >= self.lock_ttl / 3:
            shards = len(self.queue.layout.tags)
            await self.queue.refresh_layout()
            if len(self.queue.layout.tags) != shards:  # a resize added shards: lock them
                self._lead(False)
                return
            if not await self.queue.renew_scheduler_lock(self.token, self.lock_ttl):
                self._lead(False)
                return
            self._renewed = loop.time()
        try:
            wait = await self.run_once()
        except NotLeader:
            self._lead(False)
            return
        budget = self.lock_ttl / 3 - (loop.time() - self._renewed)
        timeout = budget if wait is None else min(wait, budget)
        if timeout <= 0:
            return
        log.debug("scheduler %s waits %.3f s", self.token, timeout)
        # a server times a blocking wait out on its next tick (about every 100 ms):
        # block until shortly before the slot (or the renewal), then sleep the rest on
        # the local clock
        due = loop.time() + timeout
        if timeout > _TICK and await self._wait(timeout - _TICK):
            return  # a schedule changed, or stop
        await self._sleep(due - loop.time())

    async def run_once(self) -> float | None:
        """One pass of the leader: fire every due schedule.

        Returns:
            Seconds until the next slot is due (0: look again now; None: nothing
            is planned).

        Raises:
            NotLeader: this scheduler's token no longer holds the lock.
        """
        read = await self.queue.due_schedules(self.batch)
        again = len(read.due) >= self.batch
        soonest = read.next_ms
        for stored in read.due:
            outcome = await self.queue.fire_schedule(stored, read.now_ms, self.token)
            schedule_id = stored.schedule.schedule_id
            if outcome.stale:  # changed since it was read: read it again
                again = True
                continue
            self.fired += outcome.created
            self.skipped += outcome.skipped
            if outcome.skipped:
                log.warning(
                    "schedule %s: %d missed slot(s) skipped (misfire policy %s)",
                    schedule_id, outcome.skipped, stored.schedule.misfire,
                )  # fmt: skip
            for task_id in outcome.task_ids:
                log.info("schedule %s fired: task %s", schedule_id, task_id)
            if outcome.next_fire_at is not None:
                planned = round(outcome.next_fire_at.timestamp() * 1000)
                soonest = planned if soonest is None else min(soonest, planned)
        if again:
            return 0.0
        if soonest is None:
            return None
        # the server's clock placed the slot: the wait is measured from its reading
        return max(soonest - read.now_ms, 0) / 1000

    def _lead(self, leading: bool) -> None:
        if leading != self.leading:
            log.info(
                "scheduler %s %s queue %s",
                self.token, "leads" if leading else "no longer leads", self.queue.queue,
            )  # fmt: skip
        self.leading = leading

    async def _sleep(self, seconds: float) -> None:
        await pause_unless(self._stop, seconds)

    async def _wait(self, seconds: float, handover: bool = False) -> bool:
        """Block on the schedules' wake-up list (or, ``handover``, on the leader's
        hand-over token) for ``seconds``, or until ``stop``.

        Returns:
            True when a schedule changed (the lock was handed over) or ``stop`` was
            asked, False on time out.
        """
        wait = self.queue.wait_for_handover if handover else self.queue.wait_for_schedules
        waiting = asyncio.ensure_future(wait(seconds))
        try:
            await pause_until_done(waiting, self._stop)
        finally:
            if not waiting.done():
                waiting.cancel()
                # let the cancelled wait give its connection back; a cancellation of
                # this task meanwhile is passed on (``asyncio.wait`` never swallows one)
                await asyncio.wait({waiting})
        if waiting.cancelled():
            return self._stop.is_set()
        failure = waiting.exception()
        if failure is not None:
            raise failure
        return self._stop.is_set() or bool(waiting.result())


class SchedulerThread:
    """Schedulers for some queues on a thread of their own (``fairque worker --scheduler``).

    The worker keeps its event loop to itself; the schedulers run on a private loop
    with their own connections, and ``stop`` releases their locks.

    Args:
        url: the server.
        queues: the queues whose schedules to fire.
        cluster: a cluster (None: ask the server).
        lock_ttl: see ``Scheduler``.
        options: queue options (``QueueOptions``).
    """

    def __init__(
        self,
        url: str,
        queues: list[str],
        *,
        cluster: bool | None = None,
        lock_ttl: float = DEFAULT_LOCK_TTL,
        **options: Any,
    ) -> None:
        self.schedulers = [
            Scheduler(AsyncFairQueue.from_url(url, name, cluster=cluster, **options),
                      lock_ttl=lock_ttl)
            for name in queues
        ]  # fmt: skip
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name="fairque-scheduler", daemon=True)

    def _main(self) -> None:
        async def everything() -> None:
            try:
                await asyncio.gather(*(s.run() for s in self.schedulers))
            finally:
                for s in self.schedulers:
                    await s.queue.close()

        try:
            self._loop.run_until_complete(everything())
        except Exception:  # the worker goes on; say why schedules stopped firing
            log.exception("the scheduler stopped")
        finally:
            self._loop.close()

    def start(self) -> None:
        """Start firing (on the thread)."""
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every scheduler (releasing its lock) and wait up to ``timeout`` seconds."""
        if self._thread.is_alive():
            for s in self.schedulers:
                self._loop.call_soon_threadsafe(s.stop)
            self._thread.join(timeout)

    def __enter__(self) -> SchedulerThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
