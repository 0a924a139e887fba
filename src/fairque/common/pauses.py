"""Pauses that end early when an event is set, and never swallow a cancellation.

``asyncio.wait_for(event.wait(), seconds)`` looks like the natural way to write such a
pause, but on Python 3.11 a cancellation that arrives as the timeout fires is turned
into ``TimeoutError``: a caller that suppresses the timeout then goes on running after
it was cancelled. ``asyncio.wait`` reports a timeout by returning, so a cancellation
always reaches the caller.

redis-py's asyncio client waits with ``asyncio.wait_for`` itself, so on 3.11 a task
cancelled during a command can find its cancellation swallowed there. Such a task still
reports it (``Task.cancelling()``); ``pass_on_cancellation`` raises it again, and both
pauses call it before they wait.
"""

from __future__ import annotations

import asyncio
from typing import Any


def pass_on_cancellation() -> None:
    """Raise ``CancelledError`` when the running task was asked to cancel and the
    request was swallowed on the way (see the module's notes)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11 and newer
    if cancelling is not None and cancelling():
        raise asyncio.CancelledError


async def pause_unless(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds``, or less when ``stop`` is set meanwhile.

    Returns:
        True when ``stop`` is set.

    Raises:
        asyncio.CancelledError: the caller was cancelled (always passed on).
    """
    pass_on_cancellation()
    if stop.is_set() or seconds <= 0:
        return stop.is_set()
    waiter = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({waiter}, timeout=seconds)
    finally:
        waiter.cancel()
    return stop.is_set()


async def pause_until_done(job: asyncio.Future[Any], stop: asyncio.Event) -> None:
    """Wait until ``job`` is done or ``stop`` is set, whichever comes first (``job`` is
    left running in the second case).

    Raises:
        asyncio.CancelledError: the caller was cancelled (always passed on).
    """
    pass_on_cancellation()
    waiter = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({job, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
