"""HTTP pull workers are registered from their lease, extend and outcome calls, and
shown wherever Python workers are: ``GET /workers``, the client's ``workers()``,
``fairque status``, the Workers page and ``fairque_workers_alive``."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from helpers.servers import ServerInfo
from helpers.support import run_here, unique_queue

from fairque import FairQueue
from fairque.service import pullers
from fairque.service.settings import ServerSettings
from service.harness import Api, LiveServer


def _workers(api: Api) -> dict[str, dict[str, object]]:
    return {w["worker_id"]: w for w in api.ok("GET", "/workers")["workers"]}


def test_a_pull_worker_is_registered_and_counted(
    live: LiveServer, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _workers(api) == {}
    for i in range(3):
        api.push(task_id=f"t{i}", user_id=f"u{i}")
    leased = api.lease(
        2, worker_id="node-1", lease_seconds=30, assigned_users=["u0"], steal_targets=["*"]
    )
    assert len(leased) == 2
    seen = _workers(api)["node-1"]
    assert seen["kind"] == "http"
    assert seen["host"] == "127.0.0.1"
    assert seen["pid"] == 0
    assert (seen["concurrency"], seen["in_flight"], seen["processed"]) == (2, 2, 0)
    # the engine's registry holds it: the Python client, the CLI and the dashboard read it
    q = FairQueue.from_url(live.service.url, api.queue)
    try:
        [info] = q.workers()
        assert (info.worker_id, info.kind, info.assigned_users) == ("node-1", "http", ["u0"])
    finally:
        q.close()
    status = run_here("--url", live.service.url, "--queue", api.queue, "status")
    assert "node-1" in status.stdout
    assert "HTTP" in status.stdout
    page = httpx.get(f"{live.base}/ui/q/{api.queue}/workers", timeout=30)
    assert "node-1" in page.text
    assert "HTTP" in page.text
    alive = [
        line for line in httpx.get(f"{live.base}/metrics", timeout=30).text.splitlines()
        if line.startswith("fairque_workers_alive{") and f'queue="{api.queue}"' in line
    ]  # fmt: skip
    assert alive == [f'fairque_workers_alive{{queue="{api.queue}"}} 1.0']
    # one success, one failure (each call writes here: the refresh period set to 0)
    monkeypatch.setattr(pullers, "REFRESH_SECONDS", 0.0)
    first, second = leased
    api.ok("POST", f"/tasks/{first['task_id']}/outcome",
           {"type": "success", "lease_token": first["lease_token"], "result": 1})  # fmt: skip
    failure = {"type": "failure", "lease_token": second["lease_token"], "reason": "other",
               "should_retry": False, "message": "no"}  # fmt: skip
    api.ok("POST", f"/tasks/{second['task_id']}/outcome", failure)
    seen = _workers(api)["node-1"]
    assert (seen["in_flight"], seen["processed"], seen["failed"]) == (0, 1, 1)


def test_extend_is_a_heartbeat(live: LiveServer, api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pullers, "REFRESH_SECONDS", 0.0)  # every call writes
    api.push(task_id="long")
    [task] = api.lease(worker_id="node-2", lease_seconds=30)
    time.sleep(0.5)
    before = _workers(api)["node-2"]["last_seen_seconds"]
    assert isinstance(before, float)
    assert before >= 0.4
    api.ok("POST", "/tasks/long/extend", {"lease_token": task["lease_token"], "seconds": 30})
    after = _workers(api)["node-2"]["last_seen_seconds"]
    assert isinstance(after, float)
    assert after < before


def test_outcome_and_extend_of_an_unknown_task_are_404(api: Api) -> None:
    done = {"type": "success", "lease_token": "1", "result": None}
    answer = api.call("POST", "/tasks/nope/outcome", done)
    assert answer.status_code == 404
    assert answer.json()["type"].endswith("task-not-found")
    answer = api.call("POST", "/tasks/nope/extend", {"lease_token": "1"})
    assert answer.status_code == 404
    batch = api.ok("POST", "/outcomes", {"outcomes": [{"task_id": "nope", **done}]})
    assert batch["results"][0]["status"] == 404


def test_a_dead_workers_task_leaves_started_without_another_lease(server: ServerInfo) -> None:
    """The server takes back expired leases by itself: nobody has to ask for a lease
    for a task of a worker that died to be retried."""
    live = LiveServer(server.url, [unique_queue("reclaim")],
                      ServerSettings(reclaim_interval_seconds=0.1))  # fmt: skip
    api = Api(live.base, live.service.names[0])
    try:
        api.push(task_id="orphan")
        [task] = api.lease(worker_id="dies", lease_seconds=0.3)
        assert task["state"] == "STARTED"
        started = time.monotonic()
        while (now := api.ok("GET", "/tasks/orphan"))["state"] == "STARTED":
            time.sleep(0.05)
        assert time.monotonic() - started >= 0.25  # not before its lease ended
        assert now["state"] in ("SCHEDULED", "QUEUED")
        assert now["retry_count"] == 1
    finally:
        api.close()
        live.stop()


def test_a_refused_outcome_counts_nowhere(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """An outcome whose lease is no longer held (409) frees the task from the worker's
    figures without counting it processed or failed."""
    monkeypatch.setattr(pullers, "REFRESH_SECONDS", 0.0)
    api.push(task_id="t")
    [task] = api.lease(worker_id="node-3")
    stale = {"type": "success", "lease_token": str(int(task["lease_token"]) + 1), "result": 1}
    assert api.call("POST", "/tasks/t/outcome", stale).status_code == 409
    seen = _workers(api)["node-3"]
    assert (seen["in_flight"], seen["processed"], seen["failed"]) == (0, 0, 0)


async def test_a_silent_pull_worker_drops_out_of_the_registry(server: ServerInfo) -> None:
    """The registration is written with the TTL the server computes (the setting, or
    the long poll plus the lease when longer), and the engine forgets it after that."""
    from fairque.client.aio import AsyncFairQueue

    q = AsyncFairQueue.from_url(server.url, unique_queue("silent"))
    registry = pullers.Pullers(ttl_seconds=0.3)
    try:
        await registry.leased(q, "gone", "127.0.0.1", 1, None, None, 0.05, 0.0, [])
        assert [w.worker_id for w in await q.workers()] == ["gone"]
        ttl = registry._workers[(q.queue, "gone")].ttl
        assert ttl == max(0.3, 0.05 + pullers.REFRESH_SECONDS)
        started = time.monotonic()
        while [w.worker_id for w in await q.workers()] == ["gone"]:
            await asyncio.sleep(0.05)
        assert time.monotonic() - started >= ttl - 0.1  # not before its TTL
    finally:
        await q.purge()
        await q.close()


def test_a_server_away_at_start_up_starts_and_is_not_ready(unused_port_url: str) -> None:
    live = LiveServer(unused_port_url, [], cluster=False)
    try:
        assert httpx.get(f"{live.base}/healthz", timeout=30).status_code == 200
        assert httpx.get(f"{live.base}/readyz", timeout=30).status_code == 503
    finally:
        live.stop()


@pytest.fixture
def unused_port_url() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


def test_a_lease_names_the_tasks_its_worker_runs(live: LiveServer, api: Api) -> None:
    api.push(task_id="other", user_id="u", name="resize")
    api.push(task_id="mine", user_id="u", name="square")
    for bad in ([], [""], ["x" * 300], "square", [1]):
        refused = api.call("POST", "/leases", {"worker_id": "n", "names": bad})
        assert refused.status_code in (400, 422), bad
        assert "names" in refused.text
    assert api.ok("GET", "/stats")["counts"]["QUEUED"] == 2  # nothing leased or moved
    leased = api.lease(5, worker_id="node-2", names=["square"])
    assert [t["task_id"] for t in leased] == ["mine"]
    assert _workers(api)["node-2"]["names"] == ["square"]
    taken = api.lease(5, worker_id="node-3", names=["resize", "square"])
    assert [t["task_id"] for t in taken] == ["other"]
