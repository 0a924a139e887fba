"""The worker's per-task machinery: one timer for every execution timeout, the answer
by callback, the start of leased tasks straight from the lease reply."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, cast

from helpers.support import unique_queue
from helpers.worker_handlers import Harness, Recorder, Sleeper, eventually, wait_state

from fairque import AsyncFairQueue, Registry, Task, TaskState
from fairque.worker.runner import WAVES_IN_FLIGHT


async def test_a_later_nearer_deadline_fires_before_an_earlier_farther_one(h: Harness) -> None:
    """The watchdog's one timer is moved to a nearer deadline when a handler that
    starts later has a shorter timeout."""
    q, s = h.queue(), Sleeper()
    worker = h.start(q, s.registry, max_concurrent_tasks=4)
    far = await q.enqueue("sleep", 3.0, user_id="far", timeout=30, max_retries=0)
    await eventually(lambda: s.running == 1)
    began, near_run = time.monotonic(), 10.0
    near = await q.enqueue("sleep", near_run, user_id="near", timeout=0.2, max_retries=0)
    failed = await wait_state(q, near.task_id, TaskState.FAILED)
    assert time.monotonic() - began < near_run / 2  # cut by its timeout, not at its end
    assert (failed.error, failed.failure_reason) == ("timeout after 0.2s", "timeout")
    done = await wait_state(q, far.task_id, TaskState.FINISHED)
    assert done.retry_count == 0  # the far one ran on to its end
    # the worker counts a task once the server has answered its completion: a moment
    # after the state reads FINISHED
    await eventually(lambda: (worker.processed, worker.failed) == (1, 1))


async def test_many_handlers_keep_their_own_timeouts(h: Harness) -> None:
    q, s = h.queue(), Sleeper()
    worker = h.start(q, s.registry, max_concurrent_tasks=20)
    short = [
        await q.enqueue("sleep", 5.0, user_id=f"s{i}", timeout=0.1 + 0.02 * i, max_retries=0)
        for i in range(8)
    ]
    long = [
        await q.enqueue("sleep", 0.3, user_id=f"l{i}", timeout=20, max_retries=0) for i in range(8)
    ]
    for t in short:
        failed = await wait_state(q, t.task_id, TaskState.FAILED, timeout=5)
        assert failed.failure_reason == "timeout"
    for t in long:
        await wait_state(q, t.task_id, TaskState.FINISHED, timeout=5)
    await eventually(lambda: worker.in_flight == 0)
    assert (worker.processed, worker.failed) == (8, 8)
    assert s.cancelled == 8


async def test_a_handler_that_ignores_its_timeout_cancel_keeps_its_result(h: Harness) -> None:
    """As with ``asyncio.timeout``: the timeout cancels the handler once; a handler
    that swallows the cancel and returns has returned."""
    q, reg = h.queue(), Registry()

    @reg.task(name="stubborn")
    async def stubborn() -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)  # the cancel is not repeated
            return "kept"
        return "slept"

    h.start(q, reg)
    t = await q.enqueue("stubborn", user_id="u", timeout=0.1, max_retries=0)
    done = await wait_state(q, t.task_id, TaskState.FINISHED, timeout=5)
    assert done.state is TaskState.FINISHED
    assert await q.result(cast(str, t.task_id)) == "kept"


async def test_a_stop_after_a_timeout_still_gives_back_and_hooks_see_every_end(
    h: Harness,
) -> None:
    """A handler cancelled by a stop while past its timeout is given back (the stop
    wins); after_task hooks run for every execution, after its answer."""
    q, s, rec = h.queue(), Sleeper(), Recorder()
    worker = h.start(q, s.registry, hooks=(rec,), shutdown_grace_seconds=0.2)
    quick = await q.enqueue("sleep", 0.01, user_id="quick")
    await wait_state(q, quick.task_id, TaskState.FINISHED)
    slow = await q.enqueue("sleep", 10.0, user_id="slow", timeout=30)
    await eventually(lambda: s.running == 1)
    await h.stop(worker)
    back = await wait_state(q, slow.task_id, TaskState.QUEUED, timeout=0)
    assert back.retry_count == 0
    assert [o.state for o in rec.outcomes] == [TaskState.FINISHED, TaskState.QUEUED]
    assert worker.in_flight == 0


class SlowWaves(AsyncFairQueue):
    """A real queue whose completion waves answer 50 ms late; records how many were
    at the server at once and every count asked for."""

    out = peak = 0
    counts: list[int]

    async def complete_and_pop(
        self, done: Sequence[tuple[Task, Any]], count: int = 1, *args: Any, **kwargs: Any
    ) -> tuple[list[bool], list[Task]]:
        self.counts.append(count)
        self.out += 1
        self.peak = max(self.peak, self.out)
        try:
            await asyncio.sleep(0.05)
            return await super().complete_and_pop(done, count, *args, **kwargs)
        finally:
            self.out -= 1


async def test_waves_overlap_and_never_ask_for_more_than_the_slots(h: Harness) -> None:
    """A worker with more slots than one request takes has two waves at the server at
    once; the slots a wave asked for stay held until it is back."""
    url, cluster = h.server.url, h.server.cluster
    q = cast(SlowWaves, SlowWaves.from_url(url, unique_queue(), cluster=cluster))
    q.counts = []
    h.queues.append(q)
    reg, ran = Registry(), []

    @reg.task(name="work")
    async def work(payload: int) -> None:
        ran.append(payload)

    tasks = await q.push_many(Task(user_id=f"u{i % 7}", name="work", payload=i) for i in range(300))
    worker = h.start(q, reg, max_concurrent_tasks=12, batch_size=5, burst=True)
    job = h.runs[-1][1]
    await asyncio.wait_for(job, 30)
    assert sorted(ran) == list(range(300))
    assert worker.processed == 300
    assert q.peak == WAVES_IN_FLIGHT
    assert max(q.counts) <= 5
    for t in tasks[:5]:
        await wait_state(q, t.task_id, TaskState.FINISHED, timeout=0)
