"""Backlog quotas per tenant: a push past a user's quota raises ``QuotaExceeded`` and
writes nothing; the backlog follows every transition in and out of QUEUED, SCHEDULED
and DEFERRED (every server kind, both clients)."""

from __future__ import annotations

import pytest
from helpers.support import MakeQueue

from fairque import (
    ConfigError,
    FairQueue,
    QuotaExceeded,
    Task,
    TaskState,
    ValidationError,
)


def backlog(q: FairQueue, user: str) -> int:
    return q.user_loads([user])[0].queued


def test_a_quota_takes_exactly_its_count_and_refuses_the_next(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.set_user_limits("noisy", max_queued=20)
    for i in range(20):
        q.enqueue("work", {"i": i}, user_id="noisy")
    before = q.stats().counts
    with pytest.raises(QuotaExceeded) as caught:
        q.enqueue("work", {"i": 20}, user_id="noisy")
    err = caught.value
    assert (err.user_id, err.quota, err.queued) == ("noisy", 20, 20)
    assert "'noisy'" in str(err)
    assert "20" in str(err)
    # a batch past it writes nothing, not even its other tenants' tasks
    batch = [Task(user_id="noisy", name="work", payload={}) for _ in range(10)]
    with pytest.raises(QuotaExceeded):
        q.push_many([Task(user_id="quiet", name="work", payload={}), *batch])
    assert q.stats().counts == before
    assert backlog(q, "noisy") == 20
    # another tenant is not held to it
    q.enqueue("work", {}, user_id="quiet")
    assert backlog(q, "quiet") == 1
    load = q.user_loads(["noisy"])[0]
    assert (load.queued, load.max_queued) == (20, 20)


def test_a_batch_that_fits_exactly_is_taken(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.set_user_limits("u", max_queued=10)
    q.push_many([Task(user_id="u", name="work", payload={}) for _ in range(4)])
    with pytest.raises(QuotaExceeded) as caught:
        q.push_many([Task(user_id="u", name="work", payload={}) for _ in range(7)])
    assert caught.value.queued == 4
    q.push_many([Task(user_id="u", name="work", payload={}) for _ in range(6)])
    assert backlog(q, "u") == 10


def test_a_resent_push_of_a_counted_task_is_answered_as_stored(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.set_user_limits("u", max_queued=2)
    first = q.enqueue("work", {}, user_id="u", task_id="a")
    q.push(Task(user_id="u", name="work", payload={}, task_id="b", priority=6))
    again = q.enqueue("work", {}, user_id="u", task_id="a")
    assert again.task_id == first.task_id
    assert q.push_many([Task(user_id="u", name="work", payload={}, task_id="b")])
    assert backlog(q, "u") == 2


def test_the_backlog_follows_every_transition(make_queue: MakeQueue) -> None:
    q = make_queue(retry_base_seconds=30.0)
    user = "t"
    q.set_user_limits(user, max_queued=1000)
    q.enqueue("work", {}, user_id=user, task_id="up")
    q.enqueue("work", {}, user_id=user, depends_on=["up"])  # DEFERRED
    q.enqueue("work", {}, user_id=user, delay=600)  # SCHEDULED
    q.enqueue("work", {}, user_id=user, task_id="victim")
    assert backlog(q, user) == 4
    assert q.cancel("victim")  # QUEUED -> CANCELED
    assert backlog(q, user) == 3
    task = q.pop(worker_id="w")
    assert task is not None
    assert task.task_id == "up"
    assert backlog(q, user) == 2  # leased: STARTED is not in the backlog
    assert q.fail(task, error="boom", retry=True) == TaskState.SCHEDULED
    assert backlog(q, user) == 3
    assert q.cancel("up")  # its dependent is canceled with it
    assert backlog(q, user) == 1
    assert q.retry("up") == TaskState.QUEUED
    assert backlog(q, user) == 2


def test_the_queue_default_applies_to_users_without_a_quota_of_their_own(
    make_queue: MakeQueue,
) -> None:
    q = make_queue(max_queued_per_user=3)
    for _ in range(3):
        q.enqueue("work", {}, user_id="a")
    with pytest.raises(QuotaExceeded) as caught:
        q.enqueue("work", {}, user_id="a")
    assert caught.value.quota == 3
    q.set_user_limits("a", max_queued=5)  # its own quota wins
    q.enqueue("work", {}, user_id="a")
    q.set_user_limits("b", max_queued=1)  # another user's quota: the default still holds "a"
    q.enqueue("work", {}, user_id="a")
    with pytest.raises(QuotaExceeded):
        q.enqueue("work", {}, user_id="a")
    q.set_user_limits("a", max_queued=0)  # back to the default: 5 waiting, over 3
    with pytest.raises(QuotaExceeded):
        q.push_many([Task(user_id="a", name="work", payload={})])
    assert q.user_loads(["a"])[0].max_queued is None


def test_set_user_limits_changes_only_the_limits_it_is_given(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.set_user_limits("u", weight=3, max_in_flight=2)
    q.set_user_limits("u", max_queued=7)
    q.set_user_limits("u", max_queued=7)  # the same again changes nothing
    load = q.user_loads(["u"])[0]
    assert (load.weight, load.cap, load.max_queued) == (3, 2, 7)
    q.set_user_limits("u", max_in_flight=0)
    load = q.user_loads(["u"])[0]
    assert (load.weight, load.cap, load.max_queued) == (3, None, 7)
    q.set_user_limits("u", weight=1)
    assert q.user_loads(["u"])[0].weight == 1


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize(
    ("limits", "field"),
    [
        ({"max_queued": -1}, "max_queued"),
        ({"max_queued": True}, "max_queued"),
        ({"max_queued": "5"}, "max_queued"),
        ({"weight": 0}, "weight"),
        ({"max_in_flight": 2.5}, "max_in_flight"),
    ],
)
def test_bad_limits_are_refused_and_change_nothing(
    make_queue: MakeQueue, limits: dict[str, object], field: str
) -> None:
    q = make_queue()
    q.set_user_limits("u", max_queued=4)
    with pytest.raises(ValidationError, match=field):
        q.set_user_limits("u", **limits)  # type: ignore[arg-type]
    assert q.user_loads(["u"])[0].max_queued == 4


@pytest.mark.parametrize("value", [0, -3, True, 2.5])
def test_a_bad_queue_default_is_a_config_error(value: object) -> None:
    with pytest.raises(ConfigError, match="max_queued_per_user"):
        FairQueue.from_url("redis://127.0.0.1:1/0", "q", max_queued_per_user=value)


def test_a_quota_lives_in_its_tenants_shard(make_queue: MakeQueue) -> None:
    q = make_queue(shards=3, max_queued_per_user=2)
    users = [f"user-{i}" for i in range(6)]
    assert len({q.shard_of(u) for u in users}) > 1
    q.set_user_limits(users[0], max_queued=3)
    for u in users:
        q.push_many([Task(user_id=u, name="work", payload={}) for _ in range(2)])
    q.enqueue("work", {}, user_id=users[0])
    for u in users:
        with pytest.raises(QuotaExceeded) as caught:
            q.enqueue("work", {}, user_id=u)
        assert caught.value.user_id == u
        assert backlog(q, u) == (3 if u == users[0] else 2)


@pytest.mark.one_shard("push_many is atomic per shard")
def test_a_batch_of_many_users_is_counted_and_held_to_their_quotas(
    make_queue: MakeQueue,
) -> None:
    q = make_queue(max_queued_per_user=2)
    users = [f"u{i}" for i in range(5000)]
    q.set_user_limits("u4999", max_queued=1)
    q.push_many([Task(user_id=u, name="work", payload={}) for u in users])
    loads = q.user_loads(["u0", "u2500", "u4999"])
    assert [load.queued for load in loads] == [1, 1, 1]
    with pytest.raises(QuotaExceeded) as caught:
        q.push_many([Task(user_id=u, name="work", payload={}) for u in users])
    assert caught.value.user_id == "u4999"
    q.push_many([Task(user_id=u, name="work", payload={}) for u in users[:4999]])
    assert q.user_loads(["u4998"])[0].queued == 2


def test_a_lease_says_whether_it_holds_a_slot_of_a_cap(make_queue: MakeQueue) -> None:
    """``Task.lease_capped``: the lease holds a slot of its user's or its group's
    in-flight cap (a worker leases nothing ahead for that slot); no cap, no mark."""
    q = make_queue()
    q.enqueue("work", {}, user_id="free")
    first = q.pop(worker_id="w")
    assert first is not None
    assert first.lease_capped is False
    q.set_user_limits("lab", max_in_flight=5)
    q.set_user_limits("org-a", group="org")
    q.set_group_limits("org", max_in_flight=4)
    for user in ("lab", "free", "org-a"):
        q.enqueue("work", {}, user_id=user)
    leased: dict[str, Task] = {}
    while len(leased) < 3:  # a sharded queue's batch may come from one shard
        leased.update((t.user_id, t) for t in q.pop_batch(3, worker_id="w"))
    assert {u: t.lease_capped for u, t in leased.items()} == {
        "lab": True, "free": False, "org-a": True,
    }  # fmt: skip
    for task in leased.values():  # read back as stored, and gone once it finished
        got = q.get(task.task_id or "")
        assert got is not None
        assert got.lease_capped is task.lease_capped
        assert q.complete(task, result=None)
    done = q.get(leased["lab"].task_id or "")
    assert done is not None
    assert done.lease_capped is False
