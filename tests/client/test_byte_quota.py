"""A tenant's byte quota (``max_bytes``): the payload bytes of its tasks that have not
ended, held by the push scripts before anything is written, so a flooding tenant is
refused (``QuotaExceeded``, ``kind == "bytes"``) while the others keep pushing."""

from __future__ import annotations

import time

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, queue_snapshot, resend

from fairque import QuotaExceeded, Task, TaskState, ValidationError

BLOB = "x" * 90  # a payload of 92 bytes as JSON ("..." quoted)


def test_a_tenant_past_its_byte_quota_is_refused_and_the_others_push(
    make_queue: MakeQueue,
) -> None:
    q = make_queue()
    q.set_user_limits("flood", max_bytes=92 * 5)
    pushed = [q.enqueue("job", BLOB, user_id="flood") for _ in range(5)]  # one at a time
    with pytest.raises(QuotaExceeded) as refused:
        q.enqueue("job", BLOB, user_id="flood")
    assert refused.value.kind == "bytes"
    assert (refused.value.user_id, refused.value.quota, refused.value.queued) == (
        "flood", 460, 460
    )  # fmt: skip
    assert "byte quota is 460" in str(refused.value)
    with pytest.raises(QuotaExceeded):  # a batch is refused whole
        q.push_many([Task(user_id="flood", name="job", payload="y")])
    assert q.enqueue("job", BLOB, user_id="small").state is TaskState.QUEUED
    [load] = q.user_loads(["flood"])
    assert (load.bytes, load.max_bytes) == (460, 460)
    # an ended task counts what its record keeps: a canceled or failed one its payload
    # (it may be retried), a finished one its result ("null": 4 bytes), until it goes
    assert q.cancel(pushed[0].task_id or "")
    task = q.pop("w", assigned_users=["flood"])
    assert task is not None
    assert q.fail(task, "boom", retry=False) == TaskState.FAILED
    task = q.pop("w", assigned_users=["flood"])
    assert task is not None
    assert q.complete(task)
    assert q.user_loads(["flood"])[0].bytes == 92 + 92 + 4 + 2 * 92
    assert q.bulk_delete(state="CANCELED") == 1  # deleted now: its bytes go with it
    assert q.bulk_delete(state="FINISHED") == 1
    assert q.user_loads(["flood"])[0].bytes == 3 * 92
    q.push_many([Task(user_id="flood", name="job", payload=BLOB) for _ in range(2)])
    with pytest.raises(QuotaExceeded):
        q.enqueue("job", BLOB, user_id="flood")
    q.set_user_limits("flood", max_bytes=0)  # its own quota removed: none applies
    assert q.enqueue("job", BLOB, user_id="flood").state is TaskState.QUEUED


@pytest.mark.one_shard("ages one shard's records")
def test_an_expired_record_gives_its_bytes_back(make_queue: MakeQueue) -> None:
    q = make_queue(result_ttl_seconds=0.05, failed_ttl_seconds=0.05)
    q.set_user_limits("u", max_bytes=1000)
    for _ in range(3):
        q.enqueue("job", BLOB, user_id="u", max_retries=0)
    done, failed, _ = q.pop_batch(3, "w")
    assert q.complete(done, result="ok")  # keeps '"ok"': 4 bytes
    assert q.fail(failed, "boom") == TaskState.FAILED  # keeps its payload
    assert q.user_loads(["u"])[0].bytes == 4 + 92 + 92
    deadline = time.monotonic() + 30
    while q.user_loads(["u"])[0].bytes != 92:  # the records expire; maintain counts them out
        assert time.monotonic() < deadline, q.user_loads(["u"])[0]
        time.sleep(0.05)
        q.maintain()


def test_the_queues_default_byte_quota(make_queue: MakeQueue) -> None:
    q = make_queue(max_bytes_per_user=200)
    q.enqueue("job", BLOB, user_id="a")
    q.enqueue("job", BLOB, user_id="a")
    with pytest.raises(QuotaExceeded, match="byte quota is 200"):
        q.enqueue("job", BLOB, user_id="a")
    with pytest.raises(QuotaExceeded):
        q.push_many([Task(user_id="a", name="job", payload=BLOB)])
    q.set_user_limits("a", max_bytes=1000)  # its own quota over the default
    q.enqueue("job", BLOB, user_id="a")
    assert q.user_loads(["a"])[0].bytes == 276


def test_a_retried_task_counts_once(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.set_user_limits("u", max_bytes=100)
    first = q.enqueue("job", BLOB, user_id="u", max_retries=0)
    task = q.pop("w")
    assert task is not None
    assert q.fail(task, "boom") == TaskState.FAILED
    assert q.user_loads(["u"])[0].bytes == 92  # the failed record keeps its payload
    q.retry(first.task_id or "")
    assert q.user_loads(["u"])[0].bytes == 92  # waiting again: still counted, once
    with pytest.raises(QuotaExceeded):
        q.enqueue("job", BLOB, user_id="u")


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_resent_push_under_a_byte_quota_counts_once(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.set_user_limits("u", max_bytes=1000)
    call = q.ops.push_many([Task(user_id="u", name="j", payload=BLOB)])
    first, second = resend(q, redis_client, call)
    assert first.created == [True]
    assert second.created == [True]  # the resend answers "created" and counts nothing
    assert q.user_loads(["u"])[0].bytes == 92


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize("bad", [-1, 1 << 41, True, "5", 2.5])
def test_a_bad_byte_quota_is_a_typed_error(
    make_queue: MakeQueue, redis_client: SyncClient, bad: object
) -> None:
    q = make_queue()
    q.enqueue("job", BLOB, user_id="u")
    before = queue_snapshot(redis_client, q.queue)
    with pytest.raises(ValidationError, match="max_bytes"):
        q.set_user_limits("u", max_bytes=bad)  # type: ignore[arg-type]
    assert queue_snapshot(redis_client, q.queue) == before
