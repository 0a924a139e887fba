"""The fairness mode and each user's service over HTTP, in ``/metrics`` and on the
dashboard, against a live server on each server kind."""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fairque import FairQueue, Task
from service.harness import Api, LiveServer
from service.test_metrics import _strict_text_format, scrape, value

VALKEY = pytest.mark.parametrize("server", ["valkey"], indirect=True)


def serve_three_users(q: FairQueue) -> None:
    """'slow' (two 20 ms tasks), 'fast' (four), 'late' (one, leased last; one failure)."""
    q.set_user_limits("slow", weight=2)
    q.push_many([Task(user_id="slow", name="s") for _ in range(2)])
    q.push_many([Task(user_id="fast", name="f") for _ in range(4)])
    for _ in range(6):
        task = q.pop("w", assigned_users=["slow", "fast"])
        assert task is not None
        if task.user_id == "slow":
            time.sleep(0.02)
        assert q.complete(task)
    q.push(Task(user_id="late", name="l"))
    task = q.pop("w")
    assert task is not None
    assert task.user_id == "late"
    q.fail(task, "boom", retry=False)
    q.flush_metrics()  # what this client counted, for the service's reads


def test_fairness_mode_get_and_put(api: Api) -> None:
    got = api.call("GET", "/fairness")
    assert got.status_code == 200
    assert got.json() == {
        "queue": api.queue, "mode": "time", "previous": "time", "max_lead_seconds": 60.0
    }  # fmt: skip
    put = api.call("PUT", "/fairness", {"mode": "count"})
    assert put.status_code == 200
    assert put.json() == {
        "queue": api.queue, "mode": "count", "previous": "time", "max_lead_seconds": 60.0
    }  # fmt: skip
    again = api.call("PUT", "/fairness", {"mode": "count"})  # a resend: the same answer
    assert again.json()["previous"] == "count"
    assert api.call("GET", "/stats").json()["fairness"] == "count"
    for bad in ({"mode": "fast"}, {}, {"mode": "time", "extra": 1},
                {"mode": "count", "max_lead_seconds": 0},
                {"mode": "count", "max_lead_seconds": "1"}):  # fmt: skip
        refused = api.call("PUT", "/fairness", bad)
        assert refused.status_code == 422, bad
    assert api.call("GET", "/fairness").json()["mode"] == "count"
    lead = api.call("PUT", "/fairness", {"mode": "time", "max_lead_seconds": 5})
    assert lead.status_code == 200
    assert lead.json()["max_lead_seconds"] == 5.0
    assert api.call("GET", "/fairness").json()["max_lead_seconds"] == 5.0
    assert api.call("GET", "/v1/queues/nope/fairness").status_code == 404


def test_tenants_report(live: LiveServer, api: Api) -> None:
    q = FairQueue.from_url(live.service.url, api.queue)
    try:
        serve_three_users(q)
        whole = api.call("GET", "/tenants").json()
        assert whole["fairness"] == "time"
        assert whole["users_known"] == 3
        rows = {r["user_id"]: r for r in whole["tenants"]}
        assert next(iter(rows)) == "late"  # the most recently leased first
        assert (rows["slow"]["started"], rows["slow"]["finished"]) == (2, 2)
        assert (rows["fast"]["started"], rows["fast"]["finished"]) == (4, 4)
        assert (rows["late"]["started"], rows["late"]["failed"]) == (1, 1)
        assert rows["slow"]["busy_seconds"] >= 0.04
        assert sum(r["share"] for r in rows.values()) == pytest.approx(1.0)
        assert rows["slow"]["fair_share"] == pytest.approx(0.5)  # weight 2 of 4
        assert whole["others"]["started"] == 0
        # one user named: the other two summed as the rest
        one = api.call("GET", "/tenants", params={"limit": 1}).json()
        assert [r["user_id"] for r in one["tenants"]] == ["late"]
        assert one["others"]["started"] == 6
        assert one["others"]["finished"] == 6
        assert one["others"]["busy_seconds"] == pytest.approx(
            rows["slow"]["busy_seconds"] + rows["fast"]["busy_seconds"], abs=1e-6
        )
        assert api.call("GET", "/tenants", params={"limit": 0}).status_code == 422
    finally:
        q.close()


def test_tenant_series_in_metrics(live: LiveServer) -> None:
    queue = live.service.names[0]
    q = FairQueue.from_url(live.service.url, queue)
    settings = live.service.settings
    before = settings.metrics_tenants
    try:
        serve_three_users(q)
        settings.metrics_tenants = 2
        response = httpx.get(f"{live.base}/metrics", timeout=30)
        types = _strict_text_format(response.text)  # one block per family, still
        assert types["fairque_tenant_wait_seconds"] == "histogram"
        m = scrape(live)
        started = m["fairque_tenant_tasks_started"]
        named = {s.labels["user_id"] for s in started if s.labels["queue"] == queue}
        assert named == {"late", "fast", ""} or named == {"late", "slow", ""}
        total = sum(s.value for s in started if s.labels["queue"] == queue)
        assert total == 7  # the named users and the rest add up to every lease
        busy = sum(
            s.value for s in m["fairque_tenant_worker_seconds"] if s.labels["queue"] == queue
        )
        assert busy == pytest.approx(value(m["fairque_worker_seconds"], queue=queue), abs=1e-6)
        assert value(m["fairque_tenant_tasks_failed"], queue=queue, user_id="late") == 1
        assert value(m["fairque_tenant_weight"], queue=queue, user_id="late") == 1
        waits = [
            s
            for s in m["fairque_tenant_wait_seconds"]
            if s.name.endswith("_count") and s.labels["queue"] == queue
        ]
        assert sum(s.value for s in waits) == 7
        settings.metrics_tenants = 0
        text = httpx.get(f"{live.base}/metrics", timeout=30).text
        names = {f.name for f in text_string_to_metric_families(text)}
        assert "fairque_tenant_tasks_started" in names  # declared, with no samples
        assert 'user_id="late"' not in text.split("fairque_tenant_tasks_started")[1][:2000]
    finally:
        settings.metrics_tenants = before
        q.close()


@VALKEY
def test_groups_and_shares_in_the_report_the_metrics_and_the_dashboard(
    live: LiveServer,
) -> None:
    """A tenant's group and share show in ``tenants()``, ``GET /tenants``, ``/metrics``
    (``fairque_tenant_group_info``) and the dashboard's tenants page (a groups table)."""
    queue = live.service.names[0]
    q = FairQueue.from_url(live.service.url, queue)
    try:
        q.set_user_limits("m1", group="org", floor=0.25)
        q.set_user_limits("m2", group="org", ceiling=0.5)
        q.set_group_limits("org", weight=2, max_queued=50, floor=0.3)
        for user in ("m1", "m2", "solo"):
            q.push(Task(user_id=user, name="n"))
        while (task := q.pop("w")) is not None:
            assert q.complete(task)
        rows = {t.user_id: t for t in q.tenants().tenants}
        assert (rows["m1"].group, rows["m1"].floor, rows["m1"].ceiling) == ("org", 0.25, None)
        assert (rows["m2"].group, rows["m2"].floor, rows["m2"].ceiling) == ("org", None, 0.5)
        assert (rows["solo"].group, rows["solo"].floor) == (None, None)
        with httpx.Client(timeout=30) as http:
            shown = http.get(f"{live.base}/v1/queues/{queue}/tenants").json()
            by_user = {r["user_id"]: r for r in shown["tenants"]}
            assert (by_user["m1"]["group"], by_user["m1"]["floor"]) == ("org", 0.25)
            assert by_user["solo"]["group"] is None
            m = scrape(live)
            info = {
                s.labels["user_id"]: s.labels["group"]
                for s in m["fairque_tenant_group_info"]
                if s.labels["queue"] == queue
            }
            assert info == {"m1": "org", "m2": "org"}
            for name, want in (("fairque_group_weight", 2), ("fairque_group_tasks_waiting", 0),
                               ("fairque_group_backlog_quota", 50)):  # fmt: skip
                got = [s.value for s in m[name] if s.labels["queue"] == queue]
                assert got == [want], (name, got)
            page = http.get(f"{live.base}/ui/q/{queue}/tenants").text
            groups = page.split('id="groups-table"')[1].split("</table>")[0]
            assert ">org " in groups
            assert "floor 30.0 %" in groups
            assert "m1" in groups
            assert '<td class="backlog">0 of 50</td>' in groups
            assert "floor 25.0 %" in page
    finally:
        q.close()


@VALKEY
def test_dashboard_worker_time_and_mode_switch(live: LiveServer) -> None:
    queue = live.service.names[0]
    q = FairQueue.from_url(live.service.url, queue)
    base = f"{live.base}/ui/q/{queue}"
    try:
        serve_three_users(q)
        with httpx.Client(timeout=30) as http:
            page = http.get(f"{base}/tenants")
            assert page.status_code == 200
            assert 'id="worker-time-table"' in page.text
            assert "fair by worker time" in page.text
            for user in ("slow", "fast", "late"):
                assert f'id={user}">{user}</a>' in page.text
            # every user got all it asked for: each is at its fair share, none is low
            table = page.text.split('id="worker-time-table"')[1].split("</table>")[0]
            assert table.count(">1.00<") == 3
            assert 'class="low"' not in table
            csrf = http.cookies["fq_csrf"]
            switched = http.post(f"{base}/fairness", data={"mode": "count", "csrf": csrf})
            assert switched.status_code == 303
            assert "fair+by+turns" in switched.headers["location"]
            assert q.fairness() == "count"
            refused = http.post(f"{base}/fairness", data={"mode": "fast", "csrf": csrf})
            assert "not+changed" in refused.headers["location"]
            assert q.fairness() == "count"
            assert "fair by turns (count)" in http.get(f"{base}/tenants").text
    finally:
        q.close()
