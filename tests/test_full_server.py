"""A server at its memory limit: pushes are refused with ``ServerFull`` and nothing is
written, while every transition that moves existing tasks along still runs, so workers
drain the queue and memory comes back (every server kind, both clients)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from servers import ServerInfo
from support import unique_queue
from worker_handlers import Harness, eventually

from fairque import AsyncFairQueue, FairQueue, Registry, ServerError, ServerFull, Task, TaskState

#: bytes of room left above the memory in use when the limit is set
HEADROOM = 1_500_000
PAYLOAD = {"blob": "x" * 300}


def _nodes(server: ServerInfo) -> list[redis.Redis]:
    """A client of each node of ``server`` (one for a standalone server)."""
    if not server.cluster:
        return [redis.Redis.from_url(server.url)]
    cluster = redis.RedisCluster.from_url(server.url)
    try:
        return [redis.Redis(host=n.host, port=n.port) for n in cluster.get_primaries()]  # type: ignore[no-untyped-call]
    finally:
        cluster.close()


@contextlib.contextmanager
def memory_limit(server: ServerInfo, headroom: int = HEADROOM) -> Iterator[None]:
    """Set every node's ``maxmemory`` to what it uses now plus ``headroom`` (noeviction),
    and lift the limit again afterwards."""
    nodes = _nodes(server)
    try:
        for node in nodes:
            used = int(node.info("memory")["used_memory"])
            node.config_set("maxmemory-policy", "noeviction")
            node.config_set("maxmemory", str(used + headroom))
        yield
    finally:
        for node in nodes:
            node.config_set("maxmemory", "0")
            node.close()


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
    with memory_limit(server):
        accepted = fill(q)
        assert accepted > 0
        before = q.stats().counts
        with pytest.raises(ServerFull, match=r"memory limit \(maxmemory\)") as caught:
            q.push_many([Task(user_id="late", name="work", payload=PAYLOAD) for _ in range(10)])
        assert isinstance(caught.value, ServerError)
        with pytest.raises(ServerFull):
            q.enqueue("work", PAYLOAD, user_id="late")
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
        with memory_limit(server):
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
            with pytest.raises(ServerFull):
                await q.enqueue("work", {"id": "late", **PAYLOAD}, user_id="late")
            h.start(q, registry, max_concurrent_tasks=8)
            await eventually(lambda: len(runs) == accepted, timeout=120)
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
