"""Fair by the time handlers run, with the worker one network hop away.

A real worker reaches the server through a loopback proxy that adds 1 ms each way
(``benchmarks/delay_proxy.py``): the lease's span on the server's clock then holds
~4 ms of trips per task, more than a short task's run. Two saturated tenants, 40 ms
tasks against 1 ms tasks: each handler records its own run, and the shares of run
time come out near half each in time mode, where charging the span gave the short
tenant a fifth. The margin is taken from the run itself: the shares in count mode,
measured the same way, show how far apart the two tenants are when the queue is fair
by turns.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.servers import ServerInfo
from helpers.support import unique_queue

from fairque import AsyncFairQueue, Context, Registry, Task, Worker, WorkerConfig

_PROXY = Path(__file__).resolve().parents[2] / "benchmarks" / "delay_proxy.py"


def _delay_proxy() -> Any:
    spec = importlib.util.spec_from_file_location("delay_proxy", _PROXY)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("delay_proxy", module)
    spec.loader.exec_module(module)
    return module.DelayProxy


async def _shares(url: str, direct: str, mode: str, seconds: float) -> dict[str, float]:
    """Shares of handler run time of 'slow' (40 ms) and 'fast' (1 ms), saturated."""
    name = unique_queue("hop")
    producer = AsyncFairQueue.from_url(direct, name)
    await producer.set_fairness(mode)  # type: ignore[arg-type]
    for user, ms, n in (("slow", 40, 400), ("fast", 1, 8000)):
        tasks = [Task(user_id=user, name="job", payload={"ms": ms}) for _ in range(n)]
        for i in range(0, n, 2000):
            await producer.push_many(tasks[i : i + 2000])
    runs: list[tuple[str, float, float]] = []
    registry = Registry()

    @registry.task(name="job")
    async def job(ctx: Context, payload: dict[str, int]) -> None:
        began = time.monotonic()
        await asyncio.sleep(payload["ms"] / 1000)
        runs.append((ctx.task.user_id, began, time.monotonic()))

    q = AsyncFairQueue.from_url(url, name)
    config = WorkerConfig(max_concurrent_tasks=4, summary_interval_seconds=0,
                          maintenance_interval_seconds=0)  # fmt: skip
    worker = Worker(q, registry, config)
    running = asyncio.create_task(worker.run_async())
    start = time.monotonic()
    await asyncio.sleep(seconds)
    worker.request_stop()
    await running
    lo, hi = start + 0.7, start + seconds - 0.2
    busy = {"slow": 0.0, "fast": 0.0}
    for user, began, ended in runs:
        busy[user] += max(0.0, min(ended, hi) - max(began, lo))
    await producer.purge()
    await q.close()
    await producer.close()
    total = sum(busy.values())
    return {u: b / total for u, b in busy.items()}


@pytest.mark.server_kinds("valkey", "redis")  # the proxy forwards to one node
async def test_a_worker_a_hop_away_gets_shares_of_run_time_by_time(server: ServerInfo) -> None:
    proxy = _delay_proxy()(int(server.url.rsplit(":", 1)[1].split("/")[0]), 0.001)
    try:
        by_turns = await _shares(proxy.url, server.url, "count", 2.5)
        by_time = await _shares(proxy.url, server.url, "time", 3.0)
    finally:
        proxy.close()
    # fair by turns, the 1 ms tenant gets a few percent of the run time: what unfair is
    assert by_turns["fast"] < 0.2, by_turns
    # fair by the time handlers run: about half each, far from count mode's split
    margin = max(0.1, (0.5 - by_turns["fast"]) / 4)
    assert abs(by_time["fast"] - 0.5) < margin, (by_time, by_turns)
