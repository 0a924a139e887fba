"""Pull-worker endpoints: leases (fair, long-polled), outcomes, batches, heartbeats."""

from __future__ import annotations

import time

import pytest
from helpers.support import CheckedThread

from fairque.models import TaskOutcome, TaskState
from fairque.service.convert import failure_from_outcome
from service.harness import Api


def test_leases_are_fair_across_users(api: Api) -> None:
    for _ in range(5):
        api.push(user_id="flood")
    api.push(user_id="small1")
    api.push(user_id="small2")
    leased = api.lease(3, worker_id="w1", lease_seconds=10)
    assert sorted(t["user_id"] for t in leased) == ["flood", "small1", "small2"]
    task = leased[0]
    assert task["state"] == "STARTED"
    assert task["attempt"] == 1
    assert task["lease_token"]
    assert task["lease_expires_at"].endswith("Z")
    assert task["worker_id"] == "w1"


def test_lease_long_poll_wakes_on_push_and_ends_empty(api: Api) -> None:
    started = time.monotonic()
    assert api.lease(wait_seconds=0.6) == []
    assert time.monotonic() - started >= 0.55

    def later() -> None:
        time.sleep(0.4)
        api.push(user_id="late")

    thread = CheckedThread(target=later)
    thread.start()
    started, wait = time.monotonic(), 15
    leased = api.lease(wait_seconds=wait)
    thread.join()
    assert [t["user_id"] for t in leased] == ["late"]
    assert time.monotonic() - started < wait / 2  # the push, not the wait, ended it


def test_resent_lease_request_returns_the_same_leases(api: Api) -> None:
    api.push(task_id="a")
    first = api.lease(request_id="req-1")
    again = api.lease(request_id="req-1")
    assert [t["lease_token"] for t in first] == [t["lease_token"] for t in again]


def test_outcome_replay_and_stale_lease(api: Api) -> None:
    api.push(task_id="t")
    [task] = api.lease()
    success = {
        "type": "success",
        "lease_token": task["lease_token"],
        "result": {"ok": True},
        "finished_at": "2026-01-01T00:00:00Z",
    }
    assert api.ok("POST", "/tasks/t/outcome", success) == {"state": "FINISHED"}
    assert api.ok("POST", "/tasks/t/outcome", success) == {"state": "FINISHED"}
    stale = api.call("POST", "/tasks/t/outcome", {**success, "lease_token": "999999"})
    assert stale.status_code == 409
    problem = stale.json()
    assert problem["type"].endswith("lease-lost")
    assert problem["task_state"] == "FINISHED"


def test_failure_retries_then_fails_with_the_message_kept(api: Api) -> None:
    api.push(task_id="f", max_retries=1)
    [task] = api.lease()
    retry = {
        "type": "failure",
        "lease_token": task["lease_token"],
        "reason": "timeout",
        "should_retry": True,
        "error": {"code": 7},
        "message": "slow",
    }
    assert api.ok("POST", "/tasks/f/outcome", retry) == {"state": "SCHEDULED"}
    stored = api.ok("GET", "/tasks/f")
    assert stored["retry_count"] == stored["attempts"] == 1
    deadline = time.monotonic() + 10
    leased: list[dict[str, object]] = []
    while not leased and time.monotonic() < deadline:
        leased = api.lease(wait_seconds=2)
    [again] = leased
    assert again["attempt"] == 2
    final = {
        "type": "failure",
        "lease_token": again["lease_token"],
        "reason": "other",
        "should_retry": False,
        "error": ["boom", 1],
        "message": "it broke",
    }
    assert api.ok("POST", "/tasks/f/outcome", final) == {"state": "FAILED"}
    result = api.ok("GET", "/tasks/f/result")
    assert result == {
        "type": "failure",
        "reason": "other",
        "finished_at": result["finished_at"],
        "should_retry": False,
        "error": ["boom", 1],
        "message": "it broke",
    }
    # the failure is kept as fields: the message is the task's error
    assert api.ok("GET", "/tasks/f")["error"] == "it broke"
    # fetch once covers failures: consumed, then null
    assert api.ok("GET", "/tasks/f/result", params={"consume": "true"}) == result
    assert api.ok("GET", "/tasks/f/result") is None


def test_a_failure_whose_error_the_queue_cannot_store_keeps_its_text(api: Api) -> None:
    api.push(task_id="b", max_retries=0)
    [task] = api.lease()
    failure = {
        "type": "failure", "lease_token": task["lease_token"], "should_retry": False,
        "error": b"\x00raw", "message": "binary",
    }  # fmt: skip
    assert api.ok("POST", "/tasks/b/outcome", failure, msgpack=True) == {"state": "FAILED"}
    result = api.ok("GET", "/tasks/b/result")
    assert result["error"] == repr(b"\x00raw")
    assert result["message"] == "binary"


def test_failures_stored_as_marked_text_are_still_read() -> None:
    stored = 'fairque-failure:{"reason": "timeout", "message": "slow", "error": [1]}'
    out = TaskOutcome(task_id="t", state=TaskState.FAILED, error=stored)
    failure = failure_from_outcome(out)
    assert (failure.reason, failure.message, failure.error) == ("timeout", "slow", [1])
    plain = failure_from_outcome(out.model_copy(update={"error": "boom"}))
    assert (plain.reason, plain.message) == ("other", "boom")


def test_a_none_result_is_a_success_until_consumed(api: Api) -> None:
    api.push(task_id="n")
    [task] = api.lease()
    success = {"type": "success", "lease_token": task["lease_token"], "result": None}
    assert api.ok("POST", "/tasks/n/outcome", success) == {"state": "FINISHED"}
    result = api.ok("GET", "/tasks/n/result", params={"consume": "true"})
    assert result == {"type": "success", "finished_at": result["finished_at"], "result": None}
    assert api.ok("GET", "/tasks/n/result") is None
    api.push(task_id="k", keep_result=False)
    [task] = api.lease()
    success = {"type": "success", "lease_token": task["lease_token"], "result": 1}
    assert api.ok("POST", "/tasks/k/outcome", success) == {"state": "FINISHED"}
    assert api.ok("GET", "/tasks/k/result") is None


def test_outcome_batch_answers_each_item(api: Api) -> None:
    api.push(task_id="x")
    api.push(task_id="y")
    leased = {t["task_id"]: t for t in api.lease(2)}
    body = {"outcomes": [
        {"type": "success", "task_id": "x", "lease_token": leased["x"]["lease_token"]},
        {"type": "failure", "task_id": "y", "lease_token": "nope", "should_retry": False},
        {"type": "failure", "task_id": "y", "lease_token": leased["y"]["lease_token"],
         "should_retry": False, "message": "m"},
    ]}  # fmt: skip
    results = api.ok("POST", "/outcomes", body, msgpack=True)["results"]
    assert [r["status"] for r in results] == [200, 409, 200]
    assert results[0]["state"] == "FINISHED"
    assert results[1]["problem"]["type"].endswith("lease-lost")
    assert results[2]["state"] == "FAILED"


@pytest.mark.parametrize("msgpack", [False, True], ids=["json", "msgpack"])
def test_a_task_given_back_unrun_is_queued_with_no_attempt_spent(api: Api, msgpack: bool) -> None:
    """A draining worker gives back what it has not started: alone, in a batch, or
    carried by a lease request; a resend answers the same; a stale token is 409."""
    for task_id in ("a", "b", "c", "d"):
        api.push(task_id=task_id)
    leased = {t["task_id"]: t["lease_token"] for t in api.lease(4, worker_id="drain")}
    back = {"type": "requeue", "lease_token": leased["a"]}
    assert api.ok("POST", "/tasks/a/outcome", back, msgpack=msgpack) == {"state": "QUEUED"}
    assert api.ok("POST", "/tasks/a/outcome", back, msgpack=msgpack) == {"state": "QUEUED"}
    batch = {"outcomes": [
        {"type": "requeue", "task_id": "b", "lease_token": leased["b"]},
        {"type": "success", "task_id": "c", "lease_token": leased["c"]},
    ]}  # fmt: skip
    results = api.ok("POST", "/outcomes", batch, msgpack=msgpack)["results"]
    assert [(r["task_id"], r["state"]) for r in results] == [("b", "QUEUED"), ("c", "FINISHED")]
    carried = api.ok("POST", "/leases", {
        "worker_id": "drain", "max_tasks": 1,
        "outcomes": [{"type": "requeue", "task_id": "d", "lease_token": leased["d"]}],
    }, msgpack=msgpack)  # fmt: skip
    assert carried["results"] == [{"task_id": "d", "status": 200, "state": "QUEUED"}]
    for task_id in ("a", "b", "d"):
        task = api.ok("GET", f"/tasks/{task_id}")
        assert task["state"] in ("QUEUED", "STARTED"), task  # (d may be leased again)
        assert task["retry_count"] == 0
    stale = api.call("POST", "/tasks/c/outcome", {"type": "requeue", "lease_token": "x" * 20})
    assert stale.status_code == 409


def test_a_refused_result_fails_its_task_at_once(api: Api) -> None:
    api.push(task_id="nan", max_retries=1)
    api.push(task_id="big", max_retries=0)
    api.push(task_id="ok")
    leased = {t["task_id"]: t for t in api.lease(3)}
    nan = {"type": "success", "lease_token": leased["nan"]["lease_token"],
           "result": float("nan")}  # fmt: skip
    problem = api.ok("POST", "/tasks/nan/outcome", nan, 422, msgpack=True)
    assert problem["type"].endswith("result-refused")
    assert problem["task_state"] == "SCHEDULED"  # retried by its policy
    task = api.ok("GET", "/tasks/nan")
    assert task["state"] == "SCHEDULED"
    assert task["error"].startswith("result refused: ")
    assert "NaN" in task["error"]
    # a batch: each item answered on its own, the refused one failed in the same call
    body = {"outcomes": [
        {"type": "success", "task_id": "big", "lease_token": leased["big"]["lease_token"],
         "result": b"\x00raw"},  # MessagePack bytes: no JSON for them
        {"type": "success", "task_id": "ok", "lease_token": leased["ok"]["lease_token"],
         "result": 1},
    ]}  # fmt: skip
    results = api.ok("POST", "/outcomes", body, msgpack=True)["results"]
    assert [r["status"] for r in results] == [422, 200]
    assert results[0]["problem"]["task_state"] == "FAILED"
    assert "serializ" in results[0]["problem"]["detail"]
    assert api.ok("GET", "/tasks/big")["state"] == "FAILED"
    assert api.ok("GET", "/tasks/ok")["state"] == "FINISHED"
    # over max_payload_bytes, which bounds a result as it bounds a payload
    api.push(task_id="huge", max_retries=0)
    [leased] = api.lease(1)
    huge = {"type": "success", "lease_token": leased["lease_token"], "result": "x" * 1_100_000}
    too_big = api.ok("POST", "/tasks/huge/outcome", huge, 422, msgpack=True)
    assert too_big["type"].endswith("result-refused")
    assert "max_payload_bytes" in too_big["detail"]
    assert too_big["task_state"] == "FAILED"
    # resent (its reply was lost): the same answer, and the task is failed once
    again = api.ok("POST", "/tasks/nan/outcome", nan, 422, msgpack=True)
    assert again == problem
    assert api.ok("GET", "/tasks/nan")["retry_count"] == task["retry_count"] == 1


def test_extend_moves_the_deadline_and_stale_is_409(api: Api) -> None:
    api.push(task_id="e")
    [task] = api.lease(lease_seconds=5)
    out = api.ok("POST", "/tasks/e/extend", {"lease_token": task["lease_token"], "seconds": 60})
    assert out["cancel_requested"] is False
    assert out["lease_expires_at"] > task["lease_expires_at"]
    stale = api.call("POST", "/tasks/e/extend", {"lease_token": "0"})
    assert stale.status_code == 409
    api.ok("DELETE", "/tasks/e")
    # canceled while this lease held it: the worker hears it on its next heartbeat
    for _ in range(2):  # and again on a resend
        canceled = api.ok("POST", "/tasks/e/extend", {"lease_token": task["lease_token"]})
        assert canceled["cancel_requested"] is True
    # another token of the canceled task is only stale
    stale = api.call("POST", "/tasks/e/extend", {"lease_token": "0"})
    assert stale.status_code == 409
    assert stale.json()["task_state"] == "CANCELED"


def test_an_extend_carries_the_handler_s_progress(api: Api) -> None:
    api.push(task_id="p")
    [task] = api.lease(lease_seconds=30)
    assert task["progress"] is None
    token = task["lease_token"]
    body = {"lease_token": token, "progress": 0.75, "progress_message": "three quarters"}
    api.ok("POST", "/tasks/p/extend", body)
    shown = api.ok("GET", "/tasks/p")
    assert (shown["progress"], shown["progress_message"]) == (0.75, "three quarters")
    page = api.http.get(f"/ui/q/{api.queue}/task", params={"id": "p"}).text
    assert "three quarters" in page.split('id="progress"')[1].split("</tr>")[0]
    for bad in ({"progress": 1.5}, {"progress": "half"},
                {"progress": 0.5, "progress_message": "two\nlines"}):  # fmt: skip
        refused = api.call("POST", "/tasks/p/extend", {"lease_token": token, **bad})
        assert refused.status_code == 422, refused.text
    assert api.ok("GET", "/tasks/p")["progress"] == 0.75


def test_lease_request_carries_the_previous_outcomes(api: Api) -> None:
    for i in range(3):
        api.push(task_id=f"c{i}", user_id=f"u{i}")
    first, second = api.lease(2)
    outcomes = [
        {"type": "success", "task_id": first["task_id"], "lease_token": first["lease_token"],
         "result": 1},
        {"type": "failure", "task_id": second["task_id"], "lease_token": second["lease_token"],
         "should_retry": False, "message": "no"},
        {"type": "success", "task_id": "c2", "lease_token": "stale"},
    ]  # fmt: skip
    answer = api.ok("POST", "/leases", {"worker_id": "w1", "max_tasks": 5, "outcomes": outcomes},
                    msgpack=True)  # fmt: skip
    assert [t["task_id"] for t in answer["tasks"]] == ["c2"]
    assert [(r["task_id"], r["status"]) for r in answer["results"]] == [
        (first["task_id"], 200), (second["task_id"], 200), ("c2", 409),
    ]  # fmt: skip
    assert answer["results"][1]["state"] == "FAILED"
    assert api.ok("GET", f"/tasks/{first['task_id']}/result")["result"] == 1
    [leased] = answer["tasks"]
    done = {"type": "success", "task_id": "c2", "lease_token": leased["lease_token"]}
    last = api.ok("POST", "/leases", {"worker_id": "w1", "outcomes": [done], "wait_seconds": 0.3})
    assert last == {"tasks": [], "results": [{"task_id": "c2", "status": 200,
                                              "state": "FINISHED"}]}  # fmt: skip
    assert api.ok("GET", "/stats")["counts"]["FINISHED"] == 2


def test_a_pull_worker_that_never_reports_holds_at_most_its_max_tasks(api: Api) -> None:
    for i in range(40):
        api.push(task_id=f"h{i}", user_id=f"u{i % 4}")
    held = api.lease(10, worker_id="buggy")
    assert len(held) == 10
    for _ in range(3):  # it asks again and again, reporting nothing
        assert api.lease(10, worker_id="buggy", wait_seconds=0) == []
    assert api.ok("GET", "/stats")["counts"]["STARTED"] == 10
    assert len(api.lease(5, worker_id="sound")) == 5  # the others are served
    done = {"type": "success", "lease_token": held[0]["lease_token"], "result": 1}
    assert api.ok("POST", f"/tasks/{held[0]['task_id']}/outcome", done)["state"] == "FINISHED"
    assert len(api.lease(10, worker_id="buggy")) == 1  # one ended: room for one


def test_a_refused_result_in_a_lease_request_fails_its_task_alone(api: Api) -> None:
    for i in range(3):
        api.push(task_id=f"r{i}", user_id=f"u{i}", max_retries=0)
    first, second = api.lease(2)
    outcomes = [
        {"type": "success", "task_id": first["task_id"], "lease_token": first["lease_token"],
         "result": float("inf")},
        {"type": "success", "task_id": second["task_id"], "lease_token": second["lease_token"],
         "result": 2},
    ]  # fmt: skip
    answer = api.ok("POST", "/leases", {"worker_id": "w1", "max_tasks": 5, "outcomes": outcomes},
                    msgpack=True)  # fmt: skip
    assert [t["task_id"] for t in answer["tasks"]] == ["r2"]  # the lease goes on
    refused, accepted = answer["results"]
    assert (refused["status"], refused["problem"]["task_state"]) == (422, "FAILED")
    assert refused["problem"]["type"].endswith("result-refused")
    assert (accepted["status"], accepted["state"]) == (200, "FINISHED")
    failed = api.ok("GET", f"/tasks/{first['task_id']}")
    assert failed["state"] == "FAILED"
    assert "Infinity" in failed["error"]


def _busy(api: Api, user: str) -> float:
    tenants = api.ok("GET", "/tenants")["tenants"]
    return float(next(t["busy_seconds"] for t in tenants if t["user_id"] == user))


def test_a_reported_run_is_what_the_tenant_is_charged(api: Api) -> None:
    """An outcome's and a heartbeat's ``run_seconds`` is charged (never more than the
    lease's span); a bad one answers 422 and charges nothing."""
    for user in ("a", "b"):
        api.push(task_id=f"r-{user}", user_id=user)
    leased = {t["task_id"]: t for t in api.lease(2)}
    time.sleep(0.05)  # the span the server sees: more than the reports below
    token = leased["r-a"]["lease_token"]
    for bad in (-0.5, "fast"):
        problem = api.call("POST", "/tasks/r-a/extend", {"lease_token": token, "run_seconds": bad})
        assert problem.status_code == 422, problem.text
        assert "run_seconds" in problem.text
    assert api.ok("POST", "/tasks/r-a/extend", {"lease_token": token, "run_seconds": 0})
    success = {"type": "success", "lease_token": token, "run_seconds": 0.002}
    refused = api.call("POST", "/tasks/r-a/outcome", {**success, "run_seconds": -1})
    assert refused.status_code == 422
    assert api.ok("POST", "/tasks/r-a/outcome", success) == {"state": "FINISHED"}
    assert api.ok("POST", "/tasks/r-a/outcome", success) == {"state": "FINISHED"}  # resent
    assert _busy(api, "a") == 0.002
    failure = {"type": "failure", "task_id": "r-b", "should_retry": False,
               "lease_token": leased["r-b"]["lease_token"], "run_seconds": 0.003}  # fmt: skip
    answer = api.ok("POST", "/leases", {"worker_id": "w1", "outcomes": [failure]}, msgpack=True)
    assert answer["results"][0]["state"] == "FAILED"
    assert _busy(api, "b") == 0.003
