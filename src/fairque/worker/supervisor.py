"""Run several worker processes and stop them together, gracefully.

The children run in their own session, so a Ctrl-C at the terminal (which signals
the whole foreground process group) reaches the supervisor only; the supervisor
sends each child exactly one SIGTERM per signal it receives. One Ctrl-C drains
every child; a second one stops them at once. Each child knows its supervisor's
pid (``FAIRQUE_SUPERVISOR_PID``) and stops by itself if the supervisor dies.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from types import FrameType

log = logging.getLogger("fairque.supervisor")

#: The environment variable that tells a worker process the pid of its supervisor.
SUPERVISOR_PID_ENV = "FAIRQUE_SUPERVISOR_PID"


def run_processes(commands: Sequence[Sequence[str]], env: Mapping[str, str] | None = None) -> int:
    """Start one process per command, forward SIGTERM/SIGINT as SIGTERM, wait for all.

    Args:
        commands: one command line per child (no secrets: ``ps`` shows them).
        env: variables added to this process's environment for the children.

    Returns:
        0 when every process exited cleanly, else the first non-zero exit code.
    """
    child_env = {**os.environ, **(env or {}), SUPERVISOR_PID_ENV: str(os.getpid())}
    children: list[subprocess.Popen[bytes]] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for cmd in commands:
            children.append(subprocess.Popen(list(cmd), env=child_env, start_new_session=True))
        while any(child.poll() is None for child in children):
            time.sleep(0.1)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    codes = [child.returncode for child in children]
    failed = [c for c in codes if c != 0]
    if failed:
        log.warning("worker processes exited with codes %s", codes)
    return failed[0] if failed else 0


def worker_command(base_args: Sequence[str], worker_id: str) -> list[str]:
    """The command line of one child worker process."""
    return [sys.executable, "-m", "fairque", *base_args, "worker", "--id", worker_id]


def supervisor_pid() -> int | None:
    """The supervisor's pid when this process is one of its workers, else None."""
    value = os.environ.get(SUPERVISOR_PID_ENV, "")
    return int(value) if value.isdigit() else None
