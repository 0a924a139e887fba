"""Push modes by key over HTTP: the task body's ``dedup_key``, ``dedup_mode``,
``debounce_seconds`` and ``debounce_max_seconds``; a bad combination is a 422 that
writes nothing."""

from __future__ import annotations

from helpers.servers import SyncClient
from helpers.support import queue_snapshot

from service.harness import Api


def test_a_keyed_push_merges_and_the_task_shows_its_key(api: Api) -> None:
    body = {"name": "render", "user_id": "u", "payload": 1, "dedup_key": "page:9",
            "dedup_mode": "replace"}  # fmt: skip
    first = api.ok("POST", "/tasks", body, status=201)
    again = api.ok("POST", "/tasks", {**body, "payload": 2})  # 200: not created
    assert again["task_id"] == first["task_id"]
    task = api.ok("GET", f"/tasks/{first['task_id']}")
    assert (task["payload"], task["dedup_key"], task["dedup_mode"]) == (2, "page:9", "replace")
    debounced = api.ok("POST", "/tasks", {"name": "sync", "user_id": "u", "dedup_key": "s",
                       "dedup_mode": "debounce", "debounce_seconds": 30}, status=201)  # fmt: skip
    assert debounced["state"] == "SCHEDULED"
    shown = api.ok("GET", f"/tasks/{debounced['task_id']}")
    assert (shown["debounce_seconds"], shown["debounce_max_seconds"]) == (30.0, 300.0)


def test_a_bad_dedup_is_refused_and_writes_nothing(api: Api, redis_client: SyncClient) -> None:
    api.push(user_id="u")  # the queue exists
    before = queue_snapshot(redis_client, api.queue)
    base = {"name": "n", "user_id": "u"}
    for bad in ({"dedup_mode": "keep"}, {"debounce_seconds": 1}, {"dedup_key": ""},
                {"dedup_key": "k", "dedup_mode": "debounce"},
                {"dedup_key": "k", "dedup_mode": "often"},
                {"dedup_key": "k", "dedup_mode": "debounce", "debounce_seconds": 2,
                 "debounce_max_seconds": 1}):  # fmt: skip
        refused = api.call("POST", "/tasks", {**base, **bad})
        assert refused.status_code == 422, (bad, refused.text)
    assert queue_snapshot(redis_client, api.queue) == before
