"""Queue options, validated once, shared by the sync and async clients."""

from __future__ import annotations

from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator

from fairque.core.checks import MAX_SECONDS
from fairque.errors import ConfigError, pydantic_message

#: Largest ``max_payload_bytes``: the servers' default limit of one bulk string.
MAX_PAYLOAD_BYTES = 512 * 1024 * 1024

_NUMBERS = (
    "aging_horizon_seconds", "lease_seconds", "retry_base_seconds", "max_retries",
    "max_payload_bytes", "result_ttl_seconds", "failed_ttl_seconds", "maintenance_batch",
    "max_queued_per_user", "max_bytes_per_user",
)  # fmt: skip


class QueueOptions(BaseModel):
    """Behaviour of one queue client. Every option has the same name in YAML.

    Attributes:
        ordering: ``"aging"`` (priority with bounded waiting) or ``"strict"``
            (priority first, FIFO within; low priorities can starve).
        aging_horizon_seconds: a priority-p task is ordered as if it arrived
            ``p / 5 * horizon`` seconds earlier.
        lease_seconds: default lease length of a popped task.
        retry_base_seconds: retry n waits ``base * 2 ** (n - 1)`` seconds.
        max_retries: default number of retries after the first attempt.
        max_payload_bytes: largest serialized payload accepted; results and XCom
            values are held to it too.
        serializer: ``"json"`` or ``"msgpack"``.
        result_ttl_seconds: default time a FINISHED task (and its result) is kept.
        failed_ttl_seconds: time a FAILED or CANCELED task is kept.
        maintenance_batch: at most this many expired leases and due tasks are
            handled by each pop.
        on_duplicate: pushing an existing ``task_id`` returns the existing task
            (``"return"``) or raises ``DuplicateTask`` (``"error"``).
        max_queued_per_user: the backlog quota of a user without one of its own
            (``set_user_limits(max_queued=)``): a push that would take the user's tasks
            in QUEUED, SCHEDULED or DEFERRED past it raises ``QuotaExceeded``. None:
            no default quota.
        max_bytes_per_user: the byte quota of a user without one of its own
            (``set_user_limits(max_bytes=)``): a push that would take the bytes the
            user's tasks hold (payloads waiting or running, what ended records keep)
            past it raises ``QuotaExceeded`` (``kind == "bytes"``). None: no default.

    Every duration is a finite number of seconds of at most 10 years
    (``fairque.core.checks.MAX_SECONDS``); ``max_payload_bytes`` is at most 512 MiB.
    From Python, numbers must be numbers (``"30"`` and ``True`` are rejected); the
    YAML/environment loader (``fairque.config``) reads numbers written as text.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    ordering: Literal["aging", "strict"] = "aging"
    aging_horizon_seconds: float = Field(default=300.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    lease_seconds: float = Field(default=30.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    retry_base_seconds: float = Field(default=1.0, ge=0, le=MAX_SECONDS, allow_inf_nan=False)
    max_retries: int = Field(default=3, ge=0, le=1000)
    max_payload_bytes: int = Field(default=1_048_576, gt=0, le=MAX_PAYLOAD_BYTES)
    serializer: Literal["json", "msgpack"] = "json"
    result_ttl_seconds: float = Field(default=86_400.0, ge=0, le=MAX_SECONDS, allow_inf_nan=False)
    failed_ttl_seconds: float = Field(
        default=7 * 86_400.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False
    )
    maintenance_batch: int = Field(default=100, ge=1, le=10_000)
    on_duplicate: Literal["return", "error"] = "return"
    max_queued_per_user: int | None = Field(default=None, ge=1, le=1_000_000_000)
    max_bytes_per_user: int | None = Field(default=None, ge=1, le=1 << 40)

    @field_validator(*_NUMBERS, mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        # lax parsing (YAML, environment) would read True as 1
        if isinstance(value, bool):
            raise ValueError("must be a number, not a boolean")
        return value

    @classmethod
    def build(cls, **values: Any) -> QueueOptions:
        """Validate ``values``; raise ``ConfigError`` naming each bad option."""
        try:
            return cls(**values)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}={err.get('input')!r}: "
                f"{pydantic_message(err)}"
                for err in exc.errors()
            )
            raise ConfigError(f"invalid queue option: {problems}") from None
