"""Run several worker processes and forward stop signals to them."""

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


def run_processes(commands: Sequence[Sequence[str]], env: Mapping[str, str] | None = None) -> int:
    """Start one process per command, forward SIGTERM/SIGINT, wait for all of them.

    Returns:
        0 when every process exited cleanly, else the first non-zero exit code.
    """
    children = [subprocess.Popen(list(cmd), env={**os.environ, **(env or {})}) for cmd in commands]

    def forward(signum: int, frame: FrameType | None) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
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
