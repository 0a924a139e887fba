"""Limits at the door: each token's request rate, and peers that keep sending bad tokens.

Both are token buckets kept in this ``serve`` process (several processes behind one
balancer each keep their own: a token may make its rate at each of them). A token
over its rate is answered 429 ``rate-limited``; a peer that sent more bad tokens than
its allowance is answered 429 ``too-many-bad-tokens`` for every token it sends until
its bucket has refilled by one (a good token from the same address waits too: the
server cannot tell a guesser from its neighbour). Both answers say ``Retry-After``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from fairque.service.media import ProblemError

#: the most peers remembered; past it, the peers whose buckets are full are forgotten
MAX_PEERS = 10_000


@dataclass
class Buckets:
    """Token buckets by key: ``rate`` tokens a second, up to ``burst``."""

    rate: float
    burst: float
    #: key -> (tokens at ``when``, ``when``: monotonic seconds)
    held: dict[str, tuple[float, float]] = field(default_factory=dict)

    def level(self, key: str, now: float) -> float:
        tokens, when = self.held.get(key, (self.burst, now))
        return min(self.burst, tokens + (now - when) * self.rate)

    def wait(self, key: str, now: float) -> float:
        """Seconds until ``key`` has a whole token (0: it has one now)."""
        missing = 1.0 - self.level(key, now)
        return 0.0 if missing <= 0 else missing / self.rate

    def take(self, key: str, now: float) -> float:
        """Take one token of ``key``; 0 when taken, else the seconds until one is there
        (nothing taken)."""
        tokens = self.level(key, now)
        if tokens < 1.0:
            return (1.0 - tokens) / self.rate
        self.held[key] = (tokens - 1.0, now)
        return 0.0

    def spend(self, key: str, now: float) -> None:
        """Take one token of ``key`` even below zero (a debt the refill pays off)."""
        self.held[key] = (max(self.level(key, now) - 1.0, -self.burst), now)
        if len(self.held) > MAX_PEERS:
            self.held = {k: v for k, v in self.held.items() if self.level(k, now) < self.burst}


def _retry_after(wait: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(wait)))}


class Door:
    """The buckets of one ``serve`` process: per token and per peer."""

    def __init__(self, bad_tokens_per_minute: float, bad_token_burst: int) -> None:
        self.bad = Buckets(bad_tokens_per_minute / 60.0, bad_token_burst)
        self.tokens: dict[tuple[float, int], Buckets] = {}

    def check_peer(self, peer: str) -> None:
        """429 ``too-many-bad-tokens`` while ``peer`` has no allowance of bad tokens."""
        if self.bad.rate > 0:
            wait = self.bad.wait(peer, time.monotonic())
            if wait > 0:
                raise ProblemError(
                    429, "too-many-bad-tokens", "Too Many Requests",
                    "too many requests from this address carried a token the server does "
                    "not know; wait before sending another",
                    headers=_retry_after(wait),
                )  # fmt: skip

    def failed(self, peer: str) -> None:
        """``peer`` sent a bad token."""
        if self.bad.rate > 0:
            self.bad.spend(peer, time.monotonic())

    def admit(self, name: str, rate: float | None, burst: int | None) -> None:
        """One request of the token ``name``: 429 ``rate-limited`` past ``rate`` requests
        a second (``burst`` at once, the rate when None); no limit without a rate."""
        if rate is None:
            return
        size = burst if burst is not None else max(1, math.ceil(rate))
        buckets = self.tokens.setdefault((rate, size), Buckets(rate, size))
        wait = buckets.take(name, time.monotonic())
        if wait > 0:
            raise ProblemError(
                429, "rate-limited", "Too Many Requests",
                f"this token may make {rate:g} requests a second ({size} at once); "
                "wait before sending another",
                headers=_retry_after(wait),
            )  # fmt: skip
