"""The worker under faults: idle races, stuck threads, handler budgets, outages, upkeep."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
import redis
from helpers.servers import ServerInfo, SyncClient
from helpers.support import unique_queue
from helpers.worker_handlers import Harness, eventually, wait_registered, wait_state

from fairque import AsyncFairQueue, Context, Registry, Retry, Task, TaskState, Worker, WorkerConfig
from fairque.cli.embedded import EmbeddedServer, free_port
from fairque.common.urls import redact_text as redact
from fairque.core.keys import QueueKeys
from fairque.worker import upkeep
from fairque.worker.execution import Stage
from fairque.worker.link import ErrorLog, Link, describe


def worker_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "fairque.worker"]


# ---------------------------------------------------------------------------- idle pick-up
class CountingQueue(AsyncFairQueue):
    """A real queue that records every count the worker asks for, answering a little late.

    The idle fetch answers later than a completion wave, so a wave that overlaps an
    idle fetch is the one to find newly pushed tasks.
    """

    counts: list[int]

    async def complete_and_pop(
        self, done: Sequence[tuple[Task, Any]], count: int = 1, *args: Any, **kwargs: Any
    ) -> tuple[list[bool], list[Task]]:
        self.counts.append(count)
        await asyncio.sleep(0.01)
        return await super().complete_and_pop(done, count, *args, **kwargs)

    async def wait_and_pop(
        self, timeout: float, count: int = 1, *args: Any, **kwargs: Any
    ) -> list[Task]:
        self.counts.append(count)
        await asyncio.sleep(0.03)
        return await super().wait_and_pop(timeout, count, *args, **kwargs)


async def test_idle_fetch_and_completion_wave_never_ask_for_more_than_the_free_slots(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: ``free_slots - reserved`` went negative while an idle fetch was open.

    An idle fetch and a completion wave both asked for the same free slots; the
    wave leased them, and the next wave asked for a negative count (an error and a
    1 s stall).
    """
    q = cast(
        CountingQueue,
        CountingQueue.from_url(h.server.url, unique_queue(), cluster=h.server.cluster),
    )
    h.queues.append(q)
    q.counts = []
    reg, gate = Registry(), asyncio.Event()
    held: list[str] = []

    @reg.task(name="noop")
    async def noop() -> None:
        await asyncio.sleep(0.1)  # the worker's next idle fetch is open when this ends

    @reg.task(name="seed")
    async def seed() -> None:  # spawned by an idle fetch; pushes while the worker is busy
        await q.push_many([Task(user_id=f"h{i}", name="hold") for i in range(3)])

    @reg.task(name="hold")
    async def hold(ctx: Context) -> None:
        held.append(ctx.task_id)
        await gate.wait()

    worker = h.start(q, reg, poll_interval_seconds=30, max_concurrent_tasks=4)
    await asyncio.sleep(0.3)
    first = await q.enqueue("noop", user_id="a")  # finishes while an idle fetch is open
    await wait_state(q, first.task_id, TaskState.FINISHED)
    await asyncio.sleep(0.1)
    await q.enqueue("seed", user_id="b")
    await eventually(lambda: len(held) == 3, timeout=5)
    released = time.monotonic()
    gate.set()
    await eventually(lambda: worker.in_flight == 0, timeout=30)
    # promptly: a worker that missed the change would sit out its 30 s wait
    assert time.monotonic() - released < q.options.lease_seconds / 10
    assert min(q.counts) >= 0, q.counts
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    completed = (await q.stats()).counters["completed"]
    assert completed == 5


# ---------------------------------------------------------------------------- stuck threads
async def test_stuck_sync_handlers_hold_their_slots_and_later_tasks_still_run(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """Two sync handlers outlive their timeout; the quick tasks after them run, late but run."""
    q, reg = h.queue(), Registry()
    gate = threading.Event()
    ran: list[str] = []
    reg.register(lambda: gate.wait(10), name="hang", timeout=0.3)
    reg.register(lambda ctx: ran.append(ctx.task_id), name="quick")
    worker = h.start(q, reg, id="w-stuck", max_concurrent_tasks=2, heartbeat_interval_seconds=0.1)
    hung = [await q.enqueue("hang", user_id=f"h{i}", max_retries=0) for i in range(2)]
    for t in hung:
        failed = await wait_state(q, t.task_id, TaskState.FAILED)
        assert failed.error == "timeout after 0.3s"
    quick = [await q.enqueue("quick", user_id=f"q{i}") for i in range(10)]
    await eventually(lambda: worker.threads_stuck == 2)
    for _ in range(50):  # the registration catches up within a few heartbeats
        info = await wait_registered(q, "w-stuck")
        if info.threads_stuck == 2:
            break
        await asyncio.sleep(0.05)
    assert info.threads_stuck == 2
    await asyncio.sleep(0.5)
    # no slot is usable: nothing was leased, so nothing can time out unstarted
    for t in quick:
        await wait_state(q, t.task_id, TaskState.QUEUED, timeout=0)
    stuck_lines = [
        m for m in map(logging.LogRecord.getMessage, worker_records(caplog)) if "stuck" in m
    ]
    assert any("2 thread(s) stuck, 0 of 2 slot(s) usable" in m for m in stuck_lines), stuck_lines
    gate.set()  # the hung handlers return: their threads and slots are free again
    for t in quick:
        done = await wait_state(q, t.task_id, TaskState.FINISHED)
        assert (done.retry_count, done.error) == (0, None)
    assert sorted(ran) == sorted(cast(str, t.task_id) for t in quick)
    assert worker.threads_stuck == 0


async def test_sync_timeout_counts_from_the_handler_start(h: Harness) -> None:
    """A call that waited for a pool thread is not charged for the wait."""
    q, reg = h.queue(), Registry()
    reg.register(lambda: time.sleep(0.4), name="slow", timeout=0.6)
    worker = h.start(q, reg, max_concurrent_tasks=1)
    tasks = [await q.enqueue("slow", user_id=f"u{i}", max_retries=0) for i in range(3)]
    for t in tasks:
        done = await wait_state(q, t.task_id, TaskState.FINISHED)
        assert done.error is None
    assert worker.threads_stuck == 0


# ---------------------------------------------------------------------------- handler budgets
@pytest.mark.parametrize("budget", [5, 1, 0])
async def test_handler_max_retries_decides_retry_or_failed(h: Harness, budget: int) -> None:
    q, reg = h.queue(retry_base_seconds=0.01, max_retries=3), Registry()
    attempts: list[int] = []

    @reg.task(name="boom", max_retries=budget)
    async def boom(ctx: Context) -> None:
        attempts.append(ctx.attempt)
        if ctx.attempt % 2:
            raise RuntimeError("odd attempt")
        raise Retry(delay=0)

    h.start(q, reg)
    t = await q.enqueue("boom", user_id="u")  # stored budget: the queue's 3
    failed = await wait_state(q, t.task_id, TaskState.FAILED)
    assert failed.retry_count == budget
    assert attempts == list(range(1, budget + 2))


# ---------------------------------------------------------------------------- maintenance
async def test_worker_runs_maintenance_periodically(h: Harness, redis_client: SyncClient) -> None:
    q, reg = h.queue(), Registry()
    upstream = await q.enqueue("never", user_id="u", delay=3600)
    dependent = await q.enqueue("never", user_id="u", depends_on=[cast(str, upstream.task_id)])
    await wait_state(q, dependent.task_id, TaskState.DEFERRED, timeout=0)
    # the upstream's data expires before it ever ran: only a clean-up can release its dependent
    redis_client.delete(QueueKeys(q.queue).task(cast(str, upstream.task_id)))
    h.start(q, reg, maintenance_interval_seconds=0.2)
    canceled = await wait_state(q, dependent.task_id, TaskState.CANCELED, timeout=5)
    assert canceled.state == TaskState.CANCELED


async def test_a_maintenance_round_is_bounded_and_the_next_resumes(
    h: Harness, redis_client: SyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(upkeep, "CLEANUP_BATCH", 1)
    monkeypatch.setattr(upkeep, "CLEANUP_STEPS", 1)
    q = h.queue()
    dependents = []
    for user in ("a", "b"):
        upstream = await q.enqueue("never", user_id=user, delay=3600)
        up_id = cast(str, upstream.task_id)
        dependents.append(await q.enqueue("never", user_id=user, depends_on=[up_id]))
        redis_client.delete(QueueKeys(q.queue).task(up_id))
    worker = Worker(q, Registry(), WorkerConfig())
    assert await worker.maintain() == 1  # one DEFERRED task examined in this round
    states = {cast(Task, await q.get(cast(str, t.task_id))).state for t in dependents}
    assert states == {TaskState.CANCELED, TaskState.DEFERRED}
    assert await worker.maintain() == 1
    for t in dependents:
        await wait_state(q, t.task_id, TaskState.CANCELED, timeout=0)


class MaintainedQueue(AsyncFairQueue):
    """A real queue that counts its maintenance calls and the batch they were bounded by."""

    batches: list[int]

    async def maintain(self, batch: int = 1000) -> int:
        self.batches.append(batch)
        return int(await super().maintain(batch))


async def test_maintenance_trims_registries_in_bounded_calls(h: Harness) -> None:
    q = cast(
        MaintainedQueue,
        MaintainedQueue.from_url(h.server.url, unique_queue(), cluster=h.server.cluster),
    )
    h.queues.append(q)
    q.batches = []
    h.start(q, Registry(), maintenance_interval_seconds=0.1)
    await eventually(lambda: len(q.batches) >= 3, timeout=5)
    assert set(q.batches) == {1000}


def test_worker_config_validates_the_new_settings() -> None:
    assert WorkerConfig().wait_for_server_seconds == 30
    assert WorkerConfig().maintenance_interval_seconds == 60
    for bad in ({"wait_for_server_seconds": -1}, {"maintenance_interval_seconds": float("nan")},
                {"wait_for_server_seconds": float("inf")}):  # fmt: skip
        with pytest.raises(ValueError, match=next(iter(bad))):
            WorkerConfig(**bad)


# ---------------------------------------------------------------------------- outages
@pytest.fixture
def private_server(tmp_path: Path) -> Iterator[EmbeddedServer]:
    """A Valkey of this test alone, persisting every write (AOF, fsync always)."""
    server = EmbeddedServer(
        port=free_port(),
        workdir=tmp_path / "server",
        extra_args=["--appendonly", "yes", "--appendfsync", "always"],
    )
    yield server
    server.stop()


def kill(server: EmbeddedServer) -> None:
    pid = server.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    server.stop()  # reaps it; the data stays in the working directory


async def test_worker_rides_out_a_server_restart_and_completes_each_task_once(
    private_server: EmbeddedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="fairque.worker")
    private_server.start()
    h = Harness(ServerInfo("valkey", private_server.url, cluster=False))
    try:
        q, reg = h.queue(), Registry()
        runs: dict[str, int] = {}

        @reg.task(name="job")
        async def job(ctx: Context) -> str:
            await asyncio.sleep(0.02)
            runs[ctx.task_id] = runs.get(ctx.task_id, 0) + 1
            return ctx.task_id

        tasks = await q.push_many([Task(user_id=f"u{i % 5}", name="job") for i in range(150)])
        worker = h.start(q, reg, max_concurrent_tasks=4, lease_seconds=30)
        await eventually(lambda: len(runs) >= 20)
        kill(private_server)
        outage_began = len(caplog.records)
        await asyncio.sleep(3)  # handlers finish meanwhile: their completions are held
        during = [r for r in caplog.records[outage_began:] if r.name == "fairque.worker"]
        private_server.start()  # same port, same data (AOF)
        for t in tasks:
            await wait_state(q, t.task_id, TaskState.FINISHED, timeout=30)
        assert runs == {t.task_id: 1 for t in tasks}
        stats = await q.stats()
        assert stats.counters["completed"] == 150
        assert stats.counts[TaskState.STARTED] == stats.counts[TaskState.QUEUED] == 0
        assert worker.processed == 150
        messages = [r.getMessage() for r in worker_records(caplog)]
        lost = [m for m in messages if "lost the connection to the server" in m]
        back = [m for m in messages if "connection to the server is back" in m]
        # one line for the outage, not one per failed call; once (2 of about 30 full
        # runs) a call failed again on "Connection closed by server" just after the
        # worker was back, which the worker rightly reports as a second, short loss
        assert 1 <= len(lost) == len(back) <= 2, [*lost, *back]
        assert float(back[0].split(" after ")[1].rstrip("s")) >= 3, back  # the outage
        assert [r for r in caplog.records if r.exc_info] == []
        assert len([r for r in during if r.levelno >= logging.WARNING]) <= 2, during
    finally:
        await h.close()


async def test_worker_waits_for_the_server_at_start(
    private_server: EmbeddedServer, caplog: pytest.LogCaptureFixture
) -> None:
    h = Harness(ServerInfo("valkey", private_server.url, cluster=False))
    try:
        q, reg = h.queue(), Registry()
        reg.register(lambda: "ran", name="job")
        worker = h.start(q, reg, id="patient", wait_for_server_seconds=20)
        await asyncio.sleep(1.0)
        assert not h.runs[0][1].done()  # still waiting, not crashed
        private_server.start()
        await wait_registered(q, "patient")
        t = await q.enqueue("job", user_id="u")
        await wait_state(q, t.task_id, TaskState.FINISHED)
        messages = [r.getMessage() for r in worker_records(caplog)]
        assert any("cannot reach the server; waiting up to 20s" in m for m in messages), messages
        assert [r for r in caplog.records if r.exc_info] == []
        await h.stop(worker)
    finally:
        await h.close()


async def test_worker_gives_up_when_the_server_never_comes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    q = AsyncFairQueue.from_url(url, unique_queue(), cluster=False)
    wait = 0.5
    worker = Worker(q, Registry(), WorkerConfig(wait_for_server_seconds=wait))
    begin = time.monotonic()
    with pytest.raises(redis.ConnectionError):  # not waiting forever: wait_for would cancel it
        await asyncio.wait_for(worker.run_async(), 20 * wait)
    assert time.monotonic() - begin >= wait * 0.6  # it waited (its last try may come early)
    assert [r for r in caplog.records if r.exc_info] == []
    await q.close()


class CutQueue(AsyncFairQueue):
    """A real queue whose ``fail`` and ``requeue`` lose their first ``cuts`` calls, by
    turns: a call applied on the server and its reply lost, then one lost on the way
    (not applied). The worker must send each again; the resend of an applied call is
    recognised by the script and answered as the first was.
    """

    cuts = 0
    applied = 0  # calls the server applied whose reply was lost

    async def _cut(self, send: Callable[[], Awaitable[TaskState]]) -> TaskState:
        self.cuts -= 1
        if self.cuts % 2:  # applied, then the reply lost
            await send()
            self.applied += 1
        raise redis.ConnectionError("connection reset by peer")

    async def fail(self, task: Task, *args: Any, **kwargs: Any) -> TaskState:
        send = functools.partial(super().fail, task, *args, **kwargs)
        return await (self._cut(send) if self.cuts else send())

    async def requeue(self, task: Task, delay: float = 0) -> TaskState:
        send = functools.partial(super().requeue, task, delay)
        return await (self._cut(send) if self.cuts else send())


async def test_failures_and_give_backs_are_resent_after_a_connection_error(h: Harness) -> None:
    q = cast(CutQueue, CutQueue.from_url(h.server.url, unique_queue(), cluster=h.server.cluster))
    h.queues.append(q)
    reg = Registry()
    reg.register(lambda: 1 / 0, name="bad")
    reg.register(lambda: time.sleep(5), name="long")
    q.cuts = 2
    worker = h.start(q, reg, shutdown_grace_seconds=0.1)
    bad = await q.enqueue("bad", user_id="a", max_retries=0)
    failed = await wait_state(q, bad.task_id, TaskState.FAILED, timeout=5)
    assert failed.error == "ZeroDivisionError: division by zero"
    # the first send was applied (the task FAILED then); the worker learns it from a resend
    await eventually(lambda: worker.failed == 1, timeout=10)
    q.cuts = 2
    long = await q.enqueue("long", user_id="b")
    await wait_state(q, long.task_id, TaskState.STARTED, timeout=5)
    await h.stop(worker)
    back = await wait_state(q, long.task_id, TaskState.QUEUED, timeout=0)
    assert back.retry_count == 0
    assert q.applied == 2  # one failure and one give-back applied before their resends
    stats = await q.stats()
    assert stats.counters.get("requeued", 0) == 1  # each applied once
    assert stats.counts[TaskState.FAILED] == 1


async def test_a_stop_during_an_outage_gives_up_on_held_outcomes_in_bounded_time(
    private_server: EmbeddedServer, caplog: pytest.LogCaptureFixture
) -> None:
    private_server.start()
    h = Harness(ServerInfo("valkey", private_server.url, cluster=False))
    try:
        q, reg = h.queue(), Registry()
        started, gate = [], asyncio.Event()

        slow_seconds = 30

        @reg.task(name="slow")
        async def slow() -> None:
            started.append("slow")
            await asyncio.sleep(slow_seconds)

        @reg.task(name="late")
        async def late() -> str:
            started.append("late")
            await gate.wait()
            return "finished while the server was away"

        worker = h.start(q, reg, shutdown_grace_seconds=0.2, lease_seconds=30)
        slow_task = await q.enqueue("slow", user_id="a")
        late_task = await q.enqueue("late", user_id="b")
        await eventually(lambda: len(started) == 2)
        kill(private_server)
        gate.set()  # its completion cannot be sent: it is held

        def reporting() -> bool:
            held = worker._executor.held()
            return any(e.task.task_id == late_task.task_id and e.stage is Stage.REPORTING
                       for e in held)  # fmt: skip

        await eventually(reporting)
        worker.request_stop()
        begin = time.monotonic()
        worker.request_stop()  # a second signal: give back now, give up on what cannot be sent
        await asyncio.wait_for(h.runs[0][1], slow_seconds)
        assert time.monotonic() - begin < slow_seconds / 2  # not the slow handler's end
        messages = [r.getMessage() for r in worker_records(caplog)]
        # both outcomes wait in the one ack path: the give-back and the held completion
        for what, t in (("give-back", slow_task), ("completion", late_task)):
            line = f"gave up reporting the {what} of task {t.task_id}"
            assert any(line in m for m in messages), messages
        assert any("could not report 2 outcome(s) before exiting" in m for m in messages)
        assert [r for r in caplog.records if r.exc_info] == []
    finally:
        await h.close()


# ---------------------------------------------------------------------------- the link itself
class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_link_logs_one_line_per_outage_a_reminder_and_redacts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    clock, logger = Clock(), logging.getLogger("fairque.test.link")
    base, cap = 0.1, 2.0
    link = Link("worker w", logger, base=base, cap=cap, remind_every=30, clock=clock)
    exc = redis.ConnectionError("Error connecting to redis://fq:hunter2@db:6379/0\nrefused")
    delays = []
    for _ in range(12):
        delays.append(link.failed(exc))
        clock.now += 3
    assert link.down
    assert delays[0] <= base
    assert all(base / 2 <= d <= cap for d in delays)
    assert delays[-1] >= cap / 2  # capped, with jitter of at most half
    link.ok()
    link.ok()
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "worker w: lost the connection to the server (ConnectionError: Error connecting to "
        "redis://fq:***@db:6379/0 refused); reconnecting with backoff",
        "worker w: still no connection to the server after 30s (ConnectionError: Error "
        "connecting to redis://fq:***@db:6379/0 refused)",
        "worker w: connection to the server is back after 36.0s",
    ]
    assert not link.down
    assert link.failures == 0


def test_describe_and_redact() -> None:
    assert redact("rediss://user:p%40ss@h:1/0 and redis://:pw@x") == (
        "rediss://user:***@h:1/0 and redis://:***@x"
    )
    assert describe(ValueError("x" * 300)).endswith("...")
    assert len(describe(ValueError("x" * 300))) == len("ValueError: ") + 200
    assert describe(RuntimeError()) == "RuntimeError"


def test_error_log_shows_a_traceback_once_then_one_line(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    errors = ErrorLog(logging.getLogger("fairque.test.errors"), quiet_for=30, clock=clock)
    for _ in range(3):
        errors.error("call failed", RuntimeError("boom"))
    clock.now += 31
    errors.error("call failed", RuntimeError("boom"))
    errors.error("call failed", RuntimeError("other"))
    assert [bool(r.exc_info) for r in caplog.records] == [True, False, False, True, True]
    assert caplog.records[1].getMessage() == "call failed (RuntimeError: boom; again)"


# ---------------------------------------------------------------------------- lost replies
class LosingQueue(AsyncFairQueue):
    """A real queue whose first lease replies are lost on the way back: the server ran
    the call and leased the tasks, then the client saw a connection error."""

    to_lose: int

    async def wait_and_pop(
        self, timeout: float, count: int = 1, *args: Any, **kwargs: Any
    ) -> list[Task]:
        leased = await super().wait_and_pop(timeout, count, *args, **kwargs)
        return self._maybe_lose(leased)

    async def complete_and_pop(
        self, done: Sequence[tuple[Task, Any]], count: int = 1, *args: Any, **kwargs: Any
    ) -> tuple[list[bool], list[Task]]:
        acks, leased = await super().complete_and_pop(done, count, *args, **kwargs)
        self._maybe_lose(leased)
        return acks, leased

    def _maybe_lose(self, leased: list[Task]) -> list[Task]:
        if leased and self.to_lose > 0:
            self.to_lose -= 1
            raise redis.ConnectionError("connection reset while reading the reply")
        return leased


async def test_a_lease_reply_lost_to_a_connection_error_is_recovered_at_once(
    h: Harness,
) -> None:
    """The worker resends the lease request under the same id, so the server hands back
    the tasks it leased for the lost reply: they run now, once, as first attempts,
    instead of waiting for their leases (30 s) to expire and counting a failure."""
    q = cast(
        LosingQueue,
        LosingQueue.from_url(
            h.server.url, unique_queue(), cluster=h.server.cluster, lease_seconds=30
        ),
    )
    q.to_lose = 2
    h.queues.append(q)
    ran: list[str] = []
    reg = Registry()
    reg.register(lambda ctx: ran.append(ctx.task_id), name="job")
    tasks = [await q.enqueue("job", user_id=f"u{i}") for i in range(6)]
    h.start(q, reg, id="unlucky", max_concurrent_tasks=2, batch_size=2)
    for t in tasks:
        done = await wait_state(q, t.task_id, TaskState.FINISHED, timeout=10)
        assert done.retry_count == 0
    assert q.to_lose == 0
    assert sorted(ran) == sorted(t.task_id or "" for t in tasks)
