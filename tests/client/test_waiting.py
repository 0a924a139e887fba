"""Idle pick-up: ``wait_and_pop``, ``wake``, the quick ``enqueue`` path, lost scripts."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
import redis
from helpers.servers import ServerInfo, SyncClient, connect
from helpers.support import MakeQueue, queue_snapshot

from fairque import FairQueue, Priority, Task, TaskState, ValidationError
from fairque.core.keys import QueueKeys


def test_wait_and_pop_leases_what_a_push_wakes_it_for(make_queue: MakeQueue) -> None:
    q = make_queue()
    producer = make_queue(queue=q.queue)
    pushed: list[Task] = []
    timer = threading.Timer(0.2, lambda: pushed.append(producer.enqueue("job", 1, user_id="u")))
    timer.start()
    try:
        leased = q.wait_and_pop(3.0, 5, "w1", 10.0)
    finally:
        timer.join()
    assert [t.task_id for t in leased] == [pushed[0].task_id]
    assert leased[0].state == TaskState.STARTED
    assert leased[0].worker_id == "w1"
    assert leased[0].lease_token
    assert q.complete(leased[0], "done")


def test_wait_and_pop_times_out_empty_and_then_leases_what_is_ready(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    assert q.wait_and_pop(0.05, 3, "w") == []
    first = q.enqueue("job", 1, user_id="a")
    redis_client.delete(QueueKeys(q.queue).wake)  # a token another worker took
    begin = time.monotonic()
    leased = q.wait_and_pop(0.1, 3, "w")
    # no token: the wait runs out, and the lease behind it still finds the task
    assert time.monotonic() - begin >= 0.09
    assert [t.task_id for t in leased] == [first.task_id]


def test_wait_for_work_reports_a_token_or_the_timeout(make_queue: MakeQueue) -> None:
    q = make_queue()
    assert q.wait_for_work(0.05) is False
    q.enqueue("job", 1, user_id="u")  # one token per ready task
    assert q.wait_for_work(1.0) is True
    assert q.wait_for_work(0.05) is False
    with pytest.raises(ValidationError, match="timeout"):
        q.wait_for_work(0)


def test_wait_and_pop_rejects_bad_arguments_before_waiting(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.enqueue("job", 1, user_id="u")
    before = queue_snapshot(redis_client, q.queue)
    for timeout, count, lease in ((0, 1, None), (1.0, 0, None), (1.0, 1, -1)):
        with pytest.raises(ValidationError):
            q.wait_and_pop(timeout, count, "w", lease)
    with pytest.raises(ValidationError, match="assigned_users"):
        q.wait_and_pop(1.0, 1, "w", assigned_users="alice")
    assert queue_snapshot(redis_client, q.queue) == before  # not even a token was taken


def test_wake_pushes_tokens_and_checks_its_count(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    assert q.wake() == 1
    assert q.wake(3) == 4
    for bad in (0, 65, True, 1.5):
        with pytest.raises(ValidationError, match="n must be an integer"):
            q.wake(bad)  # type: ignore[arg-type]
    assert redis_client.llen(QueueKeys(q.queue).wake) == 4


def test_scripts_lost_by_the_server_are_sent_again(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    redis_client.script_flush()
    t = q.enqueue("job", {"n": 1}, user_id="u")  # EVALSHA fails, the source follows
    redis_client.script_flush()
    leased = q.wait_and_pop(1.0, 2, "w")  # the pipelined lease is run again alone
    assert [x.task_id for x in leased] == [t.task_id]


def test_quick_enqueue_returns_what_the_full_model_returns(make_queue: MakeQueue) -> None:
    q = make_queue(max_retries=5, result_ttl_seconds=120)
    quick = q.enqueue("job", {"v": [1, 2]}, user_id="u", priority=Priority.HIGH, task_id="q1",
                      max_retries=2, keep_result=False)  # fmt: skip
    full = q.push(Task(user_id="u", name="job", payload={"v": [1, 2]}, priority=4,
                       task_id="f1", max_retries=2, keep_result=False))  # fmt: skip
    skip = {"task_id", "created_at"}
    assert quick.model_dump(exclude=skip) == full.model_dump(exclude=skip)
    stored = q.get("q1")
    assert stored is not None
    assert stored.model_dump(exclude={"state"}) == quick.model_dump(exclude={"state"})
    assert isinstance(quick.priority, Priority)
    assert quick.max_retries == 2
    assert quick.result_ttl == 120
    default = q.enqueue("job", user_id="u")
    assert (default.max_retries, default.keep_result, default.payload) == (5, True, None)
    again = q.enqueue("other", {"v": 0}, user_id="u", task_id="q1")  # the stored task wins
    assert (again.name, again.payload, again.created_at) == ("job", {"v": [1, 2]}, quick.created_at)


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"user_id": ""}, "user_id"),
        ({"user_id": "a\x00b"}, "control characters"),
        ({"user_id": "u" * 257}, "longer than 256"),
        ({"name": "x\ny"}, "control characters"),
        ({"task_id": ""}, "task_id"),
        ({"priority": 0}, "priority"),
        ({"priority": True}, "priority"),
        ({"max_retries": -1}, "max_retries"),
        ({"max_retries": 1001}, "max_retries"),
        ({"keep_result": "maybe"}, "keep_result"),
    ],
)
def test_quick_enqueue_doubts_go_to_the_model(
    make_queue: MakeQueue, redis_client: SyncClient, kwargs: dict[str, object], message: str
) -> None:
    q = make_queue()
    before = queue_snapshot(redis_client, q.queue)
    args: dict[str, object] = {"name": "job", "user_id": "u"} | kwargs
    with pytest.raises(ValidationError, match=message):
        q.enqueue(args.pop("name"), None, **args)  # type: ignore[arg-type]
    assert queue_snapshot(redis_client, q.queue) == before


def test_a_client_that_decodes_replies_reads_the_same_tasks(server: ServerInfo) -> None:
    """Task hashes read through a ``decode_responses=True`` client give the same Tasks."""
    if server.cluster:
        decoding: SyncClient = redis.RedisCluster.from_url(server.url, decode_responses=True)
    else:
        decoding = redis.Redis.from_url(server.url, decode_responses=True)
    plain = connect(server)
    try:
        name = f"decoding-{uuid.uuid4().hex[:8]}"
        q, raw = FairQueue(decoding, name), FairQueue(plain, name)
        pushed = q.enqueue("job", {"n": [1, "x"]}, user_id="u", priority=Priority.HIGH, timeout=5)
        assert q.get(pushed.task_id or "") == raw.get(pushed.task_id or "")
        leased = q.pop("w1")
        assert leased is not None
        assert leased.payload == {"n": [1, "x"]}
        assert leased.timeout == 5
        assert leased == raw.get(leased.task_id or "")
        raw.purge()
    finally:
        decoding.close()
        plain.close()
