"""A cancelled worker ends wherever the cancellation finds it, and so do its loops.

redis-py sends a command under ``asyncio.wait_for`` (its socket timeout); on Python
3.11 a cancellation that lands while the command is being sent is swallowed: the
command completes and the task goes on as if never cancelled. Such a cancellation is
raised again before the next step (``fairque.common.pauses``). A cancellation one, two or
three turns of the event loop after a command starts is swallowed every time, so
each test cancels after a growing number of turns, then at moments spread in time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any

import pytest
from helpers.worker_handlers import Harness, wait_state

from fairque import Context, Registry, TaskState, Worker, WorkerConfig
from fairque.worker.leasing import Leasing
from fairque.worker.link import ErrorLog, Link
from fairque.worker.park import Park
from fairque.worker.runner import log
from fairque.worker.upkeep import Upkeep

#: cancellations per test: the first half after 0, 1, 2... turns of the event loop,
#: the second half at moments 2.5 ms apart
CANCELS = 40


async def moment(i: int) -> None:
    """Wait until the ``i``-th moment to cancel at (see ``CANCELS``)."""
    if i < CANCELS // 2:
        for _ in range(i):
            await asyncio.sleep(0)
    else:
        await asyncio.sleep(0.0025 * (i - CANCELS // 2))


async def left_running(before: set[asyncio.Task[Any]], within: float = 3.0) -> set[str]:
    """The tasks started since ``before`` that still run after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        running = {t for t in asyncio.all_tasks() if t not in before and not t.done()}
        running.discard(asyncio.current_task())
        if not running or time.monotonic() > deadline:
            return {repr(t.get_coro()) for t in running}
        await asyncio.sleep(0.01)


async def test_a_cancelled_worker_ends_whenever_the_cancellation_comes(h: Harness) -> None:
    """Registering, starting its upkeep, sending a wave, parking, running tasks: a
    cancelled worker ends there, cancelled, and leaves nothing of its own running (its
    park's job and its upkeep loops included). Nothing is lost: the tasks it leased come
    back when their leases expire, and each is completed once."""
    q = h.queue(lease_seconds=1.0)
    runs: Counter[str] = Counter()
    registry = Registry()

    @registry.task(name="noop")
    async def noop(payload: Any) -> None:
        runs[str(payload)] += 1

    cfg: dict[str, Any] = {
        "heartbeat_interval_seconds": 0.01,
        "maintenance_interval_seconds": 0.02,
        "max_concurrent_tasks": 4,
        "batch_size": 2,
    }
    pushed: dict[str, str] = {}  # task id: payload
    workers = []
    for i in range(CANCELS):
        for n in range(i % 3):  # busy with waves some times, idle and parked others
            task = await q.enqueue("noop", f"{i}.{n}", user_id=f"u{n}")
            assert task.task_id is not None
            pushed[task.task_id] = f"{i}.{n}"
        before = asyncio.all_tasks()
        worker = h.start(q, registry, id=f"w{i}", **cfg)
        workers.append(worker)
        job = h.runs[-1][1]
        await moment(i)
        asked = job.cancel()
        done, _ = await asyncio.wait({job}, timeout=5.0)
        assert done == {job}, f"cancellation {i} did not end the worker"
        assert job.cancelled() or not asked, f"cancellation {i} was lost ({job})"
        assert await left_running(before) == set(), f"cancellation {i}"
    # the tasks leased by the cancelled workers come back once their leases expire
    last = h.start(q, registry, id="last", **cfg)
    for task_id in pushed:
        await wait_state(q, task_id, TaskState.FINISHED, timeout=15)
    await h.stop(last)
    # each completed once; every task ran (some twice: leased by a cancelled worker)
    assert sum(w.processed for w in [*workers, last]) == len(pushed)
    assert set(runs) == set(pushed.values())


async def test_a_closed_park_ends_whenever_the_close_comes(h: Harness) -> None:
    """A park (slots) or a watch (none) that is closed ends, wherever the cancellation
    finds it (asking when the next task is due, blocking on the wake-up list, leasing),
    and hands no task over once closed."""
    q = h.queue(lease_seconds=1.0)
    delivered: list[str] = []
    leasing = Leasing(q, "p", 1.0, (), ())

    async def pause(seconds: float) -> None:
        await asyncio.sleep(seconds)

    park = Park(
        q, leasing, Link("park", log), ErrorLog(log), pause,
        stopping=lambda: False, on_end=lambda: None,
        deliver=lambda tasks: delivered.extend(t.task_id or "" for t in tasks),
    )  # fmt: skip
    for i in range(CANCELS):
        if i % 4 == 3:  # the park leases it (or a later one does)
            await q.enqueue("noop", i, user_id="u")
        before = asyncio.all_tasks()
        park.start(2 if i % 2 else 0)
        await moment(i)
        closing = len(delivered)
        await park.close()
        assert await left_running(before, within=0.0) == set(), f"close {i}"
        await asyncio.sleep(0.01)
        assert len(delivered) == closing, f"close {i}: tasks handed over after it"


async def test_cancelled_upkeep_loops_end_whenever_the_cancellation_comes(h: Harness) -> None:
    """The heartbeat (extending leases, registering) and the maintenance rounds end at
    their first cancellation, wherever it finds them."""
    q = h.queue()
    worker = Worker(q, Registry(), WorkerConfig(id="u", maintenance_interval_seconds=0.004))
    lane = worker._lanes[0]
    await q.enqueue("noop", None, user_id="u")
    (held,) = await q.pop_batch(1, "u", 30.0)
    # a lease to extend on every beat: its execution (no handler) waits for a wave
    worker._executor.start(held, q, lane.acker)
    try:
        for i in range(CANCELS):
            upkeep = Upkeep(
                q, worker.config, "u", 0.001, 30.0, worker._executor, worker.info,
                Link("u", log), ErrorLog(log), before_beat=lambda: None,
            )  # fmt: skip
            upkeep.start()
            loops = list(upkeep._loops)
            await moment(i)
            try:
                for loop in loops:
                    loop.cancel()
                done, _ = await asyncio.wait(loops, timeout=2.0)
                assert done == set(loops), f"cancellation {i} did not end the upkeep"
                assert all(loop.cancelled() for loop in loops), f"cancellation {i} was lost"
            finally:
                await upkeep.stop()  # cancels again what is left
    finally:
        lane.acker.give_up()
        worker._threads.shutdown()


async def test_a_wave_back_after_a_cancellation_starts_nothing(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """A wave at the server when the worker is cancelled comes back later with tasks:
    they are not started (nothing would report them), and run once when their leases
    expire, here by the same worker run again (which starts what it leases)."""
    caplog.set_level(logging.WARNING, logger="fairque.worker")
    q = h.queue(lease_seconds=0.5)
    started: list[str] = []
    registry = Registry()

    @registry.task(name="job")
    async def job(ctx: Context) -> None:
        started.append(ctx.worker_id)

    tasks = [await q.enqueue("job", user_id=f"u{i}") for i in range(3)]
    leased = asyncio.Event()
    complete_and_pop = q.complete_and_pop

    async def slow_reply(*args: Any, **kwargs: Any) -> Any:
        answer = await complete_and_pop(*args, **kwargs)  # the server leased the tasks
        leased.set()
        await asyncio.sleep(0.3)  # and the reply is still on its way
        return answer

    q.complete_and_pop = slow_reply  # type: ignore[method-assign]
    gone = h.start(q, registry, id="gone")
    job_of_gone = h.runs[-1][1]
    await asyncio.wait_for(leased.wait(), 5)
    job_of_gone.cancel()
    await asyncio.wait({job_of_gone}, timeout=5)
    assert job_of_gone.cancelled()
    await asyncio.sleep(0.5)  # the wave is back meanwhile
    assert started == []
    assert "3 task(s) leased after it left were not started" in caplog.text
    del q.complete_and_pop
    again = asyncio.create_task(gone.run_async())  # the same worker, run once more
    try:
        for task in tasks:
            await wait_state(q, task.task_id, TaskState.FINISHED, timeout=10)
    finally:
        gone.request_stop()
        await asyncio.wait_for(again, 10)
    assert started == ["gone"] * 3
