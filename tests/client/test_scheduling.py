"""Fair selection: round robin, lanes, priority aging, delays, affinity, weights, caps."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from helpers.support import MakeQueue

from fairque import FairQueue, Priority, Task, TaskState


def drain(q: FairQueue, limit: int = 100_000, **pop_kwargs: Any) -> list[Task]:
    out: list[Task] = []
    while len(out) < limit:
        task = q.pop("w", **pop_kwargs)
        if task is None:
            break
        assert q.complete(task)
        out.append(task)
    return out


@pytest.mark.one_shard("turns between tenants are exact within a shard, on average across shards")
def test_flood_does_not_starve_small_users(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.set_fairness("count")  # strict turns; time mode: tests/client/test_time_fair.py
    q.push_many(Task(user_id="A", name="flood", payload=i) for i in range(1000))
    small = [f"user-{c}" for c in "BCDEFGHIJK"]
    for u in small:
        q.push_many(Task(user_id=u, name="small", payload=i) for i in range(10))
    served = [t.user_id for t in drain(q, limit=110)]
    counts = Counter(served)
    assert all(counts[u] == 10 for u in small)
    assert counts["A"] == 10
    # strict rotation: every window of 11 consecutive pops serves 11 different users
    for start in range(0, 110, 11):
        assert len(set(served[start : start + 11])) == 11
    # nobody is served twice while another user with ready work waits
    for i in range(1, len(served)):
        assert served[i] != served[i - 1]


@pytest.mark.one_shard("turns between tenants are exact within a shard, on average across shards")
def test_pop_batch_is_round_robin_within_the_batch(make_queue: MakeQueue) -> None:
    q = make_queue()
    for u in ("a", "b", "c"):
        q.push_many(Task(user_id=u, name="n") for _ in range(5))
    batch = q.pop_batch(6, worker_id="w")
    assert [t.user_id for t in batch] == ["a", "b", "c", "a", "b", "c"]
    assert all(t.state == TaskState.STARTED and t.lease_token for t in batch)
    assert len({t.lease_token for t in batch}) == 6
    rest = q.pop_batch(100)
    assert len(rest) == 9
    assert q.pop_batch(10) == []


@pytest.mark.one_shard("turns between tenants are exact within a shard, on average across shards")
@pytest.mark.parametrize("limits", [False, True])
def test_a_batch_leases_what_single_pops_would(make_queue: MakeQueue, limits: bool) -> None:
    """A batch follows the ring's head as single pops do: same tasks, same order, with
    users emptying, weighted turns, caps reached and the critical lane."""
    queues = make_queue(), make_queue()
    for q in queues:
        for u, n in (("a", 7), ("b", 1), ("c", 4), ("d", 9), ("e", 2)):
            q.push_many(Task(user_id=u, name="n", task_id=f"{u}{i}") for i in range(n))
        q.push_many([Task(user_id="c", name="n", task_id="c!", priority=Priority.CRITICAL)])
        if limits:
            q.set_user_limits("a", weight=3)
            q.set_user_limits("d", max_in_flight=2)
    batched, single = queues
    by_batch = [t.task_id for t in batched.pop_batch(12, "w")]
    by_batch += [t.task_id for t in batched.pop_batch(50, "w")]
    one_by_one = []
    while (task := single.pop("w")) is not None:
        one_by_one.append(task.task_id)
    assert by_batch == one_by_one
    assert len(one_by_one) == (17 if limits else 24)  # d: 2 of its 9 under its cap


def test_critical_lane_first_and_fifo(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.enqueue("n1", user_id="u", priority=Priority.VERY_HIGH)
    q.enqueue("c1", user_id="u", priority=Priority.CRITICAL)
    q.enqueue("n2", user_id="u", priority=Priority.VERY_HIGH)
    q.enqueue("c2", user_id="u", priority=Priority.CRITICAL)
    q.enqueue("c3", user_id="u", priority=Priority.CRITICAL)
    assert [t.name for t in drain(q)] == ["c1", "c2", "c3", "n1", "n2"]


def test_critical_does_not_break_round_robin_across_users(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.set_fairness("count")  # exact turns (time mode charges what each task ran)
    for i in range(3):
        q.enqueue(f"a-crit-{i}", user_id="a", priority=Priority.CRITICAL)
    for i in range(3):
        q.enqueue(f"b-norm-{i}", user_id="b")
    served = [(t.user_id, t.name) for t in drain(q)]
    assert [u for u, _ in served] == ["a", "b", "a", "b", "a", "b"]
    assert [n for u, n in served if u == "a"] == ["a-crit-0", "a-crit-1", "a-crit-2"]


def test_priorities_pushed_together_pop_highest_first(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.push_many(Task(user_id="u", name=f"p{p}", priority=p) for p in (3, 1, 5, 2, 4))
    assert [t.name for t in drain(q)] == ["p5", "p4", "p3", "p2", "p1"]


def test_fifo_within_a_priority(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.push_many(Task(user_id="u", name=f"batch-{i}") for i in range(20))
    for i in range(20):
        q.enqueue(f"single-{i}", user_id="u")
    names = [t.name for t in drain(q)]
    assert names == [f"batch-{i}" for i in range(20)] + [f"single-{i}" for i in range(20)]


def test_aging_bounds_overtaking(make_queue: MakeQueue) -> None:
    q = make_queue(aging_horizon_seconds=1.0)
    q.enqueue("old-low", user_id="u", priority=Priority.VERY_LOW)
    time.sleep(0.3)
    q.enqueue("early-high", user_id="u", priority=Priority.VERY_HIGH)  # within 0.8 s: overtakes
    time.sleep(0.6)
    q.enqueue("late-high", user_id="u", priority=Priority.VERY_HIGH)  # after 0.8 s: cannot
    assert [t.name for t in drain(q)] == ["early-high", "old-low", "late-high"]


def test_strict_ordering_lets_priority_win_regardless_of_age(make_queue: MakeQueue) -> None:
    q = make_queue(ordering="strict", aging_horizon_seconds=0.001)
    q.enqueue("low", user_id="u", priority=Priority.VERY_LOW)
    time.sleep(0.01)
    q.enqueue("high-1", user_id="u", priority=Priority.HIGH)
    q.enqueue("high-2", user_id="u", priority=Priority.HIGH)
    q.enqueue("top", user_id="u", priority=Priority.VERY_HIGH)
    assert [t.name for t in drain(q)] == ["top", "high-1", "high-2", "low"]


def test_delayed_task_waits_without_blocking_ready_ones(make_queue: MakeQueue) -> None:
    q = make_queue()
    later = q.enqueue("later", user_id="u", delay=0.4, priority=Priority.CRITICAL)
    assert later.state == TaskState.SCHEDULED
    q.enqueue("now-1", user_id="u")
    q.enqueue("now-2", user_id="v")
    assert sorted(t.name for t in drain(q)) == ["now-1", "now-2"]
    assert q.pop("w") is None
    assert q.get(later.task_id or "").state == TaskState.SCHEDULED  # type: ignore[union-attr]
    time.sleep(0.45)
    task = q.pop("w")
    assert task is not None
    assert task.name == "later"


def test_execute_after_in_the_past_is_ready_at_once(make_queue: MakeQueue) -> None:
    from datetime import datetime, timedelta, timezone

    q = make_queue()
    past = datetime.now(timezone.utc) - timedelta(hours=1)
    assert q.enqueue("x", user_id="u", execute_after=past).state == TaskState.QUEUED
    future = datetime.now(timezone.utc) + timedelta(hours=1)
    t = q.enqueue("y", user_id="u", execute_after=future.replace(tzinfo=None))
    assert t.state == TaskState.SCHEDULED
    assert [x.name for x in drain(q)] == ["x"]


@pytest.mark.one_shard("turns between tenants are exact within a shard, on average across shards")
def test_assigned_users_first_then_steal_targets(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.set_fairness("count")  # exact alternation; time mode: tests/client/test_time_fair.py
    for u in ("user:1", "user:2", "user:3", "user:4"):
        q.push_many(Task(user_id=u, name=u) for _ in range(2))
    served = [
        t.user_id for t in drain(q, assigned_users=["user:1", "user:3"], steal_targets=["user:4"])
    ]
    assert served == ["user:1", "user:3", "user:1", "user:3", "user:4", "user:4"]
    # without steal targets an affine worker takes nothing else
    assert q.pop("w", assigned_users=["user:1"]) is None
    # '*' steals from anyone
    stolen = q.pop("w", assigned_users=["user:1"], steal_targets=["*"])
    assert stolen is not None
    assert stolen.user_id == "user:2"


def test_steal_targets_alone_and_unknown_users(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.enqueue("x", user_id="a")
    q.enqueue("y", user_id="b")
    assert q.pop("w", steal_targets=["nobody"]) is None
    t = q.pop("w", steal_targets=["b", "nobody"])
    assert t is not None
    assert t.user_id == "b"


@pytest.mark.one_shard("turns between tenants are exact within a shard, on average across shards")
def test_weights_give_proportional_share(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.set_fairness("count")  # weights as turns per round; as time: tests/client/test_time_fair.py
    q.set_user_limits("heavy", weight=3)
    q.push_many(Task(user_id="heavy", name="h") for _ in range(60))
    q.push_many(Task(user_id="light", name="l") for _ in range(60))
    served = [t.user_id for t in drain(q, limit=40)]
    counts = Counter(served)
    assert counts["heavy"] == 30
    assert counts["light"] == 10
    # the share holds in every round of four pops
    for start in range(0, 40, 4):
        assert Counter(served[start : start + 4]) == {"heavy": 3, "light": 1}
    q.set_user_limits("heavy", weight=1)
    served = [t.user_id for t in drain(q, limit=10)]
    assert Counter(served) == {"heavy": 5, "light": 5}


@pytest.mark.one_shard("turns between tenants are exact within a shard, on average across shards")
def test_in_flight_cap_skips_user_until_a_slot_frees(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.set_user_limits("capped", max_in_flight=2)
    q.push_many(Task(user_id="capped", name="c") for _ in range(5))
    q.push_many(Task(user_id="free", name="f") for _ in range(5))
    held = q.pop_batch(10, worker_id="w")
    assert Counter(t.user_id for t in held) == {"capped": 2, "free": 5}
    assert q.stats().capped_users == 1
    limits = {u.user_id: (u.weight, u.max_in_flight) for u in q.stats().users}
    assert limits == {"capped": (1, 2), "free": (1, None)}
    q.enqueue("c-late", user_id="capped")  # a capped user pushing work stays out of the ring
    assert q.pop("w") is None
    assert q.complete(held[0])
    nxt = q.pop("w")
    assert nxt is not None
    assert nxt.user_id == "capped"
    assert q.pop("w") is None
    # lifting the cap lets the user back at once
    q.set_user_limits("capped", max_in_flight=0)
    assert len(q.pop_batch(10)) == 3


def test_cap_lowered_below_in_flight_and_failure_frees_slot(make_queue: MakeQueue) -> None:
    q = make_queue(retry_base_seconds=0)
    q.push_many(Task(user_id="u", name="x") for _ in range(4))
    held = q.pop_batch(2)
    q.set_user_limits("u", max_in_flight=2)
    assert q.pop("w") is None
    assert q.fail(held[0], "boom", retry=False) == TaskState.FAILED
    assert q.pop("w") is not None
    q.set_user_limits("u", max_in_flight=5)
    assert q.pop("w") is not None


def _drain_wake_ups(q: FairQueue) -> None:
    while q.wait_for_work(0.01):
        pass


@pytest.mark.parametrize("frees", ["complete", "fail", "cancel", "raise_cap"])
def test_a_user_let_back_in_wakes_an_idle_worker(make_queue: MakeQueue, frees: str) -> None:
    """Idle workers park on the wake-up list: a freed cap must wake one, not wait for a poll."""
    q = make_queue()
    q.set_user_limits("u", max_in_flight=1)
    q.push_many(Task(user_id="u", name="x") for _ in range(3))
    held = q.pop("w")
    assert held is not None
    assert q.pop("w") is None  # the user is held out by its cap
    _drain_wake_ups(q)
    if frees == "complete":
        assert q.complete(held, None)
    elif frees == "fail":
        assert q.fail(held, "boom", retry=False) == TaskState.FAILED
    elif frees == "cancel":
        assert q.cancel(str(held.task_id))
    else:
        q.set_user_limits("u", max_in_flight=2)
    assert q.wait_for_work(1.0), f"{frees} freed a slot but woke no idle worker"
    assert q.pop("w") is not None
