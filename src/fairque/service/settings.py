"""The ``server:`` and ``dispatch:`` sections of the settings file."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from fairque.core.checks import MAX_TASK_ID, identifier_problem
from fairque.core.keys import validate_queue_name
from fairque.service.scope import EVERYTHING, Scope, is_pattern

Role = Literal["producer", "worker", "viewer", "admin"]

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class TokenSettings(BaseModel):
    """One bearer token: its role and its SHA-256 (``sha256``), or the token itself
    (``token``, hashed at load; prefer ``sha256`` in files). From ``expires_at`` (an
    ISO 8601 time with its zone) the token is refused (401).

    ``queues`` and ``tenants`` narrow what it reaches (names or ``fnmatch`` patterns;
    absent: all). A tenant scope suits producer, worker and viewer tokens; a worker's
    tenants are names (a lease asks for them by name), and an admin token acts on whole
    queues, so it takes no tenant scope.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    role: Role
    sha256: str | None = None
    token: SecretStr | None = None
    #: from this time on (ISO 8601 with its zone) the token is refused
    expires_at: datetime | None = None
    #: the queues it may use (names or fnmatch patterns; None: every queue served)
    queues: list[str] | None = Field(default=None, min_length=1, max_length=1000)
    #: the tenants it acts for (names or patterns; a worker's are names; None: all)
    tenants: list[str] | None = Field(default=None, min_length=1, max_length=10_000)
    #: whether it reads tasks' payloads and results (None: yes, but a viewer held to
    #: some queues or tenants does not)
    payloads: bool | None = None
    #: requests a second this token may make, ``burst`` at once (None: the server's
    #: ``token_rate`` and ``token_burst``)
    rate: float | None = Field(default=None, gt=0, le=1_000_000)
    burst: int | None = Field(default=None, ge=1, le=1_000_000)

    @field_validator("expires_at")
    @classmethod
    def _zoned(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.utcoffset() is None:
            raise ValueError(
                "must say its time zone (2027-01-31T00:00:00Z, or +01:00): a time without "
                "one means a different instant on each host"
            )
        return value

    @field_validator("queues")
    @classmethod
    def _queue_names(cls, value: list[str] | None) -> list[str] | None:
        for name in value or ():
            validate_queue_name(name)  # (a ConfigError is a ValueError) patterns too
        return value

    @field_validator("tenants")
    @classmethod
    def _tenant_names(cls, value: list[str] | None) -> list[str] | None:
        for name in value or ():
            problem = identifier_problem(name, "a tenant", MAX_TASK_ID)
            if problem is not None:
                raise ValueError(problem)
        return value

    @field_validator("sha256")
    @classmethod
    def _hex(cls, value: str | None) -> str | None:
        if value is not None and not _HEX64.match(value.lower()):
            raise ValueError("must be 64 hexadecimal digits (sha256 of the token)")
        return None if value is None else value.lower()

    @model_validator(mode="after")
    def _one(self) -> TokenSettings:
        if (self.sha256 is None) == (self.token is None):
            raise ValueError(f"token {self.name!r}: give exactly one of sha256 and token")
        if self.token is not None and len(self.token.get_secret_value()) < 16:
            raise ValueError(f"token {self.name!r}: a token must be at least 16 characters")
        if self.tenants is not None and self.role == "admin":
            raise ValueError(
                f"token {self.name!r}: an admin token acts on whole queues (limits, purge, "
                "constraints), so it takes no tenants; give the tenants' tokens another role"
            )
        if self.role == "worker" and any(is_pattern(t) for t in self.tenants or ()):
            raise ValueError(
                f"token {self.name!r}: a worker token's tenants must be names, not patterns "
                "(its leases ask for them by name)"
            )
        return self

    @property
    def scope(self) -> Scope:
        """What the token may reach."""
        scoped = self.queues is not None or self.tenants is not None
        payloads = (
            self.payloads if self.payloads is not None else not (scoped and self.role == "viewer")
        )
        if not scoped and payloads:
            return EVERYTHING
        return Scope(
            queues=None if self.queues is None else tuple(self.queues),
            tenants=None if self.tenants is None else tuple(self.tenants),
            payloads=payloads,
        )

    def digest(self) -> bytes:
        """The token's SHA-256 digest (the only form the server keeps)."""
        if self.sha256 is not None:
            return bytes.fromhex(self.sha256)
        assert self.token is not None
        return hashlib.sha256(self.token.get_secret_value().encode()).digest()


class ServerSettings(BaseModel):
    """How ``fairque serve`` listens (``FAIRQUE_SERVER__HOST``, ``FAIRQUE_SERVER__PORT``...).

    ``queues`` lists the queues served: names, and patterns with ``*``, ``?`` or ``[``
    (empty: every queue on the server).
    ``tokens`` enables bearer authentication; without tokens the server binds to
    loopback addresses only. A request body may be ``max_body_bytes`` (a batch push of
    up to 10,000 tasks, a batch of outcomes), or the queue's ``max_payload_bytes`` plus
    ``body_margin_bytes`` when that is more; each payload is held to
    ``max_payload_bytes`` on its own.
    """

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    queues: list[str] = Field(default_factory=list)
    tokens: list[TokenSettings] = Field(default_factory=list)
    body_margin_bytes: int = Field(default=65_536, ge=0, le=64 * 1024 * 1024)
    max_body_bytes: int = Field(default=16 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024)
    #: an HTTP pull worker stays registered this long after its last call (longer when
    #: its lease and long poll are: see ``fairque.service.pullers``)
    pull_worker_ttl_seconds: float = Field(default=60.0, ge=5, le=86_400)
    #: take back expired leases of the served queues this often (seconds; 0: only when
    #: a lease is asked for), so a dead worker's task does not stay STARTED
    reclaim_interval_seconds: float = Field(default=2.0, ge=0, le=3600)
    #: requests a second each token may make (None: no limit), ``token_burst`` at once
    #: (None: a second's worth); kept per ``serve`` process; a token's entry may differ
    token_rate: float | None = Field(default=None, gt=0, le=1_000_000)
    token_burst: int | None = Field(default=None, ge=1, le=1_000_000)
    #: bad tokens one address may send a minute, ``bad_token_burst`` in a row, before
    #: every token it sends is answered 429 for a while (0: no such limit)
    bad_tokens_per_minute: float = Field(default=60.0, ge=0, le=1_000_000)
    bad_token_burst: int = Field(default=20, ge=1, le=1_000_000)
    #: the key that signs the dashboard's login sessions (give every ``serve`` process
    #: behind one balancer the same; None: a random one per process), and how long a
    #: session lasts (never past its token's expiry)
    session_secret: SecretStr | None = Field(default=None, min_length=16)
    session_hours: float = Field(default=12.0, gt=0, le=24 * 365)
    #: serve HTTPS with this certificate (PEM, the chain after it) and its key; both or
    #: neither (without them, plain HTTP: put a TLS proxy in front)
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    #: log one line per request (uvicorn's access log; never the Authorization header)
    access_log: bool = False
    #: the ``le`` bounds (seconds) ``/metrics`` shows of the wait and run histograms;
    #: each is taken down to the nearest bound the scripts keep (their factor is 2^(1/4)
    #: from 1 ms to 70 min). None: every kept bound.
    metrics_buckets: list[float] | None = Field(default=None, min_length=1, max_length=200)
    #: users per queue with their own service series in ``/metrics`` (the most recently
    #: leased; the rest are summed under ``user_id=""``); 0: none
    metrics_tenants: int = Field(default=20, ge=0, le=1000)

    @model_validator(mode="after")
    def _tls_pair(self) -> ServerSettings:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("give both tls_cert_file and tls_key_file, or neither")
        return self

    @field_validator("tokens")
    @classmethod
    def _names(cls, value: list[TokenSettings]) -> list[TokenSettings]:
        names = [t.name for t in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(
                f"token names must differ (audit lines, rate limits and dashboard sessions "
                f"go by name): {', '.join(twice)} named twice"
            )
        return value

    @field_validator("metrics_buckets")
    @classmethod
    def _bounds(cls, value: list[float] | None) -> list[float] | None:
        if value is not None and not all(0.001 <= b <= 86_400 for b in value):
            raise ValueError("each bound must be between 0.001 and 86400 seconds")
        return None if value is None else sorted(set(value))


class Endpoint(BaseModel):
    """One HTTP push worker: which tasks go to ``url``, how many at once, how long."""

    model_config = ConfigDict(extra="forbid")

    queue: str = Field(min_length=1)
    url: str = Field(pattern=r"^https?://")
    #: task-name globs (fnmatch); empty: every task of the queue
    names: list[str] = Field(default_factory=list)
    concurrency: int = Field(default=4, ge=1, le=1000)
    timeout_seconds: float = Field(default=30.0, gt=0, le=86_400)
    lease_seconds: float = Field(default=30.0, gt=0, le=86_400)


class DispatchSettings(BaseModel):
    """Where ``fairque dispatch`` sends tasks (HTTP push workers)."""

    model_config = ConfigDict(extra="forbid")

    endpoints: list[Endpoint] = Field(default_factory=list)
    worker_id: str | None = None
