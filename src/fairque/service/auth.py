"""Bearer tokens with roles; only SHA-256 digests are kept and compared."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Sequence
from datetime import datetime, timezone

from fairque.service.media import ProblemError
from fairque.service.settings import Role, TokenSettings

#: roles allowed on the read endpoints (GET)
READERS: frozenset[Role] = frozenset({"producer", "worker", "viewer", "admin"})
PRODUCERS: frozenset[Role] = frozenset({"producer", "admin"})
WORKERS: frozenset[Role] = frozenset({"worker", "admin"})
ADMINS: frozenset[Role] = frozenset({"admin"})


class Tokens:
    """The configured tokens; ``role_of`` answers in time independent of which matched."""

    def __init__(self, tokens: Sequence[TokenSettings]) -> None:
        self._digests: list[tuple[bytes, TokenSettings]] = [(t.digest(), t) for t in tokens]

    @property
    def enabled(self) -> bool:
        """True when at least one token is configured (else every request is allowed)."""
        return bool(self._digests)

    def role_of(self, authorization: str | None) -> Role:
        """The role of the request's bearer token, or ``ProblemError`` 401."""
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
        return found.role

    def check(self, authorization: str | None, allowed: frozenset[Role]) -> None:
        """Allow the request, or raise ``ProblemError`` 401/403."""
        if not self.enabled:
            return
        role = self.role_of(authorization)
        if role not in allowed:
            raise ProblemError(
                403, "forbidden", "Forbidden",
                f"role {role!r} may not do this; allowed: {', '.join(sorted(allowed))}",
            )  # fmt: skip


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
