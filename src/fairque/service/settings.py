"""The ``server:`` and ``dispatch:`` sections of the settings file."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ServerSettings(BaseModel):
    """How ``fairque serve`` listens (``FAIRQUE_SERVER__HOST``, ``FAIRQUE_SERVER__PORT``...)."""

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)


class DispatchSettings(BaseModel):
    """Where ``fairque dispatch`` sends tasks (HTTP push workers)."""

    model_config = ConfigDict(extra="forbid")
