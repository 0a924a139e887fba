"""Handlers shared by the producer and the consumer examples."""

from __future__ import annotations

import asyncio
from typing import Any

from fairque import Context, Retry, task


@task(name="send_email", timeout=10)
async def send_email(ctx: Context, payload: dict[str, Any]) -> dict[str, Any]:
    """Pretend to send an email; the result is kept with the task."""
    await asyncio.sleep(0.01)
    ctx.logger.info("sent email to %s (attempt %d)", payload["to"], ctx.attempt)
    return {"delivered_to": payload["to"]}


@task(name="resize_image", max_retries=2)
def resize_image(ctx: Context, payload: dict[str, Any]) -> str:
    """A sync handler: runs in the worker's thread pool."""
    if payload.get("flaky") and ctx.attempt == 1:
        raise Retry(delay=0.1, reason="storage not ready")
    return f"{payload['image']} resized to {payload.get('width', 128)}px"
