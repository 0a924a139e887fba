"""Pauses that a stop event ends early never swallow a cancellation.

On Python 3.11, ``asyncio.wait_for(event.wait(), t)`` can turn a cancellation that
arrives with its timeout into a ``TimeoutError``; a scheduler that suppressed the
timeout then went on running after it was cancelled (a crash test hung on it).
"""

from __future__ import annotations

import asyncio

import pytest

from fairque.common.pauses import pause_unless, pause_until_done

#: moments around the pause's own end (it lasts 10 ms) to cancel it at
CANCEL_AT = [i / 2000 for i in range(40)]


async def test_a_pause_lasts_its_time_or_ends_on_stop() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await pause_unless(stop, 0.05) is False
    assert loop.time() - started >= 0.045
    loop.call_later(0.01, stop.set)
    started, pause = loop.time(), 5.0
    assert await pause_unless(stop, pause) is True
    assert loop.time() - started < pause / 2  # the stop, not the pause, ended it
    assert await pause_unless(stop, 5.0) is True  # already set: no wait
    assert await pause_unless(asyncio.Event(), 0) is False


@pytest.mark.parametrize("at", CANCEL_AT)
async def test_a_cancelled_pause_is_cancelled_whenever_it_comes(at: float) -> None:
    went_on = False

    async def sleeper() -> None:
        nonlocal went_on
        await pause_unless(asyncio.Event(), 0.01)
        went_on = True
        await asyncio.sleep(3600)

    job = asyncio.ensure_future(sleeper())
    await asyncio.sleep(at)
    job.cancel()
    done, _ = await asyncio.wait({job}, timeout=2.0)
    assert done == {job}
    assert job.cancelled()
    assert not went_on or at >= 0.0095  # it may have ended on its own just before


@pytest.mark.parametrize("at", CANCEL_AT)
async def test_a_cancelled_wait_for_a_job_is_cancelled_whenever_it_comes(at: float) -> None:
    async def sleeper() -> None:
        job = asyncio.ensure_future(asyncio.sleep(0.01))
        try:
            await pause_until_done(job, asyncio.Event())
        finally:
            job.cancel()
            await asyncio.wait({job})
        await asyncio.sleep(3600)

    runner = asyncio.ensure_future(sleeper())
    await asyncio.sleep(at)
    runner.cancel()
    done, _ = await asyncio.wait({runner}, timeout=2.0)
    assert done == {runner}
    assert runner.cancelled()


async def test_a_job_that_ends_first_ends_the_wait_and_stop_leaves_it_running() -> None:
    stop = asyncio.Event()
    job = asyncio.ensure_future(asyncio.sleep(0.01, result="done"))
    await pause_until_done(job, stop)
    assert job.result() == "done"
    slow = asyncio.ensure_future(asyncio.sleep(3600))
    asyncio.get_running_loop().call_later(0.01, stop.set)
    await pause_until_done(slow, stop)
    assert not slow.done()
    slow.cancel()
