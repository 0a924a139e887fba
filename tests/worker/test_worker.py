"""The in-process worker: handlers, retries, timeouts, leases, shutdown, hooks, registry."""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import os
import signal
import threading
import time
import uuid
from typing import Any, cast

import pytest
import redis.asyncio as aredis
from helpers.servers import SyncClient
from helpers.support import unique_queue
from helpers.worker_handlers import (
    Broken,
    FlakyQueue,
    Harness,
    Recorder,
    Sleeper,
    SwallowingQueue,
    eventually,
    stored_result,
    wait_registered,
    wait_state,
)

import fairque
from fairque import (
    AsyncFairQueue,
    ConfigError,
    Context,
    Priority,
    Registry,
    Retry,
    TaskState,
    Worker,
    WorkerConfig,
)
from fairque.worker import Handler, default_registry

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


# ---------------------------------------------------------------------------- execution
async def test_handlers_of_every_kind_run_and_store_results(
    h: Harness, redis_client: SyncClient
) -> None:
    q, reg = h.queue(), Registry()

    @reg.task(name="async2")
    async def async2(ctx: Context, payload: Any) -> dict[str, Any]:
        return {"echo": payload, "attempt": ctx.attempt, "user": ctx.user_id, "id": ctx.task_id}

    @reg.task(name="sync1")
    def sync1(payload: Any) -> dict[str, Any]:
        seen = VAR.get()
        VAR.set("changed inside")
        return {"thread": threading.current_thread().name, "var": seen, "n": payload["n"] + 1}

    @reg.task(name="async0")
    async def async0() -> str:
        return "no arguments"

    @reg.task(name="sync2")
    def sync2(ctx: Context, payload: Any) -> str:
        ctx.logger.info("running")
        return f"{ctx.worker_id}:{payload}"

    @reg.task(name="none")
    def nothing() -> None:
        return None

    @reg.task(name="ctx_only")
    async def ctx_only(ctx: Context) -> dict[str, Any]:
        return {"name": ctx.task.name, "up": await ctx.upstream_results()}

    token = VAR.set("from test")
    try:
        worker = h.start(q, reg, id="w-kinds")
    finally:
        VAR.reset(token)
    tasks = [
        await q.enqueue("async2", {"a": 1}, user_id="alice"),
        await q.enqueue("sync1", {"n": 41}, user_id="bob"),
        await q.enqueue("async0", user_id="carol"),
        await q.enqueue("sync2", "x", user_id="dave"),
        await q.enqueue("none", user_id="erin"),
    ]
    up = [cast(str, tasks[0].task_id)]
    tasks.append(await q.enqueue("ctx_only", "ignored", user_id="frank", depends_on=up))
    for t in tasks:
        done = await wait_state(q, t.task_id, TaskState.FINISHED)
        assert (done.retry_count, done.error) == (0, None)
    results = [stored_result(redis_client, q, t.task_id) for t in tasks]
    assert results[0] == {"echo": {"a": 1}, "attempt": 1, "user": "alice", "id": tasks[0].task_id}
    assert results[1]["thread"].startswith("fairque-handler")
    assert (results[1]["var"], results[1]["n"]) == ("from test", 42)
    assert results[2:5] == ["no arguments", "w-kinds:x", None]
    assert results[5] == {"name": "ctx_only", "up": {up[0]: results[0]}}
    assert await q.result(cast(str, tasks[0].task_id)) == results[0]
    assert VAR.get() == "unset"
    assert (await q.stats()).counters["completed"] == 6
    assert (worker.processed, worker.failed, worker.in_flight) == (6, 0, 0)


async def test_exception_is_retried_with_backoff_then_failed(h: Harness) -> None:
    q, reg = h.queue(retry_base_seconds=0.1), Registry()
    seen: list[tuple[int, float]] = []

    @reg.task(name="boom")
    async def boom(ctx: Context, payload: Any) -> None:
        seen.append((ctx.attempt, time.monotonic()))
        raise ValueError(f"bad input {payload}")

    h.start(q, reg)
    t = await q.enqueue("boom", 7, user_id="u", max_retries=2)
    failed = await wait_state(q, t.task_id, TaskState.FAILED)
    assert (failed.error, failed.retry_count) == ("ValueError: bad input 7", 2)
    assert [a for a, _ in seen] == [1, 2, 3]
    gaps = [b - a for (_, a), (_, b) in itertools.pairwise(seen)]
    assert gaps[0] >= 0.09  # base * 2**0
    assert gaps[1] >= 0.19  # base * 2**1
    counters = (await q.stats()).counters
    assert (counters["retried"], counters["failed"]) == (2, 1)


async def test_retry_exception_reschedules_until_success(h: Harness) -> None:
    q, reg = h.queue(retry_base_seconds=60), Registry()  # only Retry's delay can be this fast
    attempts: list[int] = []

    @reg.task(name="flaky")
    async def flaky(ctx: Context, payload: Any) -> int:
        attempts.append(ctx.attempt)
        if ctx.attempt < 3:
            raise Retry(delay=0.05)
        return ctx.attempt

    @reg.task(name="always")
    def always() -> None:
        raise Retry(delay=0, reason="not ready yet")

    h.start(q, reg)
    ok = await q.enqueue("flaky", user_id="u")
    never = await q.enqueue("always", user_id="v", max_retries=1)
    done = await wait_state(q, ok.task_id, TaskState.FINISHED)
    assert attempts == [1, 2, 3]
    assert done.retry_count == 2
    failed = await wait_state(q, never.task_id, TaskState.FAILED)
    assert (failed.error, failed.retry_count) == ("not ready yet", 1)


async def test_fail_ends_an_attempt_with_its_own_kind_and_details(h: Harness) -> None:
    """``Fail(retry=False)`` fails the task at once, whatever its budget; ``Fail()``
    retries it as an exception would; details the serializer cannot take are kept as
    their repr; no traceback is kept for a failure the handler chose."""
    q, reg = h.queue(retry_base_seconds=0.05), Registry()
    attempts: list[int] = []

    @reg.task(name="final")
    async def final() -> None:
        raise fairque.Fail("refused", retry=False, kind="invalid", details={"field": "to"})

    @reg.task(name="again")
    def again(ctx: Context) -> None:
        attempts.append(ctx.attempt)
        raise fairque.Fail("busy", kind="busy", details=object())

    h.start(q, reg)
    once = await q.enqueue("final", user_id="u", max_retries=5)
    twice = await q.enqueue("again", user_id="v", max_retries=1)
    failed = await wait_state(q, once.task_id, TaskState.FAILED)
    assert (failed.error, failed.retry_count) == ("refused", 0)
    out = await q.outcome(cast(str, once.task_id))
    assert out is not None
    assert (out.reason, out.details, out.traceback) == ("invalid", {"field": "to"}, None)
    failed = await wait_state(q, twice.task_id, TaskState.FAILED)
    assert (failed.error, failed.retry_count) == ("busy", 1)
    assert attempts == [1, 2]
    out = await q.outcome(cast(str, twice.task_id))
    assert out is not None
    assert out.reason == "busy"
    assert isinstance(out.details, str)
    assert out.details.startswith("<object object")


async def test_timeouts_from_task_handler_and_worker(h: Harness) -> None:
    q, reg = h.queue(), Sleeper().registry
    reg.register(lambda: time.sleep(1.0), name="slow_sync")
    worker = h.start(q, reg, task_timeout_seconds=0.3)
    by_task = await q.enqueue("sleep", 5, user_id="a", timeout=0.2, max_retries=1)
    by_handler = await q.enqueue("sleep_h", 5, user_id="b", max_retries=0)
    by_worker = await q.enqueue("sleep", 5, user_id="c", max_retries=0)
    in_thread = await q.enqueue("slow_sync", user_id="d", timeout=0.2, max_retries=0)
    failed = await wait_state(q, in_thread.task_id, TaskState.FAILED)
    assert worker.threads_busy == 1  # a thread cannot be interrupted; it runs on
    expected = [
        (by_task, "timeout after 0.2s", 1),
        (by_handler, "timeout after 0.25s", 0),
        (by_worker, "timeout after 0.3s", 0),
        (in_thread, "timeout after 0.2s", 0),
    ]
    for t, error, retries in expected:
        failed = await wait_state(q, t.task_id, TaskState.FAILED)
        assert (failed.error, failed.retry_count) == (error, retries)
        assert (failed.failure_reason, failed.traceback) == ("timeout", None)
    await eventually(lambda: worker.threads_busy == 0)


async def test_unknown_name_and_unserializable_result_fail(h: Harness) -> None:
    q, reg = h.queue(), Registry()

    @reg.task(name="weird")
    async def weird() -> object:
        return object()

    @reg.task(name="huge")
    async def huge() -> str:
        return "x" * 2_000_000  # over max_payload_bytes (1 MiB), which bounds results too

    h.start(q, reg, unknown_tasks="fail")
    unknown = await q.enqueue("nope", user_id="u", max_retries=0)
    bad = await q.enqueue("weird", user_id="v", max_retries=3)
    big = await q.enqueue("huge", user_id="w", max_retries=3)
    failed = await wait_state(q, unknown.task_id, TaskState.FAILED)
    assert "no handler registered for task name 'nope'" in (failed.error or "")
    failed = await wait_state(q, bad.task_id, TaskState.FAILED)
    assert failed.retry_count == 0  # not retried: it would fail the same way
    assert (failed.error or "").startswith("result not serializable")
    failed = await wait_state(q, big.task_id, TaskState.FAILED)
    assert failed.retry_count == 0
    assert (failed.error or "").startswith("result too large: result is 2000002 bytes")


async def test_concurrency_is_bounded(h: Harness) -> None:
    q, s = h.queue(), Sleeper()
    tasks = [await q.enqueue("sleep", 0.2, user_id=f"u{i % 3}") for i in range(9)]
    h.start(q, s.registry, max_concurrent_tasks=3)
    for t in tasks:
        await wait_state(q, t.task_id, TaskState.FINISHED)
    assert (s.peak, s.started) == (3, 9)


async def test_assigned_users_are_respected(h: Harness) -> None:
    q, reg = h.queue(), Registry()
    reg.register(lambda: "ok", name="job")
    mine = await q.enqueue("job", user_id="alice")
    other = await q.enqueue("job", user_id="bob")
    h.start(q, reg, assigned_users=["alice"])
    await wait_state(q, mine.task_id, TaskState.FINISHED)
    await asyncio.sleep(0.3)
    await wait_state(q, other.task_id, TaskState.QUEUED, timeout=0)


# ---------------------------------------------------------------------------- leases
async def test_heartbeat_keeps_a_long_task_leased(h: Harness) -> None:
    """A handler that runs past its lease keeps it: the heartbeat moves the deadline on
    (twice, awaited), nothing is reclaimed, and the task finishes in its first attempt."""
    q, reg, gate = h.queue(), Registry(), asyncio.Event()

    @reg.task(name="long")
    async def long() -> None:
        await gate.wait()

    h.start(q, reg, lease_seconds=2.0)
    t = await q.enqueue("long", user_id="u")
    first = await wait_state(q, t.task_id, TaskState.STARTED)
    assert first.lease_deadline is not None
    seen = first.lease_deadline
    for _ in range(2):  # two heartbeats, each moving the deadline on
        while True:
            now = await q.get(t.task_id or "")
            assert now is not None
            assert now.state is TaskState.STARTED
            assert now.lease_deadline is not None
            if now.lease_deadline > seen:
                seen = now.lease_deadline
                break
            await asyncio.sleep(0.05)
    assert seen > first.lease_deadline  # past its first deadline, held all along
    assert await q.reclaim() == 0
    gate.set()
    done = await wait_state(q, t.task_id, TaskState.FINISHED)
    assert done.retry_count == 0
    assert (await q.stats()).counters.get("reclaimed", 0) == 0


async def test_canceled_task_stops_its_handler(h: Harness) -> None:
    q, s = h.queue(), Sleeper()
    # frequent heartbeats, a lease no busy machine lets lapse
    worker = h.start(q, s.registry, lease_seconds=30, heartbeat_interval_seconds=0.1)
    t = await q.enqueue("sleep", 5, user_id="u")
    await eventually(lambda: s.running == 1)
    assert await q.cancel(cast(str, t.task_id)) is True
    await eventually(lambda: s.cancelled == 1)  # the heartbeat (or the stop wait) noticed
    await eventually(lambda: worker.in_flight == 0)  # and the worker has its answer
    canceled = await wait_state(q, t.task_id, TaskState.CANCELED)
    assert canceled.retry_count == 0
    assert (await q.stats()).counters.get("requeued", 0) == 0


async def test_lease_lost_at_every_exit_is_reported_not_applied(h: Harness) -> None:
    q, reg, rec = h.queue(), Registry(), Recorder()
    gate = asyncio.Event()

    @reg.task(name="gated")
    async def gated(payload: str) -> str:
        await gate.wait()
        if payload == "raise":
            raise RuntimeError("too late")
        if payload == "hang":
            await asyncio.sleep(5)
        return payload

    ids = [cast(str, (await q.enqueue("gated", p, user_id=p)).task_id) for p in ("ok", "raise")]
    ids.append(cast(str, (await q.enqueue("gated", "hang", user_id="hang")).task_id))

    async def deaf(worker_id: str, timeout: float) -> None:
        await asyncio.sleep(timeout)  # a worker whose wait for cancels is down

    q.wait_for_cancel = deaf  # type: ignore[method-assign]
    worker = h.start(q, reg, hooks=(rec,), shutdown_grace_seconds=0.1)  # heartbeat: 10 s
    await eventually(lambda: worker.in_flight == 3)
    for task_id in ids:  # canceled behind the worker's back: complete/fail/requeue lose
        assert await q.cancel(task_id) is True
    gate.set()
    await eventually(lambda: worker.in_flight == 1)
    await h.stop(worker)
    assert all(o.lease_lost and o.state is None for o in rec.outcomes)
    got = sorted(repr(o.result or o.error) for o in rec.outcomes)
    assert got == ["'ok'", "None", "RuntimeError('too late')"]
    for task_id in ids:
        await wait_state(q, task_id, TaskState.CANCELED, timeout=0)
    assert (worker.processed, worker.failed) == (0, 0)


async def test_stop_before_start_and_on_sigterm(h: Harness) -> None:
    q, reg = h.queue(), Registry()
    early = Worker(q, reg, WorkerConfig(id="early"))
    early.request_stop()
    await asyncio.wait_for(early.run_async(), 5)  # returns without fetching
    worker = Worker(q, reg, WorkerConfig(id="signalled", poll_interval_seconds=30))
    job = asyncio.create_task(worker.run_async(install_signals=True))
    await wait_registered(q, "signalled")  # signal handlers are installed by now
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(job, 5)
    assert await q.workers() == []


async def test_stop_survives_a_lost_heartbeat_cancellation(h: Harness) -> None:
    """Regression: run_async used to cancel its heartbeat once and wait forever."""
    url, cluster = h.server.url, h.server.cluster
    q = cast(SwallowingQueue, SwallowingQueue.from_url(url, unique_queue(), cluster=cluster))
    h.queues.append(q)
    q.inside = asyncio.Event()
    worker = h.start(q, Registry(), heartbeat_interval_seconds=0.05)
    await wait_registered(q, worker.id)
    q.armed = True
    await asyncio.wait_for(q.inside.wait(), 5)  # the heartbeat is inside its call
    await h.stop(worker, timeout=2)


async def test_transient_queue_errors_are_retried(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    url, cluster = h.server.url, h.server.cluster
    q = cast(FlakyQueue, FlakyQueue.from_url(url, unique_queue(), cluster=cluster))
    h.queues.append(q)
    s = Sleeper()
    worker = h.start(q, s.registry, lease_seconds=30, heartbeat_interval_seconds=0.1)
    await wait_registered(q, worker.id)
    q.broken = {"wait_and_pop", "register_worker", "complete_and_pop"}
    await eventually(lambda: not q.broken - {"complete_and_pop"})
    t = await q.enqueue("sleep", 0.2, user_id="u")
    await wait_state(q, t.task_id, TaskState.FINISHED)
    assert not q.broken
    assert (await q.result(cast(str, t.task_id)), worker.processed) == (0.2, 1)
    records = [r for r in caplog.records if r.name == "fairque.worker"]
    logged = [r.getMessage() for r in records]
    for name in ("register_worker", "wait_and_pop", "complete_and_pop"):
        lost = (
            f"worker {worker.id}: lost the connection to the server "
            f"(ConnectionError: injected failure in {name}); reconnecting with backoff"
        )
        assert lost in logged
    back = [m for m in logged if "connection to the server is back" in m]
    assert len(back) == 3
    assert [r for r in records if r.exc_info] == []  # one line each, no traceback


# ---------------------------------------------------------------------------- shutdown
@pytest.mark.parametrize(
    ("grace", "expected"), [(5.0, TaskState.FINISHED), (0.1, TaskState.QUEUED)]
)
async def test_graceful_stop(h: Harness, grace: float, expected: TaskState) -> None:
    q, s = h.queue(), Sleeper()
    tasks = [await q.enqueue("sleep", 0.5, user_id=u) for u in ("a", "b")]
    worker = h.start(q, s.registry, shutdown_grace_seconds=grace)
    await eventually(lambda: s.started == 2)
    await h.stop(worker)
    for t in tasks:
        got = await wait_state(q, t.task_id, expected, timeout=0)
        assert got.retry_count == 0
    counters = (await q.stats()).counters
    assert counters.get("requeued", 0) == (2 if expected == TaskState.QUEUED else 0)


async def test_second_stop_request_gives_back_at_once(h: Harness) -> None:
    q, s = h.queue(), Sleeper()
    tasks = [await q.enqueue("sleep", 5, user_id=u) for u in ("a", "b")]
    grace = 30
    worker = h.start(q, s.registry, shutdown_grace_seconds=grace)
    await eventually(lambda: s.started == 2)
    worker.request_stop()
    await asyncio.sleep(0.1)
    begin = time.monotonic()
    await h.stop(worker)
    assert time.monotonic() - begin < grace / 3  # not its grace
    for t in tasks:
        await wait_state(q, t.task_id, TaskState.QUEUED, timeout=0)
    assert (await q.stats()).counters["requeued"] == 2


# ---------------------------------------------------------------------------- waking up
async def test_idle_worker_is_woken_by_a_push(h: Harness) -> None:
    q, reg = h.queue(), Registry()
    reg.register(lambda: 1, name="quick")
    h.start(q, reg, poll_interval_seconds=30)
    await asyncio.sleep(0.3)  # the worker is now blocked on the wake-up list
    begin = time.monotonic()
    t = await q.enqueue("quick", user_id="u")
    await wait_state(q, t.task_id, TaskState.FINISHED, timeout=30)
    # woken by the push: a missed one would wait for the end of its blocking wait, a
    # lease length away
    assert time.monotonic() - begin < q.options.lease_seconds / 10


async def test_idle_worker_runs_a_delayed_task_when_due(h: Harness) -> None:
    q, reg = h.queue(), Registry()
    reg.register(lambda: 1, name="later")
    begin = time.monotonic()
    t = await q.enqueue("later", user_id="u", delay=0.3)
    h.start(q, reg, poll_interval_seconds=30)
    await wait_state(q, t.task_id, TaskState.FINISHED, timeout=30)
    # not before it is due; not at the end of a 30 s poll or a lease-long wait either
    assert 0.25 <= time.monotonic() - begin < min(30, q.options.lease_seconds) / 10


async def test_blocked_worker_notices_a_delayed_task_pushed_later(h: Harness) -> None:
    q, reg = h.queue(), Registry()
    reg.register(lambda: 1, name="later")
    h.start(q, reg, poll_interval_seconds=30)
    await asyncio.sleep(0.3)  # blocked on the wake-up list for up to 30 s
    t = await q.enqueue("later", user_id="u", delay=0.3)
    await wait_state(q, t.task_id, TaskState.FINISHED, timeout=3)


async def test_retry_backoff_is_honoured_with_a_long_poll_interval(h: Harness) -> None:
    q, reg = h.queue(lease_seconds=30), Registry()

    @reg.task(name="once")
    async def once(ctx: Context, payload: Any) -> int:
        if ctx.attempt == 1:
            await asyncio.sleep(0.3)  # meanwhile the idle worker blocks
            raise RuntimeError("first attempt fails")
        return ctx.attempt

    h.start(q, reg, poll_interval_seconds=30)
    t = await q.enqueue("once", user_id="u")  # retry due 0.01 s after the failure
    await wait_state(q, t.task_id, TaskState.FINISHED, timeout=3)


async def test_task_given_back_wakes_an_idle_worker(h: Harness) -> None:
    q, reg = h.queue(lease_seconds=30), Registry()
    started = asyncio.Event()

    @reg.task(name="job")
    async def job(ctx: Context, payload: Any) -> str:
        if ctx.worker_id == "leaving":
            started.set()
            await asyncio.sleep(5)
        return ctx.worker_id

    t = await q.enqueue("job", user_id="u")
    leaving = h.start(q, reg, id="leaving", shutdown_grace_seconds=0.1)
    await asyncio.wait_for(started.wait(), 5)
    h.start(q, reg, id="staying", poll_interval_seconds=30)
    await asyncio.sleep(0.3)  # idle: blocked on the wake-up list
    await h.stop(leaving)
    await wait_state(q, t.task_id, TaskState.FINISHED, timeout=3)
    assert await q.result(cast(str, t.task_id)) == "staying"


async def test_stopping_an_idle_worker_leases_nothing(h: Harness) -> None:
    q, reg = h.queue(), Registry()
    reg.register(lambda: 1, name="quick")
    worker = h.start(q, reg, poll_interval_seconds=30)
    await asyncio.sleep(0.3)  # idle: a wait with a lease behind it is on the server
    await h.stop(worker, timeout=3)  # the stop wakes it instead of waiting 30 s
    counters = (await q.stats()).counters
    assert counters.get("popped", 0) == counters.get("requeued", 0) == 0
    t = await q.enqueue("quick", user_id="u")
    assert (await q.get(cast(str, t.task_id))).state == TaskState.QUEUED  # type: ignore[union-attr]


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
async def test_idle_worker_with_a_long_poll_interval_logs_no_errors(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    q = h.queue()
    h.start(q, Registry(), poll_interval_seconds=30)
    await asyncio.sleep(5.5)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


# ---------------------------------------------------------------------------- hooks
async def test_hooks_are_called_and_their_errors_are_logged(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    q, reg = h.queue(), Registry()
    reg.register(lambda: "ok", name="good")
    reg.register(lambda: 1 / 0, name="bad")
    rec = Recorder()
    worker = h.start(q, reg, hooks=(Broken(), rec), id="w-hooks")
    good = await q.enqueue("good", user_id="a")
    bad = await q.enqueue("bad", user_id="b", max_retries=0)
    await wait_state(q, good.task_id, TaskState.FINISHED)
    failed = await wait_state(q, bad.task_id, TaskState.FAILED)
    assert failed.error == "ZeroDivisionError: division by zero"
    await h.stop(worker)
    assert rec.events[0] == ("startup", "w-hooks")
    assert rec.events[-1] == ("shutdown", 0)
    middle = rec.events[1:-1]
    assert sorted(e for e in middle if e[0] == "before") == [("before", "bad"), ("before", "good")]
    after = {e[1]: e[2:] for e in middle if e[0] == "after"}
    assert after == {"good": (TaskState.FINISHED, "ok"), "bad": (TaskState.FAILED, None)}
    failures = {r.getMessage() for r in caplog.records if r.name == "fairque.worker"}
    for name in ("on_startup", "before_task", "after_task"):
        assert f"hook Broken.{name} failed" in failures


async def test_worker_registers_while_running(h: Harness) -> None:
    q = h.queue()
    worker = h.start(q, Registry(), id="w-reg", max_concurrent_tasks=4)
    info = await wait_registered(q, "w-reg")
    assert (info.pid, info.concurrency, info.queue) == (os.getpid(), 4, q.queue)
    await h.stop(worker)
    assert [w.worker_id for w in await q.workers()] == []


# ---------------------------------------------------------------------------- registry
def test_registry_decorator_forms_and_defaults() -> None:
    reg = Registry()

    @reg.task
    def bare(payload: Any) -> None: ...

    @reg.task(name="named", max_retries=1, timeout=2.5, priority=Priority.HIGH)
    async def named(ctx: Context, payload: Any) -> None: ...

    plain = reg.register(lambda a, b=1: None, name="plain")
    ctx_only = reg.register(lambda context: None, name="ctx_only")
    assert (ctx_only.arity, ctx_only.arguments("ctx", "p")) == (-1, ("ctx",))
    default_name = f"{__name__}.{bare.__qualname__}"
    assert bare.__qualname__.endswith("<locals>.bare")
    assert list(reg) == [default_name, "named", "plain", "ctx_only"]
    assert (len(reg), "named" in reg, reg.get("missing")) == (4, True, None)
    first = reg[default_name]
    assert (first.func, first.arity, first.is_async) == (bare, 1, False)
    h2 = reg["named"]
    assert (h2.is_async, h2.arity, h2.max_retries, h2.timeout) == (True, 2, 1, 2.5)
    assert (plain.arity, plain.arguments("ctx", "p")) == (1, ("p",))
    assert h2.arguments("ctx", "p") == ("ctx", "p")
    assert reg.register(bare).name == default_name  # same function again: fine

    task = h2.make_task({"k": 1}, user_id="u")
    assert (task.name, task.payload, task.priority) == ("named", {"k": 1}, Priority.HIGH)
    assert (task.max_retries, task.timeout) == (1, 2.5)
    override = h2.make_task(user_id="u", priority=Priority.LOW, timeout=9.0)
    assert (override.priority, override.timeout) == (Priority.LOW, 9.0)
    untouched = reg["plain"].make_task(user_id="u")
    assert (untouched.max_retries, untouched.timeout, untouched.cost) == (None, None, 1)
    dear = reg.register(lambda: None, name="dear", cost=4)
    assert (dear.make_task(user_id="u").cost, dear.make_task(user_id="u", cost=2).cost) == (4, 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timeout": 0}, "timeout must be positive"),
        ({"timeout": -1.0}, "timeout must be positive"),
        ({"max_retries": -1}, "max_retries must not be negative"),
        ({"priority": 0}, "priority must be 1..6"),
        ({"priority": 7}, "priority must be 1..6"),
        ({"cost": 0}, "cost must be an integer 1..1000, got 0"),
        ({"cost": 1001}, "cost must be an integer 1..1000"),
        ({"cost": True}, "cost must be an integer 1..1000, got True"),
    ],
)
def test_registry_rejects_invalid_options(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Registry().register(lambda: None, name="x", **kwargs)


def test_registry_rejects_duplicates_bad_signatures_and_non_callables() -> None:
    reg = Registry()
    reg.register(lambda: 1, name="dup")
    with pytest.raises(ConfigError, match="'dup' is already registered"):
        reg.register(lambda: 2, name="dup")
    with pytest.raises(ConfigError, match="it requires 3"):
        reg.register(lambda a, b, c: None, name="three")
    with pytest.raises(ConfigError, match="must be callable"):
        reg.register(cast(Any, "not a function"))
    assert list(reg) == ["dup"]


def test_registry_rejects_required_keyword_only_parameters() -> None:
    def handler(ctx: Context, payload: Any, *, key: str) -> None: ...

    def optional(ctx: Context, payload: Any, *, key: str = "k") -> None: ...

    with pytest.raises(ConfigError, match=r"required keyword-only parameter\(s\) \['key'\]"):
        Registry().register(handler, name="kwonly")
    assert Registry().register(optional, name="fine").arity == 2


def test_fairque_task_uses_the_default_registry() -> None:
    name = f"test-default-{uuid.uuid4().hex}"

    @fairque.task(name=name)
    def handler() -> None: ...

    assert name in default_registry
    assert isinstance(default_registry[name], Handler)
    assert Worker(AsyncFairQueue(aredis.Redis(), unique_queue())).registry is default_registry


def test_retry_rejects_a_negative_delay() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        Retry(delay=-1)
    retry = Retry()
    assert (retry.delay, retry.reason, str(retry)) == (None, "retry requested", "retry requested")


async def test_handler_timeout_error_is_not_mistaken_for_the_execution_timeout(
    h: Harness,
) -> None:
    q, reg = h.queue(), Registry()

    @reg.task(name="db")
    async def db() -> None:
        raise TimeoutError("database did not answer")

    h.start(q, reg)
    t = await q.enqueue("db", user_id="u", max_retries=0)
    failed = await wait_state(q, t.task_id, TaskState.FAILED)
    assert failed.error == "TimeoutError: database did not answer"
