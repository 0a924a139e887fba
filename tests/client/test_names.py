"""A lease that names the tasks a worker handles: other names are set aside, never
leased, and come back for a worker that handles them, fairly between users."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue
from helpers.worker_handlers import Harness, wait_state

from fairque import Priority, Task, TaskState
from fairque.core.keys import QueueKeys
from fairque.errors import ValidationError
from fairque.worker.registry import Registry


def test_a_worker_never_leases_a_name_it_does_not_handle(make_queue: MakeQueue) -> None:
    q = make_queue()
    resize = q.enqueue("resize", {}, user_id="a")
    square = q.enqueue("square", {}, user_id="a")
    other = q.enqueue("square", {}, user_id="b")
    got = q.pop_batch(10, "py", names=["square"])
    # the user's next task is served, the other user is not blocked
    assert {t.task_id for t in got} == {square.task_id, other.task_id}
    stored = q.get(resize.task_id or "")
    assert stored is not None
    assert stored.state is TaskState.QUEUED
    assert q.pop_batch(10, "py", names=["square"]) == []
    # a worker that handles the name gets it, in the next lease
    node = q.pop_batch(10, "node", names=["square", "resize"])
    assert [t.task_id for t in node] == [resize.task_id]


@pytest.mark.one_shard("a lease is filled from one shard first")
def test_a_lease_without_names_takes_the_tasks_set_aside(make_queue: MakeQueue) -> None:
    q = make_queue()
    first = q.enqueue("a", {}, user_id="u", priority=Priority.CRITICAL)
    second = q.enqueue("a", {}, user_id="u")
    assert q.pop_batch(5, "w", names=["b"]) == []
    got = q.pop_batch(5, "w")
    # back in their lanes, in their order: the critical task first
    assert [t.task_id for t in got] == [first.task_id, second.task_id]
    assert all(t.name == "a" for t in got)


@pytest.mark.one_shard("turns between tenants are exact within a shard, on average across shards")
def test_set_aside_tasks_come_back_fair_between_users(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.push_many([Task(user_id="flood", name="resize", payload={}) for _ in range(50)])
    small = q.enqueue("resize", {}, user_id="small")
    assert q.pop_batch(100, "py", names=["square"]) == []
    got = q.pop_batch(2, "node", names=["resize"])
    # the small user's only task is not behind the flood's fifty
    assert small.task_id in {t.task_id for t in got}
    assert Counter(t.user_id for t in got) == {"flood": 1, "small": 1}


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_cancel_and_purge_of_a_set_aside_task(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    t = q.enqueue("resize", {}, user_id="a")
    kept = q.enqueue("resize", {}, user_id="b")
    assert q.pop_batch(5, "py", names=["square"]) == []
    assert q.cancel(t.task_id or "")
    got = q.pop_batch(5, "node", names=["resize"])
    assert [x.task_id for x in got] == [kept.task_id]
    q.enqueue("resize", {}, user_id="c")
    assert q.pop_batch(5, "py", names=["square"]) == []
    k = QueueKeys(q.queue)
    assert redis_client.exists(k.aside)
    assert redis_client.exists(k.constraint_parked("~c:resize"))
    q.purge()
    assert not redis_client.exists(k.aside, k.aside_users("resize"))
    assert not redis_client.exists(k.constraint_parked("~c:resize"))


def test_a_resent_lease_sets_nothing_aside_twice(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.enqueue("resize", {}, user_id="a")
    square = q.enqueue("square", {}, user_id="a")
    for _ in range(2):
        got = q.pop_batch(5, "py", request_id="r1", names=["square"])
        assert [t.task_id for t in got] == [square.task_id]
    assert q.stats().counts[TaskState.QUEUED] == 1


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize("bad", ["square", [""], [1], [], ["x" * 300], ["a\ud800"]])
def test_bad_names_are_refused(make_queue: MakeQueue, bad: object) -> None:
    q = make_queue()
    q.enqueue("square", {}, user_id="a")
    with pytest.raises(ValidationError) as refused:
        q.pop_batch(1, "w", names=bad)  # type: ignore[arg-type]
    assert refused.value.problems[0][0] == "names"
    assert q.stats().counts[TaskState.QUEUED] == 1


async def test_a_mixed_fleet_runs_each_task_on_a_worker_that_handles_it(h: Harness) -> None:
    q = h.queue()
    ran: dict[str, list[str]] = {"py": [], "all": []}
    narrow, wide = Registry(), Registry()

    @narrow.task(name="square")
    def py_square(x: int) -> int:
        ran["py"].append("square")
        return x * x

    for name in ("square", "concat", "explode"):

        @wide.task(name=name)
        def handler(x: int, _name: str = name) -> int:
            ran["all"].append(_name)
            return x

    # the narrow worker starts first and is idle first: it would win every race
    h.start(q, narrow, max_concurrent_tasks=2, unknown_task_delay_seconds=60)
    await asyncio.sleep(0.2)
    wide_worker = h.start(q, wide, max_concurrent_tasks=2)
    ids: dict[str, str] = {}
    for name in ("concat", "explode", "resize", "square"):
        ids[name] = (await q.enqueue(name, 3, user_id="u")).task_id or ""
    for name in ("square", "concat", "explode"):
        await wait_state(q, ids[name], TaskState.FINISHED, timeout=30)
    assert "concat" not in ran["py"]
    assert "explode" not in ran["py"]
    resize = await q.get(ids["resize"])
    assert resize is not None
    assert resize.state is TaskState.QUEUED
    place = await q.wait_place(resize)
    assert place.set_aside == "resize"
    assert (await q.metrics()).requeued == 0  # nothing was leased and given back
    # each worker registers the names it leases
    found = {w.worker_id: w.names for w in await q.workers()}
    assert found[wide_worker.id] == ["concat", "explode", "square"]
    assert ["square"] in found.values()
