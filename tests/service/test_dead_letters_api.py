"""``POST /dead-letters/retry`` and ``/dead-letters/delete``: FAILED tasks chosen by a
filter, counted with a dry run, then moved; a bad filter is a 422 that changes nothing."""

from __future__ import annotations

from service.harness import Api


def fail_all(api: Api, name: str, n: int, message: str) -> None:
    api.ok("POST", "/tasks", {"tasks": [{"name": name, "user_id": "u", "max_retries": 0}] * n},
           status=201)  # fmt: skip
    leased = api.lease(n, names=[name])
    assert len(leased) == n
    for task in leased:
        outcome = {"type": "failure", "lease_token": task["lease_token"], "reason": "other",
                   "should_retry": False, "message": message}  # fmt: skip
        assert api.ok("POST", f"/tasks/{task['task_id']}/outcome", outcome) == {"state": "FAILED"}


def test_dead_letters_are_counted_then_retried_or_deleted(api: Api) -> None:
    fail_all(api, "send_email", 6, "SMTP 550")
    fail_all(api, "resize", 4, "bad image")
    counted = api.ok("POST", "/dead-letters/retry", {"name": "send_email", "dry_run": True})
    assert counted == {"count": 6, "dry_run": True}
    assert api.ok("GET", "/stats")["counts"]["FAILED"] == 10
    assert api.ok("POST", "/dead-letters/retry", {"error": "SMTP"}) == {
        "count": 6,
        "dry_run": False,
    }
    assert api.ok("GET", "/stats")["counts"]["QUEUED"] == 6
    gone = api.ok("POST", "/dead-letters/delete", {"name": "resize", "older_than_seconds": 0})
    assert gone == {"count": 4, "dry_run": False}
    assert api.ok("GET", "/stats")["counts"]["FAILED"] == 0
    for bad in ({"state": "QUEUED"}, {"older_than_seconds": -1}, {"error": ""},
                {"name": "x", "other": 1}):  # fmt: skip
        refused = api.call("POST", "/dead-letters/retry", bad)
        assert refused.status_code == 422, refused.text
    assert api.ok("GET", "/stats")["counts"]["QUEUED"] == 6
    # FINISHED records may be deleted (to make room), never retried
    assert api.call("POST", "/dead-letters/retry", {"state": "FINISHED"}).status_code == 422
    [task] = api.lease(1)
    done = {"type": "success", "lease_token": task["lease_token"], "result": 1}
    assert api.ok("POST", f"/tasks/{task['task_id']}/outcome", done) == {"state": "FINISHED"}
    finished = api.ok("POST", "/dead-letters/delete", {"state": "FINISHED"})
    assert finished == {"count": 1, "dry_run": False}
    assert api.ok("GET", "/stats")["counts"]["FINISHED"] == 0
