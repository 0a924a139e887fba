"""The intake: a plain task pushed on its own waits in a list until a lease call (or
``stats``, ``maintain``, ``place`` and the readers of lanes) puts it into its lane.

What must hold: the task is QUEUED and visible everywhere from its push; a cancel takes
it out of the intake; nothing overtakes it; a placement is bounded and keeps each user's
push order; every task is leased exactly once whoever places it.
"""

from __future__ import annotations

from collections import Counter

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, queue_snapshot

from fairque import FairQueue, Priority, ResultTimeout, Task, TaskState, ValidationError
from fairque.core.keys import QueueKeys


def intake(client: SyncClient, q: FairQueue) -> int:
    return int(client.llen(QueueKeys(q.queue).intake))


def test_a_task_in_the_intake_is_queued_for_every_reader(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    t = q.enqueue("job", {"n": 1}, user_id="ann")
    keys = QueueKeys(q.queue)
    assert intake(redis_client, q) == 1
    assert redis_client.zcard(keys.queued) == 0  # not placed: in no registry yet
    got = q.get(str(t.task_id))
    assert got is not None
    assert got.state is TaskState.QUEUED
    with pytest.raises(ResultTimeout, match="still QUEUED"):
        q.result(str(t.task_id))
    assert q.metrics().pushed == 1
    assert q.next_wakeup() == 0  # a worker leases at once: the intake is due now
    assert q.stats().counts[TaskState.QUEUED] == 1
    # a listing places the intake first
    assert [x.task_id for x in q.list_tasks(state=TaskState.QUEUED).tasks] == [t.task_id]
    assert intake(redis_client, q) == 0
    assert [x.task_id for x in q.list_tasks(user_id="ann").tasks] == [t.task_id]
    assert [x.task_id for x in q.list_tasks(name="job").tasks] == [t.task_id]
    assert [(u.user_id, u.ready) for u in q.stats().users] == [("ann", 1)]


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_readers_place_the_whole_intake_first(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    ids = {str(q.enqueue("job", user_id=f"u{i % 7}").task_id) for i in range(1_100)}
    stats = q.stats()  # places 500, counts the rest as QUEUED
    assert stats.counts[TaskState.QUEUED] == 1_100
    assert intake(redis_client, q) == 600
    assert q.oldest_queued_ms() is not None  # places all 600, in two calls
    assert intake(redis_client, q) == 0
    listed: set[str] = set()
    cursor = None
    while True:
        page = q.list_tasks(state=TaskState.QUEUED, limit=500, cursor=cursor)
        listed |= {str(t.task_id) for t in page.tasks}
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert listed == ids


def test_a_canceled_task_that_was_never_placed_is_listed(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    t = q.enqueue("job", user_id="ann")
    assert q.cancel(str(t.task_id))
    assert intake(redis_client, q) == 0
    assert [x.task_id for x in q.list_tasks(user_id="ann").tasks] == [t.task_id]
    assert [x.task_id for x in q.list_tasks(state=TaskState.CANCELED).tasks] == [t.task_id]


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_a_cancel_before_placement_takes_the_entry_out(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    keep = q.enqueue("job", user_id="ann")
    gone = q.enqueue("job", user_id="ann", priority=Priority.CRITICAL)
    other = q.enqueue("job", user_id="bob")
    assert q.cancel(str(gone.task_id))
    assert intake(redis_client, q) == 2
    assert q.stats().counts[TaskState.QUEUED] == 2
    assert q.stats().counts[TaskState.CANCELED] == 1
    leased = q.pop_batch(10, "w")
    assert sorted(str(t.task_id) for t in leased) == sorted([str(keep.task_id), str(other.task_id)])
    assert q.pop("w") is None
    stored = q.get(str(gone.task_id))
    assert stored is not None
    assert stored.state is TaskState.CANCELED


def test_a_resent_cancel_of_an_unplaced_task_changes_nothing(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    t = q.enqueue("job", user_id="ann")
    q.enqueue("job", user_id="ann")
    call = q.ops.cancel(str(t.task_id))
    assert q._run(call) is True
    before = queue_snapshot(redis_client, q.queue)
    assert q._run(call) is True  # the resend after a lost reply
    assert queue_snapshot(redis_client, q.queue) == before
    assert intake(redis_client, q) == 1


def test_a_general_push_goes_behind_the_intake(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    first = q.enqueue("job", user_id="ann")  # one plain task: the intake
    batch = q.push_many([Task(user_id="ann", name="job"), Task(user_id="ann", name="job")])
    assert intake(redis_client, q) == 3  # behind it, not into the lane ahead of it
    scheduled = q.push_many([Task(user_id="ann", name="later")], delays=[60])
    assert scheduled[0].state is TaskState.SCHEDULED
    assert intake(redis_client, q) == 3
    order = [q.pop("w") for _ in range(3)]
    assert [t.task_id for t in order if t] == [first.task_id, *(t.task_id for t in batch)]
    # with the intake empty the general path places at once
    direct = q.push_many([Task(user_id="bob", name="job")])
    assert intake(redis_client, q) == 0
    assert q.ring_users() == (["bob"], 1)
    assert [t.task_id for t in q.pop_batch(5, "w")] == [direct[0].task_id]


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_placement_is_bounded_and_keeps_each_users_order(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    pushed = [q.enqueue("job", {"i": i}, user_id=f"u{i % 3}") for i in range(1_200)]
    assert intake(redis_client, q) == 1_200
    assert q.place() == 500
    assert intake(redis_client, q) == 700
    assert q.next_wakeup() == 0
    leased: list[Task] = []
    while batch := q.pop_batch(100, "w"):
        leased.extend(batch)
        for t in batch:
            assert q.complete(t)
    assert intake(redis_client, q) == 0
    assert Counter(str(t.task_id) for t in leased) == Counter(str(t.task_id) for t in pushed)
    for user in ("u0", "u1", "u2"):
        mine = [t.payload["i"] for t in leased if t.user_id == user]
        assert mine == sorted(mine), f"{user} leased out of push order"


@pytest.mark.one_shard("turns between tenants are exact within a shard, on average across shards")
def test_users_take_turns_from_placement(make_queue: MakeQueue) -> None:
    q = make_queue()
    for _ in range(3):
        q.enqueue("job", user_id="flood")
    q.enqueue("job", user_id="small")
    served = [t.user_id for t in q.pop_batch(4, "w")]
    assert served[:2] == ["flood", "small"]


def test_placing_twice_places_nothing_more(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    q.enqueue("job", user_id="ann")
    q.enqueue("job", user_id="bob", priority=Priority.CRITICAL)
    assert q.place() == 2
    before = queue_snapshot(redis_client, q.queue)
    assert q.place() == 0
    assert q.maintain() == 0
    assert queue_snapshot(redis_client, q.queue) == before


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_a_read_with_bad_arguments_places_nothing(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.enqueue("job", user_id="ann")
    before = queue_snapshot(redis_client, q.queue)
    with pytest.raises(ValidationError, match="offset"):
        q.ring_users(offset=-1)
    with pytest.raises(ValidationError, match="limit"):
        q.list_tasks(state=TaskState.QUEUED, limit=0)
    assert queue_snapshot(redis_client, q.queue) == before
    assert intake(redis_client, q) == 1


def test_maintain_places_the_intake(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    q.enqueue("job", user_id="ann")
    q.maintain()
    assert intake(redis_client, q) == 0
    assert q.ring_users() == (["ann"], 1)


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_purge_deletes_the_intake(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    for i in range(5):
        q.enqueue("job", user_id=f"u{i}")
    q.place()
    for i in range(700):  # more than one purge call's batch
        q.enqueue("job", user_id=f"u{i}")
    assert q.purge(batch=300) == 705
    assert intake(redis_client, q) == 0
    assert queue_snapshot(redis_client, q.queue) == {}
    assert q.pop("w") is None
