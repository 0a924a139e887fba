"""``fairque serve`` as a separate process (as deployed), for the HTTP benchmarks."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from typing import Any

import httpx


def start_service(
    url: str, port: int, *queues: str, config: str | None = None
) -> subprocess.Popen[bytes]:
    """``fairque [--config CONFIG] --url URL serve QUEUES --port PORT``, once
    ``/healthz`` answers."""
    options = ["--config", config] if config else []
    command = [sys.executable, "-m", "fairque", *options, "--url", url, "serve", *queues]
    process = subprocess.Popen([*command, "--port", str(port)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("fairque serve did not start")
        time.sleep(0.1)


def machine() -> dict[str, Any]:
    """What a report says of the machine it ran on."""
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average": list(os.getloadavg()),
    }
