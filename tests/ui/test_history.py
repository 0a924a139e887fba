"""The overview's per-minute history: snapshots of the scripts' counters, differenced."""

from __future__ import annotations

import asyncio
import bisect
import time

import httpx
import pytest
from helpers.servers import ServerInfo
from helpers.support import unique_queue
from service.harness import LiveServer

from fairque import FairQueue, Task
from fairque.client.aio import AsyncFairQueue
from fairque.errors import FairqueError
from fairque.models import HISTOGRAM_BOUNDS_SECONDS, Histogram, QueueMetrics
from fairque.service.ui import history, served
from fairque.service.ui.history import History

VALKEY = pytest.mark.parametrize("server", ["valkey"], indirect=True)


BUCKETS = len(HISTOGRAM_BOUNDS_SECONDS) + 1


def at(seconds: float) -> int:
    """The bucket whose bound is the largest at or under ``seconds``."""
    return bisect.bisect_right(HISTOGRAM_BOUNDS_SECONDS, seconds * (1 + 1e-9)) - 1


def metrics(finished: int, failed: int, waits: dict[int, int]) -> QueueMetrics:
    empty = Histogram(counts=[0] * BUCKETS, sum=0.0, count=0)
    counts = [waits.get(i, 0) for i in range(BUCKETS)]
    wait = Histogram(counts=counts, sum=0.0, count=sum(counts))
    return QueueMetrics(queue="q", finished=finished, failed=failed, wait_time=wait, run_time=empty)


def test_minutes_from_snapshots() -> None:
    h = History()
    assert h.minutes("q") == []
    assert h.covered("q") is None
    h.add("q", metrics(0, 0, {}), at=0.0)
    assert h.minutes("q", now=1.0) == []
    h.add("q", metrics(10, 1, {at(0.004): 10}), at=30.0)  # minute 0..1: 10 finished, <= 4 ms
    h.add("q", metrics(40, 1, {at(0.004): 10, at(2.5): 30}), at=90.0)  # 30 more, <= 2.5 s
    minutes = h.minutes("q", now=100.0)
    assert [m["minute"] for m in minutes] == [1, 0]
    assert (minutes[0]["finished"], minutes[0]["failed"]) == (10, 1)
    assert (minutes[1]["finished"], minutes[1]["failed"]) == (30, 0)
    assert minutes[0]["p95"] <= 0.004
    assert 2.0 < minutes[1]["p50"] <= 2.5
    assert h.covered("q", now=100.0) == 100.0
    # an hour at most: an old interval falls out of the chart
    assert len(h.minutes("q", now=4000.0)) == 60


@VALKEY
async def test_sampler_reads_the_queues(server: ServerInfo) -> None:
    q = AsyncFairQueue.from_url(server.url, unique_queue("hist"))
    h = History(period=0.05)

    async def served() -> dict[str, AsyncFairQueue]:
        return {q.queue: q}

    try:
        async with h.running(served):
            await asyncio.sleep(0.2)
            await q.push_many([Task(user_id="u", name="n") for _ in range(3)])
            for _ in range(3):
                task = await q.pop(worker_id="w")
                assert task is not None
                await q.complete(task)
            await asyncio.sleep(0.3)
        assert sum(int(m["finished"]) for m in h.minutes(q.queue)) == 3
    finally:
        await q.purge()
        await q.close()


async def test_the_sampler_stops_even_when_a_read_swallows_its_cancellation() -> None:
    """A client may turn a cancellation inside a read into an error the sampler skips:
    closing ``running`` still ends the loop (it hung the suite once, on a busy machine)."""
    h = History(period=0.01)
    reads = 0

    async def absorbing() -> dict[str, AsyncFairQueue]:
        nonlocal reads
        reads += 1
        try:
            await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            raise FairqueError("connection lost") from None
        return {}

    async def open_and_close() -> None:
        async with h.running(absorbing):
            while reads < 3:
                await asyncio.sleep(0.01)

    closing = asyncio.ensure_future(open_and_close())
    await asyncio.wait({closing}, timeout=30)  # returns as soon as it closes
    hung = not closing.done()
    closing.cancel()  # (a second cancellation would end the old loop)
    assert not hung
    stopped_at = reads
    await asyncio.sleep(0.1)
    assert reads == stopped_at


@VALKEY
def test_overview_uses_the_history(server: ServerInfo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history, "PERIOD", 0.05)
    live = LiveServer(server.url, [unique_queue("hist")])
    q = FairQueue.from_url(server.url, live.service.names[0])
    try:
        q.push_many([Task(user_id="u", name="n") for _ in range(4)])
        for _ in range(4):
            task = q.pop(worker_id="w")
            assert task is not None
            q.fail(task, "boom", retry=False)
        time.sleep(0.3)
        page = httpx.get(f"{live.base}/ui/q/{q.queue}", timeout=30).text
        assert "sampled every few seconds since this server started" in page
        assert "4 failed" in page  # the chart's bar title for this minute
    finally:
        q.purge()
        q.close()
        live.stop()


@VALKEY
async def test_the_sampler_starts_the_tenants_window(server: ServerInfo) -> None:
    """A window of the tenants page counts from when the service started watching, not
    from the first read of the page: leases before the sampler's snapshot are not in it."""
    q = AsyncFairQueue.from_url(server.url, unique_queue("served"))
    try:
        await q.push_many([Task(user_id=u, name="n") for u in ("early", "late", "late")])
        first = await q.pop(worker_id="w", assigned_users=["early"])
        assert first is not None
        await q.complete(first)
        await History().sample({q.queue: q})  # the service's sampler, before any page
        for _ in range(2):
            task = await q.pop(worker_id="w")
            assert task is not None
            await q.complete(task)
        window = await served.served_in(q, 0.0)  # the newest snapshot is the sampler's
        assert window.span is not None
        assert window.leases == {"late": 2}
    finally:
        await q.purge()
        await q.close()
