"""The dashboard's login session: an opaque cookie that never holds the token.

A session names its token's entry, when it ends, and a random nonce, signed with a key
made from the server's session secret and the token's digest. So a session ends when
it runs out (``server.session_hours``), when its token expires, and when its token is
removed from the settings or replaced (the digest changes); a cookie with a changed
byte is refused. It needs no store: every ``serve`` process with the same
``server.session_secret`` takes the sessions the others made (without the setting,
each process makes a secret of its own at start, and a restart logs everyone out).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from datetime import datetime, timezone

from fairque.service.auth import Tokens
from fairque.service.settings import TokenSettings


class Sessions:
    """Issues and reads session cookies for ``tokens``."""

    def __init__(self, tokens: Tokens, secret: bytes | None, hours: float) -> None:
        self.tokens = tokens
        self.secret = secret or secrets.token_bytes(32)
        self.seconds = hours * 3600.0

    def _mac(self, entry: TokenSettings, body: str) -> str:
        key = hmac.new(self.secret, entry.digest(), hashlib.sha256).digest()
        mac = hmac.new(key, body.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def issue(self, entry: TokenSettings) -> tuple[str, int]:
        """A new session of ``entry``'s token: the cookie's value and its lifetime in
        seconds (never past the token's expiry)."""
        ends = time.time() + self.seconds
        if entry.expires_at is not None:
            ends = min(ends, entry.expires_at.timestamp())
        name = base64.urlsafe_b64encode(entry.name.encode()).decode().rstrip("=")
        body = f"{name}.{int(ends)}.{secrets.token_urlsafe(16)}"
        return f"{body}.{self._mac(entry, body)}", max(0, int(ends - time.time()))

    def entry_of(self, cookie: str) -> TokenSettings | None:
        """The live entry a session cookie names, or None (unknown, changed, ended, or
        its token gone, replaced or expired)."""
        body, _, mac = cookie.rpartition(".")
        parts = body.split(".")
        if len(parts) != 3 or not parts[1].isdigit() or int(parts[1]) <= time.time():
            return None
        try:
            name = base64.urlsafe_b64decode(parts[0] + "=" * (-len(parts[0]) % 4)).decode()
        except (ValueError, UnicodeDecodeError):
            return None
        entry = self.tokens.named(name)
        if entry is None or not hmac.compare_digest(mac, self._mac(entry, body)):
            return None
        if entry.expires_at is not None and datetime.now(timezone.utc) >= entry.expires_at:
            return None
        return entry
