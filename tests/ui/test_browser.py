"""The dashboard in a real browser: every page, every action and its effect in Redis,
the login and roles, CSRF, and stored XSS attempts in every tenant-supplied field."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

import pytest
from helpers.servers import ServerInfo
from helpers.support import unique_queue
from playwright.sync_api import expect
from service.harness import LiveServer

from fairque import FairQueue, Task, TaskState
from fairque.models import Priority, WorkerInfo
from fairque.service.settings import ServerSettings, TokenSettings
from ui.conftest import TOKENS

pytestmark = pytest.mark.parametrize("server", ["valkey"], indirect=True)

XSS_IMG = "<img src=x onerror=window.__xss=1>"
XSS_SCRIPT = "<script>window.__xss=1</script>"


def _register_worker(q: FairQueue, worker_id: str) -> None:
    info = WorkerInfo(
        worker_id=worker_id, queue=q.queue, host="host-1", pid=4242,
        started_at=datetime.now(timezone.utc), concurrency=4, in_flight=1, processed=17,
        failed=2,
    )  # fmt: skip
    q.register_worker(info, ttl_seconds=60)


def _state(q: FairQueue, task_id: str) -> TaskState | None:
    task = q.get(task_id)
    return None if task is None else task.state


def test_pages_and_actions(open_ui: tuple[LiveServer, FairQueue], page: Any) -> None:
    live, q = open_ui
    base = f"{live.base}/ui/q/{q.queue}"
    q.push_many(
        [Task(user_id="alice", name="resize", payload={"n": i}) for i in range(12)]
        + [Task(user_id="bob", name="email", payload={"n": i}) for i in range(3)]
        + [Task(user_id="bob", name="urgent", priority=Priority.CRITICAL, task_id="crit-1")]
    )
    first = q.push(Task(user_id="carol", name="report", task_id="up-1"))
    q.push(Task(user_id="carol", name="report", task_id="down-1", depends_on=("up-1",)))
    q.enqueue("later", {"x": 1}, user_id="carol", delay=3600, task_id="delayed-1")
    leased = q.pop(worker_id="w-1", assigned_users=["carol"])
    assert leased is not None
    assert leased.task_id == first.task_id
    q.set_user_limits("alice", weight=2, max_in_flight=5)
    _register_worker(q, "w-1")

    # overview: counts per state, workers alive
    page.goto(base)
    assert page.locator('[data-state="QUEUED"]').inner_text() == "16"
    assert page.locator('[data-state="STARTED"]').inner_text() == "1"
    assert page.locator("#workers-alive").inner_text() == "1"
    response = page.request.get(base)
    assert "script-src 'self'" in response.headers["content-security-policy"]

    # tenants: one row per user, sorted by backlog, weight and cap shown
    page.goto(f"{base}/tenants")
    rows = page.locator("#tenants tbody tr")
    assert rows.count() == 3
    assert rows.nth(0).locator("td").nth(0).inner_text().startswith("alice")
    cells = [c.strip() for c in rows.nth(0).locator("td").all_inner_texts()]
    assert cells[1:6] == ["0", "12", "0", "2", "5"]
    assert page.locator("#jnorm").inner_text() != ""

    # tasks: state x user x name filter, cursor pagination
    # (a click's navigation may still be loading when it returns: expect() waits, count() not)
    page.goto(f"{base}/tasks?state=QUEUED&user=alice&limit=5")
    expect(page.locator("#tasks tbody tr")).to_have_count(5)
    page.click("#next-page")
    expect(page).to_have_url(re.compile("cursor="))
    expect(page.locator("#tasks tbody tr")).to_have_count(5)
    page.click("#next-page")
    expect(page.locator("#tasks tbody tr")).to_have_count(2)
    page.goto(f"{base}/tasks")
    page.fill("#f-user", "bob")
    page.fill("#f-name", "email")
    page.click("#f-apply")
    expect(page.locator("#tasks tbody tr")).to_have_count(3)

    # task page: payload, lease holder, dependencies as links, why it waits
    page.goto(f"{base}/task?id=up-1")
    assert page.locator("#lease-holder").inner_text() == "w-1"
    assert "0 of 3 (latest attempt: 1)" in page.locator("table.kv").inner_text()
    page.click("text=down-1")
    assert page.locator("#task-state").inner_text() == "DEFERRED"
    assert "up-1" in page.locator("#why").inner_text()
    page.goto(f"{base}/task?id=delayed-1")
    assert "delayed until" in page.locator("#why").inner_text()
    page.goto(f"{base}/task?id=crit-1")
    why = page.locator("#why").inner_text()
    assert "critical" in why
    assert "0 tasks of this user go first" in why

    # cancel and retry one task
    page.click("#cancel")
    assert "canceled" in page.locator("#flash").inner_text()
    assert _state(q, "crit-1") is TaskState.CANCELED
    page.click("#retry")
    assert _state(q, "crit-1") is TaskState.QUEUED

    # cancel every task matching a filter, after a confirmation with the count
    page.goto(f"{base}/tasks?state=QUEUED&user=alice")
    page.click("#bulk-cancel")
    assert "12" in page.locator("#bulk-count").inner_text()
    page.click("#bulk-confirm")
    assert "12 of 12 tasks canceled" in page.locator("#flash").inner_text()
    assert q.stats().counts[TaskState.CANCELED] == 12
    page.goto(f"{base}/tasks?state=CANCELED&user=alice")
    page.click("#bulk-retry")
    page.click("#bulk-confirm")
    assert "12 of 12 tasks queued again" in page.locator("#flash").inner_text()
    assert q.stats().counts[TaskState.QUEUED] == 16

    # set a user's weight and cap
    page.goto(f"{base}/user?id=bob")
    page.fill("#weight", "3")
    page.fill("#cap", "1")
    page.click("#save-limits")
    assert page.locator("#user-weight").inner_text() == "3"
    bob = next(u for u in q.stats(user_limit=100).users if u.user_id == "bob")
    assert (bob.weight, bob.max_in_flight) == (3, 1)
    page.fill("#cap", "")
    page.fill("#bytes", "5000")
    page.click("#save-limits")
    assert page.locator("#user-cap").inner_text() == "none"
    assert page.locator("#user-byte-quota").inner_text() == "5,000"
    assert q.user_loads(["bob"])[0].max_bytes == 5000

    # workers
    page.goto(f"{base}/workers")
    cells = page.locator("#workers tbody tr").first.locator("td").all_inner_texts()
    assert cells[0] == "w-1"
    assert cells[7] == "17"
    assert cells[8] == "2"

    # the second queue is listed and opens
    other = live.service.names[1]
    page.goto(f"{live.base}/ui")
    page.click(f"header >> text={other}")
    assert page.url.endswith(f"/ui/q/{other}")


def test_login_roles_and_csrf(secured_ui: tuple[LiveServer, FairQueue], page: Any) -> None:
    live, q = secured_ui
    base = f"{live.base}/ui/q/{q.queue}"
    q.push(Task(user_id="alice", name="job", task_id="t1"))

    page.goto(base)
    assert "/ui/login" in page.url
    page.fill("#token", "not-a-valid-token-at-all")
    page.click("#login")
    expect(page.locator("#login-failed")).to_be_visible()

    # a viewer looks but cannot act
    page.fill("#token", TOKENS["viewer"])
    page.click("#login")
    assert page.url == base
    cookie = next(c for c in page.context.cookies() if c["name"] == "fq_session")
    assert cookie["httpOnly"]
    assert cookie["sameSite"] == "Strict"
    page.goto(f"{base}/task?id=t1")
    assert page.locator("#cancel").count() == 0
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "fq_csrf")
    denied = page.request.post(
        f"{base}/task/cancel", form={"csrf": csrf, "id": "t1"}, max_redirects=0
    )
    assert denied.status == 403
    assert _state(q, "t1") is TaskState.QUEUED
    page.click("text=log out")
    assert "/ui/login" in page.url

    # an admin acts; a form without the CSRF token changes nothing
    page.fill("#token", TOKENS["admin"])
    page.click("#login")
    forged = page.request.post(f"{base}/task/cancel", form={"id": "t1"}, max_redirects=0)
    assert forged.status == 403
    wrong = page.request.post(
        f"{base}/task/cancel", form={"id": "t1", "csrf": "x" * 43}, max_redirects=0
    )
    assert wrong.status == 403
    assert _state(q, "t1") is TaskState.QUEUED
    page.goto(f"{base}/task?id=t1")
    page.click("#cancel")
    assert _state(q, "t1") is TaskState.CANCELED

    # /metrics takes the same tokens
    assert page.request.get(f"{live.base}/metrics").status == 401
    scraped = page.request.get(
        f"{live.base}/metrics", headers={"Authorization": f"Bearer {TOKENS['viewer']}"}
    )
    assert scraped.status == 200


def test_stored_xss_runs_nowhere(open_ui: tuple[LiveServer, FairQueue], page: Any) -> None:
    live, q = open_ui
    base = f"{live.base}/ui/q/{q.queue}"
    evil = [XSS_IMG, XSS_SCRIPT, '"><svg onload=window.__xss=1>', "javascript:window.__xss=1"]
    for i, text in enumerate(evil):
        q.push(
            Task(
                user_id=text, name=text, task_id=f"x{i}-{text}"[:100],
                payload={"html": text, text: [text]},
            )
        )  # fmt: skip
    for i in range(len(evil)):
        leased = q.pop(worker_id=evil[i])
        assert leased is not None
        if i % 2:
            q.fail(leased, error=f"Traceback\n  {evil[i]}\n{XSS_SCRIPT}", retry=False)
        else:
            q.complete(leased, result={"out": evil[i]})
    q.push(Task(user_id=XSS_IMG, name=XSS_SCRIPT, task_id="queued-evil", payload=XSS_IMG))
    _register_worker(q, XSS_SCRIPT)

    urls = [base, f"{base}/tenants", f"{base}/workers", f"{base}/tenants?user={quote(XSS_IMG)}"]
    for state in ("QUEUED", "FINISHED", "FAILED"):
        urls.append(f"{base}/tasks?state={state}")
        urls.append(f"{base}/tasks?state={state}&user={quote(XSS_IMG)}&name={quote(XSS_SCRIPT)}")
        urls.append(f"{base}/bulk?state={state}&action=cancel&user={quote(XSS_SCRIPT)}")
    urls += [f"{base}/user?id={quote(text)}" for text in evil]
    urls += [f"{base}/task?id={quote(f'x{i}-{text}'[:100])}" for i, text in enumerate(evil)]
    urls += [f"{base}/task?id=queued-evil", f"{base}/task?id={quote(XSS_IMG)}"]
    urls.append(f"{live.base}/ui/login?next={quote('javascript:window.__xss=1')}")
    for url in urls:
        response = page.goto(url)
        assert response is not None, url
        assert response.status in (200, 404), url
        page.wait_for_load_state("load")
        assert page.evaluate("window.__xss") is None, url
        assert page.locator("img[src=x], svg[onload]").count() == 0, url
    # the live refresh inserts fresh HTML (with new hostile strings) and runs none of it
    page.goto(base)
    page.check("#live")
    before = page.locator('[data-state="QUEUED"]').inner_text()
    q.push(Task(user_id=XSS_SCRIPT, name=XSS_IMG, task_id="late-evil", payload=XSS_IMG))
    # (polled from here: the page's CSP forbids the string evaluation wait_for_function uses)
    deadline = time.monotonic() + 15
    while page.locator('[data-state="QUEUED"]').inner_text() == before:
        assert time.monotonic() < deadline, "the live refresh did not update the page"
        page.wait_for_timeout(200)
    assert page.evaluate("window.__xss") is None
    page.uncheck("#live")
    # the strings are shown as text
    page.goto(f"{base}/task?id=queued-evil")
    assert page.locator("#task-user").inner_text() == XSS_IMG
    assert page.locator("#task-name").inner_text() == XSS_SCRIPT
    page.goto(f"{base}/task?id={quote('x1-' + XSS_SCRIPT)}")
    assert XSS_SCRIPT in page.locator("#error-text").inner_text()
    assert re.search(r"script", page.locator("#payload").inner_text())


def test_tenants_page_after_a_drained_flood_says_it_was_fair(
    open_ui: tuple[LiveServer, FairQueue], page: Any
) -> None:
    """A flood of 1,200 tasks and two small tenants pushed into it, all run to the end:
    every tenant got all it asked for, so J_norm is 1 and no row is marked low, even
    though the small tenants' starts are long out of the sample of recent starts."""
    live, q = open_ui
    base = f"{live.base}/ui/q/{q.queue}"
    q.push_many([Task(user_id="flood", name="bulk", payload={}) for _ in range(1200)])
    q.push_many([Task(user_id=u, name="small", payload={}) for u in ("small-a", "small-b")])
    page.goto(f"{base}/tenants")  # watched mid-run: the page keeps a snapshot
    while tasks := q.pop_batch(100, "w"):
        acks, _ = q.complete_and_pop([(t, None) for t in tasks], 0, "w")
        assert all(acks)
    page.goto(f"{base}/tenants?window=60")
    assert page.locator("#jnorm").inner_text() == "1.000"
    rows = page.locator("#tenants tbody tr")
    users = [rows.nth(i).locator("td").nth(0).inner_text() for i in range(rows.count())]
    assert {"flood", "small-a", "small-b"} <= {u.split()[0] for u in users}
    assert page.locator("#tenants td.low").count() == 0
    assert page.locator("#worker-time-table td.low").count() == 0


@pytest.fixture
def scoped_ui(server: ServerInfo) -> Iterator[tuple[LiveServer, FairQueue]]:
    """The service with two queues, a viewer held to the first and a tenant's viewer."""
    mine, hidden = unique_queue("ui"), unique_queue("ui")
    tokens = [
        TokenSettings(name="queue", role="viewer", token=SCOPED["queue"], queues=[mine]),  # type: ignore[arg-type]
        TokenSettings(name="tenant", role="viewer", token=SCOPED["tenant"], tenants=["acme"]),  # type: ignore[arg-type]
    ]
    live = LiveServer(server.url, [mine, hidden], ServerSettings(tokens=tokens))
    q = FairQueue.from_url(server.url, mine)
    yield live, q
    q.close()
    live.stop()


SCOPED = {"queue": "queue-viewer-token-0123456789", "tenant": "tenant-viewer-token-0123456789"}


def test_a_scoped_viewer_sees_its_queues_alone(
    scoped_ui: tuple[LiveServer, FairQueue], page: Any
) -> None:
    live, q = scoped_ui
    mine, hidden = live.service.explicit
    q.push(Task(user_id="alice", name="job", task_id="t1"))

    # a tenant's token cannot open the dashboard, and is told why
    page.goto(f"{live.base}/ui")
    page.fill("#token", SCOPED["tenant"])
    page.click("#login")
    expect(page.locator("#login-failed")).to_contain_text("held to some tenants")
    assert not any(c["name"] == "fq_session" for c in page.context.cookies())

    # a queue's viewer: home is its one queue; no menu names the other
    page.fill("#token", SCOPED["queue"])
    page.click("#login")
    assert page.url.endswith(f"/ui/q/{mine}")
    assert hidden not in page.content()
    page.goto(f"{live.base}/ui/q/{mine}/task?id=t1")
    expect(page.locator("main")).to_contain_text("t1")
    expect(page.locator("#payload-hidden")).to_be_visible()  # a scoped viewer's default
    assert page.locator("#payload").count() == 0
    away = page.goto(f"{live.base}/ui/q/{hidden}")
    assert away is not None
    assert away.status == 404
    assert page.locator("main").inner_text().count(hidden) == 1  # the name it asked for
    assert mine in page.content()  # what it may open instead
