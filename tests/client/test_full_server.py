"""A server at its memory limit: pushes are refused with ``ServerFull`` and nothing is
written, while every transition that moves existing tasks along still runs, so workers
drain the queue and memory comes back (every server kind, both clients)."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.servers import ServerInfo
from helpers.support import eviction_policy, memory_limit, unique_queue
from helpers.worker_handlers import Harness, eventually

from fairque import (
    AsyncFairQueue,
    FairQueue,
    QuotaExceeded,
    Registry,
    ServerError,
    ServerFull,
    Task,
    TaskState,
)

PAYLOAD = {"blob": "x" * 300}


def fill(q: FairQueue, tenants: int = 5, batch: int = 50) -> int:
    """Push batches of tasks spread over ``tenants`` until the server refuses one;
    how many were accepted."""
    accepted = 0
    for _ in range(10_000):
        tasks = [
            Task(user_id=f"u{(accepted + i) % tenants}", name="work", payload=PAYLOAD)
            for i in range(batch)
        ]
        try:
            q.push_many(tasks)
        except ServerFull:
            return accepted
        accepted += batch
    raise AssertionError("the server never refused a push")


@pytest.fixture
def sync_queue(server: ServerInfo) -> Iterator[FairQueue]:
    q = FairQueue.from_url(server.url, unique_queue("full"), result_ttl_seconds=2)
    try:
        yield q
    finally:
        q.purge()
        q.close()


def test_a_push_at_the_limit_is_refused_with_its_own_error_and_writes_nothing(
    sync_queue: FairQueue, server: ServerInfo
) -> None:
    q = sync_queue
    with memory_limit(server) as limit:
        accepted = fill(q)
        assert accepted > 0
        limit.full()  # a smaller command than the refused batch would find room
        before = q.stats().counts
        with pytest.raises(ServerFull, match=r"memory limit \(maxmemory\)") as caught:
            q.push_many([Task(user_id="late", name="work", payload=PAYLOAD) for _ in range(10)])
        assert isinstance(caught.value, ServerError)
        with pytest.raises(ServerFull):
            q.enqueue("work", PAYLOAD, user_id="late")
        with pytest.raises(ServerFull):  # a schedule adds work too
            q.add_schedule(schedule_id="tick", name="work", user_id="late", interval_seconds=60)
        assert q.schedules() == []
        assert q.stats().counts == before
        assert q.stats().counts[TaskState.QUEUED] == accepted
        # reads and every transition that moves a task along still run
        task = q.pop(worker_id="w")
        assert task is not None
        assert q.extend(task, seconds=30)
        assert q.complete(task, result={"ok": True})
        other = q.pop(worker_id="w")
        assert other is not None
        assert q.fail(other, error="boom", retry=True) == TaskState.SCHEDULED
        queued = q.stats().counts[TaskState.QUEUED]
        victim = q.list_tasks(state=TaskState.QUEUED, limit=1).tasks[0]
        assert victim.task_id is not None
        assert q.cancel(victim.task_id)
        assert q.stats().counts[TaskState.QUEUED] == queued - 1


def test_a_drained_server_takes_pushes_again_with_the_default_result_ttl(
    server: ServerInfo,
) -> None:
    q = FairQueue.from_url(server.url, unique_queue("full"))  # results kept for a day
    try:
        # the scripts of the drain are loaded first: a script loaded at the limit takes
        # the server's memory too (its code), which is not what this test measures
        q.enqueue("work", PAYLOAD, user_id="warm")
        _, [warm] = q.complete_and_pop([], 1, "w")
        assert q.complete_and_pop([(warm, None)], 0, "w") == ([True], [])
        with memory_limit(server) as limit:
            accepted = fill(q, tenants=20)
            assert accepted > 0
            limit.full()  # the drain runs at the limit
            while leased := q.pop_batch(100, worker_id="w"):
                acks, _ = q.complete_and_pop([(t, {"ok": True}) for t in leased], 0, "w")
                assert all(acks)
            limit.reset()
            counts = q.stats().counts
            assert counts[TaskState.FINISHED] == accepted + 1  # all kept, none expired
            late = q.enqueue("work", PAYLOAD, user_id="late")  # room again at once
            assert late.state is TaskState.QUEUED
            done = q.get(q.list_tasks(state=TaskState.FINISHED, limit=1).tasks[0].task_id or "")
            assert done is not None
            assert done.payload is None  # a finished task keeps its result, not its payload
            assert q.result(done.task_id or "") == {"ok": True}
    finally:
        q.purge()
        q.close()


def test_a_byte_quota_refuses_the_flood_before_the_server_is_full(server: ServerInfo) -> None:
    q = FairQueue.from_url(server.url, unique_queue("full"))
    try:
        q.set_user_limits("flood", max_bytes=300_000)  # a fifth of the room left
        q.enqueue("work", PAYLOAD, user_id="warm")  # (the push script is loaded first)
        with memory_limit(server):
            pushed, refused = 0, None
            for _ in range(10_000):
                try:
                    q.push_many(
                        [Task(user_id="flood", name="work", payload=PAYLOAD) for _ in range(50)]
                    )
                except QuotaExceeded as exc:  # (never ServerFull: that would fail the test)
                    refused = exc
                    break
                pushed += 50
            assert refused is not None
            assert refused.kind == "bytes"
            assert 0 < pushed * 312 <= 300_000  # (a 300-byte blob is 312 bytes as JSON)
            for i in range(100):  # the other tenants keep pushing: the server has room
                q.enqueue("work", PAYLOAD, user_id=f"other-{i % 5}")
    finally:
        q.purge()
        q.close()


async def test_a_worker_drains_a_full_server_and_pushes_come_back(
    h: Harness, server: ServerInfo
) -> None:
    name = unique_queue("full")
    sync = FairQueue.from_url(server.url, name, result_ttl_seconds=1)
    runs: Counter[str] = Counter()
    registry = Registry()

    @registry.task(name="work")
    async def work(payload: dict[str, Any]) -> None:
        runs[payload["id"]] += 1

    try:
        with memory_limit(server) as limit:
            accepted = 0
            for _ in range(10_000):
                tasks = [
                    Task(
                        user_id=f"u{(accepted + i) % 5}",
                        name="work",
                        payload={"id": f"{accepted + i}", **PAYLOAD},
                    )
                    for i in range(50)
                ]
                try:
                    sync.push_many(tasks)
                except ServerFull:
                    break
                accepted += 50
            assert accepted > 0
            q: AsyncFairQueue = h.queue(name, result_ttl_seconds=1)
            limit.full()  # the drain runs with the server over its limit all along
            with pytest.raises(ServerFull):
                await q.enqueue("work", {"id": "late", **PAYLOAD}, user_id="late")
            h.start(q, registry, max_concurrent_tasks=8)
            await eventually(lambda: len(runs) == accepted, timeout=120)
            limit.reset()
            assert set(runs.values()) == {1}
            assert (await q.stats()).counts[TaskState.FINISHED] <= accepted

            # finished tasks expire after their result TTL: memory comes back by itself
            async def pushed() -> bool:
                try:
                    await q.enqueue("work", {"id": "again", **PAYLOAD}, user_id="late")
                except ServerFull:
                    return False
                return True

            deadline = asyncio.get_running_loop().time() + 60
            while not await pushed():
                assert asyncio.get_running_loop().time() < deadline, "memory never came back"
                await asyncio.sleep(0.2)
            await eventually(lambda: runs["again"] == 1, timeout=30)
    finally:
        sync.purge()
        sync.close()


async def test_a_worker_warns_of_a_server_that_would_lose_tasks(
    h: Harness, server: ServerInfo, caplog: pytest.LogCaptureFixture
) -> None:
    q = h.queue()
    registry = Registry()
    caplog.set_level(logging.INFO, logger="fairque")
    with eviction_policy(server, "allkeys-lru"):
        worker = h.start(q, registry)
        await eventually(lambda: "maxmemory-policy allkeys-lru" in caplog.text)
        await h.stop(worker)
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and "evicts" in r.message]
    assert warned, caplog.text
    assert "noeviction" in warned[0].message
