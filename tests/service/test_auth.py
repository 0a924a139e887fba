"""Bearer tokens and roles; the loopback rule without tokens."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest
from helpers.servers import ServerInfo
from helpers.support import unique_queue
from typer.testing import CliRunner

from fairque.cli import app
from fairque.service.auth import bind_problem, is_loopback
from fairque.service.settings import ServerSettings, TokenSettings
from fairque.service.ui.security import CSRF_COOKIE, SESSION_COOKIE
from service.harness import Api, LiveServer

TOKENS = {
    role: f"{role}-secret-token-0123456789" for role in ("producer", "worker", "viewer", "admin")
}


@pytest.fixture
def secured(server: ServerInfo) -> Iterator[LiveServer]:
    tokens = [
        TokenSettings(name="p", role="producer", token=TOKENS["producer"]),  # type: ignore[arg-type]
        TokenSettings(
            name="w", role="worker", sha256=hashlib.sha256(TOKENS["worker"].encode()).hexdigest()
        ),
        TokenSettings(name="v", role="viewer", token=TOKENS["viewer"]),  # type: ignore[arg-type]
        TokenSettings(name="a", role="admin", token=TOKENS["admin"]),  # type: ignore[arg-type]
    ]
    live = LiveServer(server.url, [unique_queue("auth")], ServerSettings(tokens=tokens))
    yield live
    live.stop()


def client(live: LiveServer, role: str | None) -> Api:
    return Api(live.base, live.service.names[0], TOKENS[role] if role else None)


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_roles(secured: LiveServer) -> None:
    anonymous = client(secured, None)
    denied = anonymous.call("GET", "/stats")
    assert denied.status_code == 401
    assert denied.headers["www-authenticate"].startswith("Bearer")
    assert denied.json()["type"].endswith("unauthorized")
    wrong = Api(secured.base, secured.service.names[0], "not-a-token")
    assert wrong.call("GET", "/stats").status_code == 401

    producer, worker = client(secured, "producer"), client(secured, "worker")
    viewer, admin = client(secured, "viewer"), client(secured, "admin")
    task = producer.push(task_id="t")
    assert worker.call("POST", "/tasks", {"name": "n", "user_id": "u"}).status_code == 403
    assert viewer.call("POST", "/tasks", {"name": "n", "user_id": "u"}).status_code == 403
    assert producer.call("POST", "/leases", {"worker_id": "w"}).status_code == 403
    for reader in (producer, worker, viewer, admin):
        assert reader.ok("GET", "/tasks/t")["task_id"] == task["task_id"]
    [leased] = worker.lease()
    assert leased["task_id"] == "t"
    forbidden = producer.call("PUT", "/users/u/limits", {"weight": 2})
    assert forbidden.status_code == 403
    assert forbidden.json()["type"].endswith("forbidden")
    assert admin.ok("PUT", "/users/u/limits", {"weight": 2})["weight"] == 2
    assert worker.call("POST", "/tasks/t/retry").status_code == 403
    assert admin.ok("POST", "/leases", {"worker_id": "a"}) == {"tasks": []}


def test_loopback_rule() -> None:
    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    assert bind_problem("127.0.0.5", []) is None
    problem = bind_problem("0.0.0.0", [])
    assert problem is not None
    assert "no tokens" in problem
    token = TokenSettings(name="a", role="admin", sha256="a" * 64)
    assert bind_problem("0.0.0.0", [token]) is None


def test_serve_refuses_a_public_address_without_tokens() -> None:
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--port", "8123"])
    assert result.exit_code == 2
    assert "refusing to listen on 0.0.0.0" in result.output


def test_token_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        TokenSettings(name="a", role="admin")
    with pytest.raises(ValueError, match="hexadecimal"):
        TokenSettings(name="a", role="admin", sha256="xyz")
    with pytest.raises(ValueError, match="at least 16"):
        TokenSettings(name="a", role="admin", token="short")  # type: ignore[arg-type]


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_an_expired_token_is_refused_everywhere(server: ServerInfo) -> None:
    """From its ``expires_at`` a token gets 401 from the API and from the dashboard (a
    bearer header, or the login form); a token whose time has not come works."""
    now = datetime.now(timezone.utc)
    tokens = [
        TokenSettings(name="old", role="admin", token=TOKENS["admin"],  # type: ignore[arg-type]
                      expires_at=now - timedelta(seconds=1)),
        TokenSettings(name="new", role="admin", token=TOKENS["viewer"],  # type: ignore[arg-type]
                      expires_at=now + timedelta(days=1)),
    ]  # fmt: skip
    live = LiveServer(server.url, [unique_queue("expiry")], ServerSettings(tokens=tokens))
    old, new = client(live, "admin"), client(live, "viewer")
    try:
        refused = old.call("GET", "/stats")
        assert refused.status_code == 401
        assert refused.json()["detail"] == "the bearer token has expired"
        assert new.call("GET", "/stats").status_code == 200
        # the dashboard sends a caller it does not know to its login page
        assert old.http.get("/ui/").headers.get("location", "").startswith("/ui/login")
        assert not new.http.get("/ui/").headers.get("location", "").startswith("/ui/login")
        csrf = "c" * 32
        login = httpx.post(
            f"{live.base}/ui/login", data={"token": TOKENS["admin"], "csrf": csrf},
            cookies={CSRF_COOKIE: csrf},
        )  # fmt: skip
        assert login.status_code == 401
        assert SESSION_COOKIE not in login.cookies
    finally:
        old.close()
        new.close()
        live.stop()


def test_an_expiry_must_say_its_zone() -> None:
    with pytest.raises(ValueError, match="time zone"):
        TokenSettings.model_validate(
            {"name": "a", "role": "admin", "sha256": "a" * 64, "expires_at": "2027-01-31T00:00"}
        )
    zoned = TokenSettings.model_validate(
        {"name": "a", "role": "admin", "sha256": "a" * 64, "expires_at": "2027-01-31T00:00Z"}
    )
    assert zoned.expires_at == datetime(2027, 1, 31, tzinfo=timezone.utc)


def test_serve_takes_the_shared_options_after_its_name(tmp_path: Path) -> None:
    """``fairque serve --config FILE`` reads the file like ``fairque --config FILE serve``."""
    config = tmp_path / "serve.yaml"
    config.write_text("server:\n  host: 0.0.0.0\n")
    for args in (["--config", str(config), "serve"], ["serve", "--config", str(config)]):
        result = CliRunner().invoke(app, [*args, "--port", "8123"])
        assert result.exit_code == 2, args
        assert "refusing to listen on 0.0.0.0" in result.output, args
