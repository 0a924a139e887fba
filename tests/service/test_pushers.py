"""Pusher endpoints: enqueue (JSON and MessagePack), read, results, cancel, retry."""

from __future__ import annotations

import html
import re
import threading
import time
from typing import Any

import pytest
from helpers.support import CheckedThread

from fairque import FairQueue, TaskNotFound
from service.harness import MSGPACK, Api

MSGPACK_TYPES = ["application/msgpack", "application/x-msgpack", "application/vnd.msgpack"]


def test_push_one_task_then_the_same_id_answers_the_stored_task(api: Api) -> None:
    response = api.call(
        "POST",
        "/tasks",
        {
            "name": "send",
            "user_id": "alice",
            "payload": {"to": "a@example.com"},
            "task_id": "t1",
            "priority": "critical",
            "timeout_seconds": 5,
        },
    )
    assert response.status_code == 201, response.text
    task = response.json()
    assert response.headers["location"] == f"/v1/queues/{api.queue}/tasks/t1"
    assert task["task_id"] == "t1"
    assert task["state"] == "QUEUED"
    assert task["priority"] == "critical"
    assert task["payload"] == {"to": "a@example.com"}
    assert task["created_at"].endswith("Z")
    again = api.ok("POST", "/tasks", {"name": "other", "user_id": "bob", "task_id": "t1"})
    assert again == task
    assert api.ok("GET", "/tasks/t1") == task


def test_racing_pushes_of_one_id_get_one_201(api: Api) -> None:
    """Eight pushes of one id at once: the engine's push says which one created it."""

    def push(n: int, task_id: str, barrier: threading.Barrier, statuses: list[int]) -> None:
        barrier.wait()
        body = {"name": "n", "user_id": f"u{n}", "task_id": task_id}
        statuses.append(api.call("POST", "/tasks", body).status_code)

    for round_ in range(3):
        statuses: list[int] = []
        barrier = threading.Barrier(8)
        args = (f"race{round_}", barrier, statuses)
        threads = [CheckedThread(target=push, args=(n, *args)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(statuses) == [200] * 7 + [201]


@pytest.mark.parametrize("media", MSGPACK_TYPES)
def test_batch_in_msgpack_answers_in_msgpack(api: Api, media: str) -> None:
    tasks = [{"name": "n", "user_id": f"u{i}", "payload": {"f": 1.5, "i": i}} for i in range(3)]
    response = api.call("POST", "/tasks", {"tasks": tasks}, msgpack=True, media=media)
    assert response.status_code == 201, response.text
    assert response.headers["content-type"].startswith(media)
    out = api.data(response)["tasks"]
    assert [t["user_id"] for t in out] == ["u0", "u1", "u2"]
    assert out[1]["payload"] == {"f": 1.5, "i": 1}


def test_batch_is_all_or_nothing(api: Api) -> None:
    tasks = [{"name": "n", "user_id": "u"}, {"name": "n", "user_id": "u", "depends_on": ["nope"]}]
    response = api.call("POST", "/tasks", {"tasks": tasks})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert api.ok("GET", "/stats")["total"] == 0


def test_a_batch_names_each_failing_field_of_each_task(api: Api) -> None:
    """The engine's problems arrive field by field, as the API spells the fields."""
    tasks = [
        {"name": "n", "user_id": "u"},
        {"name": "n", "user_id": "u", "timeout_seconds": 5, "execute_after": "2999-01-01"},
    ]
    bad = check_problem(api.call("POST", "/tasks", {"tasks": tasks}), 422, "validation")
    assert bad["errors"] == [
        {"field": "tasks[1].execute_after", "message": "must be at most 10 years in the future"}
    ], bad
    controls = [{"name": "n", "user_id": "u"}, {"name": "n", "user_id": "bad\nid"}]
    bad = check_problem(api.call("POST", "/tasks", {"tasks": controls}), 422, "validation")
    assert bad["errors"] == [
        {"field": "tasks[1].user_id", "message": "must not contain control characters"}
    ], bad
    assert api.ok("GET", "/stats")["total"] == 0


def test_a_task_cost_is_taken_shown_and_checked(api: Api) -> None:
    """``cost`` rides in the body, is shown on the task and the lease, and a cost the
    engine refuses is a 422 naming the field, with nothing written."""
    task = api.push(task_id="dear", cost=3)
    assert task["cost"] == 3
    assert api.ok("GET", "/tasks/dear")["cost"] == 3
    assert api.push(task_id="plain")["cost"] == 1
    leased = api.ok("POST", "/leases", {"worker_id": "w", "max_tasks": 2})["tasks"]
    assert {t["task_id"]: t["cost"] for t in leased} == {"dear": 3, "plain": 1}
    for cost, message in ((0, ">= 1"), (1001, "<= 1000"), ("2", "int")):
        bad = check_problem(
            api.call("POST", "/tasks", {"name": "n", "user_id": "u", "cost": cost}),
            422, "validation",
        )  # fmt: skip
        assert bad["errors"][0]["field"] == "cost", bad
        assert message in bad["errors"][0]["message"], bad
    assert api.ok("GET", "/stats")["total"] == 2


def test_a_dependent_can_wait_for_an_upstream_that_failed(api: Api) -> None:
    up = api.push(task_id="up", max_retries=0)
    down = api.push(depends_on=[up["task_id"]], on_dependency_failure="wait")
    assert down["state"] == "DEFERRED"
    [leased] = api.ok("POST", "/leases", {"worker_id": "w"})["tasks"]
    assert leased["task_id"] == "up"
    failure = {"type": "failure", "lease_token": leased["lease_token"], "should_retry": False}
    api.ok("POST", "/tasks/up/outcome", failure)
    assert api.ok("GET", f"/tasks/{down['task_id']}")["state"] == "DEFERRED"  # not canceled
    wrong = api.call("POST", "/tasks", {"name": "n", "user_id": "u",
                                        "on_dependency_failure": "ignore"})  # fmt: skip
    check_problem(wrong, 422, "validation")


def test_the_location_of_any_id_is_a_path_that_finds_it(api: Api) -> None:
    """A header carries Latin-1 only: the id in ``Location`` is percent-encoded."""
    response = api.call("POST", "/tasks", {"name": "n", "user_id": "u", "task_id": "ü€ 1"})
    assert response.status_code == 201
    where = response.headers["location"]
    assert where.endswith("/tasks/%C3%BC%E2%82%AC%201")
    found = api.http.get(where)
    assert found.status_code == 200
    assert found.json()["task_id"] == "ü€ 1"


def test_integers_written_as_integral_floats(api: Api) -> None:
    """JSON Schema counts 47.0 as an integer, and so does the API, up to
    ``MAX_INTEGRAL_FIXES`` such values in one body; past them, a 422 names the field."""
    from fairque.service.media import MAX_INTEGRAL_FIXES

    few = [{"name": "n", "user_id": "u", "max_retries": 2.0, "payload": 1.0} for _ in range(3)]
    pushed = api.ok("POST", "/tasks", {"tasks": few}, status=201)["tasks"]
    assert [t["max_retries"] for t in pushed] == [2, 2, 2]
    assert api.ok("GET", f"/tasks/{pushed[0]['task_id']}")["payload"] == 1.0  # kept a float
    many = [{"name": "n", "user_id": "u", "max_retries": 2.0}] * (MAX_INTEGRAL_FIXES + 1)
    bad = check_problem(api.call("POST", "/tasks", {"tasks": many}), 422, "validation")
    assert bad["errors"][0]["field"] == f"tasks[{MAX_INTEGRAL_FIXES}].max_retries"
    assert api.ok("GET", "/stats")["total"] == 3


def test_delay_and_execute_after(api: Api) -> None:
    delayed = api.push(delay_seconds=60)
    assert delayed["state"] == "SCHEDULED"
    at = api.push(execute_after="2030-01-01T00:00:00Z")
    assert at["execute_after"] == "2030-01-01T00:00:00.000Z"
    both = api.call(
        "POST",
        "/tasks",
        {"name": "n", "user_id": "u", "delay_seconds": 1, "execute_after": "2030-01-01T00:00:00Z"},
    )
    assert both.status_code == 422
    assert both.json()["errors"][0]["field"] == "delay_seconds"


def test_the_documented_batch_of_10000_tasks_fits(api: Api) -> None:
    """10,000 tasks of a few hundred bytes each: one request, within max_body_bytes."""
    tasks = [{"name": "n", "user_id": f"u{i % 50}", "payload": {"text": "x" * 300}}
             for i in range(10_000)]  # fmt: skip
    pushed = api.ok("POST", "/tasks", {"tasks": tasks}, status=201)["tasks"]
    assert len(pushed) == 10_000


def test_every_task_without_a_filter(api: Api) -> None:
    """No state, user or name: every task, running and due ones first, page by page."""
    for i in range(3):
        api.push(task_id=f"q{i}", user_id=f"u{i}")
    [running] = api.lease(worker_id="w")
    api.push(task_id="later", delay_seconds=600)
    seen: list[tuple[str, str]] = []
    cursor = None
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        page = api.ok("GET", "/tasks", params=params)
        assert len(page["tasks"]) <= 2
        seen += [(t["task_id"], t["state"]) for t in page["tasks"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(
        [(f"q{i}", "STARTED" if f"q{i}" == running["task_id"] else "QUEUED") for i in range(3)]
        + [("later", "SCHEDULED")]
    )
    assert seen[0] == (running["task_id"], "STARTED")  # running first
    assert seen[-1] == ("later", "SCHEDULED")


def test_a_past_execute_after_is_answered_as_stored(api: Api) -> None:
    """Already due: the task is QUEUED without one, and the 201 body says the same as a
    read of the stored task (single and batch pushes)."""
    past = api.push(task_id="past", execute_after="2020-01-01T00:00:00Z")
    assert past["state"] == "QUEUED"
    assert past["execute_after"] is None
    assert api.ok("GET", "/tasks/past")["execute_after"] is None
    batch = api.ok("POST", "/tasks", {"tasks": [
        {"name": "n", "user_id": "u", "execute_after": "2020-01-01T00:00:00Z"},
        {"name": "n", "user_id": "u", "execute_after": "2030-01-01T00:00:00Z"},
    ]}, status=201)["tasks"]  # fmt: skip
    assert [t["execute_after"] for t in batch] == [None, "2030-01-01T00:00:00.000Z"]
    for t in batch:
        assert api.ok("GET", f"/tasks/{t['task_id']}")["execute_after"] == t["execute_after"]


def test_result_fetch_once(api: Api) -> None:
    api.push(task_id="r1", keep_result=True)
    [leased] = api.lease()
    done = api.ok(
        "POST",
        "/tasks/r1/outcome",
        {"type": "success", "lease_token": leased["lease_token"], "result": [1, "x"]},
    )
    assert done == {"state": "FINISHED"}
    result = api.ok("GET", "/tasks/r1/result", params={"consume": "true"})
    assert result["type"] == "success"
    assert result["result"] == [1, "x"]
    assert result["finished_at"].endswith("Z")
    assert api.ok("GET", "/tasks/r1/result", params={"consume": "true"}) is None
    assert api.ok("GET", "/tasks/unknown/result") is None


def test_result_pending_then_waits_server_side(api: Api) -> None:
    api.push(task_id="w1")
    assert api.ok("GET", "/tasks/w1/result", status=202) == {"state": "QUEUED"}
    [leased] = api.lease()

    def finish() -> None:
        time.sleep(0.5)
        api.ok(
            "POST",
            "/tasks/w1/outcome",
            {"type": "success", "lease_token": leased["lease_token"], "result": 7},
        )

    thread = CheckedThread(target=finish)
    thread.start()
    started, wait = time.monotonic(), 10
    result = api.ok("GET", "/tasks/w1/result", params={"wait_seconds": str(wait)})
    thread.join()
    assert result["result"] == 7
    assert time.monotonic() - started < wait / 2  # the outcome, not the wait, ended it
    started = time.monotonic()
    api.push(task_id="w2")
    assert api.ok("GET", "/tasks/w2/result", params={"wait_seconds": "0.5"}, status=202) == {
        "state": "QUEUED"
    }
    assert time.monotonic() - started >= 0.45


def test_cancel_then_result_is_a_canceled_failure_then_retry(api: Api) -> None:
    api.push(task_id="c1")
    assert api.ok("DELETE", "/tasks/c1")["state"] == "CANCELED"
    again = api.call("DELETE", "/tasks/c1")
    assert again.status_code == 409
    assert again.json()["task_state"] == "CANCELED"
    result = api.ok("GET", "/tasks/c1/result")
    assert result["type"] == "failure"
    assert result["reason"] == "canceled"
    assert api.ok("POST", "/tasks/c1/retry")["state"] == "QUEUED"
    assert api.call("DELETE", "/tasks/missing").status_code == 404


def test_reads(api: Api) -> None:
    api.push(user_id="alice")
    api.push(user_id="bob")
    queues = api.ok("GET", "/v1/queues")["queues"]
    assert {"name": api.queue} in queues
    stats = api.ok("GET", "/stats")
    assert stats["counts"]["QUEUED"] == 2
    users = api.ok("GET", "/users")["users"]
    assert sorted(u["user_id"] for u in users) == ["alice", "bob"]
    limits = api.ok("PUT", "/users/alice/limits", {"weight": 2, "max_in_flight": 1})
    assert limits == {"user_id": "alice", "weight": 2, "max_in_flight": 1, "max_queued": None,
                      "group": None, "floor": None, "ceiling": None,
                      "max_bytes": None}  # fmt: skip
    shown = {u["user_id"]: u for u in api.ok("GET", "/users")["users"]}
    assert (shown["alice"]["weight"], shown["alice"]["max_in_flight"]) == (2, 1)
    assert (shown["bob"]["weight"], shown["bob"]["max_in_flight"]) == (1, None)
    assert api.ok("GET", "/workers") == {"workers": []}
    assert api.ok("GET", "/tasks/nope", status=404)["type"].endswith("task-not-found")


def test_purge(api: Api) -> None:
    api.push()
    assert api.ok("POST", "/purge")["deleted"] > 0
    assert api.ok("GET", "/stats")["total"] == 0


def check_problem(response: Any, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    problem: dict[str, Any] = Api.data(response)
    assert problem["status"] == status
    assert problem["type"].endswith(kind)
    assert problem["title"]
    assert problem["detail"]
    return problem


def test_errors_are_problem_details(api: Api) -> None:
    post = api.call
    check_problem(
        post("POST", "/tasks", b"x", headers={"Content-Type": "text/plain"}),
        415,
        "unsupported-media-type",
    )
    check_problem(
        post("POST", "/tasks", {"name": "n", "user_id": "u"}, headers={"Accept": "text/html"}),
        406,
        "not-acceptable",
    )
    bad = check_problem(
        post("POST", "/tasks", {"name": "n", "user_id": "u", "priority": 9}), 422, "validation"
    )
    assert bad["errors"][0]["field"] == "priority"
    check_problem(
        post("POST", "/tasks", {"name": "n", "user_id": "u", "extra": 1}), 422, "validation"
    )
    raw = api.http.post(
        api.prefix + "/tasks", content=b"{nope", headers={"Content-Type": "application/json"}
    )
    check_problem(raw, 400, "malformed-body")
    large = {"name": "n", "user_id": "u", "payload": "x" * 1_200_000}
    check_problem(post("POST", "/tasks", large), 413, "payload-too-large")
    huge = {"name": "n", "user_id": "u", "payload": "x" * (17 * 1024 * 1024)}
    refused = check_problem(post("POST", "/tasks", huge), 413, "body-too-large")
    assert "server.max_body_bytes" in refused["detail"]
    check_problem(post("GET", "/v1/queues/unknown-queue/stats"), 404, "queue-not-found")
    lost = check_problem(post("GET", "/v1/nothing/here"), 404, "not-found")
    assert "/v1/queues/{queue}/" in lost["detail"]  # where the routes are
    packed = post("GET", "/tasks/nope", msgpack=True)
    assert packed.headers["content-type"].startswith(MSGPACK)
    check_problem(packed, 404, "task-not-found")
    check_problem(post("GET", "/tasks/x/result", params={"wait_seconds": "-1"}), 422, "validation")
    check_problem(post("POST", "/tasks", {"name": "n", "user_id": "bad\nid"}), 422, "validation")


def test_unreachable_server_is_503(unused_port_url: str) -> None:
    from service.harness import LiveServer

    live = LiveServer(unused_port_url, ["q"])
    try:
        api = Api(live.base, "q")
        response = api.call("GET", "/stats")
        check_problem(response, 503, "unavailable")
        assert response.headers["retry-after"] == "1"
        # alive, not ready: a load balancer takes it out, an orchestrator keeps it
        assert api.call("GET", "/healthz").json() == {"status": "ok"}
        check_problem(api.call("GET", "/readyz"), 503, "unavailable")
    finally:
        live.stop()


def test_ready_when_the_queue_server_answers(api: Api) -> None:
    answer = api.call("GET", "/readyz")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ready"}
    assert api.call("GET", "/healthz").json() == {"status": "ok"}


@pytest.fixture
def unused_port_url() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


def test_listing_pages_newest_first_with_filters(api: Api) -> None:
    ids = [
        api.push(task_id=f"l{i}", user_id="alice" if i % 2 else "bob")["task_id"] for i in range(7)
    ]
    pushed = api.ok(
        "POST",
        "/tasks",
        {"tasks": [{"name": "batch", "user_id": "carol", "task_id": f"b{i}"} for i in range(4)]},
        status=201,
    )
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params = {"state": "QUEUED", "limit": "3", **({"cursor": cursor} if cursor else {})}
        page = api.ok("GET", "/tasks", params=params)
        assert len(page["tasks"]) <= 3
        seen += [t["task_id"] for t in page["tasks"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    batch_ids = sorted((t["task_id"] for t in pushed["tasks"]), reverse=True)
    assert seen[:4] == batch_ids  # the batch shares one push time: newest first, then by id
    assert seen[4:] == list(reversed(ids))
    alice = api.ok("GET", "/tasks", params={"state": "QUEUED", "user_id": "alice"})
    assert [t["task_id"] for t in alice["tasks"]] == ["l5", "l3", "l1"]
    assert alice["next_cursor"] is None
    # any state: the user's index, newest created first
    everyone = api.ok("GET", "/tasks", params={"user_id": "alice", "limit": "2"})
    assert [t["task_id"] for t in everyone["tasks"]] == ["l5", "l3"]
    assert everyone["next_cursor"] is not None
    named = api.ok("GET", "/tasks", params={"state": "queued", "name": "batch", "limit": "2"})
    assert len(named["tasks"]) == 2
    assert api.ok("GET", "/tasks", params={"state": "FAILED"}) == {"tasks": [], "next_cursor": None}
    check_problem(api.call("GET", "/tasks", params={"cursor": "x"}), 422, "validation")
    check_problem(api.call("GET", "/tasks", params={"user_id": ""}), 422, "validation")
    check_problem(api.call("GET", "/tasks", params={"state": "NOPE"}), 422, "validation")
    check_problem(api.call("GET", "/tasks", params={"state": ""}), 422, "validation")
    check_problem(
        api.call("GET", "/tasks", params={"state": "QUEUED", "cursor": "!!"}), 422, "validation"
    )


def test_hostile_bodies_never_cause_a_server_error(api: Api) -> None:
    deep = '{"name": "n", "user_id": "u", "payload": ' + "[" * 5000 + "]" * 5000 + "}"
    bodies = [
        deep.encode(),
        b'{"name": "n", "user_id": "u", "payload": 123456789012345678901234567890}',
        b'{"name": "n", "user_id": "u", "payload": 1e400}',
        b'{"name": "n", "user_id": "u", "priority": true}',
        b"[]",
        b"null",
        b'{"tasks": []}',
        b'{"name": "n", "user_id": "u", "timeout_seconds": 1e308}',
    ]
    for body in bodies:
        response = api.http.post(api.prefix + "/tasks", content=body,
                                 headers={"Content-Type": "application/json"})  # fmt: skip
        assert response.status_code in (400, 422), (body[:60], response.text)
        assert response.headers["content-type"] == "application/problem+json"
    packed = api.call("POST", "/tasks", {"name": "n", "user_id": "u", "payload": float("nan")},
                      msgpack=True)  # fmt: skip
    assert packed.status_code == 422


def test_listing_resumes_when_the_cursor_task_left_the_state(api: Api) -> None:
    for i in range(6):
        api.push(task_id=f"m{i}")
        time.sleep(0.003)  # distinct push times
    page = api.ok("GET", "/tasks", params={"state": "QUEUED", "limit": "2"})
    assert [t["task_id"] for t in page["tasks"]] == ["m5", "m4"]
    api.ok("DELETE", "/tasks/m4")
    rest = api.ok("GET", "/tasks", params={"state": "QUEUED", "cursor": page["next_cursor"]})
    assert [t["task_id"] for t in rest["tasks"]] == ["m3", "m2", "m1", "m0"]


def test_an_unknown_id_reads_the_same_everywhere(live: Any, api: Api) -> None:
    """The same condition, the same words: the HTTP answers of a read, a cancel, a retry
    and an outcome, the dashboard's page and the Python client's exception."""
    expected = f"no task 'nope' in queue '{api.queue}'"
    details = [
        api.call("GET", "/tasks/nope").json()["detail"],
        api.call("DELETE", "/tasks/nope").json()["detail"],
        api.call("POST", "/tasks/nope/retry").json()["detail"],
        api.call("POST", "/tasks/nope/outcome",
                 {"type": "success", "lease_token": "1", "result": None}).json()["detail"],
    ]  # fmt: skip
    assert details == [expected] * 4
    page = api.http.get(f"/ui/q/{api.queue}/task", params={"id": "nope"})
    assert expected in html.unescape(page.text)
    q = FairQueue.from_url(live.service.url, api.queue)
    try:
        with pytest.raises(TaskNotFound, match=re.escape(expected)):
            q.cancel("nope")
    finally:
        q.close()
