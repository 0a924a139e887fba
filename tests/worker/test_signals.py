"""``SIGTERM`` and ``SIGINT`` stop every long-running command cleanly: the command exits,
and no process it started outlives it (an embedded Valkey, worker processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.servers import ServerInfo
from helpers.support import unique_queue

from fairque.cli.embedded import free_port

pytestmark = pytest.mark.server_kinds("valkey")

TESTS = Path(__file__).resolve().parents[1]
#: how long a command may take to start or to stop: a hang guard, not a timing claim
PATIENCE = 90.0


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid``, from the process table."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # the command name is in parentheses and may hold spaces
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _until_serving(port: int, proc: subprocess.Popen[str]) -> None:
    import httpx

    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError("fairque serve did not answer /healthz")


def _commands(server: ServerInfo, tmp_path: Path) -> dict[str, tuple[list[str], str, int]]:
    """Each command: its arguments, the output line that says it runs, the count of
    that line to wait for."""
    queue = unique_queue("sig")
    config = tmp_path / "dispatch.yaml"
    config.write_text(
        f"dispatch:\n  endpoints:\n    - queue: {queue}\n      url: http://127.0.0.1:9/x\n"
    )
    at = ["--url", server.url, "--queue", queue]
    return {
        # no Redis configured: each starts its own embedded Valkey
        "serve": (["serve", "--port", str(free_port())], "fairque serve: dashboard", 1),
        "demo": (["demo"], "noisy-tenant queued", 1),
        "worker": ([*at, "worker", "--import", "helpers.proc_handlers", "--processes", "2"],
                   "serving queue", 2),
        "scheduler": ([*at, "scheduler"], " leads queue ", 1),
        "dispatch": (["--config", str(config), *at, "dispatch"], "serving queue", 1),
    }  # fmt: skip


#: how a shell starts a background job: ``SIGINT`` ignored, which the command inherits
IGNORING_SIGINT = ["sh", "-c", 'trap "" INT; exec "$0" "$@"']


@pytest.mark.parametrize(
    ("sig", "launcher"),
    [(signal.SIGTERM, []), (signal.SIGINT, []), (signal.SIGTERM, IGNORING_SIGINT)],
    ids=["SIGTERM", "SIGINT", "SIGTERM-as-a-background-job"],
)
@pytest.mark.parametrize("command", ["serve", "demo", "worker", "scheduler", "dispatch"])
def test_a_signal_leaves_no_process_behind(
    server: ServerInfo, tmp_path: Path, command: str, sig: signal.Signals, launcher: list[str]
) -> None:
    """Each long-running command exits on the signal (0, or 130 when interrupted) with
    no traceback, and every process it started is gone; a command started with
    ``SIGINT`` ignored (a shell's background job) stops on ``SIGTERM`` as cleanly."""
    args, ready, count = _commands(server, tmp_path)[command]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRQUE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [*launcher, sys.executable, "-m", "fairque", *args],
        env=env, cwd=TESTS, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True, text=True,
    )  # fmt: skip
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if sum(ready in got for got in lines) >= count:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert seen.wait(PATIENCE), "".join(lines)
        if command == "serve":  # serving: its HTTP answers (a stop during start-up is
            # another case, not this test's)
            _until_serving(int(args[args.index("--port") + 1]), proc)
        started = _descendants(proc.pid)
        if command in ("serve", "demo"):
            assert started, "the embedded server is a child process"
        if command == "worker":
            assert len(started) >= 2
        os.kill(proc.pid, sig)  # what a process manager does: the main process alone
        code = proc.wait(timeout=PATIENCE)
        assert code in (0, 130), "".join(lines)
        deadline = time.monotonic() + PATIENCE
        while any(_alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [pid for pid in started if _alive(pid)] == [], "".join(lines)
        assert "Traceback" not in "".join(lines)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(timeout=5)
