"""A lease request's ``max_held``: a worker never holds more unexpired leases than its
bound, counted by the server from the leases themselves."""

from __future__ import annotations

import time

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, resend

from fairque import Task, TaskState, ValidationError
from fairque.core.records import LeaseRequest


@pytest.mark.one_shard("a bound holds per shard (docs/howto/http.md)")
def test_a_worker_never_holds_more_than_its_bound(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.push_many(Task(user_id=f"u{i % 3}", name="x") for i in range(30))
    first = q.pop_batch(10, "w", max_held=4)
    assert len(first) == 4
    assert q.pop_batch(10, "w", max_held=4) == []  # it reported nothing: none more
    assert len(q.pop_batch(2, "other", max_held=4)) == 2  # another worker has its own
    assert q.extend(first[0], seconds=30)  # a heartbeat keeps the lease counted
    assert q.pop_batch(10, "w", max_held=4) == []
    assert q.complete(first[1])
    q.fail(first[2], "boom")
    acks, more = q.complete_and_pop([(first[3], 1)], 10, "w", max_held=4)
    assert acks == [True]
    assert len(more) == 3  # three of its four ended
    assert q.pop_batch(10, "w", max_held=4) == []
    assert len(q.pop_batch(10, "w")) == 10  # no bound asked: none applied


@pytest.mark.one_shard("reads one shard's keys")
def test_an_expired_lease_frees_its_place(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.push_many(Task(user_id="u", name="x") for _ in range(5))
    assert len(q.pop_batch(5, "w", lease_seconds=0.05, max_held=2)) == 2
    assert q.pop_batch(5, "w", max_held=2) == []
    time.sleep(0.1)  # its leases lapsed: they count no more, reclaimed or not
    assert len(q.pop_batch(5, "w", max_held=2)) == 2


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_resent_bounded_lease_leases_nothing_more(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.push_many(Task(user_id="u", name="x") for _ in range(5))
    request = LeaseRequest(5, "w", request_id="r1", max_held=3)
    first, second = resend(q, redis_client, q.ops.pop(request))
    assert [t.task_id for t in first] == [t.task_id for t in second]
    assert len(first) == 3


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize("bad", [0, -1, 10_001, True, "3", 2.5])
def test_a_bad_bound_is_a_typed_error(make_queue: MakeQueue, bad: object) -> None:
    q = make_queue()
    q.push(Task(user_id="u", name="x"))
    with pytest.raises(ValidationError, match="max_held"):
        q.pop_batch(1, "w", max_held=bad)  # type: ignore[arg-type]
    assert q.stats().counts[TaskState.QUEUED] == 1
