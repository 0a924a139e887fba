"""The ``fairque`` command against real servers: in this process through its entry point
(``support.run_here``), and as a real subprocess (``run_cli``) where the process itself
is what is tested: exit codes and messages of ``python -m fairque``, no server at all."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.servers import ServerInfo
from helpers.support import run_here, unique_queue

from fairque import FairQueue, TaskState

# the command line's own behaviour: the engine's tests cover the standalone Redis kind
pytestmark = pytest.mark.server_kinds("valkey", "cluster")


def run_cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:  # fmt: skip
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FAIRQUE_")}
    clean.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "fairque", *args],
        env=clean,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def cli_queue(server: ServerInfo) -> tuple[list[str], FairQueue]:
    queue = unique_queue("cli")
    return ["--url", server.url, "--queue", queue], FairQueue.from_url(server.url, queue)


def test_enqueue_show_cancel_retry_purge(cli_queue: tuple[list[str], FairQueue]) -> None:
    base, q = cli_queue
    made = run_here(*base, "enqueue", "send_email", '{"to": "a@example.com"}', "--user", "alice",
                   "--priority", "5", "--task-id", "mail-1")  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == "mail-1"
    task = q.get("mail-1")
    assert task is not None
    assert task.payload == {"to": "a@example.com"}
    assert task.priority == 5

    shown = run_here(*base, "task", "mail-1", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["user_id"] == "alice"
    table = run_here(*base, "task", "mail-1")
    assert "send_email" in table.stdout

    assert run_here(*base, "cancel", "mail-1").returncode == 0
    again = run_here(*base, "cancel", "mail-1")
    assert again.returncode == 1
    assert "already ended" in again.stderr
    assert run_here(*base, "retry", "mail-1").returncode == 0
    assert q.get("mail-1").state == TaskState.QUEUED  # type: ignore[union-attr]
    not_failed = run_here(*base, "retry", "mail-1")
    assert not_failed.returncode == 1
    assert "InvalidTransition" in not_failed.stderr

    refused = run_here(*base, "purge", stdin="n\n")
    assert refused.returncode == 1
    assert q.get("mail-1") is not None
    purged = run_here(*base, "purge", "--yes")
    assert purged.returncode == 0
    assert "purged 1 task(s)" in purged.stdout
    assert q.get("mail-1") is None
    q.close()


def test_enqueue_from_file_and_status(
    cli_queue: tuple[list[str], FairQueue], tmp_path: Path
) -> None:
    base, q = cli_queue
    lines = [
        json.dumps({"name": "job", "user_id": f"user-{i % 3}", "payload": i}) for i in range(1200)
    ]
    lines.insert(5, "")
    lines.append(json.dumps({"name": "later", "user_id": "z", "delay": 60}))
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(lines) + "\n")
    made = run_here(*base, "enqueue", "--file", str(path))
    assert made.returncode == 0, made.stderr
    assert "enqueued 1201 task(s)" in made.stdout
    stats = q.stats()
    assert stats.counts[TaskState.QUEUED] == 1200
    assert stats.counts[TaskState.SCHEDULED] == 1

    status = run_here(*base, "status", "--json")
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert doc["stats"]["counts"]["QUEUED"] == 1200
    assert doc["workers"] == []
    human = run_here(*base, "status", "--users", "2")
    assert human.returncode == 0
    assert "busiest users" in human.stdout
    assert "QUEUED" in human.stdout
    q.close()


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"name": "a"}'], "user_id"),
        (["not json"], "not valid JSON"),
        (["[1, 2]"], "JSON object"),
        (['{"name": "a", "user_id": "u", "colour": 1}'], "unknown field"),
        (['{"name": "a", "user_id": "u", "delay": -1}'], "delay"),
        ([""], "no tasks"),
    ],
)
def test_bad_task_file_pushes_nothing(
    cli_queue: tuple[list[str], FairQueue], tmp_path: Path, lines: list[str], message: str
) -> None:
    base, q = cli_queue
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"name": "ok", "user_id": "u"}\n' + "\n".join(lines) + "\n" if lines != [""] else ""
    )
    result = run_here(*base, "enqueue", "--file", str(path))
    assert result.returncode == 2
    assert message in result.stderr
    assert q.stats().total == 0
    q.close()


def test_usage_errors_have_exit_code_2(
    cli_queue: tuple[list[str], FairQueue], tmp_path: Path
) -> None:
    base, q = cli_queue
    bad_json = run_here(*base, "enqueue", "job", "{oops", "--user", "u")
    assert bad_json.returncode == 2
    assert "not valid JSON" in bad_json.stderr
    missing_user = run_here(*base, "enqueue", "job")
    assert missing_user.returncode == 2
    bad_priority = run_here(*base, "enqueue", "job", "--user", "u", "--priority", "9")
    assert bad_priority.returncode == 2
    assert "priority" in bad_priority.stderr
    both = run_here(*base, "enqueue", "job", "--file", str(tmp_path / "x"))
    assert both.returncode == 2
    unknown = run_here(*base, "task", "nope")
    assert unknown.returncode == 1
    assert "no task 'nope'" in unknown.stderr
    assert run_here(*base, "cancel", "nope").returncode == 1
    config = tmp_path / "worker.yaml"
    config.write_text("worker:\n  max_concurrent_tasks: lots\n")
    bad_config = run_here("--config", str(config), *base, "status")
    assert bad_config.returncode == 2
    assert "worker.max_concurrent_tasks = 'lots'" in bad_config.stderr
    bad_import = run_here(*base, "worker", "--import", "no.such.module")
    assert bad_import.returncode == 2
    assert "no.such.module" in bad_import.stderr
    assert q.stats().total == 0
    q.close()


def test_commands_without_a_server() -> None:
    no_url = run_cli("status")
    assert no_url.returncode == 2
    assert "no Redis configured" in no_url.stderr
    refused = run_cli("--url", "redis://127.0.0.1:1/0", "status")
    assert refused.returncode == 1
    assert "cannot connect" in refused.stderr


def test_demo_with_the_embedded_server() -> None:
    result = run_cli("demo", "--quick", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "started an embedded Valkey" in result.stderr
    assert "summary" in result.stdout
    # without a terminal: no bar running into the next line
    assert "flood drained: 400 of 400\n" in result.stdout
    assert re.search(r"^summary: ", result.stdout, re.M)
    assert "tenant-04" in result.stdout
    assert "noisy-tenant" in result.stdout


def test_help_lists_every_command() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    commands = ("worker", "enqueue", "status", "task", "result", "cancel", "retry", "purge",
                "users", "limits", "demo")  # fmt: skip
    for command in commands:
        assert command in result.stdout
    assert "Exit codes: 0 success; 1 the command failed" in " ".join(result.stdout.split())


def test_no_help_text_loses_a_bracket_to_markup() -> None:
    """Help is rendered with rich markup, where ``[default: x]`` is a tag and vanishes
    (leaving "Port ."); defaults are given with ``show_default`` instead."""
    import typer.main

    from fairque.cli import app

    group: Any = typer.main.get_command(app)
    names = [*group.commands, "schedule add", "constraint add"]
    assert len(names) > 15
    for name in names:
        help_text = run_here(*name.split(), "--help").stdout
        flat = " ".join(help_text.replace("│", " ").split())
        assert re.search(r"\w \.(\s|$)", flat) is None, (name, flat)


def test_serve_on_a_busy_port_is_one_error_line(server: ServerInfo) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_here("--url", server.url, "serve", "--port", str(port))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use (--port, server.port)"
    ]
    assert "fairque serve:" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    "args",
    [
        "schedule add s n --user u --every 0",
        "schedule add s n --user u --every 10 --grace -1",
        "schedule add s n --user u --every 10 --start-at garbage",
        "constraint add c --rate 0",
        "constraint add c --rate 1 --burst 0",
        "constraint add c --concurrency 0",
        "scheduler --lock-ttl 0",
        "worker --concurrency 0",
        "status --interval 0",
        "tasks --limit 0",
        "nosuchcommand",
        "schedule add",
    ],
)
def test_a_bad_option_is_one_error_line(args: str) -> None:
    """Options the command line checks itself (ranges, types, a missing argument) read
    as every other failure: one ``error:`` line naming the help, exit code 2."""
    result = run_here("--url", "redis://127.0.0.1:1/0", *args.split())
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert lines[0].endswith("--help)")
    assert "Usage:" not in result.stderr + result.stdout


def test_version_prints_the_package_version() -> None:
    from fairque import __version__

    shown = run_here("--version")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"fairque {__version__}"
