"""A time-fair queue charges the handler's run as the worker reports it.

The report (``Task.run_seconds``) rides on complete, fail, requeue, extend and
complete_and_pop; the scripts charge it, never more than the lease's span on the
server's clock, and charge nothing twice when a call is resent. Real server, real
sleeps: a lease held 60 ms whose handler reports 1 ms is charged 1 ms.
"""

from __future__ import annotations

import time

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue
from test_time_fair import start_tag, watermark

from fairque import FairQueue, Task, TaskState, ValidationError
from fairque.core.keys import QueueKeys

#: how long each test holds a lease before it reports (the span the server sees)
HELD = 0.06


def busy_us(client: SyncClient, q: FairQueue, user: str) -> int:
    """The worker time counted for ``user`` (``q`` flushes what it counted first)."""
    q.flush_metrics()
    return int(client.hget(QueueKeys(q.queue).tenant(user), "busy_us") or 0)


def leased(q: FairQueue, user: str = "u", n: int = 2) -> Task:
    q.push_many(Task(user_id=user, name="x") for _ in range(n))
    task = q.pop("w")
    assert task is not None
    return task


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_completion_is_charged_the_reported_run_once(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    task = leased(q)
    before = start_tag(redis_client, q, "u") - watermark(redis_client, q, task.task_id)
    time.sleep(HELD)
    task.run_seconds = 0.001
    call = q.ops.complete(task, None)
    assert q._run(call)
    assert busy_us(redis_client, q, "u") == 1_000  # not the ~60 ms the lease was held
    assert start_tag(redis_client, q, "u") == before + 1_000
    assert q._run(call)  # a resend finds it FINISHED and charges nothing more
    assert busy_us(redis_client, q, "u") == 1_000
    assert start_tag(redis_client, q, "u") == before + 1_000


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_a_report_never_charges_more_than_the_span(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    task = leased(q)
    assert task.started_at is not None
    before = start_tag(redis_client, q, "u") - watermark(redis_client, q, task.task_id)
    task.run_seconds = 3600.0  # an hour: more than the server saw
    assert q.complete(task)
    seen_us = (time.time() - task.started_at.timestamp()) * 1e6  # this process's clock
    done = q.get(task.task_id or "")
    assert done is not None
    assert done.ended_at is not None
    span_us = (done.ended_at - task.started_at).total_seconds() * 1e6
    charged = start_tag(redis_client, q, "u") - before
    assert charged <= span_us + 1_000  # the span (ms stamps), not an hour
    # nor is an hour counted as its worker time: at most what this process saw
    assert busy_us(redis_client, q, "u") <= seen_us + 1_000


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_without_a_report_the_span_is_charged(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    task = leased(q)
    time.sleep(HELD)
    assert task.run_seconds is None
    assert q.complete(task)
    assert busy_us(redis_client, q, "u") >= HELD * 1e6 * 0.9


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_failure_and_a_give_back_are_charged_their_reports(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    task = leased(q)
    time.sleep(HELD)
    task.run_seconds = 0.002
    failed = q.ops.fail(task, "boom", True, 0)
    for _ in range(2):  # the resend answers the same and charges nothing more
        assert q._run(failed) is TaskState.SCHEDULED
        assert busy_us(redis_client, q, "u") == 2_000
    again = q.pop("w")
    assert again is not None
    time.sleep(HELD)
    again.run_seconds = 0.0  # given back before its handler started: no run
    given = q.ops.requeue(again, 0)
    for _ in range(2):
        assert q._run(given) is TaskState.QUEUED
        assert busy_us(redis_client, q, "u") == 2_000


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_heartbeat_charges_the_reported_run_so_far(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    """A task leased ahead reports 0 while it waits: its heartbeats charge nothing; once
    it runs, they charge its run so far, each resend nothing more."""
    q = make_queue()
    task = leased(q)
    first = watermark(redis_client, q, task.task_id)
    time.sleep(HELD)
    task.run_seconds = 0.0
    q.extend(task, 30)
    assert watermark(redis_client, q, task.task_id) == first  # the estimate stays
    time.sleep(HELD)
    task.run_seconds = 0.040  # 40 ms of run, more than the first estimate (10 ms)
    call = q.ops.extend(task, 30)
    q._run(call)
    q._run(call)
    assert watermark(redis_client, q, task.task_id) == 40_000
    task.run_seconds = 0.041
    assert q.complete(task)
    assert busy_us(redis_client, q, "u") == 41_000


def test_extend_many_and_complete_and_pop_carry_each_tasks_report(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.push_many(Task(user_id=u, name="x") for u in ("a", "b") for _ in range(2))
    tasks = q.pop_batch(2, worker_id="w")
    assert {t.user_id for t in tasks} == {"a", "b"}
    time.sleep(HELD)
    for t, ran in zip(tasks, (0.005, 0.0), strict=True):
        t.run_seconds = ran
    assert q.extend_many(tasks, 30) == [True, True]
    assert watermark(redis_client, q, tasks[0].task_id) == 10_000  # 5 ms < the estimate
    for t, ran in zip(tasks, (0.003, 0.004), strict=True):
        t.run_seconds = ran
    acks, _ = q.complete_and_pop([(t, None) for t in tasks], 0, "w")
    assert acks == [True, True]
    by_user = {t.user_id: busy_us(redis_client, q, t.user_id) for t in tasks}
    assert by_user == {tasks[0].user_id: 3_000, tasks[1].user_id: 4_000}


def test_a_new_tenant_is_first_charged_the_queues_mean_attempt(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    """Before any run the first charge is 10 ms; after tenants ran 2 ms tasks, a new
    tenant's first lease is charged about that (the queue's mean attempt), not 10 ms."""
    q = make_queue()
    for user in ("a", "b"):
        task = leased(q, user, 1)
        time.sleep(0.01)  # the span: more than the report, which counts then
        task.run_seconds = 0.002
        assert q.complete(task)
    q.flush_metrics()  # the mean is taken from the counts processes flushed
    task = leased(q, "newcomer", 1)
    assert 1_000 < watermark(redis_client, q, task.task_id) < 5_000


def test_a_bad_report_is_refused_before_anything_is_sent(make_queue: MakeQueue) -> None:
    q = make_queue()
    task = leased(q)
    for bad in (-1.0, float("nan"), float("inf"), True, "1"):
        with pytest.raises(ValidationError, match="run_seconds"):
            task.run_seconds = bad  # type: ignore[assignment]
    assert task.run_seconds is None
    task.run_seconds = 0.25
    assert task.run_seconds == 0.25
    task.run_seconds = None
    assert task.run_seconds is None
    assert q.get(task.task_id or "") is not None
