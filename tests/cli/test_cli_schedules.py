"""``fairque schedule ...`` and ``fairque worker --scheduler``: the real CLI against real
servers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.servers import ServerInfo
from helpers.support import unique_queue
from typer.testing import CliRunner

from fairque import FairQueue, TaskState
from fairque.cli import app

pytestmark = pytest.mark.server_kinds("valkey", "cluster")

HANDLERS = """
import fairque


@fairque.task(name="tick")
def tick(payload):
    return payload
"""

# loaded at the start of the worker's interpreter: names every module first imported
# while the scheduler's thread runs
IMPORT_AUDIT = """
import sys, threading

def _audit(event, args):
    if event == "import" and args[0] not in sys.modules and any(
        t.name == "fairque-scheduler" for t in threading.enumerate()
    ):
        sys.stderr.write(f"imported while the scheduler ran: {args[0]}\\n")

sys.addaudithook(_audit)
"""


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the command line in this process (a dozen runs cost a dozen interpreter
    starts otherwise); the same app, options and exit codes as ``fairque``."""
    result = CliRunner().invoke(app, list(args), env=env)
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


def test_schedule_commands(server: ServerInfo) -> None:
    name = unique_queue("cli-sched")
    base = ["--url", server.url, "--queue", name]
    added = cli(*base, "schedule", "add", "nightly", "--name", "report", "--user", "ops",
                    "--cron", "30 2 * * *", "--tz", "Europe/Berlin", "--payload", '{"a": 1}',
                    "--misfire", "catch_up", "--catch-up-limit", "3")  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("nightly: cron '30 2 * * *' (Europe/Berlin); next ")
    made = cli(*base, "schedule", "add", "tick", "--name", "tick", "--user", "u", "--every",
                   "30", "--paused", "--cost", "2")  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert json.loads(cli(*base, "schedule", "show", "tick").stdout)["cost"] == 2
    other = cli(*base, "schedule", "add", "tick", "--name", "tick", "--user", "u", "--every",
                    "45", "--cost", "2")  # fmt: skip
    assert other.returncode == 1
    assert "already exists with another definition (--replace replaces it)" in other.stderr
    replaced = cli(*base, "schedule", "add", "tick", "--name", "tick", "--user", "u",
                       "--every", "45", "--replace")  # fmt: skip
    assert replaced.returncode == 0, replaced.stderr
    assert replaced.stdout.startswith("tick: every 45 s; next ")

    listed = cli(*base, "schedule", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["schedule_id"]: row for row in json.loads(listed.stdout)}
    assert rows["nightly"]["payload"] == {"a": 1}
    assert rows["nightly"]["misfire"] == "catch_up"
    assert rows["tick"]["interval_seconds"] == 45
    assert rows["tick"]["enabled"] is True
    table = cli(*base, "schedule", "list")
    assert table.returncode == 0
    assert table.stdout.startswith(f"schedules of {name!r} (2)")

    assert cli(*base, "schedule", "pause", "tick").stdout.strip() == "tick: paused"
    shown = cli(*base, "schedule", "show", "tick")
    assert json.loads(shown.stdout)["enabled"] is False
    resumed = cli(*base, "schedule", "resume", "tick")
    assert resumed.stdout.startswith("tick: enabled; next ")
    assert cli(*base, "schedule", "remove", "tick").stdout.strip() == "tick: removed"

    for args in (["remove", "tick"], ["pause", "tick"]):
        gone = cli(*base, "schedule", *args)
        assert gone.returncode == 1, args
        assert "no schedule" in gone.stderr, args
    bad = [
        ["add", "x", "--name", "n", "--user", "u"],  # neither --cron nor --every
        ["add", "x", "--name", "n", "--user", "u", "--cron", "99 * * * *"],
        ["add", "x", "--name", "n", "--user", "u", "--every", "5", "--payload", "{"],
        ["add", "x", "--name", "n", "--user", "u", "--every", "5", "--cost", "0"],
    ]
    for args in bad:
        refused = cli(*base, "schedule", *args)
        assert refused.returncode == 2, (args, refused.stderr)
        assert refused.stderr.startswith("error: "), args
    q = FairQueue.from_url(server.url, name)
    try:
        assert [s.schedule_id for s in q.schedules()] == ["nightly"]
    finally:
        q.close()


def test_help_texts() -> None:
    shown = cli("schedule", "add", "--help")
    assert shown.returncode == 0
    assert "--misfire" in shown.stdout
    assert "--lock-ttl" in cli("scheduler", "--help").stdout
    assert "--scheduler" in cli("worker", "--help").stdout


def test_worker_with_scheduler_fires_and_runs(server: ServerInfo, tmp_path: Path) -> None:
    (tmp_path / "tick_handlers.py").write_text(HANDLERS)
    (tmp_path / "sitecustomize.py").write_text(IMPORT_AUDIT)
    name = unique_queue("cli-sched")
    q = FairQueue.from_url(server.url, name)
    q.add_schedule(schedule_id="tick", name="tick", user_id="ops", interval_seconds=0.2,
                   payload={"hello": 1})  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRQUE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, "-m", "fairque", "worker", "--scheduler", "--url", server.url,
         "--queue", name, "--import", "tick_handlers"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while q.stats().counts[TaskState.FINISHED] < 3:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert q.scheduler_holder() is not None
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    try:
        assert proc.returncode == 0, err
        assert "schedule tick fired" in err
        # the worker's modules are all imported before the scheduler's thread starts:
        # a first import on one thread while another runs once failed the start
        assert "imported while the scheduler ran" not in err, err
        assert q.scheduler_holder() is None  # released on the way out
        assert q.result("tick@" + err.split("task tick@", 1)[1].split()[0]) == {"hello": 1}
    finally:
        q.close()


def test_worker_scheduler_needs_a_server() -> None:
    refused = cli("worker", "--scheduler", "--import", "os")
    assert refused.returncode == 2
    assert "--scheduler needs a server" in refused.stderr


def test_scheduler_takes_its_ttl_from_the_settings(server: ServerInfo, tmp_path: Path) -> None:
    config = tmp_path / "fairque.yaml"
    config.write_text("scheduler:\n  lock_ttl_seconds: 0.5\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRQUE_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fairque", "scheduler", "--url", server.url, "--queue",
         unique_queue("cli-sched"), "--config", str(config)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    first, second = proc.stderr.readline(), proc.stderr.readline()
    proc.send_signal(signal.SIGTERM)
    _, rest = proc.communicate(timeout=30)
    assert proc.returncode == 0, rest
    assert "lock TTL 0.5 s" in first
    assert "leads queue" in second
    assert "no longer leads" in rest
    bad = cli("scheduler", "--url", server.url,
                  env={"FAIRQUE_SCHEDULER__LOCK_TTL_SECONDS": "0"})  # fmt: skip
    assert bad.returncode == 2
    assert "lock_ttl_seconds" in bad.stderr
