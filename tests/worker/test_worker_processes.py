"""Real worker processes: SIGKILL recovery, several processes, graceful SIGTERM."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.proc_handlers import runs_key, started_key, stopped_key
from helpers.servers import ServerInfo, SyncClient
from helpers.support import TESTS, unique_queue, worker_env

from fairque import FairQueue, Task, TaskState
from fairque.cli.embedded import EmbeddedServer, free_port

# the command line's own behaviour: the engine's tests cover the standalone Redis kind
pytestmark = pytest.mark.server_kinds("valkey", "cluster")


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
            "helpers.proc_handlers",
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
    """Tasks FINISHED (the truth; the 'completed' counter trails it by a flush)."""
    return q.stats().counts[TaskState.FINISHED]


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
    # counted by the workers' processes: never twice; the killed one's last second lost
    assert stats.counters["completed"] <= 200
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
    # (no lease ahead: the four leases are the four long tasks' running handlers, not a
    # task waiting for a slot, which the shutdown would give back)
    proc = spawn(queue, "--concurrency", "4", FAIRQUE_WORKER__SHUTDOWN_GRACE_SECONDS="20",
                 FAIRQUE_WORKER__LEASE_AHEAD="0")  # fmt: skip
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


# ---------------------------------------------------------------------------- supervision
SECRET = "s3cret-pw"


@pytest.fixture
def password_server(tmp_path: Path) -> Iterator[str]:
    """A private Valkey where only user ``fq`` (password ``SECRET``) may do anything."""
    acl = ["--user", "default", "on", "nopass", "-@all", "+ping"]
    acl += ["--user", "fq", "on", f">{SECRET}", "~*", "&*", "+@all"]
    server = EmbeddedServer(workdir=tmp_path / "server", extra_args=acl)
    server.start()
    yield f"redis://fq:{SECRET}@127.0.0.1:{server.port}/0"
    server.stop()


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def start_supervisor(
    url: str, queue: str, log: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``fairque worker --processes 2`` in its own session, as a shell starts it."""
    extra = env or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRQUE_")}
    env.update(FAIRQUE_URL=url, PYTHONPATH=os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]))
    env.update(extra)
    cmd = [sys.executable, "-m", "fairque", "--queue", queue, "worker", "--processes", "2",
           "--import", "helpers.proc_handlers", "--id", "pair", *args]  # fmt: skip
    with log.open("wb") as out:
        return subprocess.Popen(
            cmd, env=env, cwd=TESTS, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def test_one_ctrl_c_drains_every_child_and_no_secret_is_shown(
    password_server: str, tmp_path: Path
) -> None:
    queue = unique_queue("ctrlc")
    q = FairQueue.from_url(password_server, queue, cluster=False)
    log = tmp_path / "worker.log"
    sup = start_supervisor(
        password_server, queue, log, "--concurrency", "2", "--log-level", "DEBUG"
    )  # DEBUG: the start lines
    try:
        wait_until(lambda: len(q.workers()) == 2, 30, "two registered workers")
        children = children_of(sup.pid)
        assert len(children) == 2
        for pid in [sup.pid, *children]:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode()
            assert SECRET not in cmdline
            assert "--url" not in cmdline.split("\0")
        tasks = q.push_many(
            Task(user_id=f"u{i}", name="record", payload={"sleep": 1.5}) for i in range(4)
        )
        wait_until(lambda: q.stats().counts[TaskState.STARTED] == 4, 30, "four tasks to start")
        # leased is not yet running: tasks a lease call brings back after a stop request
        # are given back unrun, so the interrupt waits for the four handlers to start
        wait_until(
            lambda: log.read_text().count(" started: record ") == 4, 30, "four handlers to start"
        )
        os.killpg(sup.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        assert sup.wait(timeout=30) == 0
        for t in tasks:
            got = q.get(t.task_id or "")
            assert got is not None
            assert (got.state, got.retry_count) == (TaskState.FINISHED, 0)
        assert q.stats().counters.get("requeued", 0) == 0
        assert q.workers() == []
    finally:
        if sup.poll() is None:
            os.killpg(sup.pid, signal.SIGKILL)
            sup.wait()
        q.close()
    assert SECRET not in log.read_text()


def test_children_stop_by_themselves_when_the_supervisor_dies(
    password_server: str, tmp_path: Path
) -> None:
    queue = unique_queue("orphan")
    q = FairQueue.from_url(password_server, queue, cluster=False)
    # a child looks for its supervisor before each heartbeat (every 10 s by default)
    beat = {"FAIRQUE_WORKER__HEARTBEAT_INTERVAL_SECONDS": "0.5"}
    sup = start_supervisor(password_server, queue, tmp_path / "worker.log", env=beat)
    try:
        wait_until(lambda: len(q.workers()) == 2, 30, "two registered workers")
        children = children_of(sup.pid)
        sup.kill()
        sup.wait()
        wait_until(lambda: q.workers() == [], 30, "the orphaned workers to unregister")
        gone = [Path(f"/proc/{pid}") for pid in children]
        wait_until(lambda: not any(p.exists() for p in gone), 10, "the children to exit")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sup.pid, signal.SIGKILL)
        q.close()


def test_cli_waits_for_the_server_then_says_so_in_one_line(tmp_path: Path) -> None:
    url = f"redis://fq:{SECRET}@127.0.0.1:{free_port()}/0"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRQUE_")}
    env.update(FAIRQUE_URL=url, FAIRQUE_REDIS__CLUSTER="false")
    wait = 1
    cmd = [sys.executable, "-m", "fairque", "worker", "--wait-for-server", str(wait)]
    begin = time.monotonic()
    # it gives up: waiting on would end in subprocess's timeout (TimeoutExpired)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60 * wait)
    assert done.returncode == 1
    assert time.monotonic() - begin >= wait
    output = done.stdout + done.stderr
    assert SECRET not in output
    assert "Traceback" not in output
    assert "cannot reach the server; waiting up to 1s" in output


def test_cli_worker_waits_for_a_server_that_starts_late(tmp_path: Path) -> None:
    """With no cluster setting the worker asks the server what it is: that question
    waits for the server too, instead of ending the worker at once."""
    server = EmbeddedServer(port=free_port(), workdir=tmp_path / "late")
    queue = unique_queue()
    env = worker_env(ServerInfo("valkey", server.url, cluster=False))
    del env["FAIRQUE_REDIS__CLUSTER"]
    cmd = [sys.executable, "-m", "fairque", "--queue", queue, "worker", "--import",
           "helpers.proc_handlers", "--wait-for-server", "30"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, cwd=TESTS, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        # start the server only once the worker has found it missing and said so
        wait_until(
            lambda: any("waiting for the server" in line for line in lines),
            30,
            "the worker to say it waits for the server",
        )
        assert proc.poll() is None  # still waiting
        server.start()
        with FairQueue.from_url(server.url, queue) as q:
            t = q.enqueue("record", {"sleep": 0}, user_id="u")
            wait_until(
                lambda: (
                    (got := q.get(t.task_id or "")) is not None and got.state == TaskState.FINISHED
                ),
                30,
                "the late server's task to finish",
            )
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        reader.join(timeout=10)
        assert "Traceback" not in "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        server.stop()


def test_a_cancel_from_another_process_stops_running_handlers_within_a_second(
    server: ServerInfo, spawn: Callable[..., subprocess.Popen[bytes]]
) -> None:
    """Three worker processes run 20 tasks (async and sync handlers, none returning by
    itself); each is canceled from this process in turn. Each handler stops within a
    second of its cancel (p99 of the 20: their maximum), with no heartbeat due (a 30 s
    lease beats every 10 s); each task ends CANCELED, never retried, and the task run
    beside them finishes once."""
    queue = unique_queue("stop")
    q = FairQueue.from_url(server.url, queue, cluster=server.cluster)
    client = q.client
    spawn(queue, "--processes", "3", "--concurrency", "8", "--id", "trio",
          FAIRQUE_WORKER__LEASE_AHEAD="0")  # fmt: skip
    try:
        ids = [
            str(q.enqueue(f"stoppable_{'async' if i % 2 else 'sync'}", None, user_id=f"u{i % 5}")
                .task_id)
            for i in range(20)
        ]  # fmt: skip
        wait_until(lambda: client.llen(started_key(queue)) == 20, 60, "20 running handlers")
        holders = {task.worker_id for task in map(q.get, ids) if task is not None}
        assert len(holders) == 3, holders  # 20 tasks over 3 x 8 slots, none leased ahead
        latencies, calls = [], []
        for task_id in ids:
            sent, began = time.time(), time.monotonic()
            assert q.cancel(task_id)
            calls.append(time.monotonic() - began)
            wait_until(lambda: client.hexists(stopped_key(queue), task_id), 10, "the stop")  # noqa: B023
            latencies.append(float(client.hget(stopped_key(queue), task_id) or 0) - sent)
        bystander = q.enqueue("record", {"sleep": 0}, user_id="b")
        assert q.result(str(bystander.task_id), timeout=30) == 1
        # within a second: a loaded machine's margin is the cancel calls' own time
        assert max(latencies) <= 1.0 + 10 * max(calls), (sorted(latencies), max(calls))
        time.sleep(0.5)  # any late report or retry would have landed by now
        for task_id in ids:
            task = q.get(task_id)
            assert task is not None
            assert (task.state, task.retry_count) == (TaskState.CANCELED, 0)
        assert client.hget(runs_key(queue), str(bystander.task_id)) == b"1"
        print(json.dumps({"cancel_to_stop_seconds": {
            "p50": sorted(latencies)[9], "max": max(latencies)}}))  # fmt: skip
    finally:
        q.close()
