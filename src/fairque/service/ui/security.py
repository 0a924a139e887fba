"""Who may look and act on the dashboard: sessions, roles, CSRF, response headers.

The dashboard takes the API's tokens. A login form starts a session: an opaque, signed
HttpOnly, SameSite=Strict cookie scoped to ``/ui`` (``Secure`` over HTTPS) that never
holds the token (``fairque.service.ui.session``); a request may also send the token as
a bearer header. Readers (``viewer``, and the API's ``producer`` and ``worker``) see
the pages, ``admin`` acts. Without configured tokens (loopback-only mode) everyone is
admin, as on the API. Every form carries a CSRF token equal to a random HttpOnly
cookie (double submit) and is checked on every POST, with the Origin header when sent.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Any

from litestar import Request

from fairque.service.auth import READERS, Tokens
from fairque.service.media import ProblemError
from fairque.service.scope import EVERYTHING, Scope
from fairque.service.settings import Role, TokenSettings
from fairque.service.ui.session import Sessions

SESSION_COOKIE = "fq_session"
CSRF_COOKIE = "fq_csrf"
CSRF_FIELD = "csrf"

#: no inline script or style anywhere: scripts and styles are files served by /ui/static
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


class Denied(Exception):
    """The request may not see or do this: ``status`` 401 (log in) or 403."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def caller(sessions: Sessions, request: Request[Any, Any, Any]) -> TokenSettings | None:
    """The caller's token entry (by a bearer header or a session cookie), or None when
    not logged in (or without tokens)."""
    tokens = sessions.tokens
    if not tokens.enabled:
        return None
    header = request.headers.get("authorization")
    if header is not None:
        try:
            return tokens.entry_of(header)
        except ProblemError:
            return None
    cookie = request.cookies.get(SESSION_COOKIE)
    return sessions.entry_of(cookie) if cookie else None


def role_of(sessions: Sessions, request: Request[Any, Any, Any]) -> Role | None:
    """The caller's role, or None when not logged in (always ``admin`` without tokens)."""
    if not sessions.tokens.enabled:
        return "admin"
    entry = caller(sessions, request)
    return None if entry is None else entry.role


def scope_of(sessions: Sessions, request: Request[Any, Any, Any]) -> Scope:
    """What the caller may reach (everything without tokens)."""
    entry = caller(sessions, request)
    return EVERYTHING if entry is None else entry.scope


#: why a token held to tenants cannot open the dashboard
TENANT_SCOPED = (
    "this token is held to some tenants, and the dashboard shows whole queues; "
    "a tenant's token reads its own tasks through the API"
)


def check_token(tokens: Tokens, token: str, peer: str) -> tuple[TokenSettings | None, int, str]:
    """The entry of a token typed into the login form from ``peer`` (a bad one counts
    against the address, as on the API), or None, the status and why not."""
    try:
        entry = tokens.admit(f"Bearer {token}", peer)
    except ProblemError as exc:
        if exc.problem.status == 429:
            return None, 429, exc.problem.detail or exc.problem.title
        return None, 401, "That token is not valid."
    if entry.scope.by_tenant:
        return None, 403, TENANT_SCOPED
    return entry, 200, ""


def require(sessions: Sessions, request: Request[Any, Any, Any], act: bool) -> Role:
    """The caller's role when it may look (``act``: and act), else ``Denied``."""
    role = role_of(sessions, request)
    if role is None:
        raise Denied(401, "log in with a token")
    if scope_of(sessions, request).by_tenant:
        raise Denied(403, TENANT_SCOPED)
    if role not in READERS:
        raise Denied(403, f"role {role!r} may not use the dashboard")
    if act and role != "admin":
        raise Denied(403, f"role {role!r} may look but not act; actions need an admin token")
    return role


def csrf_token(request: Request[Any, Any, Any]) -> tuple[str, bool]:
    """The CSRF token of this browser, and whether it is new (the cookie must be set)."""
    known = request.cookies.get(CSRF_COOKIE)
    if known and len(known) >= 32:
        return known, False
    return secrets.token_urlsafe(32), True


def check_csrf(request: Request[Any, Any, Any], form: dict[str, str]) -> None:
    """``Denied`` 403 unless the form's CSRF token matches the cookie (and Origin, if sent)."""
    cookie = request.cookies.get(CSRF_COOKIE) or ""
    sent = form.get(CSRF_FIELD, "")
    if not cookie or not sent or not hmac.compare_digest(cookie.encode(), sent.encode()):
        raise Denied(403, "the form's CSRF token is missing or stale; reload the page")
    origin = request.headers.get("origin")
    host = request.headers.get("host")
    if origin and origin != "null" and host and origin.split("://", 1)[-1] != host:
        raise Denied(403, "the request comes from another origin")
