"""The constraint endpoints: define, read, list, remove; use counts; roles."""

from __future__ import annotations

from typing import Any

import pytest

from service.harness import Api, LiveServer
from service.test_auth import client, secured  # noqa: F401 (the fixture)

# HTTP over the engine's constraint methods: the engine's tests cover every server kind
pytestmark = pytest.mark.server_kinds("valkey")

MAIL: dict[str, Any] = {"name": "mail.*", "payload": {"region": ["eu", "us"]},
                        "concurrency": 1, "rate": 50, "burst": 2}  # fmt: skip


def test_constraint_endpoints(api: Api) -> None:
    body = api.ok("PUT", "/constraints/mail", MAIL)
    assert body["constraint_id"] == "mail"
    assert body["queue"] == api.queue
    assert (body["concurrency"], body["rate"], body["burst"], body["per"]) == (1, 50, 2, 1.0)
    assert (body["running"], body["parked"], body["buckets"]) == (0, 0, {})
    assert api.ok("PUT", "/constraints/mail", MAIL) == body  # the same again
    for _ in range(2):
        api.push(name="mail.send", user_id="u", payload={"region": "eu"})
    leased = api.ok("POST", "/leases", {"worker_id": "w", "max_tasks": 2, "wait_seconds": 0})
    assert len(leased["tasks"]) == 1
    used = api.ok("GET", "/constraints/mail", msgpack=True)
    assert used["buckets"] == {"mail": {"running": 1, "parked": 1}}
    assert api.ok("GET", "/constraints")["constraints"] == [used]
    assert api.ok("DELETE", "/constraints/mail") == {"constraint_id": "mail", "removed": True}
    for method in ("GET", "DELETE"):
        missing = api.call(method, "/constraints/mail")
        assert missing.status_code == 404
        assert missing.json()["type"].endswith("constraint-not-found")
    assert api.ok("GET", "/constraints") == {"constraints": []}


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/constraints/c", {"name": "n"}, "rate or a concurrency"),
        ("/constraints/c", {"rate": 0}, "rate"),
        ("/constraints/c", {"rate": 1, "payload": {"k": {"deep": 1}}}, "payload"),
        ("/constraints/c", {"rate": 1, "extra": 1}, "extra"),
        ("/constraints/bad%20id", {"rate": 1}, "constraint id"),
    ],
)
def test_bad_constraints_are_refused(api: Api, path: str, body: Any, field: str) -> None:
    refused = api.call("PUT", path, body)
    assert refused.status_code == 422, refused.text
    assert field in refused.text
    assert api.ok("GET", "/constraints") == {"constraints": []}
    assert api.call("GET", "/constraints/" + "x" * 300).status_code == 422


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_readers_list_and_admins_change(secured: LiveServer) -> None:  # noqa: F811
    producer, admin = client(secured, "producer"), client(secured, "admin")
    assert producer.call("PUT", "/constraints/c", {"rate": 1}).status_code == 403
    admin.ok("PUT", "/constraints/c", {"rate": 1})
    assert producer.ok("GET", "/constraints/c")["constraint_id"] == "c"
    assert producer.call("DELETE", "/constraints/c").status_code == 403
    assert admin.ok("DELETE", "/constraints/c")["removed"] is True
