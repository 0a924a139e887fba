"""Which queues ``fairque serve`` serves and lists: every queue on the server when none
is named, names and patterns otherwise; ``GET /v1/queues``, the dashboard's home and
``/metrics`` list them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.servers import ServerInfo
from helpers.support import unique_queue

from fairque import FairQueue
from fairque.cli.embedded import EmbeddedServer, free_port
from service.harness import LiveServer


@pytest.fixture
def two_queues(server: ServerInfo) -> Iterator[tuple[str, str]]:
    """Two queues that exist on ``server`` (one task each), sharing a fresh prefix."""
    prefix = unique_queue("disc")
    names = (f"{prefix}-a", f"{prefix}-b")
    made = [FairQueue.from_url(server.url, name) for name in names]
    for q in made:
        q.enqueue("n", user_id="u")
    yield names
    for q in made:
        q.purge()
        q.close()


def _listed(base: str) -> list[str]:
    answer = httpx.get(f"{base}/v1/queues", timeout=30)
    assert answer.status_code == 200, answer.text
    return [q["name"] for q in answer.json()["queues"]]


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[str]:
    """A Valkey of this test alone: "every queue on the server" is then exactly the
    test's queues (on the suite's shared servers it is thousands, read in tens of
    seconds on a busy machine)."""
    server = EmbeddedServer(port=free_port(), workdir=tmp_path / "server")
    server.start()
    yield server.url
    server.stop()


def test_no_name_serves_every_queue_on_the_server(own_server: str) -> None:
    made = [FairQueue.from_url(own_server, name) for name in ("disc-a", "disc-b")]
    for q in made:
        q.enqueue("n", user_id="u")
    live = LiveServer(own_server, [])
    try:
        assert live.service.selection == "every queue"
        assert sorted(_listed(live.base)) == ["disc-a", "disc-b"]
        stats = httpx.get(f"{live.base}/v1/queues/disc-a/stats").json()
        assert stats["counts"]["QUEUED"] == 1
        # a queue nobody pushed to yet is served too: a push creates it
        pushed = httpx.post(
            f"{live.base}/v1/queues/fresh/tasks", json={"name": "n", "user_id": "u"}
        )
        assert pushed.status_code == 201
        live.service._listed_at = float("-inf")  # the listing is reused for 2 s
        assert sorted(_listed(live.base)) == ["disc-a", "disc-b", "fresh"]
        home = httpx.get(f"{live.base}/ui")
        assert home.status_code == 200
        for name in ("disc-a", "disc-b", "fresh"):
            assert f'href="/ui/q/{name}"' in home.text
        scrape = httpx.get(f"{live.base}/metrics").text
        for name in ("disc-a", "disc-b", "fresh"):
            assert f'fairque_tasks{{queue="{name}",state="QUEUED"}} 1.0' in scrape
    finally:
        live.stop()
        for q in made:
            q.close()


def test_a_pattern_restricts_what_is_served_and_listed(
    server: ServerInfo, two_queues: tuple[str, str]
) -> None:
    a, b = two_queues
    live = LiveServer(server.url, [a[:-1] + "[a]", "explicit-queue"])
    try:
        assert _listed(live.base) == sorted([a, "explicit-queue"])
        assert httpx.get(f"{live.base}/v1/queues/{a}/stats", timeout=30).status_code == 200
        refused = httpx.get(f"{live.base}/v1/queues/{b}/stats", timeout=30)
        assert refused.status_code == 404
        detail = refused.json()["detail"]
        assert b in detail
        assert a in detail  # says what is served instead
        page = httpx.get(f"{live.base}/ui/q/{b}", timeout=30)
        assert page.status_code == 404
        assert f'href="/ui/q/{a}"' in page.text
    finally:
        live.stop()


def test_a_newcomer_is_told_how_to_make_a_queue(server: ServerInfo) -> None:
    live = LiveServer(server.url, [unique_queue("none") + "-*"])
    try:
        assert _listed(live.base) == []
        home = httpx.get(f"{live.base}/ui", timeout=30)
        assert home.status_code == 200
        assert 'id="empty"' in home.text
        assert "/v1/queues/hello/tasks" in home.text
    finally:
        live.stop()


def test_a_bad_queue_name_is_not_found(live: LiveServer) -> None:
    """A name no queue can have is not served (404, as the document says), and the
    answer says why."""
    answer = httpx.get(f"{live.base}/v1/queues/a%20b/stats", timeout=30)
    assert answer.status_code == 404
    assert answer.json()["type"].endswith("queue-not-found")
    assert "whitespace" in answer.json()["detail"]
