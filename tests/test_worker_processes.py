"""Real worker processes: SIGKILL recovery, several processes, graceful SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from proc_handlers import runs_key
from servers import ServerInfo, SyncClient
from support import unique_queue

from fairque import FairQueue, Task, TaskState

TESTS = Path(__file__).parent


def worker_env(server: ServerInfo, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRQUE_")}
    env.update(
        FAIRQUE_URL=server.url,
        FAIRQUE_REDIS__CLUSTER="true" if server.cluster else "false",
        PYTHONPATH=os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]),
        **extra,
    )
    return env


@pytest.fixture
def spawn(server: ServerInfo) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start ``fairque worker`` processes; kill any left at the end of the test."""
    started: list[subprocess.Popen[bytes]] = []

    def start(queue: str, *args: str, **env: str) -> subprocess.Popen[bytes]:
        cmd = [
            sys.executable,
            "-m",
            "fairque",
            "--queue",
            queue,
            "worker",
            "--import",
            "proc_handlers",
            *args,
        ]
        proc = subprocess.Popen(cmd, env=worker_env(server, **env), cwd=TESTS)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def completed(q: FairQueue) -> int:
    return q.stats().counters.get("completed", 0)


def runs(client: SyncClient, queue: str) -> dict[str, int]:
    raw: dict[Any, Any] = client.hgetall(runs_key(queue))
    return {k.decode(): int(v) for k, v in raw.items()}


def test_sigkill_mid_flight_loses_nothing_and_completes_once(
    server: ServerInfo, redis_client: SyncClient, spawn: Callable[..., subprocess.Popen[bytes]]
) -> None:
    queue = unique_queue("kill")
    q = FairQueue.from_url(server.url, queue, retry_base_seconds=0)
    tasks = q.push_many(
        Task(user_id=f"u{i % 7}", name="record", payload={"sleep": 0.02}) for i in range(200)
    )
    lease = {"FAIRQUE_WORKER__LEASE_SECONDS": "1"}
    first = spawn(queue, "--concurrency", "8", "--id", "doomed", **lease)
    wait_until(lambda: completed(q) >= 20, 30, "the first worker to make progress")
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert q.stats().counts[TaskState.STARTED] > 0  # it died holding leases
    spawn(queue, "--concurrency", "8", "--id", "rescuer", **lease)
    wait_until(lambda: completed(q) == 200, 60, "every task to finish")
    time.sleep(0.3)
    stats = q.stats()
    assert stats.counters["completed"] == 200
    assert stats.counts[TaskState.FINISHED] == 200
    assert stats.counts[TaskState.STARTED] == stats.counts[TaskState.QUEUED] == 0
    for t in tasks:
        got = q.get(t.task_id or "")
        assert got is not None
        assert got.state == TaskState.FINISHED
    executed = runs(redis_client, queue)
    assert set(executed) == {t.task_id for t in tasks}
    # at most the tasks in flight at the kill can have run twice
    assert sum(executed.values()) <= 200 + 8
    q.close()


def test_two_processes_drain_2000_tasks_each_exactly_once(
    server: ServerInfo, redis_client: SyncClient, spawn: Callable[..., subprocess.Popen[bytes]]
) -> None:
    queue = unique_queue("multi")
    q = FairQueue.from_url(server.url, queue)
    for start in range(0, 2000, 500):
        q.push_many(
            Task(user_id=f"user-{i % 25}", name="record") for i in range(start, start + 500)
        )
    supervisor = spawn(queue, "--processes", "2", "--concurrency", "16", "--id", "pair")
    wait_until(lambda: completed(q) == 2000, 90, "2000 completions")
    workers = {w.worker_id for w in q.workers()}
    assert {"pair-1", "pair-2"} <= workers
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(timeout=30) == 0
    executed = runs(redis_client, queue)
    assert len(executed) == 2000
    assert set(executed.values()) == {1}
    counters = q.stats().counters
    assert counters["completed"] == 2000
    assert "reclaimed" not in counters
    assert q.workers() == []
    q.close()


def test_sigterm_finishes_running_tasks_and_leaves_the_rest_queued(
    server: ServerInfo, redis_client: SyncClient, spawn: Callable[..., subprocess.Popen[bytes]]
) -> None:
    queue = unique_queue("term")
    q = FairQueue.from_url(server.url, queue)
    long = q.push_many(
        Task(user_id=f"u{i}", name="record", payload={"sleep": 1.0}) for i in range(4)
    )
    rest = q.push_many(Task(user_id="later", name="record") for _ in range(10))
    proc = spawn(queue, "--concurrency", "4", FAIRQUE_WORKER__SHUTDOWN_GRACE_SECONDS="20")
    wait_until(lambda: q.stats().counts[TaskState.STARTED] == 4, 30, "four tasks to start")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    for t in long:
        got = q.get(t.task_id or "")
        assert got is not None
        assert got.state == TaskState.FINISHED
    for t in rest:
        got = q.get(t.task_id or "")
        assert got is not None
        assert got.state == TaskState.QUEUED
        assert got.retry_count == 0
    assert len(runs(redis_client, queue)) == 4
    q.close()


def test_sigterm_after_grace_gives_tasks_back_without_a_retry(
    server: ServerInfo, spawn: Callable[..., subprocess.Popen[bytes]]
) -> None:
    queue = unique_queue("grace")
    q = FairQueue.from_url(server.url, queue)
    tasks = q.push_many(
        Task(user_id=f"u{i}", name="record", payload={"sleep": 30}) for i in range(2)
    )
    proc = spawn(queue, "--concurrency", "2", FAIRQUE_WORKER__SHUTDOWN_GRACE_SECONDS="0.2")
    wait_until(lambda: q.stats().counts[TaskState.STARTED] == 2, 30, "two tasks to start")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    for t in tasks:
        got = q.get(t.task_id or "")
        assert got is not None
        assert got.state == TaskState.QUEUED
        assert got.retry_count == 0
    assert q.stats().counters["requeued"] == 2
    q.close()
