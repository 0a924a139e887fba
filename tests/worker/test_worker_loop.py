"""The worker's loop: idle parks that do not poll, one path for every outcome, waves."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, cast

import pytest
from helpers.support import unique_queue
from helpers.worker_handlers import Harness, eventually, wait_state

from fairque import AsyncFairQueue, Registry, Task, TaskState
from fairque.errors import ServerError
from fairque.worker.acker import Acknowledger, Failed, Finished, GivenBack
from fairque.worker.leasing import Leasing
from fairque.worker.link import ErrorLog, Link
from fairque.worker.park import (
    DIRECT_TRIES,
    LOCAL_WAIT,
    SHORTEST_WAIT,
    _blocking_wait,
    _direct,
)


class CallCounter(AsyncFairQueue):
    """A real queue that counts the calls the worker makes, by method."""

    calls: Counter[str]
    log: list[str]

    def _count(self, name: str) -> None:
        self.calls[name] += 1
        self.log.append(name)

    async def complete_and_pop(
        self, done: Sequence[tuple[Task, Any]], count: int = 1, *args: Any, **kwargs: Any
    ) -> tuple[list[bool], list[Task]]:
        self._count("complete_and_pop")
        if done:  # a call that reports, and how many successes it carries
            self.calls["reports"] += 1
            self.calls["reported"] += len(done)
        return await super().complete_and_pop(done, count, *args, **kwargs)

    async def wait_and_pop(
        self, timeout: float, count: int = 1, *args: Any, **kwargs: Any
    ) -> list[Task]:
        self._count("wait_and_pop")
        return await super().wait_and_pop(timeout, count, *args, **kwargs)

    async def next_wakeup(self) -> float | None:
        self._count("next_wakeup")
        return await super().next_wakeup()

    async def complete(self, task: Task, result: Any = None) -> bool:
        self._count("complete")
        return await super().complete(task, result)

    async def fail(self, task: Task, *args: Any, **kwargs: Any) -> TaskState:
        self._count("fail")
        return await super().fail(task, *args, **kwargs)


#: the lease of most workers here, and so the longest wait of their parks (the client
#: allows blocking calls of up to a minute): a wait that ends sooner ended by an event
PARK = 30.0


def counting_queue(h: Harness, **options: Any) -> CallCounter:
    opts = {"retry_base_seconds": 0.01, **options}
    url, cluster = h.server.url, h.server.cluster
    url += f"{'&' if '?' in url else '?'}socket_timeout={2 * PARK:g}"
    q = cast(CallCounter, CallCounter.from_url(url, unique_queue(), cluster=cluster, **opts))
    q.calls, q.log = Counter(), []
    h.queues.append(q)
    return q


# ---------------------------------------------------------------------------- idle
async def test_an_idle_worker_sends_no_lease_request_per_poll_interval(h: Harness) -> None:
    """Nothing happens: the worker stays parked on the wake-up list, whatever its
    poll interval; it used to send a ``complete_and_pop`` and a lease every poll."""
    q = counting_queue(h, lease_seconds=PARK)
    h.start(q, Registry(), poll_interval_seconds=0.05)
    await eventually(lambda: q.calls["wait_and_pop"] == 1)
    q.calls.clear()
    await asyncio.sleep(1.5)
    # a park's wait lasts until a due time, at most the lease: at most one new wait began
    assert q.calls["complete_and_pop"] == 0, q.calls
    assert q.calls["wait_and_pop"] <= 1, q.calls
    assert q.calls["next_wakeup"] <= 1, q.calls


async def test_an_idle_worker_reclaims_a_lease_taken_after_it_parked(h: Harness) -> None:
    """A consumer leases a task while the worker waits, and never reports it: the
    worker's next wait ends when that lease expires, and it runs the task again."""
    q = counting_queue(h, lease_seconds=1.0)
    ran: list[int] = []
    reg = Registry()
    reg.register(lambda ctx: ran.append(ctx.attempt), name="job")
    h.start(q, reg, poll_interval_seconds=PARK, assigned_users=["mine"], lease_seconds=PARK)
    await eventually(lambda: q.calls["wait_and_pop"] == 1)
    t = await q.enqueue("job", user_id="other")  # not for this worker: it stays parked
    taken = await q.pop(worker_id="vanished", lease_seconds=1.0)
    assert taken is not None
    assert taken.task_id == t.task_id
    began = time.monotonic()
    await q.enqueue("job", user_id="mine")  # a push: the worker wakes once, then waits again
    await eventually(lambda: ran == [1])
    retried = await wait_state(q, t.task_id, TaskState.SCHEDULED, TaskState.QUEUED)
    assert retried.retry_count == 1  # reclaimed by the worker's own wait...
    assert time.monotonic() - began < PARK / 3  # ...which ended at the lease's expiry


# ---------------------------------------------------------------------------- waves
async def test_a_success_asks_for_the_slot_it_frees(h: Harness) -> None:
    """A capped user's next task starts with the completion that frees its slot, in
    the same round trip, although the worker's other slots are parked."""
    q = counting_queue(h, lease_seconds=PARK)
    await q.set_user_limits("capped", max_in_flight=1)
    spans: list[tuple[float, float]] = []

    registry = Registry()

    @registry.task(name="step")
    async def step() -> None:
        begin = time.monotonic()
        await asyncio.sleep(0.1)
        spans.append((begin, time.monotonic()))

    tasks = [await q.enqueue("step", user_id="capped") for _ in range(3)]
    begin = time.monotonic()
    h.start(q, registry, poll_interval_seconds=PARK, max_concurrent_tasks=4)
    for t in tasks:
        await wait_state(q, t.task_id, TaskState.FINISHED)
    assert time.monotonic() - begin < PARK / 3  # not after a park's wait
    ordered = sorted(spans)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ordered))  # the cap held


async def test_a_failure_is_sent_before_the_lease_request_it_makes_room_for(
    h: Harness,
) -> None:
    """A failure frees its user's in-flight slot; the lease request of the same wave
    follows it, so the user's next task starts at once."""
    q = counting_queue(h, lease_seconds=PARK)
    await q.set_user_limits("capped", max_in_flight=1)
    reg = Registry()

    @reg.task(name="bad")
    async def bad() -> None:
        await asyncio.sleep(0.1)
        raise RuntimeError("no")

    reg.register(lambda: "ok", name="good")
    first = await q.enqueue("bad", user_id="capped", max_retries=0)
    second = await q.enqueue("good", user_id="capped")
    h.start(q, reg, poll_interval_seconds=PARK, max_concurrent_tasks=2)
    await wait_state(q, first.task_id, TaskState.FAILED)
    failed_at = time.monotonic()
    await wait_state(q, second.task_id, TaskState.FINISHED)
    assert time.monotonic() - failed_at < PARK / 3  # not after a park's wait
    after_fail = q.log[q.log.index("fail") + 1 :]
    assert after_fail[0] == "complete_and_pop", q.log


async def test_successes_ride_with_the_lease_request(h: Harness) -> None:
    """A busy worker reports and leases in one call per wave: no other call per task."""
    q = counting_queue(h, lease_seconds=PARK)
    reg = Registry()

    @reg.task(name="quick")
    async def quick() -> None:
        await asyncio.sleep(0.01)

    await q.push_many([Task(user_id=f"u{i % 7}", name="quick") for i in range(200)])
    worker = h.start(q, reg, poll_interval_seconds=PARK, max_concurrent_tasks=8, batch_size=8)
    await eventually(lambda: worker.processed == 200, timeout=20)
    assert q.calls["fail"] == 0
    assert q.calls["complete"] == 0, q.calls  # no success is acknowledged on its own
    # every success rides with a lease request, and a wave reports what finished
    # together: fewer reports than tasks (about 25 waves of 8 on a quiet machine; a
    # loaded one files smaller waves, and lease-ahead adds calls that report nothing)
    await eventually(lambda: q.calls["reported"] == 200, timeout=20)  # the last wave sent
    assert q.calls["reports"] < 200, q.calls


class RefusingQueue(AsyncFairQueue):
    """A real queue whose next ``refusals`` failure reports the server refuses."""

    refusals = 0

    async def fail(self, task: Task, *args: Any, **kwargs: Any) -> TaskState:
        if self.refusals:
            self.refusals -= 1
            raise ServerError("OOM command not allowed when used memory > 'maxmemory'.")
        return await super().fail(task, *args, **kwargs)


async def test_a_report_the_server_refuses_is_sent_again(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """A refusal (out of memory, a read-only replica) passes like an outage."""
    url, cluster = h.server.url, h.server.cluster
    q = cast(RefusingQueue, RefusingQueue.from_url(url, unique_queue(), cluster=cluster))
    h.queues.append(q)
    q.refusals = 2
    reg = Registry()
    reg.register(lambda: 1 / 0, name="bad")
    worker = h.start(q, reg, poll_interval_seconds=PARK)
    t = await q.enqueue("bad", user_id="u", max_retries=0)
    failed = await wait_state(q, t.task_id, TaskState.FAILED)
    assert failed.error == "ZeroDivisionError: division by zero"
    assert q.refusals == 0
    assert worker.failed == 1
    refused = [r for r in caplog.records if "could not report the failure" in r.getMessage()]
    assert len(refused) == 2
    assert [bool(r.exc_info) for r in refused] == [True, False]  # one traceback, then a line


async def test_a_report_whose_execution_stopped_waiting_is_still_sent(h: Harness) -> None:
    """The acknowledger owns a report once it is filed: cancelling the wait for its
    answer (an execution cancelled meanwhile) does not drop it."""
    q = h.queue()
    done, failed, back = [await q.enqueue("x", user_id=f"u{i}") for i in range(3)]
    leased = {t.task_id: t for t in await q.pop_batch(3, worker_id="w")}
    log = logging.getLogger("fairque.test.acker")
    acker = Acknowledger(
        q, Leasing(q, "w", 30, [], []), Link("w", log), ErrorLog(log), lambda: None
    )
    answers = [
        acker.report(Finished(leased[done.task_id])),
        acker.report(Failed(leased[failed.task_id], "boom", retry=False)),
        acker.report(GivenBack(leased[back.task_id])),
    ]
    for answer in answers:
        answer.cancel()
    assert acker.pending == 3
    assert await acker.send(0) == []
    assert acker.pending == 0
    await wait_state(q, done.task_id, TaskState.FINISHED, timeout=0)
    await wait_state(q, failed.task_id, TaskState.FAILED, timeout=0)
    await wait_state(q, back.task_id, TaskState.QUEUED, timeout=0)


# ---------------------------------------------------------------------------- stopping
async def test_a_stop_ends_the_park_even_when_another_worker_takes_the_token(
    h: Harness,
) -> None:
    """The stopping worker's wake-up token may wake another idle worker first (the one
    that has waited longest); it pushes another until its own wait has ended."""
    q = counting_queue(h, lease_seconds=PARK)
    h.start(q, Registry(), id="first", poll_interval_seconds=PARK)
    await eventually(lambda: q.calls["wait_and_pop"] == 1)
    leaving = h.start(q, Registry(), id="second", poll_interval_seconds=PARK)
    await eventually(lambda: q.calls["wait_and_pop"] == 2)
    await asyncio.sleep(0.1)
    begin = time.monotonic()
    await h.stop(leaving, timeout=10)
    assert time.monotonic() - begin < PARK / 3  # not at the end of its wait
    assert (await q.stats()).counters.get("popped", 0) == 0


def test_a_park_waits_for_a_near_due_time_on_its_own_clock_a_bounded_number_of_times() -> None:
    """A due time nearer than the server's tick is waited for here; after a lease that
    found nothing, only a due time still ahead is (the lease came a moment early), and
    at most DIRECT_TRIES times in a row: a due time that keeps passing cannot spin."""
    assert not _direct(None, 0)
    assert not _direct(LOCAL_WAIT, 0)
    assert _direct(0.0, 0)
    assert _direct(0.02, 0)
    assert _direct(0.0004, 1)  # a moment early: once more on this clock
    assert not _direct(0.0, 1)  # already passed and nothing leased: block
    assert _direct(0.02, DIRECT_TRIES - 1)
    assert not _direct(0.02, DIRECT_TRIES)


def test_a_blocking_wait_for_a_due_time_ends_a_server_tick_early() -> None:
    """The server ends a timed-out wait on its clock tick: a wait for a due time a tick
    or more away ends a tick early, and the rest is waited for on this clock."""
    assert _blocking_wait(None, 30.0) == 30.0
    assert _blocking_wait(0.0, 30.0) > 0  # a real wait, however short
    assert _blocking_wait(0.05, 30.0) == 0.05  # nearer than a tick: (``_direct`` first)
    assert _blocking_wait(0.25, 30.0) == pytest.approx(0.25 - LOCAL_WAIT)
    # what is left once it ends is waited for on this clock (a tick late: at once)
    assert _direct(0.25 - _blocking_wait(0.25, 30.0) - 0.001, 0)
    assert _blocking_wait(LOCAL_WAIT, 30.0) == SHORTEST_WAIT
    assert _blocking_wait(90.0, 30.0) == 30.0  # never past the lease length
