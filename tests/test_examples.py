"""The examples and the shipped config template work as documented."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.servers import ServerInfo
from helpers.support import unique_queue

from fairque import FairQueue, TaskState
from fairque.config import load_settings

ROOT = Path(__file__).parent.parent


@pytest.mark.parametrize("server", ["valkey", "cluster"], indirect=True)
def test_producer_then_consumer_drains_every_tenant(server: ServerInfo) -> None:
    queue = unique_queue("ex")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRQUE_")}
    produce = subprocess.run(
        [sys.executable, str(ROOT / "examples/producer.py"), "--url", server.url, "--queue", queue],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert produce.returncode == 0, produce.stderr
    assert "queued 207 tasks for 4 tenants" in produce.stdout
    consume = subprocess.run(
        [sys.executable, str(ROOT / "examples/consumer.py"), "--url", server.url, "--queue", queue,
         "--drain"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert consume.returncode == 0, consume.stderr
    assert "finished 207, failed 0" in consume.stdout
    q = FairQueue.from_url(server.url, queue)
    assert q.stats().counts[TaskState.FINISHED] == 207
    q.close()


def test_config_template_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("FAIRQUE_"):
            monkeypatch.delenv(key)
    settings = load_settings(ROOT / "config/worker.yaml")
    assert settings.worker.id == "worker-001"
    assert settings.redis.to_url() == "redis://localhost:6379/0"
    assert settings.queue.name == "default"
