"""The audit log, against a live ``serve``: each change and each refusal leaves one JSON
line naming the token, the action, the queue, the tenant and the task; reads, pushes
and a worker's traffic leave none."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from helpers.servers import ServerInfo
from helpers.support import unique_queue

from fairque.service.settings import ServerSettings, TokenSettings
from service.harness import Api, LiveServer

SECRETS = {name: f"{name}-secret-token-0123456789" for name in ("ops", "acme", "fleet")}


@pytest.fixture
def audited(server: ServerInfo) -> Iterator[LiveServer]:
    tokens = [
        TokenSettings(name="ops", role="admin", token=SECRETS["ops"]),  # type: ignore[arg-type]
        TokenSettings(name="acme", role="producer", token=SECRETS["acme"], tenants=["acme"]),  # type: ignore[arg-type]
        TokenSettings(name="fleet", role="worker", token=SECRETS["fleet"]),  # type: ignore[arg-type]
    ]
    live = LiveServer(server.url, [unique_queue("audit")], ServerSettings(tokens=tokens))
    yield live
    live.stop()


def lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """The audit lines logged so far (and forget them)."""
    found = [json.loads(r.getMessage()) for r in caplog.records if r.name == "fairque.audit"]
    caplog.clear()
    return found


def test_each_change_and_refusal_leaves_one_line(
    audited: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="fairque.audit")
    ops = Api(audited.base, audited.service.names[0], SECRETS["ops"])
    acme = Api(audited.base, ops.queue, SECRETS["acme"])
    fleet = Api(audited.base, ops.queue, SECRETS["fleet"])
    queue = ops.queue

    # traffic: pushes, reads, leases and outcomes leave nothing
    ops.push(user_id="bob", task_id="t1")
    acme.ok("POST", "/tasks", {"name": "job", "task_id": "a1"}, status=201)
    ops.ok("GET", "/tasks/t1")
    [leased] = fleet.lease()
    fleet.ok("POST", f"/tasks/{leased['task_id']}/outcome",
             {"type": "success", "lease_token": leased["lease_token"]})  # fmt: skip
    assert lines(caplog) == []

    ops.push(user_id="bob", task_id="t2")
    caplog.clear()
    ops.ok("DELETE", "/tasks/t2")
    ops.ok("PUT", "/users/bob/limits", {"weight": 3})
    assert lines(caplog) == [
        {"audit": "cancel_task", "token": "ops", "peer": "127.0.0.1", "status": 200,
         "queue": queue, "tenant": "bob", "task": "t2"},
        {"audit": "set_limits", "token": "ops", "peer": "127.0.0.1", "status": 200,
         "queue": queue, "tenant": "bob"},
    ]  # fmt: skip

    # refusals: for the scope, for the role, and a change that failed
    assert acme.call("POST", "/tasks", {"name": "job", "user_id": "bob"}).status_code == 403
    assert acme.call("GET", "/stats").status_code == 403
    assert fleet.call("POST", "/purge").status_code == 403
    assert ops.call("DELETE", "/tasks/t2").status_code == 409
    assert lines(caplog) == [
        {"audit": "push", "token": "acme", "peer": "127.0.0.1", "status": 403,
         "queue": queue, "tenant": "bob"},
        {"audit": "queue_stats", "token": "acme", "peer": "127.0.0.1", "status": 403,
         "queue": queue},
        {"audit": "purge", "token": "fleet", "peer": "127.0.0.1", "status": 403,
         "queue": queue},
        {"audit": "cancel_task", "token": "ops", "peer": "127.0.0.1", "status": 409,
         "queue": queue, "task": "t2"},
    ]  # fmt: skip


def test_a_dashboard_action_leaves_a_line(
    audited: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="fairque.audit")
    ops = Api(audited.base, audited.service.names[0], SECRETS["ops"])
    ops.push(user_id="bob", task_id="t3")
    browser = httpx.Client(base_url=audited.base)
    browser.get("/ui/login")
    csrf = browser.cookies["fq_csrf"]
    browser.post("/ui/login", data={"csrf": csrf, "next": "/ui", "token": SECRETS["ops"]})
    caplog.clear()
    done = browser.post(f"/ui/q/{ops.queue}/task/cancel", data={"csrf": csrf, "id": "t3"})
    assert done.status_code in (200, 303)
    assert ops.ok("GET", "/tasks/t3")["state"] == "CANCELED"
    assert lines(caplog) == [
        {"audit": "dashboard:task_action", "token": "ops", "peer": "127.0.0.1",
         "status": 303, "queue": ops.queue, "task": "t3"},
    ]  # fmt: skip
