"""The HTTP service, ``/metrics``, the dashboard and ``fairque status`` on a sharded queue:
each reads every shard through the client, so a queue of 3 shards is served as one."""

from __future__ import annotations

import httpx
from helpers.servers import ServerInfo
from helpers.support import run_here, unique_queue
from prometheus_client.parser import text_string_to_metric_families

from fairque import FairQueue, TaskState
from service.harness import Api, LiveServer


def test_a_sharded_queue_is_served_as_one(server: ServerInfo) -> None:
    name = unique_queue("http")
    made = FairQueue.from_url(server.url, name, shards=3)
    users = [f"u{i}" for i in range(12)]
    assert len({made.shard_of(u) for u in users}) == 3
    live = LiveServer(server.url, [name])
    api = Api(live.base, name)
    try:
        ids = [api.push(user_id=u, task_id=f"t-{u}")["task_id"] for u in users]
        for task_id in ids:
            assert api.ok("GET", f"/tasks/{task_id}")["state"] == "QUEUED"
        leased = api.lease(8, worker_id="node-1", lease_seconds=30)
        leased += api.lease(8, worker_id="node-1", lease_seconds=30)
        assert sorted(t["task_id"] for t in leased) == sorted(ids)
        for t in leased[:10]:
            done = {"type": "success", "lease_token": t["lease_token"], "result": t["task_id"]}
            api.ok("POST", f"/tasks/{t['task_id']}/outcome", done)
        assert made.result(leased[0]["task_id"]) == leased[0]["task_id"]
        counts = made.stats().counts
        assert (counts[TaskState.FINISHED], counts[TaskState.STARTED]) == (10, 2)

        text = httpx.get(f"{live.base}/metrics", timeout=30).text
        samples = {
            (s.name, s.labels.get("queue"), s.labels.get("state")): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        assert samples[("fairque_tasks", name, "FINISHED")] == 10
        assert samples[("fairque_tasks_pushed_total", name, None)] == 12
        assert samples[("fairque_tasks_finished_total", name, None)] == 10
        for page in ("", "/tenants", "/tasks?state=FINISHED", "/workers", "/user?id=u3",
                     f"/task?id={ids[0]}"):  # fmt: skip
            response = httpx.get(f"{live.base}/ui/q/{name}{page}", timeout=30)
            assert response.status_code == 200, (page, response.text[:500])
        status = run_here("--url", server.url, "--queue", name, "status")
        assert status.returncode == 0, status.stderr
        assert "node-1" in status.stdout
    finally:
        api.close()
        live.stop()
        made.close()


def test_constraints_and_schedules_over_http_span_the_shards(server: ServerInfo) -> None:
    name = unique_queue("http")
    made = FairQueue.from_url(server.url, name, shards=3)
    live = LiveServer(server.url, [name])
    api = Api(live.base, name)
    try:
        too_small = api.call("PUT", "/constraints/api", {"name": "call", "concurrency": 2})
        assert too_small.status_code == 422, too_small.text
        assert "cannot be split over 3 shards" in too_small.text
        api.ok("PUT", "/constraints/api", {"name": "call", "concurrency": 3})
        users = [u for u in (f"u{i}" for i in range(100)) if made.shard_of(u) == 2][:1]
        for i in range(3):
            api.push(user_id=users[0], name="call", task_id=f"c{i}")
        leased = api.lease(8, worker_id="node-1", lease_seconds=30)
        assert len(leased) == 1  # shard 2's share of 3 is 1
        used = api.ok("GET", "/constraints/api")
        assert (used["running"], used["parked"]) == (1, 2)
        body = {"schedule_id": "nightly", "name": "report", "user_id": users[0],
                "cron": "0 2 * * *"}  # fmt: skip
        api.ok("POST", "/schedules", body, status=201)
        assert made.get_schedule("nightly") is not None
        assert [s["schedule_id"] for s in api.ok("GET", "/schedules")["schedules"]] == ["nightly"]
        assert api.ok("DELETE", "/schedules/nightly")["removed"] is True
    finally:
        api.close()
        live.stop()
        made.close()
