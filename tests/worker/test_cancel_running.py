"""A cancel reaches the handler that runs its task at once, from any client.

``cancel`` of a STARTED task puts the lease it took away on the worker's stop list;
the worker blocks on it (``wait_for_cancel``) and stops that handler: an async one is
cancelled, a sync one sees ``ctx.cancelled`` and is given up after
``cancel_grace_seconds``. The heartbeat here is long (a 30 s lease beats every 10 s),
so only the stop list can stop a handler within the bounds these tests hold.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from helpers.support import MakeQueue
from helpers.worker_handlers import Harness, eventually, wait_state

from fairque import AsyncFairQueue, Context, Registry, TaskCanceled, TaskState, ValidationError

#: a lease long enough that no heartbeat comes within a test (one every 10 s)
LEASE = 30.0


async def timed_cancel(q: AsyncFairQueue, task_id: str | None) -> tuple[float, float]:
    """Cancel ``task_id``: (when the call was sent, how long it took)."""
    assert task_id is not None
    sent = time.monotonic()
    assert await q.cancel(task_id)
    return sent, time.monotonic() - sent


async def test_a_cancel_stops_a_running_async_handler_at_once(h: Harness) -> None:
    """Canceled from another client, the handler is cancelled within a few of the
    cancel's own round trips (no heartbeat comes in the test); the task is CANCELED,
    not retried, and the worker's one slot runs the next task."""
    q = h.queue(lease_seconds=LEASE)
    other = h.queue(q.queue)
    reg = Registry()
    started, stopped = asyncio.Event(), asyncio.Event()
    seen: dict[str, Any] = {}

    @reg.task(name="long")
    async def long(ctx: Context) -> str:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen["at"], seen["flag"] = time.monotonic(), ctx.cancelled
            stopped.set()
            raise
        return "never"

    @reg.task(name="next")
    async def next_one() -> str:
        return "ran"

    worker = h.start(q, reg, max_concurrent_tasks=1, lease_ahead=0)
    task = await q.enqueue("long", user_id="u")
    await asyncio.wait_for(started.wait(), 10)
    sent, took = await timed_cancel(other, task.task_id)
    await asyncio.wait_for(stopped.wait(), 5)
    assert seen["flag"] is True
    # the signal's trip is one more round trip and a turn of the loop: a few of the
    # cancel's own, and far from the heartbeat (10 s)
    assert seen["at"] - sent <= 0.5 + 10 * took, (seen["at"] - sent, took)
    after = await q.enqueue("next", user_id="u")
    assert await q.result(after.task_id or "", timeout=10) == "ran"
    ended = await wait_state(q, task.task_id, TaskState.CANCELED)
    assert ended.retry_count == 0
    await asyncio.sleep(0.2)
    assert (await q.get(task.task_id or "")).state is TaskState.CANCELED  # type: ignore[union-attr]
    assert worker.processed == 1  # the next task; the canceled one is not counted


async def test_a_sync_handler_sees_cancelled_and_its_late_result_is_fenced_out(
    h: Harness,
) -> None:
    """A sync handler polling ``ctx.cancelled`` (here sleeping with ``wait_cancelled``)
    returns soon after the cancel; what it returns is not recorded."""
    q = h.queue(lease_seconds=LEASE)
    other = h.queue(q.queue)
    reg = Registry()
    started = threading.Event()
    seen: dict[str, float] = {}

    @reg.task(name="polite")
    def polite(ctx: Context) -> str:
        started.set()
        while not ctx.wait_cancelled(60):
            pass
        seen["at"] = time.monotonic()
        return "late"

    worker = h.start(q, reg)
    task = await q.enqueue("polite", user_id="u", keep_result=True)
    while not started.is_set():
        await asyncio.sleep(0.01)
    sent, took = await timed_cancel(other, task.task_id)
    await eventually(lambda: "at" in seen)  # the handler saw the cancel
    assert seen["at"] - sent <= 0.5 + 10 * took, (seen["at"] - sent, took)
    await eventually(lambda: not worker._executor.in_flight)  # the worker has its answer
    ended = await q.get(task.task_id or "")
    assert ended is not None
    assert (ended.state, ended.retry_count) == (TaskState.CANCELED, 0)
    with pytest.raises(TaskCanceled):  # not the "late" it returned: fenced out
        await q.result(task.task_id or "", timeout=0.1)


async def test_a_sync_handler_that_ignores_the_cancel_is_given_up_after_the_grace(
    h: Harness,
) -> None:
    """A sync handler that never looks at ``ctx.cancelled`` keeps its thread, but the
    worker gives it up once ``cancel_grace_seconds`` have passed, not before: its
    execution ends while the thread still runs (a stuck thread, counted as busy)."""
    q = h.queue(lease_seconds=LEASE)
    reg = Registry()
    started, release = threading.Event(), threading.Event()
    grace = 0.3

    @reg.task(name="stubborn")
    def stubborn(ctx: Context) -> str:
        started.set()
        release.wait(30)
        return "late"

    worker = h.start(q, reg, max_concurrent_tasks=2, cancel_grace_seconds=grace)
    executor, threads = worker._executor, worker._threads
    try:
        task = await q.enqueue("stubborn", user_id="u")
        while not started.is_set():
            await asyncio.sleep(0.01)
        sent, _ = await timed_cancel(q, task.task_id)
        await eventually(lambda: not executor.in_flight)  # the handler was given up
        assert time.monotonic() - sent >= grace  # not before its grace
        assert threads.stuck == 1
        assert not release.is_set()
    finally:
        release.set()
    assert (await q.get(task.task_id or "")).state is TaskState.CANCELED  # type: ignore[union-attr]


async def test_a_stop_for_another_lease_or_task_stops_nothing(h: Harness) -> None:
    """The worker stops a handler only for the lease the cancel took: a stop naming
    another token (an earlier lease of the task) or a task it does not run is ignored."""
    q = h.queue(lease_seconds=LEASE)
    reg = Registry()
    started, go = asyncio.Event(), asyncio.Event()

    @reg.task(name="wait")
    async def wait(ctx: Context) -> bool:
        started.set()
        await go.wait()
        return ctx.cancelled

    worker = h.start(q, reg)
    task = await q.enqueue("wait", user_id="u")
    await asyncio.wait_for(started.wait(), 10)
    executor = worker._executor
    assert not executor.canceled(q, task.task_id or "", "an-earlier-token")
    assert not executor.canceled(q, "no-such-task", "token")
    go.set()
    assert await q.result(task.task_id or "", timeout=10) is False


def test_wait_for_cancel_answers_the_lease_a_cancel_took(make_queue: MakeQueue) -> None:
    """On every kind of queue (one shard or several): a cancel of a leased task answers
    its id and lease token to the worker that holds it, and to no other; a cancel of a
    task not running signals nothing."""
    q = make_queue()
    tasks = [q.enqueue("n", user_id=f"u{i}") for i in range(6)]  # over the shards
    leased = q.pop_batch(5, "w1")
    assert len(leased) == 5
    queued = next(t for t in tasks if t.task_id not in {x.task_id for x in leased})
    assert q.cancel(queued.task_id or "")
    assert q.wait_for_cancel("w1", 0.05) is None
    for task in leased:
        assert q.cancel(task.task_id or "")
    stops = [q.wait_for_cancel("w1", 1.0) for _ in leased]
    assert {(s.task_id, s.lease_token) for s in stops if s} == {
        (t.task_id, t.lease_token) for t in leased
    }
    assert q.wait_for_cancel("w2", 0.05) is None


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize(
    ("worker_id", "timeout"),
    [("", 1.0), (None, 1.0), ("w", 0), ("w", -1.0), ("w", "1"), ("x" * 300, 1.0)],
)
def test_wait_for_cancel_checks_its_arguments(
    make_queue: MakeQueue, worker_id: Any, timeout: Any
) -> None:
    q = make_queue()
    with pytest.raises(ValidationError):
        q.wait_for_cancel(worker_id, timeout)
