"""A global limit hands out what it lets through by the queue's fairness, not push order."""

from __future__ import annotations

from collections import Counter

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, resend

from fairque import FairQueue
from fairque.core.keys import QueueKeys

ONE = "a global limit below the shard count is not split (docs/howto/shards.md)"


def _drain(q: FairQueue, batch: int = 4, **where: object) -> list[str]:
    """Lease ``batch`` at a time and complete each at once; the users in lease order."""
    order: list[str] = []
    while got := q.pop_batch(batch, worker_id="w", **where):  # type: ignore[arg-type]
        for t in got:
            order.append(t.user_id)
            assert q.complete(t)
    return order


@pytest.mark.one_shard(ONE)
@pytest.mark.parametrize("mode", ["time", "count"])
def test_a_small_tenant_behind_a_flood_starts_in_the_next_wave(
    make_queue: MakeQueue, mode: str
) -> None:
    q = make_queue()
    q.set_fairness(mode)  # type: ignore[arg-type]
    q.define_constraint(id="db", name="job", concurrency=1)
    for _ in range(50):
        q.enqueue("job", user_id="flood")
    q.enqueue("job", user_id="small")
    order = _drain(q)
    assert len(order) == 51
    assert order.index("small") == 1  # right after the flood's task that held the slot


@pytest.mark.one_shard(ONE)
@pytest.mark.parametrize("mode", ["time", "count"])
def test_two_saturated_tenants_share_a_limit_whoever_pushed_first(
    make_queue: MakeQueue, mode: str
) -> None:
    q = make_queue()
    q.set_fairness(mode)  # type: ignore[arg-type]
    q.define_constraint(id="db", name="job", concurrency=2)
    for user in ("first", "second"):
        for _ in range(60):
            q.enqueue("job", user_id=user)
    order = _drain(q, batch=4)  # more than the limit lets start: the rest wait
    head = Counter(order[:40])
    assert abs(head["first"] - head["second"]) <= 2, order[:40]
    assert Counter(order) == {"first": 60, "second": 60}


@pytest.mark.one_shard(ONE)
@pytest.mark.parametrize("mode", ["time", "count"])
def test_weights_hold_at_a_limit(make_queue: MakeQueue, mode: str) -> None:
    q = make_queue()
    q.set_fairness(mode)  # type: ignore[arg-type]
    q.set_user_limits("heavy", weight=3)
    q.define_constraint(id="db", name="job", concurrency=1)
    for user in ("light", "heavy"):
        for _ in range(60):
            q.enqueue("job", user_id=user)
    head = Counter(_drain(q)[:40])
    assert 28 <= head["heavy"] <= 32, head


@pytest.mark.one_shard(ONE)
def test_a_limit_splits_by_cost(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.set_fairness("count")
    q.define_constraint(id="db", name="job", concurrency=4)
    for _ in range(30):
        q.enqueue("job", user_id="dear", cost=4)
        q.enqueue("job", user_id="cheap")
    head = Counter(_drain(q)[:25])
    assert 3 <= head["dear"] <= 7, head  # one dear task for four cheap ones


@pytest.mark.one_shard(ONE)
def test_unlimited_tasks_pass_while_the_limit_has_a_queue(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.define_constraint(id="db", name="slow", concurrency=1)
    for i in range(3):
        q.enqueue("slow", user_id="a", task_id=f"s{i}")
    q.enqueue("fast", user_id="b", task_id="f")
    got = q.pop_batch(10, worker_id="w")
    assert sorted(t.task_id or "" for t in got) == ["f", "s0"]
    assert q.constraint("db").parked == 2


@pytest.mark.one_shard("reads one shard's keys")
def test_a_task_let_go_that_must_wait_again_keeps_its_place(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    k = QueueKeys(q.queue)
    q.define_constraint(id="db", name="job", concurrency=1)
    a1 = q.enqueue("job", user_id="a", task_id="a1")
    assert [t.task_id for t in q.pop_batch(2, worker_id="w")] == ["a1"]
    q.enqueue("job", user_id="b", task_id="b1")
    assert q.pop(worker_id="w") is None  # b1 waits for the slot, first in the limit's order
    tag = redis_client.hget(k.task("b1"), "ptag")
    assert tag is not None
    running = q.get("a1")
    assert running is not None
    assert q.complete(running)
    # c pushes: b1 goes back to its lane (nothing else waits), c's task, served first by
    # this worker, takes the slot, and b1 waits again at the place it had
    q.enqueue("job", user_id="c", task_id="c1")
    got = q.pop_batch(2, worker_id="w", assigned_users=["c"], steal_targets=["*"])
    assert [t.task_id for t in got] == ["c1"]
    assert redis_client.hget(k.task("b1"), "ptag") == tag
    q.enqueue("job", user_id="c", task_id="c2")
    assert q.pop(worker_id="w") is None
    assert q.complete(got[0])
    assert [t.task_id for t in q.pop_batch(1, worker_id="w")] == ["b1"]
    assert redis_client.hget(k.task("b1"), "ptag") is None  # a started task keeps no tag
    assert a1.task_id == "a1"


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_resent_lease_that_lets_tasks_go_in_fair_order(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.define_constraint(id="db", name="job", concurrency=1)
    for user in ("a", "b"):
        for i in range(3):
            q.enqueue("job", user_id=user, task_id=f"{user}{i}")
    running = q.pop_batch(4, worker_id="w")
    assert len(running) == 1
    assert q.complete(running[0])
    first, second = resend(q, redis_client, q.ops.pop(4, "w", None, None, None))
    assert [t.task_id for t in first] == [t.task_id for t in second]
    assert len(first) == 1
    assert first[0].user_id != running[0].user_id


@pytest.mark.one_shard("reads one shard's keys")
def test_the_limits_order_goes_with_its_queue(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    k = QueueKeys(q.queue)
    q.define_constraint(id="db", name="job", concurrency=1)
    for user in ("a", "b"):
        q.enqueue("job", user_id=user)
    held = q.pop_batch(2, worker_id="w")
    assert len(held) == 1
    assert redis_client.exists(k.constraint_order("db"))
    assert q.complete(held[0])
    assert len(_drain(q)) == 1  # the last one let go: nothing waits, the order goes
    assert not redis_client.exists(k.constraint_order("db"), k.constraint_parked("db"))
    q.enqueue("job", user_id="a")
    assert len(q.pop_batch(2, worker_id="w")) == 1
    assert q.remove_constraint("db")
    assert not redis_client.exists(k.constraint_order("db"))
