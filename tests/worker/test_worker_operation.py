"""What an operator sees of a worker: unknown task names, per-task log lines, burst
mode, the poll interval that has no effect."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, cast

import pytest
from helpers.proc_handlers import runs_key
from helpers.servers import ServerInfo, SyncClient
from helpers.support import unique_queue
from helpers.worker_handlers import Harness, eventually, wait_state

from fairque import (
    ConfigError,
    Context,
    FairQueue,
    Registry,
    Retry,
    Task,
    TaskState,
    Worker,
    WorkerConfig,
)
from fairque.config import load_settings
from fairque.worker.summary import Summary
from fairque.worker.tasklog import STORED_FRAMES, TRACEBACK_CHARS

TESTS = Path(__file__).resolve().parents[1]


def messages(caplog: pytest.LogCaptureFixture, level: int = logging.DEBUG) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= level]


# ---------------------------------------------------------------------------- unknown names
async def test_a_name_the_worker_does_not_handle_waits_for_one_that_does(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="fairque")
    q = h.queue(lease_seconds=30)
    other, able = Registry(), Registry()
    other.register(lambda: "x", name="a")
    other.register(lambda: "y", name="b")
    able.register(lambda ctx: ctx.worker_id, name="mystery")
    first = [await q.enqueue("mystery", user_id=f"u{i}", max_retries=0) for i in range(3)]
    h.start(q, other, id="without", unknown_task_delay_seconds=0.5)
    later = await q.enqueue("mystery", user_id="u9", max_retries=0)
    for t in [*first, later]:  # never leased: set aside, QUEUED, no attempt counted
        for _ in range(200):  # 10 s
            stored = await wait_state(q, t.task_id, TaskState.QUEUED)
            if (await q.wait_place(stored)).set_aside is not None:
                break
            await asyncio.sleep(0.05)
        assert (await q.wait_place(stored)).set_aside == "mystery"
    counters = (await q.stats()).counters
    assert counters.get("popped", 0) == 0
    h.start(q, able, id="with")
    for t in [*first, later]:
        done = await wait_state(q, t.task_id, TaskState.FINISHED, timeout=10)
        assert done.retry_count == 0
        assert await q.result(cast(str, t.task_id)) == "with"
    # nothing was leased by the worker without a handler, so nothing to warn about
    assert not [m for m in messages(caplog, logging.WARNING) if "has no handler" in m]
    assert not [m for m in messages(caplog) if "started:" in m and "without" in m]


async def test_a_name_no_worker_handles_does_not_spin(h: Harness) -> None:
    q = h.queue(lease_seconds=30)
    h.start(q, Registry(), id="empty", unknown_task_delay_seconds=0.5)
    t = await q.enqueue("nobody", user_id="u")
    await asyncio.sleep(1.6)  # about three leases at 0.5 s apart, not hundreds
    popped = (await q.stats()).counters.get("popped", 0)
    assert 2 <= popped <= 5, popped
    got = await q.get(cast(str, t.task_id))
    assert got is not None
    assert got.retry_count == 0
    assert got.state in (TaskState.SCHEDULED, TaskState.QUEUED, TaskState.STARTED)


async def test_unknown_names_fail_when_configured(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    q = h.queue()
    h.start(q, Registry(), unknown_tasks="fail")
    t = await q.enqueue("nope", user_id="u", max_retries=0)
    failed = await wait_state(q, t.task_id, TaskState.FAILED)
    assert "no handler registered for task name 'nope'" in (failed.error or "")
    assert not [m for m in messages(caplog) if "has no handler in worker" in m]


@pytest.mark.parametrize("delay", [0, -1, 3601])
def test_the_unknown_task_delay_is_validated(delay: float) -> None:
    with pytest.raises(ConfigError, match="unknown_task_delay_seconds"):
        load_settings(None, worker={"unknown_task_delay_seconds": delay})
    with pytest.raises(ConfigError, match="unknown_tasks"):
        load_settings(None, worker={"unknown_tasks": "drop"})


# ---------------------------------------------------------------------------- log lines
@pytest.mark.parametrize("server", ["valkey"], indirect=True)
async def test_each_task_logs_its_start_and_end(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="fairque")
    q, reg = h.queue(), Registry()

    def deep(n: int) -> None:
        if n == 0:
            raise ValueError("bottom reached")
        deep(n - 1)

    @reg.task(name="ok")
    async def ok() -> int:
        await asyncio.sleep(0.05)
        return 1

    @reg.task(name="boom")
    def boom(ctx: Context) -> None:
        deep(500 if ctx.attempt == 2 else 1)

    @reg.task(name="again")
    async def again(ctx: Context) -> int:
        if ctx.attempt == 1:
            raise Retry(0, "not yet")
        return ctx.attempt

    good = await q.enqueue("ok", user_id="alice")
    bad = await q.enqueue("boom", user_id="bob", max_retries=1)
    later = await q.enqueue("again", user_id="carol")
    began = time.monotonic()
    h.start(q, reg, id="w1")
    await wait_state(q, good.task_id, TaskState.FINISHED)
    await wait_state(q, bad.task_id, TaskState.FAILED)
    await wait_state(q, later.task_id, TaskState.FINISHED)

    def lines(task: Task) -> list[logging.LogRecord]:
        records = [r for r in caplog.records if r.name == "fairque.worker"]
        return [r for r in records if cast(str, task.task_id) in r.getMessage()]

    # the end lines follow the queue's answers: a start and an end a run
    await eventually(lambda: [len(lines(t)) for t in (good, bad, later)] == [2, 4, 4])
    ran_within = time.monotonic() - began

    start, end = (r.getMessage() for r in lines(good))
    assert start == f"task {good.task_id} started: ok for user alice, attempt 1"
    assert end.startswith(f"task {good.task_id} finished (ok for user alice, attempt 1, ")
    took = float(end.rsplit(", ", 1)[1].rstrip("s)"))
    assert 0.04 <= took <= ran_within  # its handler's 50 ms, within what the test saw
    assert all(r.levelno == logging.DEBUG for r in lines(good))  # the summary counts them
    assert getattr(lines(good)[0], "task_id", None) == good.task_id  # the adapter's extras

    assert [r.levelno for r in lines(bad) if "started:" in r.getMessage()] == [logging.DEBUG] * 2
    first, retried = (r for r in lines(bad) if "started:" not in r.getMessage())
    assert first.levelno == logging.WARNING
    assert first.getMessage().startswith(
        f"task {bad.task_id} will retry (SCHEDULED): ValueError: bottom reached (boom for "
        "user bob, attempt 1, "
    )
    assert "Traceback (most recent call last)" in first.getMessage()
    assert 'raise ValueError("bottom reached")' in first.getMessage()
    assert retried.levelno == logging.ERROR
    assert retried.getMessage().startswith(
        f"task {bad.task_id} failed for good: ValueError: bottom reached (boom for user bob, "
        "attempt 2, "
    )
    assert len(retried.getMessage()) < TRACEBACK_CHARS + 400  # 500 frames, cut
    assert retried.getMessage().rstrip().endswith("ValueError: bottom reached")

    asked = [r for r in lines(later) if "will retry" in r.getMessage()]
    assert [r.levelno for r in lines(later) if "finished (" in r.getMessage()] == [logging.DEBUG]
    assert [r.levelno for r in asked] == [logging.INFO]  # the handler asked for it
    assert "Traceback" not in asked[0].getMessage()

    # the stored error keeps its one line, and the traceback is kept beside it
    stored = await q.get(cast(str, bad.task_id))
    assert stored is not None
    assert stored.error == "ValueError: bottom reached"
    assert stored.traceback is not None
    assert stored.traceback.startswith("Traceback (most recent call last)")
    assert 'raise ValueError("bottom reached")' in stored.traceback
    assert stored.traceback.endswith("ValueError: bottom reached")
    assert stored.traceback.count(", in deep") <= STORED_FRAMES  # 500 frames, the last kept
    for quiet in (good, later):
        kept = await q.get(cast(str, quiet.task_id))
        assert kept is not None
        assert kept.traceback is None  # a Retry has no traceback to keep


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
async def test_at_info_a_worker_logs_a_summary_not_a_line_per_task(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="fairque")
    q, reg = h.queue(), Registry()

    @reg.task(name="ok")
    async def ok(payload: int) -> int:
        if payload < 0:
            raise ValueError("negative")
        return payload

    tasks = [await q.enqueue("ok", i, user_id=f"u{i % 3}") for i in range(30)]
    bad = await q.enqueue("ok", -1, user_id="u0", max_retries=0)
    worker = h.start(q, reg, id="w-sum", summary_interval_seconds=0.2)
    for t in tasks:
        await wait_state(q, cast(str, t.task_id), TaskState.FINISHED)
    await wait_state(q, cast(str, bad.task_id), TaskState.FAILED)

    def summed() -> tuple[list[str], int, int]:
        lines = [m for m in messages(caplog, logging.INFO) if m.startswith("worker w-sum: ")]
        finished = sum(int(m.split(" ")[2].replace(",", "")) for m in lines)
        failed = sum(int(m.split(", ")[1].split(" ")[0]) for m in lines)
        return lines, finished, failed

    # the worker counts an end when the queue's answer comes back, a moment after the
    # state the test waited for: wait for the summary lines that carry every end
    summaries, finished, failed = summed()
    for _ in range(200):
        if (finished, failed) == (30, 1):
            break
        await asyncio.sleep(0.05)
        summaries, finished, failed = summed()
    assert (finished, failed) == (30, 1)
    assert all(" finished, " in m and " in the last " in m and " running" in m for m in summaries)
    per_task = [m for m in messages(caplog, logging.INFO) if any(
        cast(str, t.task_id) in m for t in tasks)]  # fmt: skip
    assert per_task == []  # a finished task has no INFO line of its own
    assert [m for m in messages(caplog, logging.ERROR) if cast(str, bad.task_id) in m]
    await asyncio.sleep(0.5)  # nothing ended since: no more summary lines
    later = [m for m in messages(caplog, logging.INFO) if m.startswith("worker w-sum: ")]
    assert later == summaries
    await h.stop(worker)


def test_a_summary_counts_what_ended_since_the_last_one() -> None:
    ended = [0, 0]
    summary = Summary("w", 10.0, counts=lambda: (ended[0], ended[1]), running=lambda: 4)
    assert summary.line() is None
    ended[:] = [1234, 1]
    first = summary.line()
    assert first is not None
    assert first.startswith("worker w: 1,234 finished, 1 failed attempt in the last ")
    assert first.endswith("/s); 4 running")
    assert summary.line() is None
    ended[1] = 3
    assert "0 finished, 2 failed attempts" in (summary.line() or "")


@pytest.mark.parametrize("interval", [-1, 86_401, "soon"])
def test_summary_interval_is_validated(interval: Any) -> None:
    with pytest.raises(ConfigError, match="summary_interval_seconds"):
        load_settings(None, worker={"summary_interval_seconds": interval})


# ---------------------------------------------------------------------------- burst
async def test_a_burst_worker_finishes_every_task_and_stops(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="fairque")
    q, reg = h.queue(), Registry()
    done: Counter[str] = Counter()

    @reg.task(name="work")
    async def work(ctx: Context, payload: int) -> int:
        await asyncio.sleep(0.01 * (payload % 3))
        done[ctx.task_id] += 1
        return payload

    tasks = [await q.enqueue("work", i, user_id=f"u{i % 4}") for i in range(40)]
    worker = h.start(q, reg, burst=True, max_concurrent_tasks=4, batch_size=4)
    job = next(job for w, job in h.runs if w is worker)
    await asyncio.wait_for(job, 30)
    assert job.result() is None
    assert worker.processed == 40
    assert set(done.values()) == {1}
    assert len(done) == 40
    for t in tasks:
        assert (await q.get(cast(str, t.task_id))).state == TaskState.FINISHED  # type: ignore[union-attr]
    assert await q.workers() == []
    assert any("no task is ready (burst)" in m for m in messages(caplog))


async def test_a_burst_worker_on_an_empty_queue_stops_at_once(h: Harness) -> None:
    q = h.queue()
    later = await q.enqueue("work", user_id="u", delay=60)  # not ready: left for later
    worker = h.start(q, Registry(), burst=True)
    job = next(job for w, job in h.runs if w is worker)
    await asyncio.wait_for(job, 5)
    assert (await q.get(cast(str, later.task_id))).state == TaskState.SCHEDULED  # type: ignore[union-attr]


async def test_a_burst_worker_waits_for_its_retries_in_flight(h: Harness) -> None:
    """A failure's retry is due at once: the worker is not idle while it reports it."""
    q, reg = h.queue(), Registry()

    @reg.task(name="twice")
    async def twice(ctx: Context) -> int:
        if ctx.attempt == 1:
            raise Retry(0, "again")
        return ctx.attempt

    t = await q.enqueue("twice", user_id="u")
    worker = h.start(q, reg, burst=True)
    await asyncio.wait_for(next(job for w, job in h.runs if w is worker), 10)
    assert (await q.get(cast(str, t.task_id))).state == TaskState.FINISHED  # type: ignore[union-attr]


# the command line's own behaviour: the engine's tests cover the standalone Redis kind
@pytest.mark.server_kinds("valkey", "cluster")
def test_the_burst_cli_worker_finishes_every_task_and_exits_0(
    server: ServerInfo, redis_client: SyncClient, tmp_path: Path
) -> None:
    from helpers.support import worker_env

    queue = unique_queue("burst")
    with FairQueue.from_url(server.url, queue) as q:
        q.push_many(Task(user_id=f"u{i % 5}", name="record") for i in range(60))
        cmd = [sys.executable, "-m", "fairque", "--queue", queue, "worker", "--import",
               "helpers.proc_handlers", "--concurrency", "8"]  # fmt: skip
        env = worker_env(server)
        done = subprocess.run(
            [*cmd, "--burst"], env=env, cwd=TESTS, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert "burst: exits once no task is ready or running" in done.stderr
        assert "no task is ready (burst); stopping" in done.stderr
        raw: dict[Any, Any] = redis_client.hgetall(runs_key(queue))
        assert len(raw) == 60
        assert {int(v) for v in raw.values()} == {1}
        assert q.stats().counters["completed"] == 60
        # several processes: each stops by itself, the supervisor exits 0
        q.push_many(Task(user_id=f"u{i % 5}", name="record") for i in range(40))
        config = tmp_path / "worker.yaml"
        config.write_text("worker:\n  burst: true\n")
        multi = [*cmd[:3], "--config", str(config), *cmd[3:], "--processes", "2"]
        done = subprocess.run(multi, env=env, cwd=TESTS, capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stderr
        assert q.stats().counters["completed"] == 100
        assert q.workers() == []


# ---------------------------------------------------------------------------- poll interval
def test_the_poll_interval_is_accepted_and_documented_as_without_effect() -> None:
    """An idle worker parks on the wake-up list whatever the interval (proved by
    ``test_an_idle_worker_sends_no_lease_request_per_poll_interval``); the setting
    stays valid for existing files and says it has no effect."""
    assert WorkerConfig(poll_interval_seconds=0.05).poll_interval_seconds == 0.05
    yaml = (TESTS.parent / "config" / "worker.yaml").read_text()
    line = next(x for x in yaml.splitlines() if "poll_interval_seconds" in x)
    assert "no effect" in line
    assert Worker.__doc__ is not None
    assert "``poll_interval_seconds`` has no effect" in " ".join(Worker.__doc__.split())


# ---------------------------------------------------------------------------- registration
async def test_a_worker_registers_the_users_it_serves(h: Harness) -> None:
    """``status`` reads a worker's affinity from its registration."""
    q = h.queue()
    h.start(q, Registry(), assigned_users=["alice"], steal_targets=["*"])
    for _ in range(100):
        workers = await q.workers()
        if workers:
            break
        await asyncio.sleep(0.05)
    assert [(w.assigned_users, w.steal_targets) for w in workers] == [(["alice"], ["*"])]
