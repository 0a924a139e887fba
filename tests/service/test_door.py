"""Limits at the door, against a live ``serve``: a token over its request rate gets 429
while another token is served, and an address that keeps sending bad tokens waits."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from helpers.servers import ServerInfo
from helpers.support import unique_queue

from fairque.service.settings import ServerSettings, TokenSettings
from service.harness import Api, LiveServer

SECRETS = {name: f"{name}-secret-token-0123456789" for name in ("flood", "small", "default")}


@pytest.fixture
def door(server: ServerInfo) -> Iterator[LiveServer]:
    tokens = [
        TokenSettings(name="flood", role="producer", token=SECRETS["flood"], rate=5, burst=5),  # type: ignore[arg-type]
        TokenSettings(name="small", role="producer", token=SECRETS["small"], rate=5, burst=5),  # type: ignore[arg-type]
        TokenSettings(name="default", role="viewer", token=SECRETS["default"]),  # type: ignore[arg-type]
    ]
    settings = ServerSettings(
        tokens=tokens, token_rate=2, token_burst=2, bad_tokens_per_minute=60, bad_token_burst=3
    )
    live = LiveServer(server.url, [unique_queue("door")], settings)
    yield live
    live.stop()


def api(live: LiveServer, token: str, source: str = "127.0.0.1") -> Api:
    client = Api(live.base, live.service.names[0], token)
    transport = httpx.HTTPTransport(local_address=source)
    client.http = httpx.Client(
        base_url=live.base, timeout=60, headers=dict(client.http.headers), transport=transport
    )
    return client


def refused(response: httpx.Response, kind: str) -> float:
    """Check a 429 of ``kind``; the seconds it says to wait."""
    assert response.status_code == 429, response.text
    assert response.json()["type"] == f"urn:fairque:problem:{kind}"
    return float(response.headers["Retry-After"])


def until_refused(client: Api, rate: float, burst: int) -> httpx.Response:
    """Requests until the first 429; checks that no more were served than ``burst``
    and what ``rate`` refilled meanwhile (the refusal, whatever the machine's speed)."""
    started, served = time.monotonic(), 0
    while served < 1000:
        answer = client.call("GET", "/tasks")
        if answer.status_code != 200:
            elapsed = time.monotonic() - started
            assert burst <= served <= burst + rate * elapsed, (served, elapsed)
            return answer
        served += 1
    raise AssertionError("never refused")


def test_a_token_over_its_rate_waits_and_another_is_served(door: LiveServer) -> None:
    flood, small = api(door, SECRETS["flood"]), api(door, SECRETS["small"])
    wait = refused(until_refused(flood, 5, 5), "rate-limited")
    assert wait >= 1
    for _ in range(5):  # the other token has its own bucket
        assert small.call("GET", "/tasks").status_code == 200
    time.sleep(wait)
    assert flood.call("GET", "/tasks").status_code == 200

    # a token without a rate of its own takes the server's (2 a second, 2 at once)
    refused(until_refused(api(door, SECRETS["default"]), 2, 2), "rate-limited")


def test_an_address_that_keeps_sending_bad_tokens_waits(door: LiveServer) -> None:
    guesser = api(door, "not-a-token-of-this-server-0000", source="127.0.0.2")
    assert [guesser.call("GET", "/tasks").status_code for _ in range(3)] == [401] * 3
    wait = refused(guesser.call("GET", "/tasks"), "too-many-bad-tokens")
    assert wait >= 1
    # every token from that address waits, a good one too; other addresses do not
    neighbour = api(door, SECRETS["small"], source="127.0.0.2")
    refused(neighbour.call("GET", "/tasks"), "too-many-bad-tokens")
    assert api(door, SECRETS["small"]).call("GET", "/tasks").status_code == 200
    time.sleep(wait)
    assert neighbour.call("GET", "/tasks").status_code == 200

    # the dashboard's login form counts bad tokens against the address too
    browser = httpx.Client(
        base_url=door.base, transport=httpx.HTTPTransport(local_address="127.0.0.3")
    )
    browser.get("/ui/login")
    csrf = browser.cookies["fq_csrf"]
    form: dict[str, Any] = {"csrf": csrf, "next": "/ui", "token": "wrong-token-0000000000"}
    assert [browser.post("/ui/login", data=form).status_code for _ in range(3)] == [401] * 3
    throttled = browser.post("/ui/login", data={**form, "token": SECRETS["small"]})
    assert throttled.status_code == 429
    assert "too many requests from this address" in throttled.text


def test_the_door_limits_are_checked_when_the_settings_load() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="greater than 0"):
        ServerSettings(token_rate=0)
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        TokenSettings(name="t", role="viewer", token=SECRETS["small"], burst=0)  # type: ignore[arg-type]
    assert ServerSettings(bad_tokens_per_minute=0).bad_tokens_per_minute == 0
