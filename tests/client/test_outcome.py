"""Outcomes: ``outcome()`` in one call, a None result told apart from a consumed one,
fetch-once for failures too, and failures kept as fields (traceback, reason, details)."""

from __future__ import annotations

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, queue_snapshot

from fairque import (
    CancelRequested,
    FairQueue,
    LeaseLost,
    TaskCanceled,
    TaskFailed,
    TaskState,
    ValidationError,
)
from fairque.core.keys import QueueKeys
from fairque.core.ops import MAX_TRACEBACK


def finish(q: FairQueue, result: object = None, **task: object) -> str:
    pushed = q.enqueue("n", user_id="u", **task)  # type: ignore[arg-type]
    leased = q.pop("w")
    assert leased is not None
    assert leased.task_id == pushed.task_id
    assert q.complete(leased, result)
    return pushed.task_id or ""


def test_a_none_result_is_a_result(make_queue: MakeQueue) -> None:
    q = make_queue()
    task_id = finish(q, None)
    out = q.outcome(task_id)
    assert out is not None
    assert out.state is TaskState.FINISHED
    assert out.has_result
    assert out.result is None
    assert out.ended_at is not None
    assert q.result(task_id) is None
    # consumed: now it reads as unknown
    assert q.outcome(task_id, consume=True) is not None
    assert q.outcome(task_id) is None
    assert q.result(task_id) is None


def test_a_task_that_keeps_no_result_has_none(make_queue: MakeQueue) -> None:
    q = make_queue()
    task_id = finish(q, {"big": 1}, keep_result=False)
    out = q.outcome(task_id)
    assert out is not None
    assert out.state is TaskState.FINISHED
    assert not out.has_result
    assert q.outcome("never-pushed") is None


def test_pending_outcome_has_only_its_state(make_queue: MakeQueue) -> None:
    q = make_queue()
    pushed = q.enqueue("n", user_id="u")
    out = q.outcome(pushed.task_id or "", timeout=0.05)
    assert out is not None
    assert out.state is TaskState.QUEUED
    assert not out.ended
    assert out.ended_at is None


def test_consume_covers_failures_and_cancellations(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u", task_id="f", max_retries=0)
    leased = q.pop("w")
    assert leased is not None
    assert q.fail(leased, "boom") is TaskState.FAILED
    with pytest.raises(TaskFailed, match="boom"):
        q.result("f", consume=True)
    assert q.result("f") is None
    assert q.outcome("f") is None
    q.enqueue("n", user_id="u", task_id="c")
    assert q.cancel("c")
    out = q.outcome("c", consume=True)
    assert out is not None
    assert out.state is TaskState.CANCELED
    assert q.outcome("c") is None
    # an operator's retry runs it again: its next outcome is readable
    assert q.retry("c") is TaskState.QUEUED
    leased = q.pop("w")
    assert leased is not None
    assert q.complete(leased, 5)
    assert q.result("c") == 5


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_resent_consuming_read_gets_the_outcome_again(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    task_id = finish(q, 7)
    call = q.ops.result(task_id, True, 0, "req-1")
    first = q._run(call)
    second = q._run(call)  # the resend of the same read
    assert first is not None
    assert second == first
    assert first.result == 7
    assert q._run(q.ops.result(task_id, True, 0, "req-2")) is None
    assert q.outcome(task_id) is None
    assert redis_client.hget(QueueKeys(q.queue).task(task_id), "consumed") == b"req-1"


def test_canceled_result_raises(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u", task_id="c")
    assert q.cancel("c")
    with pytest.raises(TaskCanceled):
        q.result("c")


def test_failure_fields_are_kept_and_replaced(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u", task_id="t", max_retries=2)
    leased = q.pop("w")
    assert leased is not None
    tb = "Traceback (most recent call last):\n  ...\nValueError: bad"
    state = q.fail(leased, "bad", delay=0, traceback=tb, reason="timeout", details={"code": 7})
    assert state is TaskState.SCHEDULED
    stored = q.get("t")
    assert stored is not None
    assert stored.traceback == tb
    assert stored.failure_reason == "timeout"
    assert stored.error == "bad"
    # the next attempt fails without a traceback: the old one does not linger
    leased = q.pop("w")
    assert leased is not None
    assert q.fail(leased, "plain", delay=0) is TaskState.SCHEDULED
    stored = q.get("t")
    assert stored is not None
    assert (stored.traceback, stored.failure_reason) == (None, None)
    leased = q.pop("w")
    assert leased is not None
    assert q.fail(leased, "last", retry=False, traceback="x" * (MAX_TRACEBACK + 10), details=[1])
    out = q.outcome("t")
    assert out is not None
    assert out.state is TaskState.FAILED
    assert out.error == "last"
    assert out.details == [1]
    assert out.traceback is not None
    assert out.traceback.endswith("x" * 100)
    assert len(out.traceback) <= MAX_TRACEBACK + 4
    # a retried task starts clean
    assert q.retry("t") is TaskState.QUEUED
    stored = q.get("t")
    assert stored is not None
    assert (stored.error, stored.traceback) == (None, None)


def test_a_success_clears_an_earlier_failure(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u", task_id="t")
    leased = q.pop("w")
    assert leased is not None
    q.fail(leased, "once", delay=0, traceback="tb", reason="other")
    leased = q.pop("w")
    assert leased is not None
    assert q.complete(leased, 1)
    stored = q.get("t")
    assert stored is not None
    assert (stored.error, stored.traceback, stored.failure_reason) == (None, None, None)


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"traceback": 3}, "traceback must be a string"),
        ({"reason": "r" * 65}, "reason is longer"),
        ({"reason": b"x"}, "reason must be a string"),
        ({"details": object()}, "details"),
    ],
)
def test_bad_failure_fields_change_nothing(
    make_queue: MakeQueue, fields: dict[str, object], message: str
) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u", task_id="t")
    leased = q.pop("w")
    assert leased is not None
    with pytest.raises(ValidationError, match=message):
        q.fail(leased, "x", **fields)  # type: ignore[arg-type]
    stored = q.get("t")
    assert stored is not None
    assert stored.state is TaskState.STARTED


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_resent_failure_with_fields_changes_nothing(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u", task_id="t", max_retries=0)
    leased = q.pop("w")
    assert leased is not None
    call = q.ops.fail(leased, "e", True, None, None, "tb", "timeout", {"a": 1})
    assert q._run(call) is TaskState.FAILED
    before = queue_snapshot(redis_client, q.queue)
    assert q._run(call) is TaskState.FAILED
    assert queue_snapshot(redis_client, q.queue) == before


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_extend_of_a_task_canceled_under_its_lease_says_so(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u", task_id="t")
    leased = q.pop("w")
    assert leased is not None
    assert q.cancel("t")
    call = q.ops.extend(leased, 10)
    with pytest.raises(CancelRequested):
        q._run(call)
    before = queue_snapshot(redis_client, q.queue)
    with pytest.raises(CancelRequested):  # a resend answers the same, changing nothing
        q._run(call)
    assert queue_snapshot(redis_client, q.queue) == before
    assert not q.complete(leased)  # the lease is gone all the same
    with pytest.raises(LeaseLost) as lost:
        q.fail(leased, "x")
    assert not isinstance(lost.value, CancelRequested)
    # an operator's retry runs it under a new lease; the old token is only stale now
    assert q.retry("t") is TaskState.QUEUED
    again = q.pop("w")
    assert again is not None
    with pytest.raises(LeaseLost) as stale:
        q.extend(leased)
    assert not isinstance(stale.value, CancelRequested)
    assert q.extend(again, 10) is not None
