"""Every script is safe to run twice: a resend after a lost reply changes nothing.

redis-py (and its cluster client) resend a command whose reply was lost. Each case
builds one call through the sans-IO layer, runs it, then runs the very same call again
(the resend) and checks that the second run answers as the first did and leaves the
keyspace byte-for-byte as the first run left it.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, expire_lease, resend

from fairque import DuplicateTask, FairQueue, LeaseLost, Priority, Task, TaskState
from fairque.core.keys import QueueKeys
from fairque.core.records import Call


def leased_ids(tasks: list[Task]) -> list[tuple[str | None, str | None]]:
    return [(t.task_id, t.lease_token) for t in tasks]


def enqueue_call(q: FairQueue, **fields: Any) -> Call[Task]:
    fields.setdefault("user_id", "u")
    return q.ops.enqueue(
        "n", {"x": 1}, priority=fields.pop("priority", Priority.NORMAL), delay=None,
        execute_after=None, depends_on=(), task_id=fields.pop("task_id", None),
        max_retries=None, timeout=None, keep_result=True, result_ttl=fields.pop("result_ttl", None),
        on_dependency_failure="cancel", **fields,
    )  # fmt: skip


@pytest.mark.parametrize("priority", [Priority.CRITICAL, Priority.NORMAL])
def test_resent_push_writes_the_task_once(
    make_queue: MakeQueue, redis_client: SyncClient, priority: Priority
) -> None:
    q = make_queue()
    first, second = resend(q, redis_client, enqueue_call(q, priority=priority))
    assert second.task_id == first.task_id
    assert second.state == TaskState.QUEUED
    keys = QueueKeys(q.queue)
    assert redis_client.llen(keys.intake) == 1  # one entry, placed once
    assert q.place() == 1
    lane = keys.critical("u") if priority == Priority.CRITICAL else keys.normal("u")
    size = redis_client.llen(lane) if priority == Priority.CRITICAL else redis_client.zcard(lane)
    assert size == 1
    assert q.pop_batch(10, "w")
    assert q.pop("w") is None


def test_resent_push_of_a_finished_task_does_not_run_it_again(make_queue: MakeQueue) -> None:
    q = make_queue()
    call = enqueue_call(q)
    pushed = q._run(call)
    leased = q.pop("w")
    assert leased is not None
    assert leased.task_id == pushed.task_id
    assert q.complete(leased, 1)
    again = q._run(call)
    assert again.state == TaskState.FINISHED
    assert q.pop("w") is None
    assert q.stats().counters["pushed"] == 1


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_resent_push_of_a_task_kept_for_no_time_is_still_recognised(
    make_queue: MakeQueue,
) -> None:
    q = make_queue()
    call = enqueue_call(q, result_ttl=0)
    q._run(call)
    leased = q.pop("w")
    assert leased is not None
    call_done = q.ops.complete(leased, None)
    assert q._run(call_done)
    assert q.get(leased.task_id or "") is None  # nothing kept...
    assert q._run(call_done)  # ...but the resent acknowledgement still succeeds
    again = q._run(call)
    assert again.state == TaskState.FINISHED
    assert q.pop("w") is None


def test_resent_batch_with_dependencies(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    batch = [
        Task(user_id="u", name="up"),
        Task(user_id="u", name="crit", priority=Priority.CRITICAL),
    ]
    call = q.ops.push_many(batch)
    first = q._run(call)
    down = q.ops.push_many([Task(user_id="v", name="down", depends_on=[first[0].task_id or ""])])
    a, b = resend(q, redis_client, down)
    assert [t.task_id for t in a] == [t.task_id for t in b]
    assert b[0].state == TaskState.DEFERRED
    a, b = resend(q, redis_client, call)
    assert [t.task_id for t in a] == [t.task_id for t in b]


def test_duplicate_error_mode_tells_a_resend_from_a_duplicate(make_queue: MakeQueue) -> None:
    q = make_queue(on_duplicate="error")
    call = enqueue_call(q, task_id="fixed")
    assert q._run(call).state == TaskState.QUEUED
    assert q._run(call).task_id == "fixed"  # the resend of the push that created it
    with pytest.raises(DuplicateTask):
        q._run(enqueue_call(q, task_id="fixed"))  # another push of the same id


def test_resent_pop_returns_the_same_leases(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    for user in ("a", "b", "c"):
        q.enqueue("n", user_id=user)
    call = q.ops.pop(2, "w", None, None, None)
    first, second = resend(q, redis_client, call)
    assert len(first) == 2
    assert leased_ids(second) == leased_ids(first)
    rest = q.pop_batch(5, "w")
    assert len(rest) == 1  # the resend leased nothing more


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_resent_complete_and_pop(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    for i in range(4):
        q.enqueue("n", user_id=f"u{i}")
    held = q.pop_batch(2, "w")
    call = q.ops.complete_and_pop([(t, {"i": 1}) for t in held], 2, "w", None, None, None)
    (acks1, leased1), (acks2, leased2) = resend(q, redis_client, call)
    assert acks1 == acks2 == [True, True]
    assert leased_ids(leased2) == leased_ids(leased1)
    assert q.stats().counters["completed"] == 2
    assert q.pop("w") is None


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_resent_complete_succeeds_again_and_finishes_once(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u")
    task = q.pop("w")
    assert task is not None
    assert resend(q, redis_client, q.ops.complete(task, {"ok": 1})) == (True, True)
    assert q.stats().counters["completed"] == 1
    assert q.result(task.task_id or "") == {"ok": 1}


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
@pytest.mark.parametrize(
    ("retry", "expected"), [(True, TaskState.SCHEDULED), (False, TaskState.FAILED)]
)
def test_resent_fail_answers_the_same(
    make_queue: MakeQueue, redis_client: SyncClient, retry: bool, expected: TaskState
) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u")
    task = q.pop("w")
    assert task is not None
    call = q.ops.fail(task, "boom", retry, None)
    assert resend(q, redis_client, call) == (expected, expected)


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
@pytest.mark.parametrize(("delay", "expected"), [(0, TaskState.QUEUED), (5, TaskState.SCHEDULED)])
def test_resent_requeue_answers_the_same(
    make_queue: MakeQueue, redis_client: SyncClient, delay: float, expected: TaskState
) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u")
    task = q.pop("w")
    assert task is not None
    assert resend(q, redis_client, q.ops.requeue(task, delay)) == (expected, expected)


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_resent_cancel_and_retry(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    t = q.enqueue("n", user_id="u")
    tid = t.task_id or ""
    assert resend(q, redis_client, q.ops.cancel(tid)) == (True, True)
    assert q.cancel(tid) is False  # a new request: the task had already ended
    assert resend(q, redis_client, q.ops.retry(tid)) == (TaskState.QUEUED, TaskState.QUEUED)
    assert len(q.pop_batch(5, "w")) == 1


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_resent_cancel_of_a_running_task_signals_its_worker_once(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u")
    task = q.pop("w")
    assert task is not None
    assert task.task_id is not None
    assert resend(q, redis_client, q.ops.cancel(task.task_id)) == (True, True)
    stop = q.wait_for_cancel("w", 0.5)
    assert stop is not None
    assert (stop.task_id, stop.lease_token) == (task.task_id, task.lease_token)
    assert q.wait_for_cancel("w", 0.05) is None  # one signal, not two


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_resent_extend_and_limits(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u")
    task = q.pop("w")
    assert task is not None
    call = q.ops.extend(task, 60)
    first = q._run(call)
    second = q._run(call)
    assert second >= first
    resend(q, redis_client, q.ops.set_user_limits("u", 2, 3))
    assert q.complete(task)
    # a raised cap lets a user with ready work back into the ring, waking a worker once
    q.enqueue("n", user_id="v")
    q.enqueue("n", user_id="v")
    held = q.pop("w")
    assert held is not None
    q.set_user_limits("v", max_in_flight=1)
    resend(q, redis_client, q.ops.set_user_limits("v", 1, 2))
    resend(q, redis_client, q.ops.set_user_limits("v", None, None, max_bytes=500))


@pytest.mark.parametrize("to", ["count", "time"])
def test_resent_fairness_switch_answers_the_same(
    make_queue: MakeQueue, redis_client: SyncClient, to: str
) -> None:
    """A resent switch (with leases in flight, whose charges the switch to count mode
    drops) answers the mode the queue had before the first run and changes nothing."""
    q = make_queue()
    if to == "time":
        q.set_fairness("count")
    q.push_many(Task(user_id=u, name="n") for u in ("a", "a", "b"))
    held = q.pop_batch(2, worker_id="w")
    assert len(held) == 2
    before = "time" if to == "count" else "count"
    first, second = resend(q, redis_client, q.ops.set_fairness(to, 90))
    assert first == second == before
    assert q.fairness() == to
    assert q.max_lead() == 90.0
    assert q.set_fairness(to) == to  # a new request to the same mode: it had it already
    for t in held:
        assert q.complete(t)


def test_in_flight_is_counted_from_unexpired_leases(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    """A capped user whose acknowledgement is lost is served again once the lease
    expires, without any counter to repair."""
    q = make_queue(retry_base_seconds=0)
    q.set_user_limits("solo", max_in_flight=1)
    q.enqueue("a", user_id="solo")
    q.enqueue("b", user_id="solo")
    first = q.pop("w", lease_seconds=0.3)
    assert first is not None
    assert q.pop("w") is None  # at its cap
    assert [u.in_flight for u in q.stats().users if u.user_id == "solo"] == [1]
    time.sleep(0.35)  # the worker "died": its acknowledgement never comes
    assert [u.in_flight for u in q.stats().users if u.user_id == "solo"] == [0]
    again = q.pop("w")
    assert again is not None
    assert q.complete(again)
    assert not q.complete(first)  # the old lease is fenced off


def test_replayed_duplicate_lease_of_one_task_counts_once(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.set_user_limits("u", max_in_flight=1)
    q.enqueue("n", user_id="u", priority=Priority.CRITICAL)
    task = q.pop("w")
    assert task is not None
    expire_lease(redis_client, q.queue, task.task_id or "")
    assert q.reclaim() == 1
    assert redis_client.exists(QueueKeys(q.queue).held("u")) == 0


def test_undecodable_task_fails_alone(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    good = [q.enqueue("n", user_id=f"u{i}") for i in range(4)]
    bad = q.enqueue("n", user_id="zz")
    redis_client.hset(QueueKeys(q.queue).task(bad.task_id or ""), "timeout", "1e999")
    leased = q.pop_batch(10, "w")
    assert sorted(t.task_id or "" for t in leased) == sorted(t.task_id or "" for t in good)
    broken: dict[bytes, bytes] = redis_client.hgetall(  # type: ignore[assignment]
        QueueKeys(q.queue).task(bad.task_id or "")
    )
    assert broken[b"state"] == b"FAILED"
    assert broken[b"error"].startswith(b"undecodable task: ")


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_maintain_trims_expired_registry_entries(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue(failed_ttl_seconds=0.2)
    t = q.enqueue("n", user_id="u", max_retries=0)
    task = q.pop("w")
    assert task is not None
    assert q.fail(task, "x") == TaskState.FAILED
    keys = QueueKeys(q.queue)
    assert redis_client.zcard(keys.failed) == 1
    time.sleep(0.25)
    assert q.get(t.task_id or "") is None
    assert q.maintain(batch=10) == 1
    assert redis_client.zcard(keys.failed) == 0
    assert q.maintain() == 0


def test_workers_whose_registration_expired_are_never_listed(make_queue: MakeQueue) -> None:
    from fairque.models import WorkerInfo

    q = make_queue()
    info = WorkerInfo(
        worker_id="gone", queue=q.queue, host="h", pid=1,
        started_at=__import__("datetime").datetime.now(__import__("datetime").timezone.utc),
        concurrency=1,
    )  # fmt: skip
    q.register_worker(info, ttl_seconds=0.2)
    assert [w.worker_id for w in q.workers()] == ["gone"]
    time.sleep(0.25)
    assert q.workers() == []
    assert q.maintain() == 1


def test_a_refused_command_is_a_fairque_error(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    """A server-side refusal leaves as ServerError (still a redis ResponseError)."""
    from redis.exceptions import ResponseError

    from fairque import FairqueError, ServerError

    q = make_queue()
    t = q.enqueue("n", user_id="u")
    redis_client.set(QueueKeys(q.queue).task(t.task_id or ""), "not a hash")
    with pytest.raises(ServerError) as caught:
        q.cancel(t.task_id or "")
    assert isinstance(caught.value, FairqueError)
    assert isinstance(caught.value, ResponseError)
    redis_client.delete(QueueKeys(q.queue).task(t.task_id or ""))


def test_a_request_resent_by_the_caller_returns_its_first_leases(make_queue: MakeQueue) -> None:
    q = make_queue()
    for user in ("a", "b", "c"):
        q.enqueue("n", user_id=user)
    first = q.pop_batch(2, "w", request_id="req-1")
    again = q.pop_batch(2, "w", request_id="req-1")
    assert leased_ids(again) == leased_ids(first)
    acks, more = q.complete_and_pop([(first[0], None)], 5, "w", request_id="req-2")
    assert acks == [True]
    assert len(more) == 1
    acks, same = q.complete_and_pop([(first[0], None)], 5, "w", request_id="req-2")
    assert acks == [True]
    assert leased_ids(same) == leased_ids(more)
    q.enqueue("n", user_id="d")
    waited = q.wait_and_pop(0.1, 5, "w", request_id="req-3")
    assert leased_ids(q.wait_and_pop(0.01, 5, "w", request_id="req-3")) == leased_ids(waited)


def test_fail_judges_by_the_given_retry_budget(make_queue: MakeQueue) -> None:
    q = make_queue(retry_base_seconds=0)
    t = q.enqueue("n", user_id="u", max_retries=0)
    task = q.pop("w")
    assert task is not None
    assert q.fail(task, "x", max_retries=2) == TaskState.SCHEDULED
    task = q.pop("w")
    assert task is not None
    assert task.retry_count == 1
    assert q.fail(task, "x", max_retries=1) == TaskState.FAILED
    stored = q.get(t.task_id or "")
    assert stored is not None
    assert stored.state == TaskState.FAILED


def test_an_expired_lease_cannot_be_revived_past_its_users_cap(
    make_queue: MakeQueue,
) -> None:
    """Once a lease's deadline passed it no longer counts in flight, so the user's cap
    may let another task start; extending the old lease then would put the user over
    its cap: it is lost instead (found by the state-machine test)."""
    q = make_queue()
    q.set_user_limits("uc", max_in_flight=1)
    q.enqueue("job", user_id="uc")
    q.enqueue("job", user_id="uc")
    first = q.pop("w", lease_seconds=0.2)
    assert first is not None
    time.sleep(0.3)
    q.set_user_limits("uc", max_in_flight=1)  # no live lease: uc is back in the ring
    with pytest.raises(LeaseLost):
        q.extend(first, 30)
    assert q.extend_many([first], 30) == [False]
    second = q.pop("w", lease_seconds=30)
    assert second is not None
    assert [u.in_flight for u in q.stats().users if u.user_id == "uc"] == [1]


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_retry_backoff_is_capped_at_ten_years(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    t = q.enqueue("n", user_id="u", max_retries=1000)
    task = q.pop("w")
    assert task is not None
    redis_client.hset(QueueKeys(q.queue).task(t.task_id or ""), "retries", 60)
    assert q.fail(task, "x") == TaskState.SCHEDULED
    stored = q.get(t.task_id or "")  # readable: its due time is a real date
    assert stored is not None
    assert stored.execute_after is not None
    ahead = stored.execute_after.timestamp() - time.time()
    assert 9.9 * 365 * 86400 < ahead <= 10 * 365 * 86400 + 60


def test_a_resent_lease_request_that_found_nothing_still_finds_nothing(
    make_queue: MakeQueue,
) -> None:
    """The same answer, even when work arrived between the run and its resend: the
    client sees one reply, and a resend must not lease tasks nobody will run."""
    q = make_queue()
    call = q.ops.pop(3, "w", None, None, None)
    assert q._run(call) == []
    q.enqueue("n", user_id="u")
    assert q._run(call) == []
    assert q.pop("w") is not None


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_push_says_whether_it_created_the_task(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    call = q.ops.push_many([Task(user_id="u", name="n", task_id="a")])
    first, second = resend(q, redis_client, call)
    # the resend finds the task its own first run created: still "created"
    assert first.created == [True]
    assert second.created == [True]
    assert second[0].task_id == "a"
    # another push of the same id (a new request) did not create it
    again = q.push_many([Task(user_id="u", name="n", task_id="a"), Task(user_id="u", name="n")])
    assert again.created == [False, True]
    assert again[0].state == TaskState.QUEUED
    assert q.stats().counters["pushed"] == 2


def test_push_of_an_id_that_ended_and_expired_is_not_created(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u", task_id="gone", result_ttl=0)
    leased = q.pop("w")
    assert leased is not None
    assert q.complete(leased)
    again = q.push_many([Task(user_id="u", name="n", task_id="gone")])
    assert again.created == [False]
    assert again[0].state == TaskState.FINISHED
