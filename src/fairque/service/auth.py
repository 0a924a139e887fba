"""Bearer tokens with roles; only SHA-256 digests are kept and compared."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler
from litestar.types import Guard

from fairque.service import audit
from fairque.service.door import Door
from fairque.service.media import ProblemError
from fairque.service.scope import EVERYTHING, Scope
from fairque.service.settings import Role, ServerSettings, TokenSettings

#: roles allowed on the read endpoints (GET)
READERS: frozenset[Role] = frozenset({"producer", "worker", "viewer", "admin"})
PRODUCERS: frozenset[Role] = frozenset({"producer", "admin"})
WORKERS: frozenset[Role] = frozenset({"worker", "admin"})
ADMINS: frozenset[Role] = frozenset({"admin"})


class Tokens:
    """The configured tokens; ``entry_of`` answers in time independent of which matched."""

    def __init__(
        self,
        tokens: Sequence[TokenSettings],
        door: Door | None = None,
        rate: float | None = None,
        burst: int | None = None,
    ) -> None:
        self._digests: list[tuple[bytes, TokenSettings]] = [(t.digest(), t) for t in tokens]
        #: the limits at the door (``fairque.service.door``), and each token's default rate
        self.door = door or Door(0, 1)
        self.rate, self.burst = rate, burst

    @classmethod
    def of(cls, settings: ServerSettings) -> Tokens:
        """The tokens and limits at the door of ``settings``."""
        door = Door(settings.bad_tokens_per_minute, settings.bad_token_burst)
        return cls(settings.tokens, door, settings.token_rate, settings.token_burst)

    def named(self, name: str) -> TokenSettings | None:
        """The entry called ``name`` (names differ: the settings check it)."""
        return next((entry for _, entry in self._digests if entry.name == name), None)

    @property
    def enabled(self) -> bool:
        """True when at least one token is configured (else every request is allowed)."""
        return bool(self._digests)

    def entry_of(self, authorization: str | None) -> TokenSettings:
        """The entry of the request's bearer token, or ``ProblemError`` 401."""
        scheme, _, token = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise _unauthorized("send Authorization: Bearer <token>")
        digest = hashlib.sha256(token.strip().encode("utf-8", "surrogatepass")).digest()
        found: TokenSettings | None = None
        for known, entry in self._digests:
            # every digest is compared, so the time taken says nothing about which matched
            if hmac.compare_digest(known, digest):
                found = entry
        if found is None:
            raise _unauthorized("the bearer token is not valid")
        if found.expires_at is not None and datetime.now(timezone.utc) >= found.expires_at:
            raise _unauthorized("the bearer token has expired")
        return found

    def role_of(self, authorization: str | None) -> Role:
        """The role of the request's bearer token, or ``ProblemError`` 401."""
        return self.entry_of(authorization).role

    def admit(self, authorization: str | None, peer: str) -> TokenSettings:
        """The entry of a request's token from ``peer``, within the limits at the door:
        401 for a bad token (counted against the peer), 429 for a peer with too many of
        those or a token over its rate."""
        self.door.check_peer(peer)
        try:
            entry = self.entry_of(authorization)
        except ProblemError:
            if authorization:  # a token was sent (a request with none guesses nothing)
                self.door.failed(peer)
            raise
        rate = entry.rate if entry.rate is not None else self.rate
        self.door.admit(entry.name, rate, entry.burst if entry.burst is not None else self.burst)
        return entry


#: where the guard leaves the request's scope and token name for the handler (the ASGI
#: scope's state)
SCOPE_KEY = "fairque.scope"
NAME_KEY = "fairque.token"


def guard(
    tokens: Tokens, roles: frozenset[Role], per_tenant: bool = False, action: str = ""
) -> Guard:
    """A Litestar guard: the request's bearer token is known and within its limits
    (401/429, ``Tokens.admit``), has one of ``roles`` (403), and a token held to tenants
    is used where the operation keeps it to them (``per_tenant``; 403 else). What the
    token may reach is left for the handler (``scope_of``); a 403 leaves an audit line
    for ``action``."""

    def guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
        if not tokens.enabled:
            return
        peer = connection.client.host if connection.client is not None else ""
        entry = tokens.admit(connection.headers.get("authorization"), peer)
        refusal = None
        if entry.role not in roles:
            refusal = f"role {entry.role!r} may not do this; allowed: {', '.join(sorted(roles))}"
        elif entry.scope.by_tenant and not per_tenant:
            refusal = (
                "this token is held to some tenants, and this route reads or changes the "
                "whole queue; a token of the whole queue may use it"
            )
        if refusal is not None:
            audit.record(
                action, token=entry.name, peer=peer, status=403,
                queue=connection.path_params.get("queue"),
            )  # fmt: skip
            raise ProblemError(403, "forbidden", "Forbidden", refusal)
        state = connection.scope.setdefault("state", {})
        state[SCOPE_KEY] = entry.scope
        state[NAME_KEY] = entry.name

    return guard


def token_name(request: Request[Any, Any, Any]) -> str:
    """The name of the request's token ("-" without tokens)."""
    name = (request.scope.get("state") or {}).get(NAME_KEY, "-")
    return str(name)


def scope_of(request: Request[Any, Any, Any]) -> Scope:
    """What the request's token may reach (everything without tokens)."""
    state = request.scope.get("state") or {}
    scope = state.get(SCOPE_KEY, EVERYTHING)
    assert isinstance(scope, Scope)
    return scope


def _unauthorized(detail: str) -> ProblemError:
    return ProblemError(
        401, "unauthorized", "Unauthorized", detail,
        headers={"WWW-Authenticate": 'Bearer realm="fairque"'},
    )  # fmt: skip


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind_problem(host: str, tokens: Sequence[TokenSettings]) -> str | None:
    """Why the server must not listen on ``host``, or None when it may."""
    if tokens or is_loopback(host):
        return None
    return (
        f"refusing to listen on {host}: no tokens are configured, so the API would be open "
        "to anyone who can reach it; add server.tokens (or FAIRQUE_SERVER__TOKENS) or bind "
        "to 127.0.0.1"
    )
