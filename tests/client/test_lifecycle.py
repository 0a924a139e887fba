"""Task life cycle: identity, leases, completion, failure and retries, cancel, stats."""

from __future__ import annotations

import threading
import time

import pytest
from helpers.servers import SyncClient
from helpers.support import CheckedThread, MakeQueue, expire_lease, make_due, server_ms

from fairque import (
    DuplicateTask,
    LeaseLost,
    Priority,
    Task,
    TaskNotFound,
    TaskState,
)
from fairque.core.keys import QueueKeys


def test_push_fills_identity_and_get_round_trips(make_queue: MakeQueue) -> None:
    q = make_queue()
    t = q.push(Task(user_id="alice", name="send_email", payload={"to": "a@example.com"},
                    priority=Priority.HIGH, timeout=2.5, result_ttl=60))  # fmt: skip
    assert t.task_id is not None
    assert len(t.task_id) == 32
    assert t.state == TaskState.QUEUED
    assert t.created_at is not None
    assert t.max_retries == 3
    got = q.get(t.task_id)
    assert got is not None
    assert got.payload == {"to": "a@example.com"}
    assert got.priority == Priority.HIGH
    assert got.timeout == 2.5
    assert got.result_ttl == 60
    assert got.created_at == t.created_at
    assert q.get("no-such-task") is None


def test_caller_task_id_is_deduplicated(make_queue: MakeQueue) -> None:
    q = make_queue()
    first = q.enqueue("job", {"v": 1}, user_id="u", task_id="order-42")
    again = q.enqueue("job", {"v": 2}, user_id="u", task_id="order-42")
    assert again.task_id == "order-42"
    assert again.payload == {"v": 1}
    assert again.created_at == first.created_at
    assert q.stats().counts[TaskState.QUEUED] == 1
    strict = make_queue(queue=q.queue, on_duplicate="error")
    with pytest.raises(DuplicateTask, match="order-42"):
        strict.push_many([Task(user_id="u", name="other", task_id="fresh"),
                          Task(user_id="u", name="job", task_id="order-42")])  # fmt: skip
    assert strict.get("fresh") is None  # the whole batch was rejected


def test_leased_task_is_not_popped_again(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.enqueue("one", user_id="u")
    t = q.pop("w1", lease_seconds=30)
    assert t is not None
    assert t.state == TaskState.STARTED
    assert t.worker_id == "w1"
    assert t.lease_deadline is not None
    assert q.pop("w2") is None
    assert q.stats().counts[TaskState.STARTED] == 1


def test_expired_lease_is_reclaimed_with_a_retry_counted(make_queue: MakeQueue) -> None:
    q = make_queue(retry_base_seconds=0)
    q.enqueue("one", user_id="u")
    first = q.pop("w1", lease_seconds=0.05)
    assert first is not None
    time.sleep(0.1)
    second = q.pop("w2")  # the pop path reclaims and promotes on its own
    assert second is not None
    assert second.task_id == first.task_id
    assert second.retry_count == 1
    assert second.error == "lease expired"
    assert not q.complete(first)  # stale lease
    with pytest.raises(LeaseLost):
        q.fail(first, "late")
    with pytest.raises(LeaseLost):
        q.extend(first)
    with pytest.raises(LeaseLost):
        q.requeue(first)
    assert q.complete(second, {"done": True})
    done = q.get(first.task_id or "")
    assert done is not None
    assert done.state == TaskState.FINISHED
    # who ran it is kept after the end; the lease itself is gone
    assert (done.worker_id, done.lease_token, done.lease_deadline) == ("w2", None, None)
    counters = q.stats().counters
    assert counters["reclaimed"] == 1
    assert counters["completed"] == 1


def test_explicit_reclaim_and_final_failure_after_expiries(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue(retry_base_seconds=0)
    t = q.enqueue("one", user_id="u", max_retries=1)
    a = q.pop("w")
    assert a is not None
    expire_lease(redis_client, q.queue, a.task_id or "")
    assert q.reclaim() == 1
    assert q.reclaim() == 0
    b = q.pop("w")
    assert b is not None
    expire_lease(redis_client, q.queue, b.task_id or "")
    assert q.reclaim(limit=5) == 1
    final = q.get(t.task_id or "")
    assert final is not None
    assert final.state == TaskState.FAILED
    assert final.error == "lease expired"
    assert final.retry_count == 1


def test_racing_completions_exactly_one_wins(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    """The holder of an expired lease and the current holder race: only the current
    lease completes the task, once; copies of its acknowledgement (resends) all get
    the same True answer without finishing it twice."""
    q = make_queue(retry_base_seconds=0)
    q.enqueue("contended", user_id="u")
    old = q.pop("w1")
    assert old is not None
    expire_lease(redis_client, q.queue, old.task_id or "")
    assert q.reclaim() == 1
    current = q.pop("w2")
    assert current is not None
    assert current.lease_token != old.lease_token
    results: list[tuple[str, bool]] = []
    barrier = threading.Barrier(8)

    def racer(holder: Task) -> None:
        barrier.wait()
        results.append((holder.worker_id or "", q.complete(holder.model_copy(), "r")))

    threads = [CheckedThread(target=racer, args=(h,)) for h in [old, current] * 4]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(results) == [("w1", False)] * 4 + [("w2", True)] * 4
    assert q.stats().counters["completed"] == 1


def test_retry_backoff_doubles_then_fails_with_error_kept(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue(retry_base_seconds=1.0)
    t = q.enqueue("flaky", user_id="u", max_retries=4)
    waits = []
    for attempt in range(1, 5):
        leased = q.pop("w")
        assert leased is not None
        assert leased.retry_count == attempt - 1
        before = server_ms(redis_client)
        assert q.fail(leased, ValueError(f"boom {attempt}")) == TaskState.SCHEDULED
        after = server_ms(redis_client)
        stored = q.get(t.task_id or "")
        assert stored is not None
        assert stored.state == TaskState.SCHEDULED
        assert stored.execute_after is not None
        due = round(stored.execute_after.timestamp() * 1000)
        waits.append((due - before, due - after))
        assert q.pop("w") is None  # not due yet
        make_due(redis_client, q.queue, t.task_id or "")
    for (hi, lo), expected in zip(waits, (1000, 2000, 4000, 8000), strict=True):
        assert lo <= expected <= hi
    last = q.pop("w")
    assert last is not None
    assert last.retry_count == 4
    assert q.fail(last, "final straw") == TaskState.FAILED
    failed = q.get(t.task_id or "")
    assert failed is not None
    assert failed.state == TaskState.FAILED
    assert failed.error == "final straw"
    assert q.stats().counts[TaskState.FAILED] == 1


def test_fail_without_retry_and_with_explicit_delay(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.enqueue("a", user_id="u")
    q.enqueue("b", user_id="u")
    a = q.pop("w")
    assert a is not None
    assert q.fail(a, "no retry", retry=False) == TaskState.FAILED
    failed = q.get(a.task_id or "")
    assert failed is not None
    assert (failed.worker_id, failed.lease_token) == ("w", None)
    b = q.pop("w")
    assert b is not None
    assert q.fail(b, "soon", delay=0.05) == TaskState.SCHEDULED
    time.sleep(0.1)
    again = q.pop("w")
    assert again is not None
    assert again.retry_count == 1


def test_extend_moves_the_deadline(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.enqueue("long", user_id="u")
    t = q.pop("w", lease_seconds=0.2)
    assert t is not None
    old = t.lease_deadline
    new = q.extend(t, seconds=60)
    assert old is not None
    assert new > old
    assert t.lease_deadline == new
    time.sleep(0.3)
    assert q.pop("w2") is None  # still leased thanks to the heartbeat
    assert q.complete(t)


def test_requeue_gives_back_without_counting_a_failure(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.enqueue("x", user_id="u")
    t = q.pop("w")
    assert t is not None
    assert q.requeue(t) == TaskState.QUEUED
    again = q.pop("w")
    assert again is not None
    assert again.task_id == t.task_id
    assert again.retry_count == 0
    assert q.requeue(again, delay=0.05) == TaskState.SCHEDULED
    assert q.pop("w") is None
    time.sleep(0.1)
    third = q.pop("w")
    assert third is not None
    assert third.retry_count == 0
    assert q.stats().counters["requeued"] == 2


def test_cancel_in_every_state(make_queue: MakeQueue) -> None:
    q = make_queue()
    queued = q.enqueue("q", user_id="u")
    crit = q.enqueue("c", user_id="u", priority=Priority.CRITICAL)
    sched = q.enqueue("s", user_id="u", delay=60)
    q.enqueue("leased", user_id="v")
    leased = q.pop("w", steal_targets=["v"])
    assert leased is not None
    for t in (queued, crit, sched, leased):
        assert q.cancel(t.task_id or "")
        got = q.get(t.task_id or "")
        assert got is not None
        assert got.state == TaskState.CANCELED
    assert not q.cancel(queued.task_id or "")  # already ended
    assert not q.complete(leased)  # its worker lost the lease
    assert q.pop("w") is None
    stats = q.stats()
    assert stats.counts[TaskState.CANCELED] == 4
    assert stats.active_users == 0
    with pytest.raises(TaskNotFound):
        q.cancel("missing")


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_finished_tasks_expire_and_registry_is_trimmed(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    t = q.enqueue("short", user_id="u", result_ttl=1)
    gone = q.enqueue("none", user_id="u", result_ttl=0)
    for _ in range(2):
        leased = q.pop("w")
        assert leased is not None
        assert q.complete(leased, {"r": 1})
    assert q.get(gone.task_id or "") is None  # result_ttl=0 keeps nothing
    key = QueueKeys(q.queue).task(t.task_id or "")
    assert 0 < redis_client.pttl(key) <= 1000
    assert q.stats().counts[TaskState.FINISHED] == 1
    time.sleep(1.1)
    assert q.get(t.task_id or "") is None
    assert q.stats().counts[TaskState.FINISHED] == 0


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_failed_ttl_applies_to_failed_tasks(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue(failed_ttl_seconds=3600)
    t = q.enqueue("x", user_id="u")
    leased = q.pop("w")
    assert leased is not None
    q.fail(leased, "x", retry=False)
    ttl = redis_client.pttl(QueueKeys(q.queue).task(t.task_id or ""))
    assert 3_500_000 < ttl <= 3_600_000


def test_stats_report_users_and_counters(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.push_many(Task(user_id="a", name="x") for _ in range(3))
    q.push_many(Task(user_id="b", name="x") for _ in range(2))
    q.enqueue("later", user_id="c", delay=60)
    leased = q.pop("w")
    assert leased is not None
    s = q.stats()
    assert s.counts[TaskState.QUEUED] == 4
    assert s.counts[TaskState.SCHEDULED] == 1
    assert s.counts[TaskState.STARTED] == 1
    assert s.total == 6
    users = {u.user_id: (u.ready, u.in_flight) for u in s.users}
    assert users == {"a": (2, 1), "b": (2, 0)}
    assert s.active_users == 2
    assert s.counters["pushed"] == 6
    assert s.counters["popped"] == 1
    assert len(q.stats(user_limit=1).users) >= 1


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_result_is_stored_only_when_kept(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    kept = q.enqueue("k", user_id="u")
    dropped = q.enqueue("d", user_id="u", keep_result=False)
    for _ in range(2):
        t = q.pop("w")
        assert t is not None
        q.complete(t, {"answer": 42})
    k = QueueKeys(q.queue)
    assert redis_client.hget(k.task(kept.task_id or ""), "result") == b'{"answer":42}'
    assert redis_client.hget(k.task(dropped.task_id or ""), "result") is None


def test_msgpack_serializer_round_trips_binary(make_queue: MakeQueue) -> None:
    q = make_queue(serializer="msgpack")
    t = q.enqueue("bin", {"blob": b"\x00\xff", "n": [1, 2]}, user_id="u")
    got = q.pop("w")
    assert got is not None
    assert got.task_id == t.task_id
    assert got.payload == {"blob": b"\x00\xff", "n": [1, 2]}


def test_extend_many_reports_lost_leases(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.push_many(Task(user_id="u", name="x") for _ in range(3))
    held = q.pop_batch(3, lease_seconds=0.5)
    assert q.extend_many([]) == []
    assert q.cancel(held[1].task_id or "")
    assert q.extend_many(held, seconds=60) == [True, False, True]
    assert held[0].lease_deadline is not None
    time.sleep(0.6)
    assert q.reclaim() == 0  # the extended leases did not expire
    assert q.complete(held[0])
    assert not q.complete(held[1])


def test_a_result_encoded_once_is_stored_as_it_is(make_queue: MakeQueue) -> None:
    from fairque.core.records import EncodedResult

    q = make_queue()
    task = q.enqueue("x", user_id="u")
    leased = q.pop("w")
    assert leased is not None
    encoded = q.ops.encode_result({"n": 1})
    assert q.ops.encode_result(encoded) is encoded  # passes through, not serialized twice
    done, _ = q.complete_and_pop([(leased, EncodedResult(encoded))], count=0)
    assert done == [True]
    assert q.result(task.task_id or "") == {"n": 1}


def test_a_retried_task_that_completes_keeps_no_failure(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    """The failure fields of an earlier attempt go when a later attempt completes, and a
    first attempt's completion leaves the same fields as any other."""
    q = make_queue(retry_base_seconds=0)
    t = q.enqueue("flaky", user_id="u", max_retries=2)
    first = q.pop("w")
    assert first is not None
    state = q.fail(first, "boom", traceback="Traceback: boom", reason="other", details={"n": 1})
    assert state == TaskState.SCHEDULED
    failed = q.get(t.task_id or "")
    assert failed is not None
    assert failed.error is not None
    assert failed.traceback is not None
    assert failed.failure_reason is not None
    make_due(redis_client, q.queue, t.task_id or "")
    second = q.pop("w")
    assert second is not None
    assert second.retry_count == 1
    assert q.complete(second, "ok")
    done = q.get(t.task_id or "")
    assert done is not None
    assert (done.state, done.error, done.traceback, done.failure_reason) == (
        TaskState.FINISHED, None, None, None)  # fmt: skip
    assert (done.lease_token, done.lease_deadline) == (None, None)
    plain = q.enqueue("fine", user_id="u")
    leased = q.pop("w")
    assert leased is not None
    assert q.complete(leased)
    ended = q.get(plain.task_id or "")
    assert ended is not None
    assert (ended.error, ended.lease_token, ended.lease_deadline) == (None, None, None)
