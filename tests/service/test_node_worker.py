"""Language neutrality: the Node.js pull worker of examples/node-worker (on the client
package of clients/node) serves tasks pushed over HTTP to a real ``fairque serve``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.servers import ServerInfo
from helpers.support import unique_queue

from fairque import FairQueue
from service.harness import Api, node_missing, start_serve

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "node-worker"
USERS = [f"user{i}" for i in range(5)]


@pytest.fixture
def served(server: ServerInfo) -> Iterator[tuple[str, str]]:
    """``fairque serve`` as a process: (base URL, queue)."""
    queue = unique_queue("node")
    process, base = start_serve(server.url, queue)
    try:
        yield base, queue
    finally:
        process.terminate()
        process.wait(timeout=15)


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_serve_logs_requests_when_asked(server: ServerInfo) -> None:
    queue = unique_queue("log")
    process, base = start_serve(server.url, queue, "--access-log")
    headers = {"Authorization": "Bearer not-logged-0123456789"}
    assert httpx.get(f"{base}/v1/queues/{queue}/stats", headers=headers).status_code == 200
    process.terminate()
    output = process.communicate(timeout=15)[0]
    assert f"GET /v1/queues/{queue}/stats" in output
    assert "not-logged" not in output
    assert f"queues {queue} on {base}" in output
    assert f"dashboard {base}/ui, metrics {base}/metrics" in output


def node_binary() -> str:
    """The ``node`` binary, with the example's one dependency installed."""
    node = shutil.which("node")
    if node is None:
        node_missing("node is not installed")
    if not (EXAMPLE / "node_modules" / "fairque").exists():
        node_missing("the client package is not installed in examples/node-worker")
    if not (EXAMPLE.parents[1] / "clients" / "node" / "node_modules" / "@msgpack").is_dir():
        node_missing("@msgpack/msgpack is not installed in clients/node")
    return str(node)


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_node_worker_runs_every_task(served: tuple[str, str]) -> None:
    node = node_binary()
    base, queue = served
    api = Api(base, queue)
    tasks: list[dict[str, Any]] = []
    for i in range(200):
        user = USERS[i % 5]
        if i % 20 == 19:
            tasks.append({"name": "explode", "user_id": user, "payload": {"i": i},
                          "max_retries": 1})  # fmt: skip
        elif i % 2:
            tasks.append({"name": "concat", "user_id": user, "payload": {"parts": ["a", str(i)]}})
        else:
            tasks.append({"name": "square", "user_id": user, "payload": {"n": i}})
    # pushed in a trace (no tracer in this server: the tasks keep the request's context)
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    response = api.call("POST", "/tasks", {"tasks": tasks}, msgpack=True,
                        headers={"traceparent": traceparent})  # fmt: skip
    assert response.status_code == 201, response.text
    assert response.headers["traceparent"] == traceparent  # the context it was given
    pushed = api.data(response)["tasks"]
    env = {**os.environ, "FAIRQUE_API": base, "FAIRQUE_QUEUE": queue, "EXIT_WHEN_IDLE": "2",
           "WORKER_ID": "node-test"}  # fmt: skip
    result = subprocess.run(
        [node, "worker.mjs"], cwd=EXAMPLE, env=env, capture_output=True, text=True,
        timeout=90,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    for sent, task in zip(tasks, pushed, strict=True):
        outcome = api.ok("GET", f"/tasks/{task['task_id']}/result",
                         params={"wait_seconds": "10"})  # fmt: skip
        if sent["name"] == "square":
            assert outcome["type"] == "success"
            # the handler got the task's trace context to forward
            assert outcome["result"] == {"value": sent["payload"]["n"] ** 2,
                                         "traceparent": traceparent}  # fmt: skip
        elif sent["name"] == "concat":
            assert outcome["result"] == "".join(sent["payload"]["parts"])
        else:
            assert outcome["type"] == "failure", outcome
            assert outcome["message"].startswith("cannot handle")
            assert outcome["error"] == {"name": "Error"}
            stored = api.ok("GET", f"/tasks/{task['task_id']}")
            assert stored["retry_count"] == stored["attempts"] == 1
    stats = api.ok("GET", "/stats")
    assert stats["counts"]["FINISHED"] == 190
    assert stats["counts"]["FAILED"] == 10


PY_SQUARE = """
from fairque import task

@task(name="square")
def square(payload):
    return {"value": payload["n"] ** 2}
"""


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_a_mixed_fleet_runs_each_task_on_a_worker_that_handles_it(
    served: tuple[str, str], server: ServerInfo, tmp_path: Path
) -> None:
    """A Python worker that handles ``square`` only and the Node worker on one queue:
    the Python worker, idle first, never leases ``concat`` or ``explode``; the Node
    worker runs them in its next lease; ``resize``, which no worker handles, waits and
    says why."""
    node = node_binary()
    base, queue = served
    api = Api(base, queue)
    (tmp_path / "pysquare.py").write_text(PY_SQUARE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get(
        "PYTHONPATH", "")])}  # fmt: skip
    python = subprocess.Popen(
        [sys.executable, "-m", "fairque", "--url", server.url, "--queue", queue, "worker",
         "--import", "pysquare"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    node_env = {**os.environ, "FAIRQUE_API": base, "FAIRQUE_QUEUE": queue,
                "WORKER_ID": "node-mixed", "MAX_TASKS": "1"}  # fmt: skip
    js = subprocess.Popen([node, "worker.mjs"], cwd=EXAMPLE, env=node_env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while len(api.ok("GET", "/workers")["workers"]) < 2:
            assert time.monotonic() < deadline, "the workers did not register"
            time.sleep(0.1)
        tasks: list[dict[str, Any]] = [
            {"name": "concat", "user_id": "a", "payload": {"parts": ["x", "y"]}},
            {"name": "explode", "user_id": "a", "payload": {}, "max_retries": 0},
            {"name": "resize", "user_id": "a", "payload": {}},
            {"name": "square", "user_id": "b", "payload": {"n": 3}},
        ]
        pushed = api.ok("POST", "/tasks", {"tasks": tasks}, status=201)["tasks"]
        ids = {t["name"]: p["task_id"] for t, p in zip(tasks, pushed, strict=True)}
        wait = {"wait_seconds": "20"}
        assert api.ok("GET", f"/tasks/{ids['concat']}/result", params=wait)["result"] == "xy"
        assert api.ok("GET", f"/tasks/{ids['explode']}/result", params=wait)["type"] == "failure"
        square = api.ok("GET", f"/tasks/{ids['square']}/result", params=wait)
        # both workers handle square: whichever leased it first ran it (the Node worker
        # leases ahead of its slot, so it may take it in the lease that brought concat)
        assert square["result"]["value"] == 9
        resize = api.ok("GET", f"/tasks/{ids['resize']}")
        assert resize["state"] == "QUEUED"
        with FairQueue.from_url(server.url, queue) as q:
            # nothing was leased by a worker that could not run it and given back
            assert q.metrics().requeued == 0
            place = q.wait_place(q.get(ids["resize"]))  # type: ignore[arg-type]
            assert place.set_aside == "resize"
        page = httpx.get(f"{base}/ui/q/{queue}/task", params={"id": ids["resize"]}).text
        assert "no worker handles" in page
        assert "resize" in page
    finally:
        js.send_signal(signal.SIGTERM)
        python.send_signal(signal.SIGTERM)
        drained = js.communicate(timeout=15)
        python.communicate(timeout=30)
    # SIGTERM drains the Node worker: it exits on its own, reporting what it ran
    assert js.returncode == 0, drained[1]
    assert '"worker_id":"node-mixed"' in drained[0]
