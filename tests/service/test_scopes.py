"""Tokens held to tenants and queues, against a live ``serve``: a tenant's token acts
for its tenant alone and finds another tenant's task exactly as an unknown one; a
queue's token neither sees nor reaches another queue."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from helpers.servers import ServerInfo, SyncClient
from helpers.support import queue_snapshot, unique_queue
from pydantic import ValidationError

from fairque.service.settings import ServerSettings, TokenSettings
from service.harness import Api, LiveServer

SECRETS = {
    name: f"{name}-secret-token-0123456789"
    for name in (
        "acme",
        "globex",
        "several",
        "acme-worker",
        "viewer",
        "reader",
        "admin",
        "blind",
        "many",
    )
}


def entry(name: str, role: str, **scope: Any) -> TokenSettings:
    return TokenSettings(name=name, role=role, token=SECRETS[name], **scope)  # type: ignore[arg-type]


@pytest.fixture
def scoped(server: ServerInfo) -> Iterator[LiveServer]:
    main, other = unique_queue("scoped"), unique_queue("hidden")
    tokens = [
        entry("acme", "producer", tenants=["acme"]),
        entry("globex", "producer", tenants=["globex"]),
        entry("several", "producer", tenants=["acme", "beta-*"]),
        entry("acme-worker", "worker", tenants=["acme"]),
        entry("viewer", "viewer", queues=[main[:-4] + "*"]),
        entry("reader", "viewer", queues=[main], payloads=True),
        entry("admin", "admin"),
        entry("blind", "admin", payloads=False),
        entry("many", "producer", tenants=[f"t{i}" for i in range(20)]),
    ]
    live = LiveServer(server.url, [main, other], ServerSettings(tokens=tokens))
    yield live
    live.stop()


def as_(live: LiveServer, name: str, queue: int = 0) -> Api:
    return Api(live.base, live.service.explicit[queue], SECRETS[name])


def push(api: Api, **task: Any) -> dict[str, Any]:
    """Push one task through a scoped token (naming its tenant only when given)."""
    out: dict[str, Any] = api.ok("POST", "/tasks", {"name": "job", **task}, status=201)
    return out


def answer(response: httpx.Response) -> tuple[int, Any]:
    return response.status_code, Api.data(response)


@pytest.mark.parametrize("msgpack", [False, True], ids=["json", "msgpack"])
def test_a_tenant_token_pushes_as_its_tenant_alone(
    scoped: LiveServer, redis_client: SyncClient, msgpack: bool
) -> None:
    acme, admin = as_(scoped, "acme"), as_(scoped, "admin")
    mine = acme.ok("POST", "/tasks", {"name": "job"}, status=201, msgpack=msgpack)
    assert mine["user_id"] == "acme"  # a push naming no tenant is its own
    assert acme.ok("POST", "/tasks", {"name": "job", "user_id": "acme"}, 201, msgpack=msgpack)

    before = queue_snapshot(redis_client, acme.queue)
    refused = acme.call("POST", "/tasks", {"name": "job", "user_id": "globex"}, msgpack=msgpack)
    assert refused.status_code == 403
    assert Api.data(refused)["type"] == "urn:fairque:problem:forbidden-tenant"
    batch = {"tasks": [{"name": "job"}, {"name": "job", "user_id": "globex"}]}
    assert acme.call("POST", "/tasks", batch, msgpack=msgpack).status_code == 403
    assert queue_snapshot(redis_client, acme.queue) == before  # nothing of either was pushed

    # a token of several tenants says which; a token of the whole queue always does
    several = as_(scoped, "several")
    unnamed = several.call("POST", "/tasks", {"name": "job"}, msgpack=msgpack)
    assert unnamed.status_code == 422
    assert Api.data(unnamed)["errors"][0]["field"] == "user_id"
    assert admin.call("POST", "/tasks", {"name": "job"}).status_code == 422
    assert push(several, user_id="beta-7")["user_id"] == "beta-7"
    assert several.call("POST", "/tasks", {"name": "job", "user_id": "gamma"}).status_code == 403
    assert queue_snapshot(redis_client, acme.queue) != before


@pytest.mark.parametrize("msgpack", [False, True], ids=["json", "msgpack"])
def test_another_tenants_task_answers_as_an_unknown_id(scoped: LiveServer, msgpack: bool) -> None:
    acme, globex, admin = as_(scoped, "acme"), as_(scoped, "globex"), as_(scoped, "admin")

    def probe() -> list[tuple[int, Any]]:
        """What globex gets for the id 'shared', by every route that takes an id."""
        calls = [
            ("GET", "/tasks/shared"),
            ("GET", "/tasks/shared/result"),
            ("GET", "/tasks/shared/result?consume=true"),
            ("DELETE", "/tasks/shared"),
        ]
        return [answer(globex.call(m, p, msgpack=msgpack)) for m, p in calls]

    unknown = probe()  # before any task 'shared' exists
    assert [status for status, _ in unknown] == [404, 200, 200, 404]
    task = push(acme, task_id="shared", payload={"secret": "acme's"})
    acme_id = task["task_id"]
    assert acme_id == "shared"  # the id it chose, as it chose it
    [leased] = as_(scoped, "acme-worker").lease()
    done = {"type": "success", "lease_token": leased["lease_token"], "result": {"r": 1}}
    as_(scoped, "acme-worker").ok("POST", f"/tasks/{leased['task_id']}/outcome", done)
    assert probe() == unknown  # read, result, consume and cancel: exactly as unknown
    assert acme.ok("GET", "/tasks/shared/result")["result"] == {"r": 1}  # not consumed

    # globex's own 'shared' is a task of its own: 201, its payload, its id
    theirs = globex.ok(
        "POST", "/tasks", {"name": "job", "task_id": "shared", "payload": {"mine": 1}},
        status=201, msgpack=msgpack,
    )  # fmt: skip
    assert (theirs["task_id"], theirs["payload"]) == ("shared", {"mine": 1})
    assert globex.ok("GET", "/tasks/shared", msgpack=msgpack)["payload"] == {"mine": 1}
    assert acme.ok("GET", "/tasks/shared")["state"] == "FINISHED"  # (its payload dropped)
    # a token of the whole queue sees each kept under its tenant
    stored = {t["task_id"]: t["user_id"] for t in admin.ok("GET", "/tasks")["tasks"]}
    assert stored == {"4:acme:shared": "acme", "6:globex:shared": "globex"}

    # listings hold its tenants' tasks alone, whatever user they ask for
    listed = globex.ok("GET", "/tasks", msgpack=msgpack)["tasks"]
    assert [t["task_id"] for t in listed] == ["shared"]
    assert globex.ok("GET", "/tasks?user_id=acme", msgpack=msgpack) == {
        "tasks": [], "next_cursor": None,
    }  # fmt: skip
    users = {u["user_id"] for u in globex.ok("GET", "/users", msgpack=msgpack)["users"]}
    assert users == {"globex"}


def test_a_tenant_token_is_kept_from_the_whole_queues_routes(scoped: LiveServer) -> None:
    acme = as_(scoped, "acme")
    for path in ("/stats", "/workers", "/tenants", "/constraints", "/schedules"):
        refused = acme.call("GET", path)
        assert refused.status_code == 403, path
        assert refused.json()["type"] == "urn:fairque:problem:forbidden"
    assert acme.http.get("/metrics").status_code == 403
    assert acme.ok("GET", "/fairness")["mode"] in ("time", "count")


def test_a_tenant_worker_leases_its_tenants_tasks_alone(scoped: LiveServer) -> None:
    globex, acme = as_(scoped, "globex"), as_(scoped, "acme")
    worker = as_(scoped, "acme-worker")
    theirs = push(globex, task_id="g1")
    assert worker.lease(5, assigned_users=["globex"]) == []  # asks for another tenant
    push(acme, task_id="a1")
    push(acme, task_id="a2")
    leased = worker.lease(5, steal_targets=["*"])
    # a lease carries the id as kept, which the worker reports back with no lookup
    assert sorted(t["task_id"] for t in leased) == ["4:acme:a1", "4:acme:a2"]
    assert {t["user_id"] for t in leased} == {"acme"}
    # another tenant's task answers its outcome and heartbeat as an unknown id
    token = {"lease_token": "x" * 32}
    for path, body in (
        ("/outcome", {"type": "success", **token}),
        ("/extend", {**token, "seconds": 10}),
    ):
        refused = worker.call("POST", f"/tasks/{theirs['task_id']}{path}", body)
        assert refused.status_code == 404
        assert refused.json()["type"] == "urn:fairque:problem:task-not-found"
    outcomes = [
        {"task_id": t["task_id"], "lease_token": t["lease_token"], "type": "success"}
        for t in leased
    ]
    batch = worker.ok("POST", "/outcomes", {"outcomes": outcomes})["results"]
    assert [item["state"] for item in batch] == ["FINISHED", "FINISHED"]
    assert acme.ok("GET", "/tasks/a1")["state"] == "FINISHED"
    assert as_(scoped, "admin").ok("GET", "/tasks/6:globex:g1")["state"] == "QUEUED"


def test_a_queue_token_neither_sees_nor_reaches_other_queues(scoped: LiveServer) -> None:
    viewer = as_(scoped, "viewer")
    main, hidden = scoped.service.explicit
    assert viewer.ok("GET", "/v1/queues") == {"queues": [{"name": main}]}
    assert viewer.ok("GET", "/stats")["queue"] == main
    away = Api(scoped.base, hidden, SECRETS["viewer"]).call("GET", "/stats")
    assert away.status_code == 404
    assert away.json()["type"] == "urn:fairque:problem:queue-not-found"
    never = Api(scoped.base, "never-made", SECRETS["viewer"]).call("GET", "/stats")
    assert never.status_code == 404
    # a served queue out of its scope answers as a queue that does not exist
    assert away.text.replace(hidden, "Q") == never.text.replace("never-made", "Q")
    assert hidden not in never.text
    metrics = viewer.http.get("/metrics")
    assert metrics.status_code == 200
    assert main in metrics.text
    assert hidden not in metrics.text
    assert hidden in as_(scoped, "admin").http.get("/metrics").text


def test_a_tenant_token_ids_a_pattern_tenant_by_what_it_is_answered(scoped: LiveServer) -> None:
    """A tenant the scope reaches through a pattern: the id answered is the id kept,
    which the same token reads it by; ids the queue generates are kept as they are."""
    several = as_(scoped, "several")
    named = push(several, user_id="beta-1", task_id="x")
    assert named["task_id"] == "6:beta-1:x"
    assert several.ok("GET", "/tasks/6:beta-1:x")["user_id"] == "beta-1"
    mine = push(several, user_id="acme", task_id="x")
    assert mine["task_id"] == "x"  # a tenant it names exactly: its own id
    generated = push(several, user_id="beta-1")
    assert several.ok("GET", f"/tasks/{generated['task_id']}")["user_id"] == "beta-1"
    assert as_(scoped, "admin").ok("GET", f"/tasks/{generated['task_id']}")


def test_a_tenant_tokens_batch_depends_on_its_own_ids(scoped: LiveServer) -> None:
    acme = as_(scoped, "acme")
    batch = {"tasks": [{"name": "a", "task_id": "first"},
                       {"name": "b", "task_id": "second", "depends_on": ["first"]}]}  # fmt: skip
    out = acme.ok("POST", "/tasks", batch, status=201)["tasks"]
    assert [(t["task_id"], t["depends_on"], t["state"]) for t in out] == [
        ("first", [], "QUEUED"), ("second", ["first"], "DEFERRED"),
    ]  # fmt: skip
    later = push(acme, task_id="third", depends_on=["first"])
    assert (later["depends_on"], later["state"]) == (["first"], "DEFERRED")


def test_a_scope_is_checked_when_the_settings_load() -> None:
    with pytest.raises(ValidationError, match="admin token acts on whole queues"):
        entry("admin", "admin", tenants=["acme"])
    with pytest.raises(ValidationError, match="must be names, not patterns"):
        entry("acme-worker", "worker", tenants=["acme-*"])
    with pytest.raises(ValidationError, match="braces or whitespace"):
        entry("viewer", "viewer", queues=["a b"])
    with pytest.raises(ValidationError, match="control characters"):
        entry("acme", "producer", tenants=["a\x00"])
    with pytest.raises(ValidationError, match="at least 1 item"):
        entry("acme", "producer", tenants=[])
    assert entry("acme", "producer", tenants=["acme"]).scope.own_tenant == "acme"


def test_a_scoped_viewer_reads_no_payload_unless_its_entry_says_so(scoped: LiveServer) -> None:
    admin = as_(scoped, "admin")
    admin.push(user_id="bob", task_id="p1", payload={"card": "4242"})
    [leased] = admin.lease()
    done = {"type": "success", "lease_token": leased["lease_token"], "result": {"ok": 1}}
    admin.ok("POST", "/tasks/p1/outcome", done)
    admin.push(user_id="bob", task_id="p2", payload={"card": "4343"})

    viewer, reader = as_(scoped, "viewer"), as_(scoped, "reader")
    for msgpack in (False, True):
        assert viewer.ok("GET", "/tasks/p2", msgpack=msgpack)["payload"] is None
        assert viewer.ok("GET", "/tasks/p1/result", msgpack=msgpack)["result"] is None
        listed = viewer.ok("GET", "/tasks", msgpack=msgpack)["tasks"]
        assert {t["task_id"]: t["payload"] for t in listed} == {"p1": None, "p2": None}
    assert reader.ok("GET", "/tasks/p2")["payload"] == {"card": "4343"}
    assert reader.ok("GET", "/tasks/p1/result")["result"] == {"ok": 1}
    assert admin.ok("GET", "/tasks/p2")["payload"] == {"card": "4343"}
    assert entry("viewer", "viewer").scope.payloads  # a viewer of everything reads them
    assert not entry("admin", "admin", payloads=False).scope.payloads
    blind = as_(scoped, "blind")  # an admin whose entry says it reads no payloads
    [leased] = blind.lease()
    assert leased["payload"] == {"card": "4343"}  # a lease carries its payload
    assert blind.ok("GET", "/tasks/p2")["payload"] is None


def test_a_dedup_key_merges_within_its_tenant_alone(scoped: LiveServer) -> None:
    acme, globex = as_(scoped, "acme"), as_(scoped, "globex")
    first = push(acme, payload={"v": "acme"}, dedup_key="nightly")
    merged = acme.ok(
        "POST", "/tasks", {"name": "job", "payload": {"v": "again"}, "dedup_key": "nightly"}
    )
    assert merged["task_id"] == first["task_id"]  # its own waiting task: merged (keep)
    theirs = push(globex, payload={"v": "globex"}, dedup_key="nightly")
    assert theirs["task_id"] != first["task_id"]
    assert (theirs["user_id"], theirs["payload"]) == ("globex", {"v": "globex"})


def test_a_token_of_many_named_tenants_finds_its_ids_under_each(scoped: LiveServer) -> None:
    many = as_(scoped, "many")
    for user in ("t0", "t19"):  # under the first and the last (past a read of 16 at once)
        pushed = push(many, user_id=user, task_id=f"deep-{user}")
        assert pushed["task_id"] == f"deep-{user}"
        assert many.ok("GET", f"/tasks/deep-{user}")["user_id"] == user
    assert many.call("GET", "/tasks/deep-t5").status_code == 404


def test_an_id_kept_under_its_tenant_is_held_to_the_id_limit_and_its_own_tenant(
    scoped: LiveServer, redis_client: SyncClient
) -> None:
    acme, admin = as_(scoped, "acme"), as_(scoped, "admin")
    before = queue_snapshot(redis_client, acme.queue)
    long_id = acme.call("POST", "/tasks", {"name": "job", "task_id": "x" * 250})
    assert long_id.status_code == 422  # 250 characters, 258 kept under 'acme'
    assert long_id.json()["errors"][0]["field"] == "task_id"
    assert queue_snapshot(redis_client, acme.queue) == before
    # only a token of the whole queue can push an id in a tenant's kept form; a tenant's
    # push that meets it there is a conflict, not another tenant's task
    admin.push(user_id="globex", task_id="4:acme:dup", payload={"globex's": 1})
    taken = acme.call("POST", "/tasks", {"name": "job", "task_id": "dup"})
    assert taken.status_code == 409
    assert taken.json()["type"] == "urn:fairque:problem:task-id-taken"
    assert "globex" not in taken.text
