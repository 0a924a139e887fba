"""Dead letters in bulk: ``bulk_retry`` and ``bulk_delete`` of FAILED (or CANCELED) tasks,
and ``bulk_delete`` of FINISHED records, by name, tenant, error text and age, each with a
dry run that counts what it moves (every server kind, both clients; a sharded queue's
tenants spread over its shards)."""

from __future__ import annotations

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, queue_snapshot, resend

from fairque import FairQueue, Task, TaskState, ValidationError


def failed(q: FairQueue, name: str, users: list[str], n: int, error: str = "boom") -> list[str]:
    """``n`` tasks of ``name`` per user, each leased and failed for good."""
    ids = []
    for user in users:
        pushed = q.push_many(Task(user_id=user, name=name, max_retries=0) for _ in range(n))
        ids += [str(t.task_id) for t in pushed]
    wanted = set(ids)
    while wanted:
        leased = q.pop_batch(100, "w", names=[name])
        assert leased, "the pushed tasks were not all leased"
        for task in leased:
            assert q.fail(task, error=error, retry=False) == TaskState.FAILED
            wanted.discard(str(task.task_id))
    return ids


def test_bulk_retry_by_name_moves_what_its_dry_run_counts(make_queue: MakeQueue) -> None:
    q = make_queue()
    mine = failed(q, "send_email", ["a", "b", "c"], 40)
    other = failed(q, "resize", ["a"], 10)
    victim = q.enqueue("send_email", {}, user_id="a")
    assert q.cancel(str(victim.task_id))
    assert q.bulk_retry(name="send_email", dry_run=True) == 120
    assert q.stats().counts[TaskState.FAILED] == 130  # a dry run changes nothing
    assert q.bulk_retry(name="send_email") == 120
    states = {t: q.get(t).state for t in mine}  # type: ignore[union-attr]
    assert set(states.values()) == {TaskState.QUEUED}
    again = q.get(mine[0])
    assert again is not None
    assert (again.retry_count, again.error) == (0, None)  # a fresh budget
    assert {q.get(t).state for t in other} == {TaskState.FAILED}  # type: ignore[union-attr]
    assert q.get(str(victim.task_id)).state == TaskState.CANCELED  # type: ignore[union-attr]
    assert q.bulk_retry(name="send_email") == 0  # nothing left to move
    assert q.bulk_retry(state="CANCELED", name="send_email") == 1
    assert q.stats().counts[TaskState.QUEUED] == 121  # ready to be leased again


def test_the_filters_narrow_what_is_taken(make_queue: MakeQueue) -> None:
    q = make_queue()
    failed(q, "job", ["a"], 5, error="SMTP 550 mailbox unavailable")
    failed(q, "job", ["b"], 7, error="timeout")
    assert q.bulk_retry(error="SMTP 550", dry_run=True) == 5
    assert q.bulk_retry(user_id="b", dry_run=True) == 7
    assert q.bulk_retry(user_id="b", error="SMTP", dry_run=True) == 0
    assert q.bulk_retry(older_than=3600, dry_run=True) == 0  # they ended just now
    assert q.bulk_retry(newer_than=3600, dry_run=True) == 12
    assert q.bulk_delete(user_id="a", name="job") == 5
    assert q.bulk_retry(dry_run=True) == 7


def test_bulk_delete_takes_the_tasks_out_now(make_queue: MakeQueue) -> None:
    q = make_queue()
    ids = failed(q, "job", ["a", "b"], 30)
    kept = failed(q, "keep", ["a"], 3)
    assert q.bulk_delete(name="job", dry_run=True) == 60
    assert q.bulk_delete(name="job") == 60
    assert all(q.get(t) is None for t in ids)
    assert q.stats().counts[TaskState.FAILED] == 3
    assert sorted(str(t.task_id) for t in q.list_tasks(state="FAILED").tasks) == sorted(kept)
    assert q.list_tasks(name="job").tasks == []  # out of the indexes too
    # a resent push of a deleted id within the replay window is not taken as new
    assert q.push(Task(user_id="a", name="job", task_id=ids[0])).state == TaskState.FAILED
    assert q.get(ids[0]) is None


def test_finished_records_can_be_deleted_in_bulk_but_not_retried(make_queue: MakeQueue) -> None:
    q = make_queue()
    done = []
    for user in ("a", "b"):
        for task in q.push_many(Task(user_id=user, name="job") for _ in range(5)):
            done.append(str(task.task_id))
    while leased := q.pop_batch(10, "w"):
        for task in leased:
            assert q.complete(task, result={"n": 1})
    kept = failed(q, "job", ["a"], 2)
    with pytest.raises(ValidationError, match="FAILED or CANCELED"):
        q.bulk_retry(state="FINISHED")
    assert q.bulk_delete(state="FINISHED", user_id="a", dry_run=True) == 5
    assert q.bulk_delete(state="FINISHED") == 10
    assert all(q.get(t) is None for t in done)
    assert q.result(done[0]) is None
    assert q.stats().counts[TaskState.FINISHED] == 0
    assert sorted(str(t.task_id) for t in q.list_tasks(name="job").tasks) == sorted(kept)


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_resent_delete_of_finished_records_answers_the_same(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    ids = [str(t.task_id) for t in q.push_many(Task(user_id="u", name="j") for _ in range(3))]
    for task in q.pop_batch(3, "w"):
        assert q.complete(task)
    first, second = resend(q, redis_client, q.ops.bulk_delete(ids, TaskState.FINISHED))
    assert first == second == 3


def test_a_task_that_moved_meanwhile_is_left_alone(make_queue: MakeQueue) -> None:
    q = make_queue()
    ids = failed(q, "job", ["a"], 4)
    q.retry(ids[0])  # back in QUEUED: neither retried nor deleted again
    assert q._run(q.ops.bulk_retry(ids, TaskState.FAILED)) == 3
    assert q._run(q.ops.bulk_delete(ids, TaskState.FAILED)) == 0
    assert q.get(ids[0]).state == TaskState.QUEUED  # type: ignore[union-attr]


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_resent_batches_act_once_and_answer_the_same(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    ids = failed(q, "job", ["a"], 6)
    first, second = resend(q, redis_client, q.ops.bulk_retry(ids[:3], TaskState.FAILED))
    assert first == second == 3
    first, second = resend(q, redis_client, q.ops.bulk_delete(ids[3:], TaskState.FAILED))
    assert first == second == 3


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize(
    "bad",
    [
        {"state": "QUEUED"},
        {"state": "nope"},
        {"name": ""},
        {"user_id": 3},
        {"error": ""},
        {"older_than": -1},
        {"newer_than": float("nan")},
        {"older_than": True},
    ],
)
def test_a_bad_filter_is_refused_and_changes_nothing(
    make_queue: MakeQueue, redis_client: SyncClient, bad: dict[str, object]
) -> None:
    q = make_queue()
    failed(q, "job", ["a"], 2)
    before = queue_snapshot(redis_client, q.queue)
    for action in (q.bulk_retry, q.bulk_delete):
        with pytest.raises(ValidationError):
            action(**bad)  # type: ignore[arg-type]
    assert queue_snapshot(redis_client, q.queue) == before
