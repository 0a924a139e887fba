"""Results: waiting without polling, fetch-once, expiry, failures; XCom; upstream results."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from helpers.servers import ServerInfo, SyncClient
from helpers.support import CheckedThread, MakeQueue, unique_queue

from fairque import (
    AsyncFairQueue,
    Context,
    FairQueue,
    Registry,
    ResultTimeout,
    Task,
    TaskCanceled,
    TaskFailed,
    Worker,
    WorkerConfig,
)
from fairque.core.keys import QueueKeys
from fairque.workflow import Step, push_workflow_async


def finish_later(q: FairQueue, delay: float, result: Any) -> threading.Thread:
    def work() -> None:
        time.sleep(delay)
        task = q.pop("w")
        assert task is not None
        q.complete(task, result)

    thread = CheckedThread(target=work)
    thread.start()
    return thread


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_result_wakes_a_waiter_at_completion(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    helper = make_queue(queue=q.queue)
    task = q.enqueue("job", user_id="u")
    finisher = finish_later(helper, 0.3, {"answer": 42})
    timeout = 10
    started = time.monotonic()
    assert q.result(task.task_id or "", timeout=timeout) == {"answer": 42}
    waited = time.monotonic() - started
    finisher.join()
    assert 0.25 < waited < timeout / 2  # woken by the completion, not by its timeout
    # the wake-up token and the waiter's marker are short-lived
    k = QueueKeys(q.queue)
    assert redis_client.exists(k.watch(task.task_id or "")) == 0
    assert 0 < redis_client.pttl(k.done(task.task_id or "")) <= 60_000


def test_several_waiters_are_all_woken(make_queue: MakeQueue) -> None:
    q = make_queue()
    task = q.enqueue("job", user_id="u")
    results: list[Any] = []

    def wait() -> None:
        waiter = make_queue(queue=q.queue)
        results.append(waiter.result(task.task_id or "", timeout=10))

    waiters = [CheckedThread(target=wait) for _ in range(3)]
    for w in waiters:
        w.start()
    time.sleep(0.2)
    leased = q.pop("w")
    assert leased is not None
    q.complete(leased, "shared")
    for w in waiters:
        w.join()
    assert results == ["shared"] * 3


def test_result_timeout_and_no_wait(make_queue: MakeQueue) -> None:
    q = make_queue()
    task = q.enqueue("job", user_id="u")
    with pytest.raises(ResultTimeout, match="still QUEUED"):
        q.result(task.task_id or "")
    started = time.monotonic()
    with pytest.raises(ResultTimeout, match=r"after 0\.2s"):
        q.result(task.task_id or "", timeout=0.2)
    assert time.monotonic() - started >= 0.19


def test_consume_reads_once(make_queue: MakeQueue) -> None:
    q = make_queue()
    task = q.enqueue("job", user_id="u")
    leased = q.pop("w")
    assert leased is not None
    q.complete(leased, [1, 2, 3])
    assert q.result(task.task_id or "", consume=True) == [1, 2, 3]
    assert q.result(task.task_id or "", consume=True) is None
    assert q.result(task.task_id or "") is None


def test_expired_unknown_and_unkept_results_read_as_none(make_queue: MakeQueue) -> None:
    q = make_queue()
    short = q.enqueue("job", user_id="u", result_ttl=1)
    unkept = q.enqueue("job", user_id="u", keep_result=False)
    for _ in range(2):
        leased = q.pop("w")
        assert leased is not None
        q.complete(leased, "value")
    assert q.result(unkept.task_id or "") is None
    assert q.result(short.task_id or "") == "value"
    time.sleep(1.1)
    assert q.result(short.task_id or "") is None
    assert q.result("never-pushed") is None


def test_failed_and_canceled_results_raise(make_queue: MakeQueue) -> None:
    q = make_queue()
    bad = q.enqueue("job", user_id="u", max_retries=0)
    leased = q.pop("w")
    assert leased is not None
    q.fail(leased, ValueError("broken input"))
    with pytest.raises(TaskFailed, match="ValueError: broken input"):
        q.result(bad.task_id or "", timeout=1)
    gone = q.enqueue("job", user_id="u")
    q.cancel(gone.task_id or "")
    with pytest.raises(TaskCanceled):
        q.result(gone.task_id or "")


def test_xcom_push_pull_and_expiry(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.xcom_push("run-1:rows", {"rows": 1234}, ttl=0.3)
    assert q.xcom_pull("run-1:rows") == {"rows": 1234}
    assert q.xcom_pull("missing", default="fallback") == "fallback"
    time.sleep(0.35)
    assert q.xcom_pull("run-1:rows") is None


async def test_handlers_read_upstream_results(server: ServerInfo) -> None:
    q = AsyncFairQueue.from_url(server.url, unique_queue("wf"))
    registry = Registry()

    @registry.task(name="extract")
    async def extract(ctx: Context, payload: Any) -> list[int]:
        await ctx.queue.xcom_push(f"{payload}:source", "s3://bucket/day")
        return [1, 2, 3]

    @registry.task(name="double")
    def double(ctx: Context, payload: Any) -> list[int]:
        rows = asyncio.run_coroutine_threadsafe(ctx.upstream_results(), loop).result()
        return [2 * x for values in rows.values() for x in values]

    @registry.task(name="total")
    async def total(ctx: Context, payload: Any) -> dict[str, Any]:
        upstream = await ctx.upstream_results()
        source = await ctx.queue.xcom_pull(f"{payload}:source")
        return {"sum": sum(sum(v) for v in upstream.values()), "source": source}

    loop = asyncio.get_running_loop()
    extract_step = Step("extract", "run-7", user_id="etl")
    a, b = Step("double", user_id="etl"), Step("double", user_id="etl")
    last = Step("total", "run-7", user_id="etl")
    extract_step >> [a, b] >> last
    ids = await push_workflow_async(q, extract_step)
    assert len(ids) == 4
    worker = Worker(q, registry, WorkerConfig(id="wf", max_concurrent_tasks=4))
    running = asyncio.create_task(worker.run_async())
    try:
        assert await q.result(last.task_id, timeout=10) == {"sum": 24, "source": "s3://bucket/day"}
    finally:
        worker.request_stop()
        await running
        await q.close()


async def test_async_result_waits_too(server: ServerInfo) -> None:
    q = AsyncFairQueue.from_url(server.url, unique_queue("ares"))
    task = await q.push(Task(user_id="u", name="job"))

    async def finish() -> None:
        await asyncio.sleep(0.2)
        leased = await q.pop("w")
        assert leased is not None
        await q.complete(leased, "late")

    finisher = asyncio.create_task(finish())
    assert await q.result(task.task_id or "", timeout=5) == "late"
    await finisher
    with pytest.raises(ResultTimeout):
        await q.result((await q.enqueue("x", user_id="u")).task_id or "", timeout=0.05)
    await q.close()
