"""``fairque demo --ui``: the dashboard serves the demo's queue while the flood drains."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import subprocess
import sys
import threading
import time

import httpx
import pytest
from helpers.servers import ServerInfo
from rich.console import Console

from fairque.cli.demo import Demo, DemoPlan

VALKEY = pytest.mark.parametrize("server", ["valkey"], indirect=True)


@VALKEY
def test_dashboard_next_to_the_demo(server: ServerInfo) -> None:
    out = io.StringIO()
    worker_level = logging.getLogger("fairque.worker").level
    demo = Demo(
        server.url, DemoPlan(flood=300, tenants=3, tasks_per_tenant=5, work_seconds=0.01,
                             concurrency=4),
        Console(file=out, width=200), ui_port=0, ui_linger=3.0,
    )  # fmt: skip
    runner = threading.Thread(target=lambda: asyncio.run(demo.run()), daemon=True)
    runner.start()
    deadline = time.monotonic() + 30
    while demo.ui_address is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert demo.ui_address is not None
    assert f"dashboard: {demo.ui_address}" in out.getvalue()
    page = httpx.get(demo.ui_address, timeout=30)
    assert page.status_code == 200
    assert "noisy-tenant" in page.text
    runner.join(timeout=60)
    assert not runner.is_alive()
    # the demo quiets the worker's log lines only while it runs
    assert logging.getLogger("fairque.worker").level == worker_level
    with pytest.raises(httpx.TransportError):
        httpx.get(demo.ui_address, timeout=5)


@VALKEY
def test_demo_command_prints_the_address(server: ServerInfo) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRQUE_")}
    result = subprocess.run(
        [sys.executable, "-m", "fairque", "demo", "--url", server.url, "--quick", "--ui",
         "--ui-port", "0", "--ui-linger", "0"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "dashboard: http://127.0.0.1:" in result.stdout
