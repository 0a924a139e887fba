"""Lease-ahead: a busy worker holds the next task of a slot whose handler is about to
end; the task waits for the slot (never more handlers than slots), its lease stays
alive meanwhile, and a stop gives it back unrun without spending an attempt."""

from __future__ import annotations

import asyncio

import pytest
from helpers.worker_handlers import Harness, eventually, wait_state

from fairque import Context, Registry, Task, TaskState, WorkerConfig


def holding(gate: asyncio.Event, running: list[str], most: list[int]) -> Registry:
    """``job`` returns at once, or waits for ``gate`` when its payload says ``hold``;
    ``most`` keeps the most handlers seen running at once."""
    registry = Registry()

    @registry.task(name="job")
    async def job(ctx: Context, payload: dict[str, bool]) -> None:
        running.append(ctx.task_id)
        most[0] = max(most[0], len(running))
        try:
            if payload.get("hold"):
                await gate.wait()
        finally:
            running.remove(ctx.task_id)

    return registry


async def test_a_task_leased_ahead_waits_for_the_slot_and_goes_back_at_a_stop(
    h: Harness,
) -> None:
    q = h.queue(lease_seconds=1.0)
    gate, running, most = asyncio.Event(), list[str](), [0]
    worker = h.start(q, holding(gate, running, most), max_concurrent_tasks=1, lease_ahead=1)
    warm = [await q.enqueue("job", {"hold": False}, user_id="u") for _ in range(3)]
    for t in warm:  # the worker learns that ``job`` is short
        await wait_state(q, t.task_id, TaskState.FINISHED)
    # one push: the tasks to lease ahead are there when the held one starts (a busy
    # worker does not watch for new work to lease ahead; its waves find it)
    held, *rest = await q.push_many(
        [Task(user_id="u", name="job", payload={"hold": i == 0}) for i in range(4)]
    )
    await wait_state(q, held.task_id, TaskState.STARTED)
    # its handler is expected to end at once: the slot's next task is leased ahead
    await wait_state(q, rest[0].task_id, TaskState.STARTED)
    await asyncio.sleep(2.5)  # two lease lengths: the heartbeat keeps it alive
    ahead = await q.get(rest[0].task_id or "")
    assert ahead is not None
    assert (ahead.state, ahead.retry_count) == (TaskState.STARTED, 0)
    assert running == [held.task_id]  # one slot, one handler: the task ahead waits
    assert (await q.stats()).counts[TaskState.STARTED] == 2
    stopping = asyncio.create_task(h.stop(worker))
    back = await wait_state(q, rest[0].task_id, TaskState.QUEUED)
    assert back.retry_count == 0  # given back unrun: no attempt spent
    gate.set()
    await stopping
    done = await q.get(held.task_id or "")
    assert done is not None
    assert done.state is TaskState.FINISHED
    for t in rest:
        got = await q.get(t.task_id or "")
        assert got is not None
        assert (got.state, got.retry_count) == (TaskState.QUEUED, 0)
    assert most[0] == 1
    assert (await q.stats()).counters["requeued"] == 1


async def test_lease_ahead_zero_leases_only_what_can_start(h: Harness) -> None:
    q = h.queue()
    gate, running, most = asyncio.Event(), list[str](), [0]
    h.start(q, holding(gate, running, most), max_concurrent_tasks=1, lease_ahead=0)
    warm = await q.enqueue("job", {"hold": False}, user_id="u")
    await wait_state(q, warm.task_id, TaskState.FINISHED)
    held = await q.enqueue("job", {"hold": True}, user_id="u")
    nxt = await q.enqueue("job", {"hold": False}, user_id="u")
    await wait_state(q, held.task_id, TaskState.STARTED)
    await asyncio.sleep(0.3)
    got = await q.get(nxt.task_id or "")
    assert got is not None
    assert got.state is TaskState.QUEUED
    gate.set()
    await wait_state(q, nxt.task_id, TaskState.FINISHED)


async def test_a_slot_running_a_capped_tenants_task_takes_nothing_ahead(h: Harness) -> None:
    """A lease ahead comes before the running task ends and frees its slot of the cap,
    so it would take another tenant's task for the slot the capped tenant's next one
    needs: a slot running a task that holds a cap's slot is not leased ahead for."""
    q = h.queue()
    await q.set_user_limits("u", max_in_flight=5)  # room left: only the mark counts
    gate, running, most = asyncio.Event(), list[str](), [0]
    h.start(q, holding(gate, running, most), max_concurrent_tasks=1, lease_ahead=1)
    warm = [await q.enqueue("job", {"hold": False}, user_id="u") for _ in range(3)]
    for t in warm:  # the worker learns that ``job`` is short
        await wait_state(q, t.task_id, TaskState.FINISHED)
    held, nxt = await q.push_many(
        [Task(user_id="u", name="job", payload={"hold": i == 0}) for i in range(2)]
    )
    started = await wait_state(q, held.task_id, TaskState.STARTED)
    assert started.lease_capped
    await asyncio.sleep(0.3)  # lease-ahead took the next within a round trip when not
    got = await q.get(nxt.task_id or "")
    assert got is not None
    assert got.state is TaskState.QUEUED
    gate.set()
    await wait_state(q, nxt.task_id, TaskState.FINISHED)
    assert most[0] == 1


async def test_many_short_tasks_never_run_more_handlers_than_slots(h: Harness) -> None:
    q = h.queue()
    gate, running, most = asyncio.Event(), list[str](), [0]
    gate.set()
    worker = h.start(q, holding(gate, running, most), max_concurrent_tasks=3)
    tasks = [await q.enqueue("job", {"hold": False}, user_id=f"u{i % 5}") for i in range(300)]
    await eventually(lambda: worker.processed == 300, timeout=30)
    assert most[0] <= 3
    for t in tasks:
        got = await q.get(t.task_id or "")
        assert got is not None
        assert got.state is TaskState.FINISHED


def test_lease_ahead_is_at_most_one_per_slot() -> None:
    assert WorkerConfig(max_concurrent_tasks=4).ahead == 4
    assert WorkerConfig(max_concurrent_tasks=4, lease_ahead=2).ahead == 2
    with pytest.raises(Exception, match=r"lease_ahead \(5\) must be at most max_concurrent_tasks"):
        WorkerConfig(max_concurrent_tasks=4, lease_ahead=5)
    with pytest.raises(Exception, match="lease_ahead"):
        WorkerConfig(lease_ahead=-1)
