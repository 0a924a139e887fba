"""The counts a process keeps of its own leases and completions, and their flushes.

The scripts no longer count leases, completions, worker time or the wait and run
histograms: the process that made the calls does (``fairque.core.tally``) and adds
them to the server at most once a second, in one numbered call. These hold that the
flushed figures are the tasks actually run, that a flush or a lease answered twice
counts once, and that a running worker's counts reach another reader without it
stopping.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, unique_queue
from helpers.worker_handlers import Harness, wait_state

from fairque import Context, FairQueue, Registry, Task, TaskState
from fairque.core.keys import QueueKeys
from fairque.core.tally import FLUSH_EVERY, Tally, bucket_of, waited


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_flush_whose_reply_was_lost_is_sent_again_and_counted_once(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u")
    task = q.pop("w")
    assert task is not None
    assert q.complete(task)
    call = q.ops.flush_metrics()
    assert call is not None
    assert call.script is not None
    # the server adds it; the reply never reaches the client
    assert redis_client.eval(call.script.source, len(call.keys), *call.keys, *call.args) == 1
    again = q.ops.flush_metrics()
    assert again is not None
    assert again.args == call.args  # the same flush, with its number
    assert q._run(again) == 0  # the server had it: nothing added twice
    assert q.ops.flush_metrics() is None  # nothing left to send
    m = q.metrics()
    assert (m.popped, m.finished) == (1, 1)
    assert (m.wait_time.count, m.run_time.count) == (1, 1)
    tenant = redis_client.hgetall(QueueKeys(q.queue).tenant("u"))
    assert int(tenant[b"done"]) == 1


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_flushes_are_numbered_per_process(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    """Two processes' flushes with the same number both count; one process's older
    number, sent after a newer one, counts nothing."""
    q = make_queue()
    one, other = Tally(), Tally()
    task = Task(user_id="u", name="n")
    for tally in (one, other):
        tally.leased([task], [5.0], "r1")
    sends = []
    for tally in (one, other):
        args = tally.take()
        assert args is not None
        assert args[1] == 1
        sends.append(args)
    script = q.ops.scripts["flush_metrics"]
    keys = QueueKeys(q.queue)
    for args in sends:
        assert redis_client.eval(script.source, 2, keys.prefix, keys.stats, *args) == 1
    one.sent()
    one.leased([task], [5.0], "r2")
    newer = one.take()
    assert newer is not None
    assert newer[1] == 2
    assert redis_client.eval(script.source, 2, keys.prefix, keys.stats, *newer) == 1
    assert redis_client.eval(script.source, 2, keys.prefix, keys.stats, *sends[0]) == 0
    assert q.metrics().popped == 3


def test_a_lease_answered_twice_is_counted_once(make_queue: MakeQueue) -> None:
    q = make_queue()
    for user in ("a", "b", "c"):
        q.enqueue("n", user_id=user)
    first = q.pop_batch(2, "w", request_id="req-1")
    again = q.pop_batch(2, "w", request_id="req-1")  # the caller's own resend
    assert [t.task_id for t in again] == [t.task_id for t in first]
    m = q.metrics()
    assert m.popped == 2
    assert m.wait_time.count == 2


def test_each_lease_carries_how_long_its_task_waited(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u")
    time.sleep(0.05)
    task = q.pop("w")
    assert task is not None
    m = q.metrics()
    assert m.wait_time.count == 1
    assert m.wait_time.sum >= 0.05  # in ms on the server's clock: at least the sleep
    assert sum(m.wait_time.counts[: bucket_of(40)]) == 0


def test_the_wait_is_read_from_the_field_not_a_value_that_looks_like_it() -> None:
    assert waited([b"name", b"waited", b"waited", b"12.5"]) == 12.5
    assert waited([b"name", b"waited"]) == 0.0
    assert waited({b"waited": b"7"}) == 7.0
    assert waited([b"waited", b"junk"]) == 0.0


def test_an_outcome_named_by_id_and_token_counts_for_its_owner_when_leased_here(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    """An HTTP worker's outcome names its task by id and lease token alone: the process
    that leased the task counts it for its owner; another counts it for the queue only."""
    q = make_queue()
    q.enqueue("n", user_id="owner")
    task = q.pop("w")
    assert task is not None
    handle = Task(user_id="-", name="-", task_id=task.task_id, lease_token=task.lease_token)
    handle.run_seconds = 0.004
    time.sleep(0.01)  # (a report is counted up to the time since the lease)
    assert q.complete(handle)
    q.flush_metrics()
    parts = [p.ops.keys for p in q._place.parts]  # (one: the queue's own keys)
    found = [redis_client.hgetall(k.tenant("owner")) for k in parts]
    owner = next(t for t in found if t)
    assert (int(owner[b"done"]), int(owner[b"busy_us"])) == (1, 4_000)
    assert not any(redis_client.exists(k.tenant("-")) for k in parts)
    stranger = Tally()
    stranger.ended(handle, "done")
    args = stranger.take()
    assert args is not None
    assert "-" not in args  # no tenant fields: the queue's alone
    assert q.metrics().finished == 1


def test_a_process_that_did_no_work_sends_no_flush(make_queue: MakeQueue) -> None:
    q = make_queue()
    assert q.ops.flush_metrics() is None
    q.enqueue("n", user_id="u")
    assert q.ops.flush_metrics() is None  # pushes are counted by their scripts


async def test_a_running_workers_counts_reach_other_clients_within_a_flush(h: Harness) -> None:
    """No stop, no read by the worker's own client: its counts arrive by its flushes."""
    name = unique_queue("tally")
    producer = h.queue(name)
    served = h.queue(name)  # the worker's own client
    reg = Registry()

    @reg.task(name="job")
    async def job(ctx: Context, payload: Any) -> None:
        await asyncio.sleep(0.001)

    h.start(served, reg, id="w-tally", max_concurrent_tasks=4)
    tasks = [await producer.enqueue("job", i, user_id=f"u{i % 3}") for i in range(30)]
    for t in tasks:
        await wait_state(producer, t.task_id, TaskState.FINISHED)
    started = time.monotonic()
    while (await producer.metrics()).finished < 30:
        # the worker keeps polling for work: its next call after a second flushes
        assert time.monotonic() - started < 30 * FLUSH_EVERY, "the worker's counts never came"
        await asyncio.sleep(0.05)
    m = await producer.metrics()
    assert (m.popped, m.finished, m.wait_time.count, m.run_time.count) == (30, 30, 30, 30)
    report = await producer.tenants()
    assert sum(t.finished for t in report.tenants) == 30


def test_a_client_flushes_what_it_counted_when_it_closes(server: Any) -> None:
    name = unique_queue("tally")
    q = FairQueue.from_url(server.url, name)
    reader = FairQueue.from_url(server.url, name)
    try:
        q.enqueue("n", user_id="u")
        q.enqueue("n", user_id="u")
        first = q.pop("w")  # (its lease is flushed after the call: the first of a second)
        second = q.pop("w")
        assert first is not None
        assert second is not None
        assert q.complete(first)
        assert q.complete(second)
        q.close()
        m = reader.metrics()
        assert (m.popped, m.finished) == (2, 2)
    finally:
        reader.purge()
        reader.close()
