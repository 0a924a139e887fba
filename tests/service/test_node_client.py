"""The Node.js client package (``clients/node``) against a live ``fairque serve``: its own
tests (``node --test``), and a worker process that rides out a restart of the service."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from helpers.servers import ServerInfo
from helpers.support import PATIENCE, unique_queue

from fairque import FairQueue, Task, TaskState
from fairque.cli.embedded import EmbeddedServer, free_port
from service.harness import node_missing, start_serve

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "node"


def node_binary() -> str:
    node = shutil.which("node")
    if node is None:
        node_missing("node is not installed")
    if not (PACKAGE / "node_modules" / "@msgpack" / "msgpack").is_dir():
        node_missing("@msgpack/msgpack is not installed in clients/node")
    return str(node)


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_the_packages_own_tests_pass(server: ServerInfo) -> None:
    node = node_binary()
    prefix = unique_queue("nodec") + "-"
    process, base = start_serve(server.url, prefix + "*")
    try:
        env = {**os.environ, "FAIRQUE_API": base, "FAIRQUE_QUEUE_PREFIX": prefix}
        tests = sorted(str(p.relative_to(PACKAGE)) for p in (PACKAGE / "test").glob("*.test.mjs"))
        assert len(tests) >= 2
        done = subprocess.run(
            [node, "--test", *tests], cwd=PACKAGE, env=env, capture_output=True, text=True,
            timeout=5 * PATIENCE,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert "# fail 0" in done.stdout
    finally:
        process.terminate()
        process.wait(timeout=PATIENCE)


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_a_worker_rides_out_a_restart_of_the_service(server: ServerInfo) -> None:
    """The service goes away for 10 s while the worker holds tasks: the worker neither
    exits nor loses anything; every task ends FINISHED once the service is back."""
    node = node_binary()
    queue = unique_queue("noderestart")
    process, base = start_serve(server.url, queue)
    port = int(base.rsplit(":", 1)[1])
    q = FairQueue.from_url(server.url, queue)
    worker = None
    try:
        q.push_many([
            Task(name="nap", payload={"ms": 30}, user_id=f"u{i % 3}", task_id=f"n{i}")
            for i in range(150)
        ])  # fmt: skip
        env = {**os.environ, "FAIRQUE_API": base, "FAIRQUE_QUEUE": queue, "CONCURRENCY": "4"}
        worker = subprocess.Popen(
            [node, "test/fixtures/nap-worker.mjs"], cwd=PACKAGE, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

        def finished() -> int:
            return q.stats().counts.get(TaskState.FINISHED, 0)

        deadline = time.monotonic() + PATIENCE
        while finished() < 20:
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)  # the service is gone, mid-flight
        process.wait(timeout=PATIENCE)
        time.sleep(10)
        assert worker.poll() is None, worker.communicate()  # it waits, it does not exit
        process, _ = start_serve(server.url, queue, port=port)
        deadline = time.monotonic() + 2 * PATIENCE
        while finished() < 150:
            assert worker.poll() is None, worker.communicate()
            assert time.monotonic() < deadline, f"{finished()} of 150 finished"
            time.sleep(0.05)
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=PATIENCE)
        assert worker.returncode == 0, err
        stats = json.loads(out.strip().splitlines()[-1])
        assert stats["done"] == 150  # a resent request is answered as the first was
        counts = q.stats().counts
        assert counts.get(TaskState.FINISHED, 0) == 150
        assert sum(counts.values()) == 150
        assert "again in" in err  # it said it was waiting for the service
    finally:
        _stop(worker, process)
        q.close()


def test_a_worker_waits_out_a_queue_server_that_is_away() -> None:
    """The service answers 503 while its queue server is away: the worker waits with
    backoff instead of exiting, and serves the queue once the server is there."""
    node = node_binary()
    port = free_port()
    queue = unique_queue("nodeaway")
    process, base = start_serve(f"redis://127.0.0.1:{port}/0", queue)  # nothing there yet
    server = EmbeddedServer(port=port)
    worker = None
    try:
        assert (
            httpx.post(f"{base}/v1/queues/{queue}/leases", json={"worker_id": "w"}).status_code
            == 503
        )
        env = {**os.environ, "FAIRQUE_API": base, "FAIRQUE_QUEUE": queue, "CONCURRENCY": "2"}
        worker = subprocess.Popen(
            [node, "test/fixtures/nap-worker.mjs"], cwd=PACKAGE, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        time.sleep(3)  # the outage the worker waits out (its requests answered 503)
        assert worker.poll() is None, worker.communicate()
        server.start()
        with FairQueue.from_url(server.url, queue) as q:
            q.push_many([Task(name="nap", payload={"ms": 10}, user_id="u", task_id=f"a{i}")
                         for i in range(30)])  # fmt: skip
            deadline = time.monotonic() + PATIENCE
            while q.stats().counts.get(TaskState.FINISHED, 0) < 30:
                assert worker.poll() is None, worker.communicate()
                assert time.monotonic() < deadline, "the worker never served the queue"
                time.sleep(0.05)
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=PATIENCE)
        assert worker.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["done"] == 30
        assert "HTTP 503" in err
        assert "again in" in err
    finally:
        _stop(worker, process)
        server.stop()


def _stop(worker: subprocess.Popen[str] | None, service: subprocess.Popen[str]) -> None:
    """End a test's worker (if it is still there) and its service."""
    if worker is not None and worker.poll() is None:
        worker.kill()
    service.terminate()
    service.wait(timeout=PATIENCE)
