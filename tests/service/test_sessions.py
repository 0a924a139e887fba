"""The dashboard's login session against live ``serve`` processes: an opaque cookie that
never holds the token, ends with its token, and is taken by every process that shares
the session secret."""

from __future__ import annotations

import hashlib
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import pytest
from helpers.servers import ServerInfo
from helpers.support import unique_queue

from fairque.service.settings import ServerSettings, TokenSettings
from fairque.service.ui.security import CSRF_COOKIE, SESSION_COOKIE
from service.harness import LiveServer

ADMIN = "admin-secret-token-0123456789"
OTHER = "other-secret-token-0123456789"
SECRET = "s" * 32


def serve(server: ServerInfo, queue: str, token: str = ADMIN, **settings: Any) -> LiveServer:
    entry = TokenSettings(name="ops", role="admin", token=token, **settings.pop("entry", {}))  # type: ignore[arg-type]
    return LiveServer(server.url, [queue], ServerSettings(tokens=[entry], **settings))


def log_in(live: LiveServer, token: str = ADMIN) -> httpx.Response:
    csrf = "c" * 32
    return httpx.post(
        f"{live.base}/ui/login", data={"token": token, "csrf": csrf, "next": "/ui"},
        cookies={CSRF_COOKIE: csrf},
    )  # fmt: skip


def max_age(login: httpx.Response) -> int:
    return int(login.headers["set-cookie"].lower().split("max-age=")[1].split(";")[0])


def opens(live: LiveServer, session: str) -> bool:
    """Whether the dashboard takes ``session`` (else it sends the caller to log in)."""
    page = httpx.get(f"{live.base}/ui/", cookies={SESSION_COOKIE: session})
    return not page.headers.get("location", "").startswith("/ui/login")


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_a_session_is_opaque_and_signed(server: ServerInfo) -> None:
    queue = unique_queue("session")
    live = serve(server, queue, session_secret=SECRET, session_hours=2)
    try:
        login = log_in(live)
        assert login.status_code == 303
        session = login.cookies[SESSION_COOKIE]
        header = login.headers["set-cookie"].lower()
        assert "httponly" in header
        assert "samesite=strict" in header
        assert 7000 < max_age(login) <= 7200  # two hours
        assert ADMIN not in session
        assert hashlib.sha256(ADMIN.encode()).hexdigest() not in session
        assert opens(live, session)
        assert log_in(live).cookies[SESSION_COOKIE] != session  # each login its own
        flipped = session[:-1] + ("A" if session[-1] != "A" else "B")
        assert not opens(live, flipped)
        assert not opens(live, "ops.9999999999.x.y")
    finally:
        live.stop()


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_a_session_ends_with_its_token_and_lives_where_the_secret_is_shared(
    server: ServerInfo,
) -> None:
    queue = unique_queue("session")
    first = serve(server, queue, session_secret=SECRET)
    session = log_in(first).cookies[SESSION_COOKIE]
    first.stop()
    cases = [
        ({"session_secret": SECRET}, ADMIN, True),  # another process, the same secret
        ({"session_secret": "t" * 32}, ADMIN, False),  # another secret
        ({}, ADMIN, False),  # no secret: one of the process's own
        ({"session_secret": SECRET}, OTHER, False),  # the token was replaced
    ]
    for settings, token, taken in cases:
        live = serve(server, queue, token, **settings)
        try:
            assert opens(live, session) is taken, (settings, token)
        finally:
            live.stop()


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_a_session_ends_when_its_token_expires(server: ServerInfo) -> None:
    ends = datetime.now(timezone.utc) + timedelta(seconds=2)
    live = serve(server, unique_queue("session"), entry={"expires_at": ends})
    try:
        login = log_in(live)
        session = login.cookies[SESSION_COOKIE]
        assert max_age(login) <= 2  # never past the token's expiry
        assert opens(live, session)
        time.sleep(max(0.0, (ends - datetime.now(timezone.utc)).total_seconds()) + 0.1)
        assert not opens(live, session)
    finally:
        live.stop()


def test_token_names_differ() -> None:
    entries = [
        TokenSettings(name="ops", role="admin", token=ADMIN),  # type: ignore[arg-type]
        TokenSettings(name="ops", role="viewer", token=OTHER),  # type: ignore[arg-type]
    ]
    with pytest.raises(ValueError, match="ops named twice"):
        ServerSettings(tokens=entries)
