"""The leading scheduler: one leader, each slot fired once through failovers and kills.

Real schedulers against real servers: two in one process racing (their leader
crashes and is replaced over and over), and two ``fairque scheduler`` processes
of which the leader is killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from helpers.servers import ServerInfo, connect
from helpers.support import Schedulers, server_ms, unique_queue

from fairque import AsyncFairQueue, FairQueue
from fairque.errors import ConfigError
from fairque.schedules.leader import Scheduler
from fairque.schedules.model import Schedule, slot_task_id


def task_ids(q: FairQueue) -> list[str]:
    """The ids of every task in the queue, in slot order."""
    tasks = q.pop_batch(10_000, "w")
    return sorted(t.task_id or "" for t in tasks)


def crash(runner: Scheduler, task: asyncio.Task[None]) -> None:
    """Stop ``runner`` as a crash would: without releasing its lock."""
    runner.leading = False
    task.cancel()


async def test_two_schedulers_fire_each_of_60_slots_once(server: ServerInfo) -> None:
    """Two schedulers race over 60+ slots of 0.1 s; every 0.8 s the leader crashes
    (its lock is left to expire) and a fresh scheduler replaces it (5 times at least)."""
    name = unique_queue("sched")
    clients: list[AsyncFairQueue] = []

    def fresh() -> Scheduler:
        clients.append(AsyncFairQueue.from_url(server.url, name))
        return Scheduler(clients[-1], lock_ttl=0.3)

    q = AsyncFairQueue.from_url(server.url, name)
    schedule = await q.add_schedule(
        schedule_id="tick", name="tick", user_id="ops", interval_seconds=0.1,
        misfire="catch_up",
    )  # fmt: skip
    racing = Schedulers(fresh)
    deadline = time.monotonic() + 30
    try:
        # every 0.8 s the leader crashes, until 60 slots have fired and 5 crashes happened
        while racing.crashes < 5 or ((await q.get_schedule("tick")) or schedule).fired < 60:
            assert time.monotonic() < deadline, f"{racing.crashes} crashes"
            await asyncio.sleep(0.8)
            await racing.crash_leader()
        await asyncio.sleep(0.5)
    finally:
        await racing.stop()
        for client in clients:
            await client.close()
    stored = await q.get_schedule("tick")
    await q.close()
    assert stored is not None
    assert stored.last_fire_at is not None
    sync = FairQueue.from_url(server.url, name)
    try:
        ids = task_ids(sync)
        stats = sync.stats()
    finally:
        sync.close()
    assert len(ids) >= 60
    # every slot from the first to the last, each once: no gap, no duplicate
    first = round(stored.last_fire_at.timestamp() * 1000) - (len(ids) - 1) * 100
    assert ids == sorted(slot_task_id("tick", first + n * 100) for n in range(len(ids)))
    assert stored.fired == len(ids) == stats.counters["pushed"]
    assert stored.skipped == 0


async def test_a_stopped_leader_hands_over_at_once(server: ServerInfo) -> None:
    """A leader that stops wakes a waiting scheduler, which takes the lock at once: far
    sooner than the lock's TTL, which is when the waiting one would look again."""
    ttl = 30.0
    name = unique_queue("sched")
    a, b = AsyncFairQueue.from_url(server.url, name), AsyncFairQueue.from_url(server.url, name)
    first, second = Scheduler(a, lock_ttl=ttl), Scheduler(b, lock_ttl=ttl)
    running = asyncio.ensure_future(first.run())
    await _until(lambda: first.leading)
    standby = asyncio.ensure_future(second.run())
    await asyncio.sleep(0.2)
    assert not second.leading
    assert await a.scheduler_holder() == first.token
    first.stop()
    await running
    stopped = time.monotonic()
    await _until(lambda: second.leading, ttl)
    assert time.monotonic() - stopped < ttl / 3  # not when its wait would have ended
    assert await a.scheduler_holder() == second.token
    # a schedule added while it waits is planned at once (the change wakes it), not at
    # its next renewal (a third of the TTL)
    started = time.monotonic()
    await a.add_schedule(schedule_id="s", name="n", user_id="u", interval_seconds=0.2)
    sync = FairQueue.from_url(server.url, name)
    try:
        await _until(lambda: sync.stats().counters.get("schedule_fired", 0) >= 2, ttl)
    finally:
        sync.close()
    assert time.monotonic() - started < ttl / 6
    second.stop()
    await standby
    assert await a.scheduler_holder() is None
    await a.close()
    await b.close()


async def _until(condition: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_lock_ttl_is_checked() -> None:
    q = AsyncFairQueue.from_url("redis://127.0.0.1:1/0", "x", cluster=False)
    with pytest.raises(ConfigError, match="lock_ttl"):
        Scheduler(q, lock_ttl=0)
    with pytest.raises(ConfigError, match="lock_ttl"):
        Scheduler(q, lock_ttl=True)


@contextlib.contextmanager
def scheduler_processes(
    url: str, queue: str, n: int, ttl: float
) -> Iterator[list[subprocess.Popen[str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRQUE_")}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fairque",
                "scheduler",
                "--url",
                url,
                "--queue",
                queue,
                "--lock-ttl",
                str(ttl),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_killing_the_leader_lets_the_other_fire_within_two_ttls(server: ServerInfo) -> None:
    name = unique_queue("sched-kill")
    q = FairQueue.from_url(server.url, name)
    client = connect(server)
    ttl = 1.0
    try:
        q.add_schedule(Schedule(schedule_id="tick", name="tick", user_id="ops",
                                interval_seconds=0.25))  # fmt: skip
        with scheduler_processes(server.url, name, 2, ttl) as procs:
            pids = {p.pid: p for p in procs}
            deadline = time.monotonic() + 30
            while (holder := q.scheduler_holder()) is None or q.stats().counters.get(
                "schedule_fired", 0
            ) < 2:
                assert time.monotonic() < deadline, [p.communicate() for p in procs if p.poll()]
                time.sleep(0.05)
            leader = int(holder.split(":")[1])
            assert leader in pids
            os.kill(leader, signal.SIGKILL)
            pids[leader].wait(timeout=10)
            killed_at = server_ms(client)
            fired_before = set(task_ids(q))
            deadline = time.monotonic() + 10
            while True:
                new = q.pop_batch(100, "w")
                if new:
                    break
                assert time.monotonic() < deadline
                time.sleep(0.02)
            took = (server_ms(client) - killed_at) / 1000
            assert took <= 2 * ttl, took
            other = q.scheduler_holder()
            assert other is not None
            assert int(other.split(":")[1]) != leader
            # the slot's task is new: nothing fired before the kill fires again
            assert not {t.task_id for t in new} & fired_before
    finally:
        q.close()
        client.close()


async def test_a_leader_whose_lock_is_taken_stops_firing(server: ServerInfo) -> None:
    name = unique_queue("sched")
    q = AsyncFairQueue.from_url(server.url, name)
    runner = Scheduler(q, lock_ttl=0.3)
    running = asyncio.ensure_future(runner.run())
    try:
        await _until(lambda: runner.leading)
        # another scheduler holds the lock now (this one's expired unnoticed)
        client = connect(server)
        try:
            client.set(q.ops.keys.scheduler_lock, "thief", px=3000)
        finally:
            client.close()
        await q.add_schedule(schedule_id="s", name="n", user_id="u", interval_seconds=0.1)
        await _until(lambda: not runner.leading, 2)
        fired = runner.fired
        await asyncio.sleep(0.5)
        assert runner.fired == fired == 0
        assert await q.scheduler_holder() == "thief"
    finally:
        runner.stop()
        await running
    assert await q.scheduler_holder() == "thief"  # not released: it was not this one's
    await q.close()


async def test_an_unreachable_server_is_waited_out(caplog: pytest.LogCaptureFixture) -> None:
    q = AsyncFairQueue.from_url("redis://127.0.0.1:1/0", "x", cluster=False)
    runner = Scheduler(q, lock_ttl=1)
    running = asyncio.ensure_future(runner.run())
    await asyncio.sleep(0.5)
    assert not running.done()
    runner.stop()
    await running
    assert not runner.leading
    assert "the server is unreachable" in caplog.text
    await q.close()


async def test_a_cancelled_scheduler_ends_whenever_the_cancellation_comes(
    server: ServerInfo,
) -> None:
    """A crash is a cancellation: wherever it finds the scheduler (taking the lock,
    firing, blocking on the schedules' list, sleeping out a slot), the run ends."""
    name = unique_queue("sched")
    q = AsyncFairQueue.from_url(server.url, name)
    await q.add_schedule(
        schedule_id="tick", name="tick", user_id="ops", interval_seconds=0.1,
        misfire="skip",
    )  # fmt: skip
    try:
        for i in range(40):
            runner = Scheduler(q, lock_ttl=0.3)
            job = asyncio.ensure_future(runner.run())
            await asyncio.sleep(0.005 * (i % 20))
            crash(runner, job)
            done, _ = await asyncio.wait({job}, timeout=5.0)
            assert done == {job}, f"cancellation {i} did not end the run"
    finally:
        await q.close()
