"""Which queues ``fairque serve`` serves and lists: every queue on the server when none
is named, names and patterns otherwise; ``GET /v1/queues``, the dashboard's home and
``/metrics`` list them."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from helpers.servers import ServerInfo
from helpers.support import unique_queue

from fairque import FairQueue
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


#: the dashboard's home and /metrics read every queue on the server, which the suite
#: shares with every other test's queues: on a busy machine that takes tens of seconds
WHOLE_SERVER = 90


# it reads every queue on the shared server (thousands by then): one kind is enough, the
# serving code is the same on each
@pytest.mark.server_kinds("valkey")
def test_no_name_serves_every_queue_on_the_server(
    server: ServerInfo, two_queues: tuple[str, str]
) -> None:
    live = LiveServer(server.url, [])
    try:
        assert live.service.selection == "every queue"
        listed = _listed(live.base)
        assert set(two_queues) <= set(listed)
        first, _ = two_queues
        stats = httpx.get(f"{live.base}/v1/queues/{first}/stats", timeout=WHOLE_SERVER).json()
        assert stats["counts"]["QUEUED"] == 1
        # a queue nobody pushed to yet is served too: a push creates it
        fresh = unique_queue("fresh")
        pushed = httpx.post(f"{live.base}/v1/queues/{fresh}/tasks", timeout=WHOLE_SERVER,
                            json={"name": "n", "user_id": "u"})  # fmt: skip
        assert pushed.status_code == 201
        live.service._listed_at = float("-inf")  # the listing is reused for 2 s
        assert fresh in _listed(live.base)
        home = httpx.get(f"{live.base}/ui", timeout=WHOLE_SERVER)
        assert home.status_code == 200
        for name in (*two_queues, fresh):
            assert f'href="/ui/q/{name}"' in home.text
        scrape = httpx.get(f"{live.base}/metrics", timeout=WHOLE_SERVER).text
        for name in (*two_queues, fresh):
            assert f'fairque_tasks{{queue="{name}",state="QUEUED"}} 1.0' in scrape
        FairQueue.from_url(server.url, fresh).purge()
    finally:
        live.stop()


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
