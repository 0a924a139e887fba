"""What a push does when its tenant already has a task waiting with the same key
(``Dedup``, a ``Task``'s ``dedup``)."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fairque.core.checks import MAX_DEDUP_KEY, MAX_SECONDS, identifier_problem
from fairque.errors import invalid_model

DedupMode: TypeAlias = Literal["keep", "replace", "debounce"]


class Dedup(BaseModel):
    """What a push does when its tenant already has a task waiting with the same
    ``key`` (QUEUED, SCHEDULED or DEFERRED; one that runs does not count, so one may
    run while one waits):

    - ``"keep"`` (default): the push is answered with the waiting task, unchanged;
    - ``"replace"``: the waiting task takes the push's payload and keeps its place;
    - ``"debounce"``: the waiting task takes the push's payload and its start moves to
      ``window`` seconds after this push, but never later than ``max_wait`` seconds
      after the first push (default ten windows), so a steady stream still runs. The
      first push of a key starts ``window`` seconds after it (unless it has a delay of
      its own). A task already due (QUEUED, waiting for a worker) only takes the
      payload.

    Keys are per tenant: two tenants' tasks never merge.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(strict=True)
    mode: DedupMode = "keep"
    window: float | None = Field(
        default=None, gt=0, le=MAX_SECONDS, allow_inf_nan=False, strict=True
    )
    max_wait: float | None = Field(
        default=None, gt=0, le=MAX_SECONDS, allow_inf_nan=False, strict=True
    )

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except pydantic.ValidationError as exc:
            raise invalid_model(exc, "dedup") from None

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        problem = identifier_problem(value, "dedup key", MAX_DEDUP_KEY)
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _windows(self) -> Dedup:
        if self.mode == "debounce":
            if self.window is None:
                raise ValueError("a debounce needs a window (seconds)")
            if self.max_wait is not None and self.max_wait < self.window:
                raise ValueError("max_wait must be at least the window")
        elif self.window is not None or self.max_wait is not None:
            raise ValueError("window and max_wait are for mode 'debounce' only")
        return self

    @property
    def wait_cap(self) -> float:
        """The longest a debounced task waits after its first push (``max_wait``, or
        ten windows, at most the longest wait a ``max_wait`` may name)."""
        if self.max_wait is not None:
            return self.max_wait
        return min(10 * (self.window or 0), MAX_SECONDS)

    def stored(self) -> str:
        """As a push carries it and the task hash keeps it (``dedup``): ``'<mode>
        <window ms> <max wait ms> <key>'``."""
        window, wait = round((self.window or 0) * 1000), round(self.wait_cap * 1000)
        return f"{self.mode} {window} {wait} {self.key}"

    @classmethod
    def from_stored(cls, value: bytes) -> Dedup:
        """The ``Dedup`` of a task hash's ``dedup`` field."""
        mode, window, wait, key = value.decode().split(" ", 3)
        if mode != "debounce":
            return cls(key=key, mode=mode)
        return cls(key=key, mode=mode, window=int(window) / 1000, max_wait=int(wait) / 1000)
