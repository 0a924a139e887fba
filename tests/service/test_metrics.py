"""``GET /metrics``: scraped from a live server on every kind, parsed with Prometheus's parser."""

from __future__ import annotations

import logging
import re
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest
from helpers.servers import ServerInfo
from helpers.support import unique_queue, wait_until
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from fairque import FairQueue, Task
from fairque.cli.embedded import EmbeddedServer
from fairque.models import HISTOGRAM_BOUNDS_SECONDS, Priority, WorkerInfo
from fairque.service import metrics
from fairque.service.settings import ServerSettings
from service.harness import LiveServer


def scrape(live: LiveServer) -> dict[str, list[Sample]]:
    response = httpx.get(f"{live.base}/metrics", timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    out: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(response.text):
        # the parser starts a new family of the same name for each labelled histogram
        out.setdefault(family.name, []).extend(family.samples)
    return out


def value(samples: list[Sample], name: str | None = None, **labels: str) -> float:
    found = [
        s
        for s in samples
        if (name is None or s.name == name) and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(found) == 1, (labels, found)
    return found[0].value


def test_scrape(live: LiveServer) -> None:
    queue, other = live.service.names
    q = FairQueue.from_url(live.service.url, queue)
    try:
        q.set_user_limits("big", max_bytes=10_000)  # its payloads ("null") are counted
        q.push_many(
            [Task(user_id="big", name="n") for _ in range(6)]
            + [Task(user_id="small", name="n", priority=Priority.CRITICAL) for _ in range(2)]
        )
        waited = 0.02  # every task waits at least this long (the server's clock, whole ms)
        time.sleep(waited)
        first = q.pop(worker_id="w1", assigned_users=["small"])
        assert first is not None
        assert q.complete(first, result=1)
        second = q.pop(worker_id="w1", assigned_users=["small"])
        assert second is not None
        q.fail(second, error="boom", retry=False)
        running = q.pop(worker_id="w1")
        assert running is not None
        assert not q.complete(running.model_copy(update={"lease_token": "999999"}))
        q.register_worker(
            WorkerInfo(
                worker_id="w1", queue=queue, host="h", pid=1,
                started_at=datetime.now(timezone.utc), concurrency=1,
            ),
            ttl_seconds=60,
        )  # fmt: skip
        q.flush_metrics()  # what this client counted, for the service's reads
        m = scrape(live)
        tasks = m["fairque_tasks"]
        assert value(tasks, queue=queue, state="QUEUED") == 5
        assert value(tasks, queue=queue, state="STARTED") == 1
        assert value(tasks, queue=queue, state="FINISHED") == 1
        assert value(tasks, queue=queue, state="FAILED") == 1
        assert value(tasks, queue=other, state="QUEUED") == 0
        ready = m["fairque_user_ready_tasks"]
        assert value(ready, queue=queue, user_id="big", lane="normal") == 5
        assert value(ready, queue=queue, user_id="big", lane="critical") == 0
        in_flight = m["fairque_user_in_flight_tasks"]
        assert value(in_flight, queue=queue, user_id="big") == 1
        assert value(m["fairque_user_payload_bytes"], queue=queue, user_id="big") == 6 * 4
        assert value(m["fairque_user_byte_quota"], queue=queue, user_id="big") == 10_000
        assert value(m["fairque_workers_alive"], queue=queue) == 1
        assert value(m["fairque_workers_alive"], queue=other) == 0
        assert value(m["fairque_oldest_waiting_seconds"], queue=queue) >= waited - 0.001
        assert value(m["fairque_oldest_waiting_seconds"], queue=other) == 0
        assert value(m["fairque_users_ready"], queue=queue) == 1
        pushed = m["fairque_tasks_pushed"]
        assert value(pushed, "fairque_tasks_pushed_total", queue=queue) == 8
        assert value(m["fairque_tasks_finished"], "fairque_tasks_finished_total", queue=queue) == 1
        assert value(m["fairque_tasks_failed"], "fairque_tasks_failed_total", queue=queue) == 1
        assert value(m["fairque_tasks_leased"], "fairque_tasks_leased_total", queue=queue) == 3
        assert value(m["fairque_leases_lost"], "fairque_leases_lost_total", queue=queue) == 1
        assert value(m["fairque_tasks_canceled"], "fairque_tasks_canceled_total", queue=queue) == 0
        waits = m["fairque_task_wait_seconds"]
        assert value(waits, "fairque_task_wait_seconds_count", queue=queue) == 3
        assert value(waits, "fairque_task_wait_seconds_bucket", queue=queue, le="+Inf") == 3
        last = f"{HISTOGRAM_BOUNDS_SECONDS[-1]:.6g}"
        assert value(waits, "fairque_task_wait_seconds_bucket", queue=queue, le=last) == 3
        les = {s.labels["le"] for s in waits if s.name.endswith("_bucket")}
        assert len(les) == len(HISTOGRAM_BOUNDS_SECONDS) + 1  # every kept bound, and +Inf
        assert value(waits, "fairque_task_wait_seconds_sum", queue=queue) >= 3 * (waited - 0.001)
        runs = m["fairque_task_run_seconds"]
        assert value(runs, "fairque_task_run_seconds_count", queue=queue) == 2
        assert value(runs, "fairque_task_run_seconds_count", queue=other) == 0
        buckets = [
            s.value for s in runs if s.name.endswith("_bucket") and s.labels["queue"] == queue
        ]
        assert buckets == sorted(buckets)  # cumulative
    finally:
        q.purge()
        q.close()


def _strict_text_format(text: str) -> dict[str, str]:
    """Check the text format as strict parsers (promtool, Go's expfmt) do: each family's
    HELP and TYPE once, before its samples, and its samples in one block. Answers each
    family's type."""
    types: dict[str, str] = {}
    helps: set[str] = set()
    closed: set[str] = set()
    current: str | None = None
    suffixes = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count",
                "_created"), "gauge": ()}  # fmt: skip
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split()[2]
            assert name not in helps, f"a second HELP for {name}"
            helps.add(name)
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert name not in types, f"a second TYPE for {name}"
            assert name in helps, f"TYPE before HELP for {name}"
            types[name] = kind
            if current is not None:
                closed.add(current)
            current = name
            continue
        assert line, "an empty line"
        assert not line.startswith("#"), line
        sample = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)", line)
        assert sample is not None, line
        name = sample[1]
        family = next(
            (f for f, kind in types.items()
             if name == f or any(name == f + suffix for suffix in suffixes[kind])),
            None,
        )  # fmt: skip
        assert family is not None, f"a sample of no declared family: {line}"
        assert family == current, f"{family}'s samples are split"
        assert family not in closed, f"{family}'s samples are split"
    return types


def test_two_queues_give_one_block_per_family(live: LiveServer) -> None:
    """With two queues served, every family is declared once and its samples of both
    queues are grouped; OpenMetrics, asked for, passes its own strict parser."""
    queue, other = live.service.names
    q = FairQueue.from_url(live.service.url, queue)
    try:
        q.enqueue("n", user_id="u")
        leased = q.pop("w")
        assert leased is not None
        assert q.complete(leased)
        response = httpx.get(f"{live.base}/metrics", timeout=30)
        assert response.headers.get_list("content-type") == [metrics.CONTENT_TYPE]
        types = _strict_text_format(response.text)
        assert types["fairque_task_wait_seconds"] == "histogram"
        # samples of named users only, or of the server's nodes (one server, all queues)
        per_user = ("fairque_user_", "fairque_tenant_weight", "fairque_tenant_group_info",
                    "fairque_group_", "fairque_server_")  # fmt: skip
        for name in [n for n in types if not n.startswith(per_user)]:  # per queue
            queues = {
                s.labels.get("queue") for f in text_string_to_metric_families(response.text)
                if f.name == name or f.name + "_total" == name for s in f.samples
            }  # fmt: skip
            assert {queue, other} <= queues, name
        open_metrics = httpx.get(
            f"{live.base}/metrics", timeout=30,
            headers={"Accept": "application/openmetrics-text; version=1.0.0"},
        )  # fmt: skip
        assert open_metrics.headers["content-type"] == metrics.OPENMETRICS_TYPE
        parsed = list(openmetrics_families(open_metrics.text))  # type: ignore[no-untyped-call]
        assert len({f.name for f in parsed}) == len(parsed) == len(types)
    finally:
        q.purge()
        q.close()


def test_exported_buckets_follow_the_setting(live: LiveServer) -> None:
    """``server.metrics_buckets`` picks the bounds shown, each taken down to a kept one."""
    queue = live.service.names[0]
    settings = live.service.settings
    before = settings.metrics_buckets
    settings.metrics_buckets = [0.01, 1.0, 60.0]
    try:
        text = httpx.get(f"{live.base}/metrics", timeout=30).text
    finally:
        settings.metrics_buckets = before
    les = [
        s.labels["le"]
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "fairque_task_run_seconds_bucket" and s.labels["queue"] == queue
    ]
    # each taken down to the kept bound at or under it: 2^(13/4), 2^(39/4), 2^(63/4) ms
    assert les == ["0.00951366", "0.861078", "55.109", "+Inf"]
    assert metrics.exported_bounds(None) == list(range(len(HISTOGRAM_BOUNDS_SECONDS)))


def test_per_user_series_are_bounded(live: LiveServer) -> None:
    queue = live.service.names[0]
    q = FairQueue.from_url(live.service.url, queue)
    try:
        users = metrics.TOP_USERS + 20
        q.push_many(
            [Task(user_id=f"u{i:03d}", name="n") for i in range(users) for _ in range(1 + i % 3)]
            + [Task(user_id="flood", name="n") for _ in range(30)]
        )
        ready = scrape(live)["fairque_user_ready_tasks"]
        shown = {s.labels["user_id"] for s in ready if s.labels["queue"] == queue}
        assert len(shown) == metrics.TOP_USERS
        assert "flood" in shown
        # the largest backlogs are kept: every user with 3 tasks is shown before any with 1
        assert all(f"u{i:03d}" in shown for i in range(users) if i % 3 == 2)
    finally:
        q.purge()
        q.close()


def test_every_metric_and_label_is_documented(live: LiveServer) -> None:
    """The site's dashboard page lists every family the scrape has, each with the labels
    it carries and the type it has."""
    response = httpx.get(f"{live.base}/metrics", timeout=30)
    exposed: dict[str, tuple[str, set[str]]] = {}
    for family in text_string_to_metric_families(response.text):
        labels = {k for sample in family.samples for k in sample.labels}
        name = family.name + ("_total" if family.type == "counter" else "")
        kind, seen = exposed.get(name, (family.type, set()))
        exposed[name] = (kind, seen | labels)
    root = Path(__file__).resolve().parents[2]
    row = re.compile(r"^\| `(fairque_\w+)` \| (\w+) \| ([^|]*) \|", re.M)
    for doc in (root / "docs" / "howto" / "dashboard.md",):
        documented = {
            m[1]: (m[2], set(re.findall(r"`(\w+)`", m[3]))) for m in row.finditer(doc.read_text())
        }
        assert set(documented) == set(exposed), doc.name
        for name, (kind, labels) in exposed.items():
            assert documented[name][0] == kind, (doc.name, name)
            assert labels <= documented[name][1], (doc.name, name, labels)


class Lines(logging.Handler):
    """The messages of one logger (as far as its level lets them through), whatever the
    root's handlers are."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_an_outage_of_the_queue_server_is_a_series_and_two_log_lines(server: ServerInfo) -> None:
    """Two log lines per outage, however many requests it refused; a service of the same
    process whose own server answers meanwhile ends none of it (each service keeps its
    own tracker). The service's background work (reclaiming, every 50 ms here, lists the
    queues again once ``LIST_SECONDS`` have passed) finds the outage too, but the closing
    line counts requests only."""
    valkey = EmbeddedServer()
    valkey.start()
    reclaim = 0.05
    live = LiveServer(valkey.url, [unique_queue("outage")],
                      ServerSettings(reclaim_interval_seconds=reclaim))  # fmt: skip
    healthy = LiveServer(server.url, [unique_queue("healthy")])
    lines = Lines()
    service_log = logging.getLogger("fairque.service")
    level = service_log.level
    try:
        assert value(scrape(live)["fairque_server_up"]) == 1
        service_log.setLevel(logging.DEBUG)  # the reclaimer's failures are debug lines
        service_log.addHandler(lines)
        valkey.stop()
        for _ in range(3):
            down = scrape(live)  # still 200: the server's outage is a value
            assert list(down) == ["fairque_server_up"]
            assert value(down["fairque_server_up"]) == 0
            assert value(scrape(healthy)["fairque_server_up"]) == 1
        # the reclaimer's own listing (due each turn once LIST_SECONDS have passed since
        # the last that succeeded) finds the outage twice, as a request would
        wait_until(lambda: sum(m.startswith("reclaim: ") and "unavailable" in m
                               for m in lines.messages) >= 2,
                   "the background listing to find the outage")  # fmt: skip
        gone = [m for m in lines.messages if m.startswith("the queue server is unavailable")]
        assert len(gone) == 1, lines.messages  # once per outage, not once per request
        again = EmbeddedServer(port=valkey.port)
        again.start()
        try:
            # on a busy machine a pooled connection the old server closed may still fail
            # a scrape once the server is back: before the first read that reaches it,
            # that scrape is one more request of this outage; after, one of a new one
            late = 0

            def up_again() -> bool:
                nonlocal late
                if value(scrape(live)["fairque_server_up"]) == 1:
                    return True
                late += not any("is back after" in m for m in lines.messages)
                return False

            wait_until(up_again, "a scrape to find the server back")
            back = [m for m in lines.messages if "is back after" in m]
            assert f"({3 + late} requests answered 503 meanwhile)" in back[0], lines.messages
            assert "fairque_tasks" in scrape(live)
        finally:
            again.stop()
    finally:
        service_log.removeHandler(lines)
        service_log.setLevel(level)
        live.stop()
        healthy.stop()
        valkey.stop()
