"""The schedule endpoints: add, read, list, replace, pause, resume, remove; roles."""

from __future__ import annotations

from typing import Any

import pytest

from service.harness import Api, LiveServer
from service.test_auth import client, secured  # noqa: F401 (the fixture)

# HTTP over the engine's schedule methods: the engine's tests cover every server kind
pytestmark = pytest.mark.server_kinds("valkey")

NIGHTLY: dict[str, Any] = {
    "schedule_id": "nightly", "name": "report", "user_id": "ops", "payload": {"a": 1},
    "cron": "30 2 * * *", "timezone": "Europe/Berlin", "priority": "critical",
    "misfire": "catch_up", "catch_up_limit": 5, "timeout_seconds": 30,
}  # fmt: skip


def test_schedule_endpoints(api: Api) -> None:
    created = api.call("POST", "/schedules", NIGHTLY)
    assert created.status_code == 201, created.text
    assert created.headers["location"] == f"/v1/queues/{api.queue}/schedules/nightly"
    body = created.json()
    assert body["queue"] == api.queue
    assert body["priority"] == "critical"
    assert body["payload"] == {"a": 1}
    assert body["timezone"] == "Europe/Berlin"
    assert body["next_fire_at"].endswith(":30:00.000Z")
    assert body["enabled"] is True
    assert (body["fired"], body["skipped"], body["revision"]) == (0, 0, 1)
    # the same definition again: 200 and nothing changes; another one: 409
    assert api.ok("POST", "/schedules", NIGHTLY) == body
    clash = api.call("POST", "/schedules", {**NIGHTLY, "cron": "0 3 * * *"})
    assert clash.status_code == 409
    assert clash.json()["type"].endswith("schedule-exists")
    assert api.ok("GET", "/schedules/nightly") == body
    assert api.ok("GET", "/schedules", msgpack=True) == {"schedules": [body]}

    replaced = api.ok("PUT", "/schedules/nightly", {**NIGHTLY, "cron": "0 3 * * *"})
    assert replaced["cron"] == "0 3 * * *"
    assert replaced["revision"] == 2
    added = api.call("PUT", "/schedules/tick", {"name": "t", "user_id": "u",
                                                "interval_seconds": 60, "cost": 4})  # fmt: skip
    assert added.status_code == 201, added.text
    assert (added.json()["schedule_id"], added.json()["cost"]) == ("tick", 4)
    assert body["cost"] == 1

    paused = api.ok("POST", "/schedules/tick/pause")
    assert paused["enabled"] is False
    assert paused["next_fire_at"] is None
    assert api.ok("POST", "/schedules/tick/resume")["enabled"] is True
    assert api.ok("DELETE", "/schedules/tick") == {"schedule_id": "tick", "removed": True}
    for method, path in (
        ("DELETE", "/schedules/tick"),
        ("GET", "/schedules/tick"),
        ("POST", "/schedules/tick/pause"),
        ("POST", "/schedules/tick/resume"),
    ):
        missing = api.call(method, path)
        assert missing.status_code == 404, (method, path)
        assert missing.json()["type"].endswith("schedule-not-found")
    assert [s["schedule_id"] for s in api.ok("GET", "/schedules")["schedules"]] == ["nightly"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "n", "user_id": "u", "interval_seconds": 60}, "schedule_id"),
        ({**NIGHTLY, "cron": "99 * * * *"}, "cron"),
        ({**NIGHTLY, "timezone": "Nowhere/Land"}, "timezone"),
        ({**NIGHTLY, "interval_seconds": 60}, "schedule"),
        ({**NIGHTLY, "start_at": "yesterday"}, "start_at"),
        ({**NIGHTLY, "misfire": "later"}, "misfire"),
        ({**NIGHTLY, "cost": 0}, "cost"),
        ({**NIGHTLY, "cost": 1001}, "cost"),
    ],
)
def test_bad_schedules_are_refused(api: Api, body: dict[str, Any], field: str) -> None:
    refused = api.call("POST", "/schedules", body)
    assert refused.status_code == 422, refused.text
    assert field in refused.text
    assert api.ok("GET", "/schedules") == {"schedules": []}


def test_a_path_and_body_naming_two_schedules_is_refused(api: Api) -> None:
    refused = api.call("PUT", "/schedules/other", NIGHTLY)
    assert refused.status_code == 422
    assert api.call("GET", "/schedules/" + "x" * 300).status_code == 422


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_producers_read_and_admins_change(secured: LiveServer) -> None:  # noqa: F811
    producer, admin = client(secured, "producer"), client(secured, "admin")
    assert producer.call("POST", "/schedules", NIGHTLY).status_code == 403
    admin.ok("POST", "/schedules", NIGHTLY, status=201)
    assert producer.ok("GET", "/schedules/nightly")["schedule_id"] == "nightly"
    assert len(producer.ok("GET", "/schedules")["schedules"]) == 1
    for method, path in (("PUT", "/schedules/nightly"), ("DELETE", "/schedules/nightly"),
                         ("POST", "/schedules/nightly/pause")):  # fmt: skip
        assert producer.call(method, path, NIGHTLY if method == "PUT" else None).status_code == 403
    assert client(secured, "worker").call("GET", "/schedules").status_code == 403
    assert admin.ok("DELETE", "/schedules/nightly")["removed"] is True
