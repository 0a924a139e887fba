"""Handlers for benchmark worker processes (imported with ``--import bench_handlers``)."""

from __future__ import annotations

import time
from typing import Any

from fairque import task


@task(name="noop")
async def noop(payload: Any) -> None:
    """Do nothing; the queue's own counters verify the run."""


@task(name="stamp")
async def stamp() -> float:
    """When the handler started (wall clock of the same machine as the producer)."""
    return time.time()
