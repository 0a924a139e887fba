"""Task cost: a task of cost N takes N slots of its user's cap and of its concurrency
limits, N tokens of its rate limits, and N times its run (N turns in count mode) of its
user's fair share. Every case runs against a real server; slots are counted from
unexpired leases, so an ended, expired or canceled lease frees all of its slots."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, expire_lease, queue_snapshot, resend

from fairque import FairQueue, Task, TaskState, ValidationError
from fairque.core.keys import QueueKeys


def ids(tasks: list[Task]) -> list[str]:
    return sorted(t.task_id or "" for t in tasks)


def in_flight(q: FairQueue, user: str) -> int:
    """The slots the user's unexpired leases hold, as stats counts them."""
    return next(u.in_flight for u in q.stats().users if u.user_id == user)


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize("cost", [0, -1, 1001, True, "2", 2.0, None])
def test_a_bad_cost_is_a_typed_error_and_writes_nothing(
    make_queue: MakeQueue, redis_client: SyncClient, cost: Any
) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u", cost=2)
    before = queue_snapshot(redis_client, q.queue)
    with pytest.raises(ValidationError) as info:
        q.enqueue("n", user_id="u", cost=cost)
    assert any(field == "cost" for field, _ in info.value.problems)
    with pytest.raises(ValidationError):
        Task(user_id="u", name="n", cost=cost)
    assert queue_snapshot(redis_client, q.queue) == before


def test_the_cost_is_stored_and_read_back(make_queue: MakeQueue) -> None:
    q = make_queue()
    a = q.enqueue("n", user_id="u", cost=3, task_id="a")
    b, c = q.push_many([Task(user_id="u", name="n", cost=1000, task_id="b"),
                        Task(user_id="u", name="n", task_id="c")])  # fmt: skip
    assert (a.cost, b.cost, c.cost) == (3, 1000, 1)
    assert [q.get(i).cost for i in "abc"] == [3, 1000, 1]  # type: ignore[union-attr]
    leased = {t.task_id: t.cost for t in q.pop_batch(3, "w")}
    assert leased["a"] == 3


@pytest.mark.one_shard("reads one shard's keys")
def test_a_task_of_cost_one_stores_no_cost_field(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    keys = QueueKeys(q.queue)
    q.enqueue("n", user_id="u", task_id="one", cost=1)
    q.push(Task(user_id="u", name="n", task_id="two", cost=2))
    assert redis_client.hget(keys.task("one"), "cost") is None
    assert redis_client.hget(keys.task("two"), "cost") == b"2"
    assert redis_client.hget(keys.meta, "costly") == b"1"  # the lease path reads costs


def test_a_cap_counts_cost(make_queue: MakeQueue) -> None:
    """A cap of 4 holds two tasks of cost 2; a task of cost 3 waits for three free
    slots and a task of cost 1 behind it waits too (its user's lane is in order)."""
    q = make_queue()
    q.set_user_limits("u", max_in_flight=4)
    q.push_many([Task(user_id="u", name="n", cost=2, task_id=f"two{i}") for i in range(3)])
    first = q.pop_batch(10, "w")
    assert ids(first) == ["two0", "two1"]
    assert in_flight(q, "u") == 4
    assert q.pop("w") is None
    assert q.complete(first[0])
    third = q.pop("w")
    assert third is not None
    assert third.task_id == "two2"
    q.push_many([Task(user_id="u", name="n", cost=3, task_id="three"),
                 Task(user_id="u", name="n", task_id="one")])  # fmt: skip
    assert q.pop("w") is None  # 2 of 4 slots free: "three" does not fit
    assert q.complete(first[1])
    got = q.pop_batch(10, "w")
    assert ids(got) == []  # 2 free still: "two2" holds 2
    assert q.complete(third)
    got = q.pop_batch(10, "w")
    assert ids(got) == ["one", "three"]
    assert in_flight(q, "u") == 4


def test_a_task_dearer_than_the_cap_runs_alone(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.set_user_limits("u", max_in_flight=2)
    q.push_many([Task(user_id="u", name="n", task_id="small"),
                 Task(user_id="u", name="n", cost=5, task_id="big")])  # fmt: skip
    small = q.pop("w")
    assert small is not None
    assert small.task_id == "small"
    assert q.pop("w") is None  # one slot held: "big" waits for the user to hold none
    assert q.complete(small)
    big = q.pop("w")
    assert big is not None
    assert big.task_id == "big"
    assert in_flight(q, "u") == 2  # it holds the whole cap, no more
    q.enqueue("n", user_id="u", task_id="after")
    assert q.pop("w") is None
    assert q.complete(big)
    assert [t.task_id for t in q.pop_batch(5, "w")] == ["after"]
    assert in_flight(q, "u") == 1


def test_other_users_are_served_while_a_dear_task_waits(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.set_user_limits("u", max_in_flight=2)
    q.push_many([Task(user_id="u", name="n", task_id="u1"),
                 Task(user_id="u", name="n", cost=2, task_id="u2")])  # fmt: skip
    q.push_many(Task(user_id="v", name="n", task_id=f"v{i}") for i in range(3))
    got = q.pop_batch(10, "w")
    assert ids(got) == ["u1", "v0", "v1", "v2"]


@pytest.mark.one_shard("ages one shard's keys")
def test_every_slot_of_an_ended_lease_is_freed(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    """Completion, failure, a give-back, a cancel and an expired lease each free all
    of a dear task's slots; a heartbeat keeps all of them."""
    q = make_queue(retry_base_seconds=0, lease_seconds=5)
    q.set_user_limits("u", max_in_flight=3)
    q.push_many(Task(user_id="u", name="n", cost=3, task_id=f"t{i}") for i in range(6))

    def lease() -> Task:
        task = q.pop("w")
        assert task is not None
        assert in_flight(q, "u") == 3
        assert q.pop("w") is None
        return task

    assert q.complete(lease())
    assert q.fail(lease(), "boom", retry=False) == TaskState.FAILED
    q.requeue(lease())
    assert q.cancel(lease().task_id or "")
    task = lease()
    q.extend(task, 10)
    assert in_flight(q, "u") == 3
    expire_lease(redis_client, q.queue, task.task_id or "")
    q.reclaim()
    assert in_flight(q, "u") == 0
    assert q.pop("w") is not None


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_resent_lease_and_completion_of_a_dear_task_count_once(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.set_user_limits("u", max_in_flight=4)
    q.push_many(Task(user_id="u", name="n", cost=2) for _ in range(3))
    first, second = resend(q, redis_client, q.ops.pop(3, "w", None, None, None))
    assert [t.task_id for t in first] == [t.task_id for t in second]
    assert len(first) == 2
    assert in_flight(q, "u") == 4
    done = q.ops.complete(first[0], None)
    assert q._run(done)
    snapshot = queue_snapshot(redis_client, q.queue)
    assert q._run(done)
    assert queue_snapshot(redis_client, q.queue) == snapshot
    assert in_flight(q, "u") == 2


def test_a_concurrency_limit_counts_cost(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.define_constraint(id="gpu", name="train", concurrency=4, per_user=True)
    q.push_many(Task(user_id="u", name="train", cost=2, task_id=f"t{i}") for i in range(3))
    q.enqueue("other", user_id="u", task_id="free")
    got = q.pop_batch(10, "w")
    assert ids(got) == ["free", "t0", "t1"]
    info = q.constraint("gpu")
    assert (info.running, info.parked) == (4, 1)  # slots held; tasks parked
    assert q.complete(next(t for t in got if t.task_id == "t0"))
    again = q.pop_batch(10, "w")
    assert ids(again) == ["t2"]


def test_a_task_dearer_than_a_concurrency_limit_runs_alone(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.define_constraint(id="c", name="*", concurrency=2, per_user=True)
    q.push_many([Task(user_id="u", name="n", task_id="one"),
                 Task(user_id="u", name="n", cost=9, task_id="nine")])  # fmt: skip
    one = q.pop("w")
    assert one is not None
    assert q.pop("w") is None
    assert q.complete(one)
    nine = q.pop("w")
    assert nine is not None
    assert nine.task_id == "nine"
    assert q.constraint("c").running == 2


@pytest.mark.one_shard("a global limit below the shard count is not split (docs/howto/shards.md)")
def test_a_rate_limit_takes_a_token_per_unit_of_cost(make_queue: MakeQueue) -> None:
    """10 tokens a second, burst 1: a task of cost 5 moves the schedule half a second."""
    q = make_queue()
    q.define_constraint(id="r", name="*", rate=10, per=1.0, burst=1)
    q.push_many(Task(user_id="u", name="n", cost=5, task_id=f"t{i}") for i in range(3))
    began = time.monotonic()
    first = q.pop_batch(3, "w")
    assert [t.task_id for t in first] == ["t0"]
    wake = q.next_wakeup()
    spent = time.monotonic() - began  # the margin: what the two calls took here
    assert wake is not None
    assert 0.5 - spent - 0.002 <= wake <= 0.501
    time.sleep(wake + 0.02)
    assert [t.task_id for t in q.pop_batch(3, "w")] == ["t1"]


@pytest.mark.one_shard("a global limit below the shard count is not split (docs/howto/shards.md)")
def test_a_burst_takes_a_dear_task_only_when_it_has_the_tokens(make_queue: MakeQueue) -> None:
    """Burst 4 at 10 a second: a cost-3 task leaves one token, so a second one waits
    until two more came (200 ms), and a cost-1 task behind it starts at once."""
    q = make_queue()
    q.define_constraint(id="r", name="dear", rate=10, per=1.0, burst=4)
    q.push_many(Task(user_id="u", name="dear", cost=3, task_id=f"d{i}") for i in range(2))
    q.enqueue("cheap", user_id="v", task_id="c")
    began = time.monotonic()
    got = q.pop_batch(5, "w")
    assert ids(got) == ["c", "d0"]
    wake = q.next_wakeup()
    spent = time.monotonic() - began  # the margin: what the two calls took here
    assert wake is not None
    assert 0.2 - spent - 0.002 <= wake <= 0.201


@pytest.mark.one_shard("reads one shard's keys")
def test_time_mode_charges_cost_times_the_run(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    """The lease charges 3 x the estimate over the weight; the completion corrects it
    to 3 x the reported run over the weight."""
    q = make_queue()
    q.set_user_limits("u", weight=2)
    q.push(Task(user_id="u", name="n", cost=3))
    keys = QueueKeys(q.queue)
    before = float(redis_client.zscore(keys.ring, "u") or 0)
    task = q.pop("w")
    assert task is not None
    tag = float(redis_client.hget(keys.tenant("u"), "tag") or 0)
    assert tag == before + 10_000 * 3 / 2  # the first estimate, 10 ms
    time.sleep(0.03)
    task.run_seconds = 0.02
    assert q.complete(task)
    tag = float(redis_client.hget(keys.tenant("u"), "tag") or 0)
    assert tag == pytest.approx(before + 20_000 * 3 / 2, abs=1)
    assert float(redis_client.hget(keys.tenant("u"), "est") or 0) == pytest.approx(20, abs=0.01)


def test_time_mode_shares_worker_time_by_cost(make_queue: MakeQueue) -> None:
    """At the first estimate (no task ended yet), a user whose tasks cost 3 gets one
    lease for three of a user whose tasks cost 1."""
    q = make_queue()
    q.push_many(Task(user_id="dear", name="n", cost=3) for _ in range(100))
    q.push_many(Task(user_id="cheap", name="n") for _ in range(300))
    served = Counter(t.user_id for t in q.pop_batch(80, "w"))
    assert served == {"dear": 20, "cheap": 60}


@pytest.mark.parametrize("batch", [True, False])
def test_count_mode_counts_cost_in_turns(make_queue: MakeQueue, batch: bool) -> None:
    q = make_queue()
    q.set_fairness("count")
    q.push_many(Task(user_id="dear", name="n", cost=3) for _ in range(100))
    q.push_many(Task(user_id="cheap", name="n") for _ in range(300))
    if batch:
        tasks = q.pop_batch(80, "w")
    else:
        tasks = [t for t in (q.pop("w") for _ in range(80)) if t is not None]
    served = Counter(t.user_id for t in tasks)
    assert served["dear"] + served["cheap"] == 80
    assert abs(served["dear"] - 20) <= 1
