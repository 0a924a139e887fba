"""Constraints: matchers, storage, and the lease script passing over limited tasks."""

from __future__ import annotations

import time
from typing import Any

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, expire_lease, server_ms

from fairque import Priority
from fairque.constraints.model import Constraint, ConstraintSet, constraint_list
from fairque.core.keys import QueueKeys
from fairque.errors import ConstraintNotFound, ValidationError


# matchers ---------------------------------------------------------------------------
def test_matcher_by_name_payload_and_users() -> None:
    c = Constraint("c", name="mail.*", payload={"region": ["eu", "us"], "tier": 1},
                   users=("a", "b"), rate=5)  # fmt: skip
    assert c.matches("mail.send", {"region": "eu", "tier": 1}, "a")
    assert c.matches("mail.x", {"region": "us", "tier": 1.0, "more": 2}, "b")
    assert not c.matches("sms.send", {"region": "eu", "tier": 1}, "a")
    assert not c.matches("mail.send", {"region": "asia", "tier": 1}, "a")
    assert not c.matches("mail.send", {"region": "eu", "tier": True}, "a")
    assert not c.matches("mail.send", {"region": "eu"}, "a")
    assert not c.matches("mail.send", [1, 2], "a")
    assert not c.matches("mail.send", {"region": "eu", "tier": 1}, "c")
    flag = Constraint("f", payload={"on": True}, concurrency=1)
    assert flag.matches("x", {"on": True}, "u")
    assert not flag.matches("x", {"on": 1}, "u")


def test_buckets_per_user_and_global() -> None:
    found = ConstraintSet(3, (Constraint("g", rate=1), Constraint("p", concurrency=2,
                                                                    per_user=True)))  # fmt: skip
    assert found.buckets("x", None, "alice") == '["g","p:alice"]'
    assert ConstraintSet().buckets("x", None, "alice") == ""
    only = ConstraintSet(1, (Constraint("n", name="a*", rate=1),))
    assert only.buckets("b", None, "u") == ""


@pytest.mark.parametrize(
    "fields",
    [
        {"id": "bad id", "rate": 1},
        {"id": "", "rate": 1},
        {"id": "c"},
        {"id": "c", "rate": 0},
        {"id": "c", "rate": True},
        {"id": "c", "concurrency": -1},
        {"id": "c", "rate": 1, "per": 0},
        {"id": "c", "rate": 1, "per": "1"},
        {"id": "c", "rate": 1, "burst": 0},
        {"id": "c", "rate": 1, "name": ""},
        {"id": "c", "rate": 1, "payload": [1]},
        {"id": "c", "rate": 1, "payload": {"k": {"nested": 1}}},
        {"id": "c", "rate": 1, "payload": {"k": []}},
        {"id": "c", "rate": 1, "payload": {1: 2}},
        {"id": "c", "rate": 1, "users": "alice"},
        {"id": "c", "rate": 1, "users": [""]},
        {"id": "c", "rate": 1, "per_user": 1},
    ],
)
def test_bad_definitions_are_typed_errors(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Constraint(**fields)


def test_plain_data_round_trip() -> None:
    c = Constraint("c", name="a*", payload={"k": ["x"]}, users=("u",), rate=3, per=2,
                   burst=2, concurrency=4, per_user=True)  # fmt: skip
    assert Constraint.from_dict(c.to_dict()) == c
    assert Constraint.loads(c.dumps()) == c
    assert constraint_list({"c": {"rate": 3}}) == [Constraint("c", rate=3)]
    assert constraint_list([{"id": "c", "rate": 3}]) == [Constraint("c", rate=3)]
    for bad in ({"c": 3}, "x", [{"id": "c", "rate": 1}, {"id": "c", "rate": 2}], [{"rate": 1}],
                [{"id": "c", "rate": 1, "typo": 2}], [5]):  # fmt: skip
        with pytest.raises(ValidationError):
            constraint_list(bad)


# storage and inspection -------------------------------------------------------------
@pytest.mark.one_shard("a global limit below the shard count is not split (docs/howto/shards.md)")
def test_define_list_inspect_remove(make_queue: MakeQueue) -> None:
    q = make_queue()
    assert q.constraints() == []
    c = q.define_constraint(id="mail", name="mail.*", rate=10, concurrency=2)
    assert q.define_constraint(c) == c  # the same again changes nothing
    (info,) = q.constraints()
    assert info.constraint == c
    assert info.running == 0
    assert info.parked == 0
    assert q.constraint("mail").constraint == c
    with pytest.raises(ConstraintNotFound):
        q.constraint("nope")
    with pytest.raises(ValidationError, match="not both"):
        q.define_constraint(c, rate=3)
    with pytest.raises(ValidationError):
        q.define_constraint(id="x")
    with pytest.raises(ValidationError, match="unknown constraint field 'bogus'") as refused:
        q.define_constraint(id="x", rate=1, bogus=2)
    assert refused.value.problems[0][0] == "bogus"
    with pytest.raises(ValidationError, match="needs an id"):
        q.define_constraint(rate=1)
    assert q.remove_constraint("mail") is True
    assert q.remove_constraint("mail") is False
    assert q.constraints() == []


@pytest.mark.one_shard("a global limit below the shard count is not split (docs/howto/shards.md)")
def test_a_push_matches_constraints_defined_by_another_client(make_queue: MakeQueue) -> None:
    q = make_queue()
    other = make_queue(q.queue)
    other.define_constraint(id="c", name="limited", concurrency=1)
    q.enqueue("limited", user_id="u")  # q learns of the constraint from the push's refusal
    q.enqueue("limited", user_id="u")
    first = q.pop(worker_id="w")
    assert first is not None
    assert q.pop(worker_id="w") is None
    assert q.constraint("c").running == 1
    assert q.constraint("c").parked == 1
    q.complete(first)
    second = q.pop(worker_id="w")
    assert second is not None
    assert second.name == "limited"


# the lease script ---------------------------------------------------------------------
@pytest.mark.one_shard("a global limit below the shard count is not split (docs/howto/shards.md)")
def test_concurrency_limit_passes_over_without_blocking(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.define_constraint(id="c", name="slow", concurrency=1)
    a = q.enqueue("slow", user_id="u", task_id="a")
    q.enqueue("slow", user_id="u", task_id="b", priority=Priority.HIGH)
    q.enqueue("fast", user_id="u", task_id="c")
    q.enqueue("slow", user_id="v", task_id="d")
    q.enqueue("fast", user_id="v", task_id="e")
    got = q.pop_batch(10, worker_id="w")
    ids = sorted(t.task_id or "" for t in got)
    assert len(ids) == 3
    assert "c" in ids
    assert "e" in ids
    held = next(t for t in got if t.name == "slow")
    assert held.task_id == "b"  # the higher priority went first
    info = q.constraint("c")
    assert (info.running, info.parked) == (1, 2)
    assert q.pop(worker_id="w") is None
    assert q.complete(held)
    nxt = q.pop(worker_id="w")
    assert nxt is not None
    assert nxt.task_id == "d"  # the limit's next turn is v's: u has had one
    assert q.complete(nxt)
    last = q.pop(worker_id="w")
    assert last is not None
    assert last.task_id == a.task_id == "a"


@pytest.mark.one_shard("a global limit below the shard count is not split (docs/howto/shards.md)")
def test_rate_limit_gives_the_exact_next_slot(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.define_constraint(id="r", name="*", rate=2, per=1.0, burst=1)
    for i in range(3):
        q.enqueue("job", user_id="u", task_id=f"t{i}")
    first = q.pop_batch(3, worker_id="w")
    assert [t.task_id for t in first] == ["t0"]
    wake = q.next_wakeup()
    assert wake is not None
    assert 0.3 < wake <= 0.51  # the slot's time rounded up to the millisecond
    time.sleep(wake + 0.02)
    second = q.pop_batch(3, worker_id="w")
    assert [t.task_id for t in second] == ["t1"]


def test_per_user_buckets(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.define_constraint(id="p", concurrency=1, per_user=True)
    for u in ("a", "b"):
        for i in range(2):
            q.enqueue("job", user_id=u, task_id=f"{u}{i}")
    got = q.pop_batch(4, worker_id="w")
    assert sorted(t.task_id or "" for t in got) == ["a0", "b0"]
    info = q.constraint("p")
    assert info.buckets == {"p:a": (1, 1), "p:b": (1, 1)}


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_an_expired_lease_frees_its_slot(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    q.define_constraint(id="c", concurrency=1)
    q.enqueue("job", user_id="u", task_id="a")
    q.enqueue("job", user_id="u", task_id="b")
    a = q.pop(worker_id="dead")
    assert a is not None
    assert q.pop(worker_id="w") is None
    expire_lease(redis_client, q.queue, "a")
    redis_client.zadd(QueueKeys(q.queue).constraint_held("c"), {"a": 0}, xx=True)
    b = q.pop(worker_id="w")
    assert b is not None
    assert b.task_id in ("a", "b")
    assert q.constraint("c").running == 1


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_extend_keeps_the_slot(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue(lease_seconds=1.0)
    q.define_constraint(id="c", concurrency=1)
    q.enqueue("job", user_id="u")
    t = q.pop(worker_id="w")
    assert t is not None
    q.extend(t, 30)
    deadline = redis_client.zscore(QueueKeys(q.queue).constraint_held("c"), t.task_id or "")
    assert deadline is not None
    assert deadline > server_ms(redis_client) + 20_000
    q.extend_many([t], 40)
    deadline2 = redis_client.zscore(QueueKeys(q.queue).constraint_held("c"), t.task_id or "")
    assert deadline2 is not None
    assert deadline2 > deadline


@pytest.mark.one_shard("a global limit below the shard count is not split (docs/howto/shards.md)")
def test_cancel_a_parked_task_and_remove_releases(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.define_constraint(id="c", concurrency=1)
    for i in range(3):
        q.enqueue("job", user_id="u", task_id=f"t{i}", priority=Priority.CRITICAL if i else 3)
    first = q.pop_batch(3, worker_id="w")
    assert len(first) == 1
    assert q.constraint("c").parked == 2
    parked = "t2" if first[0].task_id == "t1" else "t1"
    assert q.cancel(parked)
    assert q.constraint("c").parked == 1
    assert q.remove_constraint("c")
    rest = q.pop_batch(3, worker_id="w")
    assert len(rest) == 1


@pytest.mark.one_shard("a global limit below the shard count is not split (docs/howto/shards.md)")
def test_raising_a_limit_releases_parked_tasks(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.define_constraint(id="c", concurrency=1)
    for i in range(3):
        q.enqueue("job", user_id="u", task_id=f"t{i}")
    assert len(q.pop_batch(3, worker_id="w")) == 1
    q.define_constraint(id="c", concurrency=3)
    assert len(q.pop_batch(3, worker_id="w")) == 2


@pytest.mark.one_shard("a global limit below the shard count is not split (docs/howto/shards.md)")
def test_requeue_and_fail_free_the_slot(make_queue: MakeQueue) -> None:
    q = make_queue(retry_base_seconds=0.001)
    q.define_constraint(id="c", concurrency=1)
    q.enqueue("job", user_id="u", task_id="a")
    q.enqueue("job", user_id="u", task_id="b")
    a = q.pop(worker_id="w")
    assert a is not None
    q.requeue(a)
    b = q.pop(worker_id="w")
    assert b is not None
    q.fail(b, error="x", retry=False)
    assert q.pop(worker_id="w") is not None


@pytest.mark.one_shard("a global limit below the shard count is not split (docs/howto/shards.md)")
def test_a_purge_keeps_the_constraints_and_their_version(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.define_constraint(id="c", concurrency=1)
    q.enqueue("job", user_id="u")
    q.purge()
    fresh = make_queue(q.queue)  # a new client knows nothing of the constraints
    fresh.enqueue("job", user_id="u", task_id="a")
    fresh.enqueue("job", user_id="u", task_id="b")
    assert len(fresh.pop_batch(2, worker_id="w")) == 1
    assert [i.constraint.id for i in fresh.constraints()] == ["c"]


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_a_purge_frees_the_slots_of_the_tasks_it_deletes(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    """A purged task's lease held its bucket's slot until it expired, and a parked one
    stayed in its bucket: new tasks waited for the slot. The rate window stays."""
    q = make_queue()
    q.define_constraint(id="c", concurrency=1)
    q.define_constraint(id="r", rate=100, per=60, burst=10)
    q.enqueue("job", user_id="u", task_id="a")
    q.enqueue("job", user_id="u", task_id="b")
    assert [t.task_id for t in q.pop_batch(2, worker_id="w")] == ["a"]  # b is parked
    assert q.constraint("c").running == 1
    assert q.constraint("c").parked == 1
    k = QueueKeys(q.queue)
    rate_before = redis_client.get(k.constraint_rate("r"))
    assert rate_before is not None
    for _ in range(2):  # a resend changes nothing more
        q.purge()
        assert not redis_client.exists(k.constraint_held("c"), k.constraint_parked("c"))
        assert not redis_client.exists(k.constraint_due)
        assert redis_client.get(k.constraint_rate("r")) == rate_before
    q.enqueue("job", user_id="u", task_id="c")
    leased = q.pop(worker_id="w")  # at once, not after "a"'s lease expired
    assert leased is not None
    assert leased.task_id == "c"
    assert (q.constraint("c").running, q.constraint("c").parked) == (1, 0)


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_apply_constraints_defines_and_prunes(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.define_constraint(id="old", rate=1)
    held = q.apply_constraints([Constraint("a", rate=2), Constraint("b", concurrency=1)])
    assert [c.id for c in held.constraints] == ["a", "b", "old"]
    held = q.apply_constraints([Constraint("a", rate=3)], prune=True)
    assert held.constraints == (Constraint("a", rate=3),)
    assert held.version == q.ops.codec.constraints.version


@pytest.mark.one_shard("a global limit below the shard count is not split (docs/howto/shards.md)")
def test_a_late_start_never_pulls_the_next_one_early(make_queue: MakeQueue) -> None:
    """A start that comes after its slot moves the schedule to itself: the next start
    is a whole interval later, so no window holds more starts than the rate allows
    (a late start kept in the old schedule let two come closer than the interval)."""
    q = make_queue()
    q.define_constraint(id="r", name="*", rate=2, per=1.0, burst=1)  # a slot per 500 ms
    for i in range(3):
        q.enqueue("job", user_id="u", task_id=f"t{i}")
    asked = time.monotonic()
    assert [t.task_id for t in q.pop_batch(3, worker_id="w")] == ["t0"]
    wake = q.next_wakeup()
    spent = time.monotonic() - asked
    assert wake is not None
    assert 0.5 - spent - 0.001 <= wake <= 0.5  # the slot, from the lease on
    time.sleep(wake + 0.03)  # 30 ms late, or more on a busy machine
    asked = time.monotonic()
    late = q.pop_batch(3, worker_id="w")
    assert [t.task_id for t in late] == ["t1"]
    after = q.next_wakeup()
    spent = time.monotonic() - asked
    assert after is not None
    # a whole interval after the late start (a kept schedule would say 30 ms less)
    assert after >= 0.5 - spent - 0.001
    assert q.pop_batch(3, worker_id="w") == []
    time.sleep(after + 0.005)
    third = q.pop_batch(3, worker_id="w")
    assert [t.task_id for t in third] == ["t2"]
    assert late[0].started_at is not None
    assert third[0].started_at is not None
    assert (third[0].started_at - late[0].started_at).total_seconds() >= 0.5
