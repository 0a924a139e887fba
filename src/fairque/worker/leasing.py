"""Leasing: the one owner of a worker's lease calls on one queue.

Every task a worker runs is leased here, by one of three calls:

- ``complete_and_lease``: the acknowledger's successes and a request for the free
  slots, in one round trip (a busy worker's usual turn);
- ``wait_and_lease``: an idle worker's blocking wait on the queue's wake-up list with
  a request pipelined behind it, so a push is leased in the round trip it wakes;
- ``lease``: a park's request right after a due time nearer than the server's tick.

Each sends the lane's one lease request (worker id, lease length, assigned users,
steal targets), checked once when the worker is built, with a count and an id. When a
connection error swallows a reply, the id is kept and the next call resends it: the
server answers with the tasks it leased then instead of leasing more (those would
otherwise wait for their leases to expire).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from fairque.client.aio import AsyncFairQueue
from fairque.core.checks import check_pop, check_user_list
from fairque.core.records import request_id
from fairque.models import Task
from fairque.worker.link import CONNECTION_ERRORS

T = TypeVar("T")


def _any_name() -> None:
    return None


class Leasing:
    """The lease calls of one worker on one queue.

    Args:
        queue: the queue to lease from.
        worker_id: the worker the leases are taken for.
        lease_seconds: the lease length.
        assigned_users: users served first (empty: the whole ring).
        steal_targets: users served when the assigned ones have nothing.
        names: answers the task names the worker handles, asked at each lease (None:
            any); a task with another name is not leased, it waits for a worker that
            handles it.

    Raises:
        ValidationError: the worker id, the lease or a user list is invalid.
    """

    def __init__(
        self,
        queue: AsyncFairQueue,
        worker_id: str,
        lease_seconds: float,
        assigned_users: Sequence[str],
        steal_targets: Sequence[str],
        names: Callable[[], Sequence[str] | None] | None = None,
    ) -> None:
        check_pop(1, worker_id, lease_seconds)
        self.queue = queue
        self.worker_id = worker_id
        self.lease_seconds = lease_seconds
        self._assigned = check_user_list(list(assigned_users), "assigned_users") or None
        self._steal = check_user_list(list(steal_targets), "steal_targets") or None
        self._names = names or _any_name
        self._unanswered: list[str] = []  # several requests may be in flight

    async def complete_and_lease(
        self, done: Sequence[tuple[Task, Any]], count: int
    ) -> tuple[list[bool], list[Task]]:
        """Finish ``done`` (task, result) pairs and lease up to ``count`` tasks (0: only
        finish); one answer per pair (False: its lease was lost), and the tasks."""
        req = self._next_id() if count else None
        return await self._sent(req, self.queue.complete_and_pop(
            done, count, self.worker_id, self.lease_seconds,
            assigned_users=self._assigned, steal_targets=self._steal, request_id=req,
            names=self._names(),
        ))  # fmt: skip

    async def wait_and_lease(self, wait: float, count: int) -> list[Task]:
        """Block until work is signalled or ``wait`` seconds pass, then lease up to
        ``count`` tasks, in one round trip."""
        req = self._next_id()
        return await self._sent(req, self.queue.wait_and_pop(
            wait, count, self.worker_id, self.lease_seconds,
            assigned_users=self._assigned, steal_targets=self._steal, request_id=req,
            names=self._names(),
        ))  # fmt: skip

    async def lease(self, count: int) -> list[Task]:
        """Lease up to ``count`` tasks now."""
        req = self._next_id()
        return await self._sent(req, self.queue.pop_batch(
            count, self.worker_id, self.lease_seconds,
            assigned_users=self._assigned, steal_targets=self._steal, request_id=req,
            names=self._names(),
        ))  # fmt: skip

    async def _sent(self, req: str | None, call: Awaitable[T]) -> T:
        """``call``'s answer; when a connection error swallows it, ``req`` is kept for
        the next call to resend."""
        try:
            return await call
        except CONNECTION_ERRORS:
            if req is not None:
                self._unanswered.append(req)
            raise

    def _next_id(self) -> str:
        """The id of the next request: the id of one whose reply was lost (given out
        once only, so two calls never receive the same tasks), else a new one."""
        return self._unanswered.pop() if self._unanswered else request_id()
