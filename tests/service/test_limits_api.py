"""The HTTP API at a tenant's backlog quota (429) and at the server's memory limit
(503), and the service naming a server that would lose tasks (``/readyz``,
``/metrics``), against real servers."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.servers import ServerInfo, SyncClient
from helpers.support import eviction_policy, memory_limit, queue_snapshot

from fairque import FairQueue, ServerFull, Task
from service.harness import Api, LiveServer


def refused_push(api: Api, user: str, status: int, kind: str, wait: str) -> dict[str, Any]:
    """Push one task of ``user``; check it is refused so; the problem document."""
    refused = api.call("POST", "/tasks", {"name": "job", "user_id": user})
    assert refused.status_code == status, refused.text
    assert refused.headers["Retry-After"] == wait
    problem: dict[str, Any] = refused.json()
    assert problem["type"] == f"urn:fairque:problem:{kind}"
    return problem


def test_a_push_past_the_quota_is_429_and_writes_nothing(
    api: Api, redis_client: SyncClient
) -> None:
    limits = api.ok("PUT", "/users/noisy/limits", {"max_queued": 3})
    assert limits == {"user_id": "noisy", "weight": 1, "max_in_flight": None, "max_queued": 3,
                      "group": None, "floor": None, "ceiling": None,
                      "max_bytes": None}  # fmt: skip
    for _ in range(3):
        api.push(user_id="noisy")
    before = queue_snapshot(redis_client, api.queue)
    problem = refused_push(api, "noisy", 429, "quota-exceeded", "5")
    assert "'noisy'" in problem["detail"]
    batch = {"tasks": [{"name": "job", "user_id": "other"}, {"name": "job", "user_id": "noisy"}]}
    assert api.call("POST", "/tasks", batch).status_code == 429
    assert queue_snapshot(redis_client, api.queue) == before
    stats = api.ok("GET", "/stats")
    assert stats["counts"]["QUEUED"] == 3
    api.push(user_id="other")
    # a PUT sets every limit: the quota left out is removed
    assert api.ok("PUT", "/users/noisy/limits", {"weight": 2})["max_queued"] is None
    api.push(user_id="noisy")


def test_a_push_past_the_byte_quota_is_429_and_others_push(api: Api) -> None:
    limits = api.ok("PUT", "/users/flood/limits", {"max_bytes": 300})
    assert limits["max_bytes"] == 300
    blob = {"name": "job", "user_id": "flood", "payload": "x" * 98}  # 100 bytes as JSON
    for _ in range(3):
        api.ok("POST", "/tasks", blob, status=201)
    problem = refused_push(api, "flood", 429, "quota-exceeded", "5")
    assert "byte quota is 300" in problem["detail"]
    api.push(user_id="other")  # the other tenants keep pushing
    for bad in ({"max_bytes": 0}, {"max_bytes": "3"}, {"max_bytes": 2**41}):
        assert api.call("PUT", "/users/flood/limits", bad).status_code == 422, bad
    assert api.ok("PUT", "/users/flood/limits", {})["max_bytes"] is None  # removed
    api.ok("POST", "/tasks", blob, status=201)


def test_groups_share_worker_time_over_http(api: Api) -> None:
    """A user's group rides in its limits; a group's weight has its own PUT. Leased at
    the first estimate, a group of weight 3 with two tenants gets three quarters."""
    out = api.ok("PUT", "/users/alice/limits", {"group": "org"})
    assert out == {"user_id": "alice", "weight": 1, "max_in_flight": None, "max_queued": None,
                   "group": "org", "floor": None, "ceiling": None,
                   "max_bytes": None}  # fmt: skip
    api.ok("PUT", "/users/bob/limits", {"group": "org"})
    assert api.ok("PUT", "/groups/org/limits", {"weight": 3}) == {
        "group_id": "org", "weight": 3, "floor": None, "ceiling": None, "max_in_flight": None,
        "max_queued": None,
    }  # fmt: skip
    for user in ("alice", "bob", "carol"):
        api.ok("POST", "/tasks", {"tasks": [{"name": "job", "user_id": user}] * 40}, status=201)
    leased = api.ok("POST", "/leases", {"worker_id": "w", "max_tasks": 40})["tasks"]
    got = {u: sum(t["user_id"] == u for t in leased) for u in ("alice", "bob", "carol")}
    assert got == {"alice": 15, "bob": 15, "carol": 10}, got
    bad = api.call("PUT", "/groups/org/limits", {"weight": 0})
    assert bad.status_code == 422, bad.text
    bad = api.call("PUT", "/users/alice/limits", {"group": ""})
    assert bad.status_code == 422, bad.text
    # a PUT sets every limit: a group left out is left
    assert api.ok("PUT", "/users/alice/limits", {"weight": 1})["group"] is None
    # a group's cap: bob alone in "org" now, at most one in flight
    api.ok("POST", "/tasks", {"tasks": [{"name": "job", "user_id": "bob"}] * 3}, status=201)
    capped = api.ok("PUT", "/groups/org/limits", {"weight": 3, "max_in_flight": 1})
    assert capped["max_in_flight"] == 1
    # (the queue's first group cap counts the leases taken after it)
    # (another worker each time: "w" holds its 40, as many as it asked for)
    more = api.ok("POST", "/leases", {"worker_id": "w2", "max_tasks": 10})["tasks"]
    assert [t["user_id"] for t in more].count("bob") == 1
    more = api.ok("POST", "/leases", {"worker_id": "w3", "max_tasks": 10})["tasks"]
    assert [t["user_id"] for t in more].count("bob") == 0


def test_a_group_backlog_quota_over_http(api: Api) -> None:
    """A push past a group's quota is a 429 naming the group; nothing is written."""
    for user in ("a", "b"):
        api.ok("PUT", f"/users/{user}/limits", {"group": "org"})
    out = api.ok("PUT", "/groups/org/limits", {"max_queued": 3})
    assert out["max_queued"] == 3
    api.ok("POST", "/tasks", {"tasks": [{"name": "job", "user_id": "a"}] * 2}, status=201)
    api.push(user_id="b")
    refused = api.call("POST", "/tasks", {"tasks": [{"name": "job", "user_id": "b"}]})
    assert refused.status_code == 429, refused.text
    assert refused.headers["Retry-After"]
    assert "group 'org'" in refused.json()["detail"]
    assert api.ok("GET", "/stats")["counts"]["QUEUED"] == 3
    for bad in ({"max_queued": 0}, {"max_queued": "3"}, {"max_queued": 2**40}):
        assert api.call("PUT", "/groups/org/limits", bad).status_code == 422
    # a PUT replaces every limit: the quota left out is removed
    assert api.ok("PUT", "/groups/org/limits", {})["max_queued"] is None
    api.push(user_id="b")


def test_a_floor_and_a_ceiling_over_http(api: Api) -> None:
    """A floor of 20 % against weight 9, leased at the first estimate."""
    api.ok("PUT", "/users/flood/limits", {"weight": 9})
    out = api.ok("PUT", "/users/owner/limits", {"floor": 0.2, "ceiling": 0.5})
    assert (out["floor"], out["ceiling"]) == (0.2, 0.5)
    for user in ("flood", "owner"):
        api.ok("POST", "/tasks", {"tasks": [{"name": "job", "user_id": user}] * 60}, status=201)
    leased = api.ok("POST", "/leases", {"worker_id": "w", "max_tasks": 50})["tasks"]
    assert abs(sum(t["user_id"] == "owner" for t in leased) - 10) <= 1
    for bad in ({"floor": 1}, {"ceiling": 0}, {"floor": "0.2"}):
        refused = api.call("PUT", "/users/owner/limits", bad)
        assert refused.status_code == 422, refused.text
    assert api.ok("PUT", "/users/owner/limits", {})["floor"] is None  # a PUT replaces all


def fill(q: FairQueue) -> None:
    """Push batches until the server refuses one."""
    for _ in range(10_000):
        q.push_many([Task(user_id=f"u{i % 5}", name="job", payload={"x": "x" * 300})
                     for i in range(50)])  # fmt: skip


def test_a_push_to_a_full_server_is_503_server_full(
    live: LiveServer, api: Api, server: ServerInfo
) -> None:
    q = FairQueue.from_url(server.url, api.queue)
    try:
        with memory_limit(server) as limit:
            with pytest.raises(ServerFull):
                fill(q)
            limit.full()
            problem = refused_push(api, "late", 503, "server-full", "10")
            assert "maxmemory" in problem["detail"]
            # a worker's calls still run
            leased = api.lease(5)
            assert len(leased) == 5
            assert api.call("GET", "/readyz").status_code == 200
    finally:
        q.purge()
        q.close()


def test_an_evicting_server_is_named_but_stays_ready(api: Api, server: ServerInfo) -> None:
    ready = api.call("GET", "/readyz")
    assert ready.json() == {"status": "ready"}
    metrics = api.http.get("/metrics").text
    assert 'fairque_server_evicting{node="' in metrics
    assert "fairque_server_memory_used_bytes" in metrics
    with eviction_policy(server, "allkeys-lru"):
        ready = api.call("GET", "/readyz")
        assert ready.status_code == 200
        body = ready.json()
        assert body["status"] == "ready"
        assert any("allkeys-lru" in w and "noeviction" in w for w in body["warnings"])
        metrics = api.http.get("/metrics").text
        assert 'policy="allkeys-lru"} 1.0' in metrics
    with memory_limit(server):
        metrics = api.http.get("/metrics").text
        ratios = [
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith("fairque_server_memory_used_ratio{")
        ]
        assert ratios
        assert all(0 < r <= 1.2 for r in ratios)
