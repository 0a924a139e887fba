"""Waiting on several servers at once: the one thing the two clients do differently
beside sending. A queue of one shard waits with one blocking command; a sharded queue
on one server too (one command over every shard's key); on a cluster, where one
blocking command cannot span slots, the asyncio client waits on every shard together
and the blocking client takes them in turns. The placement (``Placement.waits``) says
which commands to wait on; these classes only run them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from fairque.client.shards.placed import Placed

if TYPE_CHECKING:
    from fairque.client.shards.placement import Wait
    from fairque.core.records import Call

T = TypeVar("T")
W = TypeVar("W")

#: Longest blocking wait on one server while the blocking client waits on several in
#: turns (one BLPOP cannot span the slots of a cluster's shards).
TURN_SECONDS = 0.05


class Waits(Placed):
    """The one thing the clients do differently beside sending: wait on several
    servers at once. The blocking client takes them in turns."""

    if TYPE_CHECKING:

        def _run(self, call: Call[T]) -> T: ...

    def _wait_any(self, waits: Sequence[Wait[W]], timeout: float, empty: W) -> W:
        """Block until one of ``waits`` answers (a true value); ``empty`` when
        ``timeout`` passed."""
        timeout = self._bounded(timeout)
        if len(waits) == 1:
            return self._run(waits[0](timeout))
        deadline = time.monotonic() + timeout
        while True:
            for wait in waits:
                left = deadline - time.monotonic()
                if left <= 0:
                    return empty
                answer = self._run(wait(min(left, TURN_SECONDS)))
                if answer:
                    return answer


class AsyncWaits(Placed):
    """The one thing the clients do differently beside sending: wait on several
    servers at once. The asyncio client waits on all of them together."""

    if TYPE_CHECKING:

        async def _run(self, call: Call[T]) -> T: ...

    async def _wait_any(self, waits: Sequence[Wait[W]], timeout: float, empty: W) -> W:
        """Block until one of ``waits`` answers (a true value); ``empty`` when
        ``timeout`` passed. The waits still blocked then are cancelled (a reply one of
        them was being sent is lost: waits for wake-ups and cancels lose nothing
        that a later read does not make up)."""
        timeout = self._bounded(timeout)
        if len(waits) == 1:
            return await self._run(waits[0](timeout))
        pending = [asyncio.ensure_future(self._run(wait(timeout))) for wait in waits]
        try:
            for next_done in asyncio.as_completed(pending):
                answer = await next_done
                if answer:
                    return answer
            return empty
        finally:
            for wait in pending:
                wait.cancel()
