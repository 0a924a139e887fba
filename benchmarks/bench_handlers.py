"""Handlers for benchmark worker processes (imported with ``--import bench_handlers``)."""

from __future__ import annotations

import os
import time
from typing import Any

import redis

from fairque import Context, task

_client: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(os.environ["FAIRQUE_URL"])
    return _client


@task(name="noop")
async def noop(payload: Any) -> None:
    """Do nothing; the queue's own counters verify the run."""


@task(name="stamp")
def stamp(ctx: Context) -> None:
    """Record when the handler started (wall clock of the same machine as the producer)."""
    _redis().hset(f"fq:{{{ctx.queue.queue}}}:bench:started", ctx.task_id, repr(time.time()))
