"""Screenshots of every dashboard page for the documentation (docs/howto/dashboard.md).

Not part of the suite (its name does not start with ``test_``): run it by its path,
with ``FAIRQUE_SCREENSHOTS`` naming a folder::

    FAIRQUE_SCREENSHOTS=docs/images FAIRQUE_TEST_SERVERS=valkey \\
        uv run pytest tests/ui/screenshots.py -p no:cacheprovider

A noisy tenant floods the queue, small tenants push a few tasks each, and a worker
loop serves them fairly for a few seconds (every figure on the pages is real).
"""

from __future__ import annotations

import os
import time
import traceback
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from helpers.servers import ServerInfo
from service.harness import LiveServer

from fairque import FairQueue, Task
from fairque.models import Priority, WorkerInfo
from fairque.service.ui import history

TARGET = os.environ.get("FAIRQUE_SCREENSHOTS")

pytestmark = pytest.mark.parametrize("server", ["valkey"], indirect=True)


def _error() -> str:
    try:
        {"invoice": 7}["customer"]
    except KeyError:
        return traceback.format_exc()
    raise AssertionError("unreachable")


def _serve(q: FairQueue, seconds: float) -> None:
    """A worker of concurrency 4: leases fairly, works 15 ms a task, fails the reports."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        tasks = q.pop_batch(4, "worker-a1", lease_seconds=30)
        if not tasks:
            time.sleep(0.05)
            continue
        time.sleep(0.015)
        for task in tasks:
            if task.name == "render_report":
                q.fail(task, _error(), retry=False)
            else:
                q.complete(task, {"ok": True, "bytes": 1024})


def test_write_screenshots(
    browser: Any, server: ServerInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the overview's per-minute chart from counters sampled every half second
    monkeypatch.setattr(history, "PERIOD", 0.5)
    live = LiveServer(server.url, ["shop-" + uuid.uuid4().hex[:6]])
    q = FairQueue.from_url(server.url, live.service.names[0])
    try:
        _scenario(live, q, browser)
    finally:
        q.purge()
        q.close()
        live.stop()


def _scenario(live: LiveServer, q: FairQueue, browser: Any) -> None:
    assert TARGET, "set FAIRQUE_SCREENSHOTS to the folder to write the screenshots to"
    out = Path(TARGET)
    out.mkdir(parents=True, exist_ok=True)
    base = f"{live.base}/ui/q/{q.queue}"
    q.push_many(
        Task(user_id="noisy-tenant", name="import_rows", payload={"row": i}) for i in range(4000)
    )
    for t in range(1, 9):
        q.push_many(
            Task(
                user_id=f"tenant-{t:02d}", name="send_email" if t % 3 else "render_report",
                payload={"to": f"user{i}@tenant-{t:02d}.example"},
                priority=Priority.CRITICAL if i == 0 and t == 2 else Priority.NORMAL,
            )
            for i in range(120)
        )  # fmt: skip
    q.set_user_limits("tenant-03", weight=2, max_in_flight=None)
    q.set_user_limits("tenant-05", weight=1, max_in_flight=1)
    q.push(Task(user_id="tenant-07", name="build_index", task_id="index-build"))
    q.push(
        Task(user_id="tenant-07", name="publish", task_id="index-publish",
             depends_on=("index-build",), payload={"channel": "release"})
    )  # fmt: skip
    q.enqueue("nightly_digest", {"day": "2026-11-24"}, user_id="tenant-01", delay=3600)
    _serve(q, 4.0)
    q.pop(worker_id="worker-a1", assigned_users=["tenant-05"])
    now = datetime.now(timezone.utc)
    for worker_id, host, processed, errors in (
        ("worker-a1", "app-1", 912, 37),
        ("worker-b2", "app-2", 0, 0),
    ):
        q.register_worker(
            WorkerInfo(
                worker_id=worker_id, queue=q.queue, host=host, pid=4100 + processed % 97,
                started_at=now, concurrency=4, in_flight=1 if processed else 0,
                processed=processed, failed=errors,
            ),
            ttl_seconds=60,
        )  # fmt: skip
    failed = q.list_tasks("FAILED", limit=1).tasks[0]
    waiting = (
        q.list_tasks("QUEUED", user_id="tenant-05", limit=1).tasks
        or q.list_tasks("QUEUED", user_id="noisy-tenant", limit=1).tasks
    )[0]
    shots = {
        "overview": base,
        "tenants": f"{base}/tenants?window=60",
        "tasks": f"{base}/tasks?state=FAILED",
        "task-failed": f"{base}/task?id={failed.task_id}",
        "task-waiting": f"{base}/task?id={waiting.task_id}",
        "task-deferred": f"{base}/task?id=index-publish",
        "user": f"{base}/user?id=tenant-05",
        "workers": f"{base}/workers",
        "bulk": f"{base}/bulk?state=QUEUED&user=noisy-tenant&action=cancel",
    }
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    for name, url in shots.items():
        page.goto(url)
        page.screenshot(path=str(out / f"ui-{name}.png"), full_page=name != "tasks")
    context.close()
    assert all((out / f"ui-{name}.png").stat().st_size > 10_000 for name in shots)
