"""Progress: a handler reports how far it got (``ctx.progress``); the worker's next
heartbeat carries it, and every read shows it. A leased task reported through
``report_progress`` and ``extend`` (the manual and the HTTP way) does the same."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from helpers.servers import SyncClient
from helpers.support import PATIENCE, MakeQueue
from helpers.worker_handlers import Harness, eventually, wait_state

from fairque import AsyncFairQueue, Context, Registry, Task, TaskState, ValidationError


async def shown(reader: AsyncFairQueue, task_id: str | None, want: tuple[float, str]) -> int:
    """Poll (from a time after the report) until a read shows ``want``; answer how many
    heartbeats moved the task's lease deadline before it showed."""
    assert task_id is not None
    began, deadlines = time.monotonic(), set[Any]()
    while True:
        got = await reader.get(task_id)
        assert got is not None
        assert got.lease_deadline is not None  # leased all along
        if (got.progress, got.progress_message) == want:  # the first read's is no beat
            return max(len(deadlines - {got.lease_deadline}) - 1, 0)
        deadlines.add(got.lease_deadline)
        assert time.monotonic() - began < PATIENCE, f"{want} not shown"
        await asyncio.sleep(0.005)


async def test_a_handler_s_progress_is_read_within_a_heartbeat(h: Harness) -> None:
    """An async and a sync handler report progress; a reader in another client sees
    each report by the heartbeat after the next (the one under way when it was made
    may have been sent already), with no call of its own: the report rides the
    heartbeat. Judged by the heartbeats themselves, not a clock."""
    q, reg = h.queue(), Registry()
    reader = h.queue(q.queue)
    beat = 0.2
    reported: set[str] = set()
    go_async, go_sync = asyncio.Event(), threading.Event()

    @reg.task(name="async")
    async def run_async(ctx: Context, payload: Any) -> str:
        ctx.progress(0.25, "a quarter")
        reported.add("async")
        await go_async.wait()
        ctx.progress(1.0, "done")
        reported.add("done")
        while (await reader.get(ctx.task_id)).progress != 1.0:  # type: ignore[union-attr]
            await asyncio.sleep(beat / 4)  # a heartbeat takes the last report
        return "ok"

    @reg.task(name="sync")
    def run_sync(ctx: Context, payload: Any) -> str:
        ctx.progress(0.5, "half way")
        reported.add("sync")
        go_sync.wait(PATIENCE)
        return "ok"

    h.start(q, reg, lease_seconds=3 * beat, heartbeat_interval_seconds=beat)
    a = await q.enqueue("async", None, user_id="u")
    s = await q.enqueue("sync", None, user_id="v")
    for key, task, want in (("async", a, (0.25, "a quarter")), ("sync", s, (0.5, "half way"))):
        await eventually(lambda key=key: key in reported)  # type: ignore[misc]
        assert await shown(reader, task.task_id, want) <= 1, key
    go_async.set()
    go_sync.set()
    await eventually(lambda: "done" in reported)
    assert await shown(reader, a.task_id, (1.0, "done")) <= 1
    done = await wait_state(reader, a.task_id, TaskState.FINISHED)
    assert (done.progress, done.progress_message) == (1.0, "done")  # kept after the end
    await wait_state(reader, s.task_id, TaskState.FINISHED)


def test_report_progress_then_extend(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.enqueue("job", {}, user_id="u")
    task = q.pop("w")
    assert task is not None
    task.report_progress(0.4, "reading rows")
    assert q.get(str(task.task_id)).progress is None  # type: ignore[union-attr]
    q.extend(task, 30)
    stored = q.get(str(task.task_id))
    assert stored is not None
    assert (stored.progress, stored.progress_message) == (0.4, "reading rows")
    task.report_progress(0.9)
    assert q.extend_many([task], 30) == [True]
    stored = q.get(str(task.task_id))
    assert stored is not None
    assert (stored.progress, stored.progress_message) == (0.9, "")
    assert q.complete(task, "ok")


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize(
    ("fraction", "message"),
    [
        (-0.1, ""),
        (1.5, ""),
        (float("nan"), ""),
        (True, ""),
        ("0.5", ""),
        (0.5, "x" * 1001),
        (0.5, "bad\nline"),
        (0.5, 3),
    ],
)
def test_a_bad_report_is_refused_and_sends_nothing(
    make_queue: MakeQueue, redis_client: SyncClient, fraction: Any, message: Any
) -> None:
    q = make_queue()
    q.enqueue("job", {}, user_id="u")
    task = q.pop("w")
    assert task is not None
    with pytest.raises(ValidationError):
        task.report_progress(fraction, message)
    assert task.progress is None
    q.extend(task, 30)
    stored = q.get(str(task.task_id))
    assert stored is not None
    assert stored.progress is None


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_resent_heartbeat_with_progress_writes_it_once(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.enqueue("job", {}, user_id="u")
    task = q.pop("w")
    assert task is not None
    task.report_progress(0.3, "a third")
    call = q.ops.extend_many([task], 30)
    task_key = q.ops.keys.task(str(task.task_id))

    def stored() -> dict[Any, Any]:  # (a resent heartbeat moves the deadline again)
        fields = redis_client.hgetall(task_key)
        return {k: v for k, v in fields.items() if k not in (b"deadline", b"fair")}

    assert q._run(call) == [True]
    once = stored()
    assert q._run(call) == [True]  # a resend: the same report, written the same
    assert stored() == once
    assert (once[b"progress"], once[b"progress_msg"]) == (b"0.3", b"a third")
    # a lost lease takes no report
    stale = Task(user_id="u", name="job", task_id=task.task_id, lease_token="nope")
    stale.report_progress(0.99, "late")
    assert q.extend_many([stale], 30) == [False]
    assert redis_client.hget(task_key, "progress") == b"0.3"
