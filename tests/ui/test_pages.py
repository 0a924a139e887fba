"""The dashboard over plain HTTP (no browser): fairness figures, headers, errors, bounds."""

from __future__ import annotations

import math
import re

import httpx
import pytest
from service.harness import LiveServer

from fairque import FairQueue, Task, TaskState
from fairque.service.ui import ranking
from fairque.service.ui.fairness import (
    histogram_quantile,
    jain,
    jain_norm,
    percentile,
    weighted_shares,
)

VALKEY = pytest.mark.parametrize("server", ["valkey"], indirect=True)


def test_fairness_figures() -> None:
    assert percentile([], 50) is None
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert jain([]) is None
    assert jain([0.0, 0.0]) is None  # nothing served: no figure
    assert jain([1.0, 1.0, 1.0]) == 1.0
    assert jain([1.0, 0.0]) == 0.5
    # a small user that wants 2 gets 2; the rest is split by weight (1:3)
    assert weighted_shares(10, [2, 100, 100], [1, 1, 3]) == pytest.approx([2, 2, 6])
    assert weighted_shares(10, [0, 5], [1, 1]) == [0, 5]
    assert weighted_shares(4, [1, 1], [1, 1]) == [1, 1]
    # the flood got 8 of 10 while two small users wanted 5 each: unfair
    unfair = jain_norm([8, 1, 1], [100, 5, 5], [1, 1, 1])
    assert unfair is not None
    assert unfair < 0.7
    # each got its max-min share: J_norm is 1 although plain J is not
    fair = jain_norm([6, 2, 2], [100, 2, 2], [1, 1, 1])
    assert fair is not None
    assert math.isclose(fair, 1.0)
    assert (jain([6, 2, 2]) or 0) < 0.8
    assert jain_norm([5], [5], [1]) is None
    assert jain_norm([0, 0], [3, 3], [1, 1]) is None


@VALKEY
def test_headers_errors_and_static(open_ui: tuple[LiveServer, FairQueue]) -> None:
    live, q = open_ui
    base = f"{live.base}/ui/q/{q.queue}"
    with httpx.Client(timeout=30) as http:
        home = http.get(f"{live.base}/ui")  # two queues served: the list of both
        assert home.status_code == 200
        for name in live.service.names:
            assert f'href="/ui/q/{name}"' in home.text
        page = http.get(base)
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp
        assert "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert page.headers["x-frame-options"] == "DENY"
        assert "<script>" not in page.text  # scripts are files only
        css = http.get(f"{live.base}/ui/static/app.css")
        assert css.headers["content-type"].startswith("text/css")
        assert (
            http.get(f"{live.base}/ui/static/app.js")
            .headers["content-type"]
            .startswith("text/javascript")
        )
        assert http.get(f"{live.base}/ui/static/nope.js").status_code == 404
        missing = http.get(f"{live.base}/ui/q/no-such-queue")
        assert missing.status_code == 404
        assert "no-such-queue" in missing.text
        assert f'href="/ui/q/{q.queue}"' in missing.text  # where to go instead
        assert http.get(f"{base}/task?id=nope").status_code == 404
        assert http.get(f"{base}/task").status_code == 404
        assert http.get(f"{base}/user").status_code == 404
        bad_cursor = http.get(f"{base}/tasks?state=QUEUED&cursor=%%%")
        assert bad_cursor.status_code == 422
        # unknown filters fall back to defaults instead of failing
        assert http.get(f"{base}/tasks?state=BOGUS&limit=x").status_code == 200
        assert http.get(f"{base}/tenants?window=7&sort=nope&page=-3").status_code == 200
        # without tokens the login page says the dashboard is open
        assert "open" in http.get(f"{live.base}/ui/login").text
        # a POST without the CSRF cookie and field changes nothing
        q.push(Task(user_id="u", name="n", task_id="t"))
        assert http.post(f"{base}/task/cancel", data={"id": "t"}).status_code == 403
        assert http.post(f"{base}/bulk", data={"state": "QUEUED"}).status_code == 403
        assert q.get("t") is not None
        task = q.get("t")
        assert task is not None
        assert task.state is TaskState.QUEUED


@VALKEY
def test_forms_with_csrf(open_ui: tuple[LiveServer, FairQueue]) -> None:
    live, q = open_ui
    base = f"{live.base}/ui/q/{q.queue}"
    q.push(Task(user_id="u", name="n", task_id="t"))
    with httpx.Client(timeout=30) as http:
        http.get(base)
        csrf = http.cookies["fq_csrf"]
        # another origin is refused even with the token
        cross = http.post(
            f"{base}/task/cancel", data={"id": "t", "csrf": csrf},
            headers={"Origin": "http://evil.example"},
        )  # fmt: skip
        assert cross.status_code == 403
        retry_queued = http.post(f"{base}/task/retry", data={"id": "t", "csrf": csrf})
        assert retry_queued.status_code == 303
        assert "not+done" in retry_queued.headers["location"]
        limits = http.post(
            f"{base}/user/limits", data={"user": "u", "weight": "0", "cap": "", "csrf": csrf}
        )
        assert "not+changed" in limits.headers["location"]
        limits = http.post(f"{base}/user/limits", data={"user": "u", "weight": "x", "csrf": csrf})
        assert "not+changed" in limits.headers["location"]
        big = http.post(f"{base}/task/cancel", content=b"a=" + b"x" * 70_000,
                        headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
        assert big.status_code == 413
        done = http.post(f"{live.base}/ui/login", data={"csrf": csrf, "next": "//evil.example"})
        assert done.headers["location"] == "/ui"
    task = q.get("t")
    assert task is not None
    assert task.state is TaskState.QUEUED


@VALKEY
def test_tenant_ranking_is_bounded(
    open_ui: tuple[LiveServer, FairQueue], monkeypatch: pytest.MonkeyPatch
) -> None:
    live, q = open_ui
    monkeypatch.setattr(ranking, "SCAN_USERS", 30)
    q.push_many([Task(user_id=f"user-{i:03d}", name="n") for i in range(120)])
    q.push_many([Task(user_id="user-100", name="n") for _ in range(5)])
    url = f"{live.base}/ui/q/{q.queue}/tenants"
    with httpx.Client(timeout=30) as http:
        page = http.get(url)
        assert page.status_code == 200
        assert "120 users have ready work" in page.text
        assert "backlog of 30 of them" in page.text
        assert page.text.count('class="id"><a href') == 30
        for known in (60, 90):
            assert f"backlog of {known} of them" in http.get(url).text
        # the fourth load has seen every user: the largest backlog comes first
        page = http.get(url)
        assert "users have ready work" not in page.text
        assert page.text.count('class="id"><a href') == 50
        first = page.text.index('class="id"><a href')
        assert "user-100" in page.text[first : first + 200]
        one = http.get(url, params={"user": "user-119"})
        assert one.text.count('class="id"><a href') == 1


@VALKEY
def test_tasks_of_any_state(open_ui: tuple[LiveServer, FairQueue]) -> None:
    live, q = open_ui
    base = f"{live.base}/ui/q/{q.queue}"
    q.push_many([Task(user_id="u", name="n", task_id=f"t{i}") for i in range(3)])
    assert q.cancel("t0")
    with httpx.Client(timeout=30) as http:
        page = http.get(f"{base}/tasks", params={"state": "ANY", "user": "u"})
        assert page.status_code == 200
        assert page.text.count("/task?id=t") == 3
        assert "CANCELED" in page.text
        # a bulk action needs one state
        assert http.get(f"{base}/bulk", params={"state": "ANY", "user": "u"}).status_code == 422
        # no user or name: every task of the queue
        every = http.get(f"{base}/tasks", params={"state": "ANY"})
        assert every.status_code == 200
        assert every.text.count("/task?id=t") == 3


@VALKEY
def test_dead_letters_retried_and_deleted_in_bulk(open_ui: tuple[LiveServer, FairQueue]) -> None:
    """FAILED tasks a filter picks: the confirmation page counts them (the engine's dry
    run), the confirmed form (with its CSRF token) retries or deletes them, and no
    other task is touched; a bulk delete of a state that holds no dead letters is
    refused."""
    live, q = open_ui
    base = f"{live.base}/ui/q/{q.queue}"
    q.push_many([Task(user_id=f"u{i % 2}", name="mail", task_id=f"m{i}", max_retries=0)
                 for i in range(6)])  # fmt: skip
    for task in q.pop_batch(6, "w"):
        q.fail(task, "boom", retry=False)
    q.push(Task(user_id="u0", name="other", task_id="keep"))
    with httpx.Client(timeout=30) as http:
        page = http.get(f"{base}/tasks", params={"state": "FAILED", "user": "u0"})
        assert 'id="bulk-delete"' in page.text
        csrf = http.cookies["fq_csrf"]
        confirm = http.get(
            f"{base}/bulk", params={"state": "FAILED", "user": "u0", "action": "delete"}
        )
        assert "<b>3</b> tasks" in confirm.text
        form = {"state": "FAILED", "user": "u0", "name": "", "csrf": csrf}
        deleted = http.post(f"{base}/bulk", data={**form, "action": "delete"})
        assert "3+of+3+tasks+deleted" in deleted.headers["location"]
        retried = http.post(f"{base}/bulk", data={**form, "user": "u1", "action": "retry"})
        assert "3+of+3+tasks+queued+again" in retried.headers["location"]
        refused = http.get(f"{base}/bulk", params={"state": "QUEUED", "action": "delete"})
        assert refused.status_code == 422
        no_token = http.post(f"{base}/bulk", data={"state": "FAILED", "action": "delete"})
        assert no_token.status_code == 403
        # FINISHED records: deleted in bulk (to make room), never retried
        q.push(Task(user_id="u2", name="mail", task_id="done"))
        leased = q.pop_batch(1, "w", assigned_users=["u2"])
        assert [t.task_id for t in leased] == ["done"]
        assert q.complete(leased[0])
        finished = http.get(f"{base}/tasks", params={"state": "FINISHED"})
        assert 'id="bulk-delete"' in finished.text
        assert 'id="bulk-retry"' not in finished.text
        cleared = http.post(f"{base}/bulk", data={**form, "user": "", "state": "FINISHED",
                                                  "action": "delete"})  # fmt: skip
        assert "1+of+1+task" in cleared.headers["location"]
    assert q.get("done") is None
    assert [q.get(f"m{i}") for i in (0, 2, 4)] == [None, None, None]
    assert {q.get(f"m{i}").state for i in (1, 3, 5)} == {TaskState.QUEUED}  # type: ignore[union-attr]
    assert q.get("keep").state is TaskState.QUEUED  # type: ignore[union-attr]


def test_histogram_quantile() -> None:
    bounds = (1.0, 2.0, 4.0)
    assert histogram_quantile(bounds, [0, 0, 0, 0], 0.5) is None
    assert histogram_quantile(bounds, [10, 0, 0, 0], 0.5) == (0.5, False)
    assert histogram_quantile(bounds, [0, 10, 0, 0], 0.95) == (1.95, False)
    assert histogram_quantile(bounds, [5, 0, 0, 5], 0.95) == (4.0, True)
    assert histogram_quantile(bounds, [1, 0, 0, 0], 1.0) == (1.0, False)


def test_weighted_shares_match_the_water_level() -> None:
    # equal weights: the classic max-min allocation
    assert weighted_shares(9, [1, 5, 5, 5], [1, 1, 1, 1]) == pytest.approx([1, 8 / 3, 8 / 3, 8 / 3])
    # weights count as turns: 1:2 among the unsatisfied
    assert weighted_shares(12, [100, 100, 1], [1, 2, 1]) == pytest.approx([11 / 3, 22 / 3, 1])
    # more capacity than demand: everyone is satisfied
    assert weighted_shares(100, [3, 4], [1, 5]) == [3, 4]
    assert weighted_shares(0, [3, 4], [1, 1]) == [0, 0]


@VALKEY
def test_why_a_task_is_parked_by_a_constraint(open_ui: tuple[LiveServer, FairQueue]) -> None:
    live, q = open_ui
    q.define_constraint(id="one-at-a-time", name="limited", concurrency=1)
    q.push_many([Task(user_id="u", name="limited", task_id=f"c{i}") for i in range(2)])
    first = q.pop(worker_id="w")
    assert first is not None
    assert q.pop(worker_id="w") is None  # the second is over the limit: parked
    waiting = "c1" if first.task_id == "c0" else "c0"
    with httpx.Client(timeout=30) as http:
        page = http.get(f"{live.base}/ui/q/{q.queue}/task", params={"id": waiting}).text
        assert "Parked by constraint bucket" in page
        assert "one-at-a-time" in page
        assert "1 running" in page
        running = http.get(f"{live.base}/ui/q/{q.queue}/task", params={"id": first.task_id})
        assert "Why is it waiting" not in running.text


@VALKEY
def test_a_tenant_held_by_its_cap_is_not_shown_as_starved(
    open_ui: tuple[LiveServer, FairQueue],
) -> None:
    live, q = open_ui
    q.set_user_limits("held", max_in_flight=1)
    q.push_many([Task(user_id=u, name="n") for u in ("held", "free") for _ in range(6)])
    leased = q.pop_batch(6, "w")  # "held" gets one, "free" the rest
    assert sum(t.user_id == "held" for t in leased) == 1
    with httpx.Client(timeout=30) as http:
        page = http.get(f"{live.base}/ui/q/{q.queue}/tenants", params={"window": "300"}).text
    ranked = page[page.index('<table class="grid" id="tenants">') :]  # not the time table
    row = ranked[ranked.index(">held</a>") : ranked.index("</tr>", ranked.index(">held</a>"))]
    assert 'class="held"' in row
    assert 'class="low"' not in row
    assert "at cap" in row
    assert 'class="card minor"><span class="n" id="jain">' in page  # plain J is secondary


@VALKEY
def test_the_overview_says_why_leases_pass_pushes(open_ui: tuple[LiveServer, FairQueue]) -> None:
    live, q = open_ui
    q.enqueue("n", user_id="u", task_id="once")
    first = q.pop(worker_id="w")
    assert first is not None
    q.requeue(first, delay=0)  # a give-back: leased again without a failure
    again = q.pop(worker_id="w")
    assert again is not None
    assert q.complete(again)
    q.flush_metrics()  # what this client counted, for the dashboard's read
    page = httpx.get(f"{live.base}/ui/q/{q.queue}", timeout=30)
    assert page.status_code == 200
    heads = re.findall(r"<th>([a-z ]+)</th>", page.text)
    cells = re.search(r'<table class="counters">\s*<tr>.*?</tr>\s*<tr>(.*?)</tr>', page.text, re.S)
    assert cells is not None
    values = dict(zip(heads[-9:], re.findall(r"<td>([\d,]+)</td>", cells.group(1)), strict=True))
    assert (values["pushed"], values["popped"], values["requeued"]) == ("1", "2", "1")
    assert "counts leases, not tasks" in page.text
