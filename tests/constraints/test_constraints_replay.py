"""Constraint scripts are safe to run twice, and bad input changes nothing."""

from __future__ import annotations

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, queue_snapshot, resend

from fairque import FairQueue
from fairque.constraints.model import Constraint
from fairque.errors import StaleConstraints, ValidationError


def _parked_queue(make_queue: MakeQueue) -> FairQueue:
    """A queue with a concurrency-1 constraint, one task running and two parked."""
    q = make_queue()
    q.define_constraint(id="c", concurrency=1)
    for i in range(3):
        q.enqueue("job", user_id="u", task_id=f"t{i}")
    assert len(q.pop_batch(3, worker_id="w")) == 1
    return q


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_resent_define(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = _parked_queue(make_queue)
    first, second = resend(q, redis_client, q.ops.define_constraint(Constraint("c", concurrency=3)))
    assert first == second
    first, second = resend(q, redis_client, q.ops.define_constraint(Constraint("d", rate=5)))
    assert first == second


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_resent_remove(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = _parked_queue(make_queue)
    first, second = resend(q, redis_client, q.ops.remove_constraint("c"))
    assert first is True
    assert second is True


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_resent_pop_that_parked(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    q.define_constraint(id="c", name="slow", concurrency=1)
    for i in range(3):
        q.enqueue("slow", user_id="u", task_id=f"s{i}")
    q.enqueue("fast", user_id="u", task_id="f")
    first, second = resend(q, redis_client, q.ops.pop(3, "w", None, None, None))
    assert [t.task_id for t in first] == [t.task_id for t in second]
    assert len(first) == 2


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_resent_complete_that_frees_a_slot(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = _parked_queue(make_queue)
    running = q.constraint("c")
    assert running.running == 1
    task = q.get("t0") or q.get("t1")
    assert task is not None
    leased = [t for t in (q.get(f"t{i}") for i in range(3)) if t and t.lease_token]
    first, second = resend(q, redis_client, q.ops.complete(leased[0], None))
    assert first is True
    assert second is True


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_stale_push_and_bad_definitions_change_nothing(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    other = make_queue(q.queue)
    other.define_constraint(id="c", rate=1)
    before = queue_snapshot(redis_client, q.queue)
    call = q.ops.enqueue(
        "n", None, user_id="u", priority=3, delay=None, execute_after=None, depends_on=(),
        task_id=None, max_retries=None, timeout=None, keep_result=True, result_ttl=None,
        on_dependency_failure="cancel",
    )  # fmt: skip
    with pytest.raises(StaleConstraints):
        q._run(call)
    with pytest.raises(ValidationError):
        q.ops.define_constraint("c")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        q.ops.remove_constraint("")
    with pytest.raises(ValidationError):
        q.ops.constraints("")
    with pytest.raises(ValidationError):
        q.ops.remove_constraint("~version")
    assert queue_snapshot(redis_client, q.queue) == before
    assert q.enqueue("n", user_id="u").task_id  # the client reloads and pushes


def test_too_many_constraints(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    from fairque.core.records import Call

    call = q.ops.define_constraint(Constraint("a", rate=1))
    q._run(call)
    limited = Call(call.script, call.keys, ("b", Constraint("b", rate=1).dumps(), 1), call.parse)
    before = queue_snapshot(redis_client, q.queue)
    with pytest.raises(ValidationError):
        q._run(limited)
    assert queue_snapshot(redis_client, q.queue) == before
