"""``fairque constraint ...`` and the ``constraints:`` section: the real CLI against real
servers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers.servers import ServerInfo
from helpers.support import unique_queue
from test_cli import run_cli
from test_cli_operator import python_path
from typer.testing import CliRunner

from fairque import FairQueue, TaskState
from fairque.cli import app

pytestmark = pytest.mark.server_kinds("valkey", "cluster")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line run in this process (same app, options and exit codes)."""
    result = CliRunner().invoke(app, list(args))
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


def test_constraint_commands(server: ServerInfo) -> None:
    name = unique_queue("cli-con")
    base = ["--url", server.url, "--queue", name]
    added = cli(*base, "constraint", "add", "mail", "--name", "mail.*", "--rate", "5",
                "--per", "2", "--burst", "2", "--concurrency", "3", "--per-user",
                "--payload", '{"region": ["eu"]}', "--user", "a", "--user", "b")  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("mail: 5 per 2 s (burst 2), 3 at once per user; name mail.*")
    listed = cli(*base, "constraint", "list")
    assert listed.returncode == 0
    assert "mail" in listed.stdout
    assert "running" in listed.stdout
    with FairQueue.from_url(server.url, name) as q:
        q.enqueue("mail.send", {"region": "eu"}, user_id="a")
        assert q.pop(worker_id="w") is not None
    as_json = json.loads(cli(*base, "constraint", "list", "--json").stdout)
    assert as_json[0]["id"] == "mail"
    assert as_json[0]["running"] == 1
    shown = json.loads(cli(*base, "constraint", "show", "mail").stdout)
    assert shown["buckets"] == {"mail:a": {"running": 1, "parked": 0}}
    assert cli(*base, "constraint", "show", "nope").returncode == 1
    bad = cli(*base, "constraint", "add", "x", "--name", "n")  # no limit
    assert bad.returncode == 2
    assert "rate or a concurrency" in bad.stderr
    assert cli(*base, "constraint", "add", "x", "--rate", "1", "--payload", "{").returncode == 2
    assert cli(*base, "constraint", "remove", "mail").returncode == 0
    assert cli(*base, "constraint", "remove", "mail").returncode == 1
    assert "(0)" in cli(*base, "constraint", "list").stdout


HANDLERS = """
import fairque


@fairque.task(name="job")
def job(payload):
    return payload
"""


def test_the_config_section_applied_by_the_cli_and_the_worker(
    server: ServerInfo, tmp_path: Path
) -> None:
    name = unique_queue("cli-con")
    config = tmp_path / "worker.yaml"
    config.write_text("constraints:\n  jobs:\n    name: 'job*'\n    concurrency: 2\n")
    base = ["--url", server.url, "--queue", name, "--config", str(config)]
    with FairQueue.from_url(server.url, name) as q:
        q.define_constraint(id="old", rate=1)
        applied = cli(*base, "constraint", "apply", "--prune")
        assert applied.returncode == 0, applied.stderr
        assert [i.constraint.id for i in q.constraints()] == ["jobs"]
        q.remove_constraint("jobs")
        pushed = q.enqueue("job", 1, user_id="u")  # pushed before the worker defines it
        (tmp_path / "con_handlers.py").write_text(HANDLERS)
        ran = run_cli("worker", *base, "--import", "con_handlers", "--burst",
                      env=python_path(tmp_path))  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert [i.constraint.id for i in q.constraints()] == ["jobs"]
        done = q.get(pushed.task_id or "")
        assert done is not None
        assert done.state == TaskState.FINISHED
    config.write_text("constraints:\n  - id: bad\n    rate: 0\n")
    refused = cli(*base, "constraint", "apply")
    assert refused.returncode == 2
    assert "constraints" in refused.stderr
