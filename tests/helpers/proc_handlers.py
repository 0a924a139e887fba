"""Handlers for worker processes started by the tests (imported with ``--import``).

Each execution records its side effect in Redis under the queue's own prefix, so
the tests can prove every task ran and none completed twice.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import redis

from fairque import Context, task

_client: redis.Redis | redis.RedisCluster | None = None


def client() -> redis.Redis | redis.RedisCluster:
    """One client per process, cluster-aware like the workers themselves."""
    global _client
    if _client is None:
        url = os.environ["FAIRQUE_URL"]
        cluster = os.environ.get("FAIRQUE_REDIS__CLUSTER") == "true"
        _client = redis.RedisCluster.from_url(url) if cluster else redis.Redis.from_url(url)
    return _client


def runs_key(queue: str) -> str:
    """Hash task id -> number of completed executions of the handler."""
    return f"fq:{{{queue}}}:test:runs"


@task(name="record")
def record(ctx: Context, payload: Any) -> int:
    """Sleep ``payload["sleep"]`` seconds, then count this execution."""
    if isinstance(payload, dict):
        time.sleep(float(payload.get("sleep", 0)))
    return int(client().hincrby(runs_key(ctx.queue.queue), ctx.task_id, 1))


def started_key(queue: str) -> str:
    """List of the ids of the stoppable tasks whose handlers started."""
    return f"fq:{{{queue}}}:test:started"


def stopped_key(queue: str) -> str:
    """Hash task id -> when (``time.time()``) its stoppable handler saw it must stop."""
    return f"fq:{{{queue}}}:test:stopped"


@task(name="stoppable_async")
async def stoppable_async(ctx: Context, payload: Any) -> str:
    """Run until cancelled; record when the cancel came."""
    client().rpush(started_key(ctx.queue.queue), ctx.task_id)
    try:
        await asyncio.sleep(300)
    except asyncio.CancelledError:
        client().hset(stopped_key(ctx.queue.queue), ctx.task_id, repr(time.time()))
        raise
    return "never"


@task(name="stoppable_sync")
def stoppable_sync(ctx: Context, payload: Any) -> str:
    """Sleep until ``ctx.cancelled``; record when it turned true."""
    client().rpush(started_key(ctx.queue.queue), ctx.task_id)
    ctx.wait_cancelled(300)
    client().hset(stopped_key(ctx.queue.queue), ctx.task_id, repr(time.time()))
    return "late"
