"""``fairque worker`` serving several queues, from the command line, a YAML file or the
environment; a stop drains them all. Real CLI, real servers (on the cluster the
queues live on different nodes)."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from helpers.servers import ServerInfo
from helpers.support import apart
from test_cli import run_cli
from test_cli_operator import python_path, read_until, start_worker
from typer.testing import CliRunner

from fairque import FairQueue, TaskState, WorkerInfo
from fairque.cli.commands import app

pytestmark = pytest.mark.server_kinds("valkey", "cluster")

HANDLERS = """
import pathlib
import time
import uuid

import fairque


@fairque.task(name="nap")
def nap(payload):
    (pathlib.Path(__file__).parent / f"started-{uuid.uuid4().hex}").touch()  # beside it
    time.sleep(payload)
    return payload
"""


@pytest.fixture
def two(server: ServerInfo) -> Iterator[list[FairQueue]]:
    queues = [FairQueue.from_url(server.url, name) for name in apart(2)]
    yield queues
    for q in queues:
        q.close()


@pytest.fixture
def handlers(tmp_path: Path) -> Path:
    (tmp_path / "nap_handlers.py").write_text(HANDLERS)
    return tmp_path


def push(queues: list[FairQueue], n: int, seconds: float) -> list[tuple[FairQueue, str]]:
    return [
        (q, q.enqueue("nap", seconds, user_id=f"u{i}").task_id or "")
        for q in queues
        for i in range(n)
    ]


def states(pushed: list[tuple[FairQueue, str]]) -> set[TaskState | None]:
    found = set()
    for q, task_id in pushed:
        task = q.get(task_id)
        found.add(None if task is None else task.state)
    return found


def test_a_worker_serves_several_queues_and_a_sigterm_drains_them(
    server: ServerInfo, two: list[FairQueue], handlers: Path
) -> None:
    a, b = two
    proc = start_worker("worker", "--url", server.url, "--queue", a.queue, "--queue", b.queue,
                        "--import", "nap_handlers", "--id", "w-two", "--concurrency", "4",
                        cwd=handlers)  # fmt: skip
    try:
        lines = read_until(proc, "serving queues")
        pushed = push(two, 2, 0.6)  # both queues at once: four tasks, four slots
        # every handler has begun (a task the server leased but whose reply the worker
        # reads after the signal is given back unrun: that is a drain too, not this test)
        deadline = time.monotonic() + 30
        while len(list(handlers.glob("started-*"))) < len(pushed):
            assert time.monotonic() < deadline, states(pushed)
            time.sleep(0.02)
        assert states(pushed) == {TaskState.STARTED}
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    banner = lines[0]
    assert f"worker w-two on queues '{a.queue}', '{b.queue}' (round robin across them)" in banner
    assert states(pushed) == {TaskState.FINISHED}  # the running tasks were let finish
    for q in two:
        assert "w-two" not in {w.worker_id for w in q.workers()}


def test_the_queues_from_a_file_or_the_environment(
    server: ServerInfo, two: list[FairQueue], handlers: Path, tmp_path: Path
) -> None:
    a, b = two
    config = tmp_path / "worker.yaml"
    config.write_text(f"worker:\n  queues: [{a.queue}, {b.queue}]\n")
    env = python_path(handlers)
    pushed = push(two, 3, 0)
    by_file = run_cli("worker", "--url", server.url, "--config", str(config), "--import",
                      "nap_handlers", "--burst", env=env)  # fmt: skip
    assert by_file.returncode == 0, by_file.stderr
    assert f"on queues '{a.queue}', '{b.queue}'" in by_file.stderr
    assert states(pushed) == {TaskState.FINISHED}

    pushed = push(two, 3, 0)
    listed = f'["{b.queue}", "{a.queue}"]'
    by_env = run_cli("worker", "--url", server.url, "--import", "nap_handlers", "--burst",
                     "--processes", "2", env={**env, "FAIRQUE_WORKER__QUEUES": listed})  # fmt: skip
    assert by_env.returncode == 0, by_env.stderr
    assert by_env.stderr.count(f"on queues '{b.queue}', '{a.queue}'") == 2  # each child
    assert states(pushed) == {TaskState.FINISHED}

    # one --queue on the command line wins over the file's list
    pushed = push([b], 2, 0)
    pushed_a = push([a], 1, 0)
    one = run_cli("worker", "--url", server.url, "--config", str(config), "--queue", b.queue,
                  "--import", "nap_handlers", "--burst", env=env)  # fmt: skip
    assert one.returncode == 0, one.stderr
    assert f"on queue '{b.queue}'" in one.stderr
    assert states(pushed) == {TaskState.FINISHED}
    assert states(pushed_a) == {TaskState.QUEUED}


def test_several_queues_are_for_the_worker_only(server: ServerInfo, tmp_path: Path) -> None:
    runner = CliRunner()
    before = runner.invoke(app, ["--url", server.url, "--queue", "a", "--queue", "b", "users"])
    assert before.exit_code == 2
    assert "--queue was given 2 times (a, b); this command works on one queue" in before.stderr
    after = runner.invoke(app, ["tasks", "-s", "FAILED", "--url", server.url, "-q", "a", "-q", "b"])
    assert after.exit_code == 2
    assert "only 'worker' and 'status' take several" in after.stderr
    config = tmp_path / "bad.yaml"
    config.write_text("worker:\n  queues: [a, a]\n")
    twice = runner.invoke(app, ["worker", "--url", server.url, "--config", str(config)])
    assert twice.exit_code == 2
    assert "worker.queues" in twice.stderr
    assert "a queue is named twice" in twice.stderr
    config.write_text("worker:\n  queues: ['a{b}']\n")
    braces = runner.invoke(app, ["worker", "--url", server.url, "--config", str(config)])
    assert braces.exit_code == 2
    assert "must not contain braces" in braces.stderr


def test_status_of_several_queues(server: ServerInfo, two: list[FairQueue]) -> None:
    a, b = two
    runner = CliRunner()
    alone = ["status", "--url", server.url, "-q", b.queue]
    one = runner.invoke(app, alone, env={"COLUMNS": "220"})
    assert one.exit_code == 0, one.output
    assert "queues" not in one.stdout  # one queue, no worker of several: no such column
    now = datetime.now(timezone.utc)
    for q, worker_id, served in (
        (a, "w-both", [a.queue, b.queue]), (b, "w-both", [a.queue, b.queue]), (a, "w-only-a", []),
    ):  # fmt: skip
        info = WorkerInfo(worker_id=worker_id, queue=q.queue, host="h", pid=1, started_at=now,
                          concurrency=4, queues=served)  # fmt: skip
        q.register_worker(info, ttl_seconds=60)
    a.enqueue("nap", 0, user_id="u")
    args = ["status", "--url", server.url, "-q", a.queue, "-q", b.queue]
    shown = runner.invoke(app, args, env={"COLUMNS": "220"})
    assert shown.exit_code == 0, shown.output
    text = shown.stdout
    assert f"queue '{a.queue}'" in text
    assert f"queue '{b.queue}'" in text
    assert "queues" in text
    assert text.count(f"{a.queue}, {b.queue}") == 2  # w-both, in each queue's table
    docs = json.loads(runner.invoke(app, [*args, "--json"]).stdout)["queues"]
    assert [d["stats"]["queue"] for d in docs] == [a.queue, b.queue]
    assert [sorted(w["worker_id"] for w in d["workers"]) for d in docs] == [
        ["w-both", "w-only-a"],
        ["w-both"],
    ]
    assert docs[0]["stats"]["counts"]["QUEUED"] == 1
    one = runner.invoke(app, alone, env={"COLUMNS": "220"})
    assert one.exit_code == 0, one.output
    # one queue shown: a worker that serves others too says which
    assert "queues" in one.stdout
    assert f"{a.queue}, {b.queue}" in one.stdout
