"""The clients of a sharded queue: ``FairQueue.from_url(..., shards=N)`` (or
``FairQueue.open``) returns a ``ShardedFairQueue`` when the queue has more than one
shard, ``AsyncFairQueue``'s the ``AsyncShardedFairQueue``. They have every method of
the plain clients; the ones that span shards run the flows of
``fairque.client.sharding``, the ones that do not yet raise ``NotShardAware``
rather than answer from one shard, and the rest (workers, XCom, the queue registry)
live in shard 0 as on a plain queue.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

import redis
import redis.asyncio as aredis

from fairque.client.aio import AsyncFairQueue
from fairque.client.base import QueueBase
from fairque.client.queue import FairQueue
from fairque.client.sharding import ShardedFlows
from fairque.core.records import Call, LeaseRequest, Pushed
from fairque.core.urls import url_errors
from fairque.errors import NotShardAware
from fairque.models import Fairness, Priority, QueueStats, Task, TaskOutcome, TaskPage, TaskState

#: Methods that read or change one partition's state and do not span shards yet.
NOT_SHARD_AWARE = (
    "acquire_scheduler_lock", "add_schedule", "apply_constraints", "backlogs",
    "capped_users", "constraint", "constraints", "define_constraint", "due_schedules",
    "fire_schedule", "get_schedule", "metrics", "oldest_queued_ms", "pause_schedule",
    "recent_starts", "release_scheduler_lock", "remove_constraint", "remove_schedule",
    "renew_scheduler_lock", "resume_schedule", "ring_users", "scheduler_holder",
    "schedules", "task_links", "tenants", "update_schedule", "user_loads", "user_weights",
    "wait_for_handover", "wait_for_schedules", "wait_place",
)  # fmt: skip
#: Longest blocking wait on one shard while a sync client on a cluster waits on all
#: shards in turn (one BLPOP cannot span slots there).
TURN_SECONDS = 0.05


def _refusal(name: str, is_async: bool) -> Any:
    def refuse(self: QueueBase, *args: Any, **kwargs: Any) -> Any:
        raise NotShardAware(
            f"{name}() does not span shards yet; queue {self.queue!r} has "
            f"{len(getattr(self, 'parts', ()))} (docs/howto/shards.md)"
        )

    async def refuse_async(self: QueueBase, *args: Any, **kwargs: Any) -> Any:
        refuse(self, *args, **kwargs)

    chosen = refuse_async if is_async else refuse
    chosen.__name__ = name
    chosen.__doc__ = f"Refused on a sharded queue: ``{name}`` does not span shards yet."
    return chosen


def _request(
    count: int, worker_id: str, lease_seconds: float | None,
    assigned_users: Sequence[str] | None, steal_targets: Sequence[str] | None,
    request_id: str | None,
) -> LeaseRequest:  # fmt: skip
    return LeaseRequest(count, worker_id, lease_seconds, assigned_users, steal_targets, request_id)


class ShardedFairQueue(ShardedFlows, FairQueue):
    """A ``FairQueue`` over the shards of a sharded queue (see ``FairQueue`` for each
    method's contract; docs/howto/shards.md for what stays exact across shards)."""

    def __init__(
        self, client: redis.Redis | redis.RedisCluster, queue: str, tags: Sequence[str],
        **options: Any,
    ) -> None:  # fmt: skip
        FairQueue.__init__(self, client, queue, **options)
        self._init_shards(client, tags, options)
        self._cluster = isinstance(client, redis.RedisCluster)

    def push(self, task: Task) -> Task:
        return self._drive(self._push_one_flow(task))

    def push_many(
        self, tasks: Iterable[Task], *, delays: Sequence[float | None] | None = None
    ) -> Pushed:
        return self._drive(self._push_many_flow(tasks, delays))

    def enqueue(
        self, name: str, payload: Any = None, *, user_id: str,
        priority: int = Priority.NORMAL, delay: float | timedelta | None = None,
        execute_after: datetime | None = None, depends_on: Sequence[str] = (),
        task_id: str | None = None, max_retries: int | None = None,
        timeout: float | None = None, keep_result: bool = True,
        result_ttl: int | None = None,
        on_dependency_failure: Literal["cancel", "wait"] = "cancel",
    ) -> Task:  # fmt: skip
        def build(part: QueueBase) -> Call[Task]:
            return part.ops.enqueue(
                name, payload, user_id=user_id, priority=priority, delay=delay,
                execute_after=execute_after, depends_on=depends_on, task_id=task_id,
                max_retries=max_retries, timeout=timeout, keep_result=keep_result,
                result_ttl=result_ttl, on_dependency_failure=on_dependency_failure,
            )  # fmt: skip

        return self._drive(self._enqueue_flow(build, user_id))

    def pop(
        self, worker_id: str = "", lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None,
    ) -> Task | None:  # fmt: skip
        request = _request(1, worker_id, lease_seconds, assigned_users, steal_targets, None)
        _, leased = self._drive(self._lease_flow(request))
        return leased[0] if leased else None

    def pop_batch(
        self, count: int, worker_id: str = "", lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None, request_id: str | None = None,
    ) -> list[Task]:  # fmt: skip
        request = _request(count, worker_id, lease_seconds, assigned_users, steal_targets,
                           request_id)  # fmt: skip
        return self._drive(self._lease_flow(request))[1]

    def complete_and_pop(
        self, done: Sequence[tuple[Task, Any]], count: int = 1, worker_id: str = "",
        lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None, request_id: str | None = None,
    ) -> tuple[list[bool], list[Task]]:  # fmt: skip
        request = _request(count, worker_id, lease_seconds, assigned_users, steal_targets,
                           request_id)  # fmt: skip
        acks, leased = self._drive(self._lease_flow(request, done))
        return acks, leased

    def complete(self, task: Task, result: Any = None) -> bool:
        return self._run(self._part(task.user_id).ops.complete(task, result))

    def fail(
        self, task: Task, error: str | BaseException = "", retry: bool = True,
        delay: float | None = None, *, max_retries: int | None = None,
        traceback: str | None = None, reason: str | None = None, details: Any = None,
    ) -> TaskState:  # fmt: skip
        ops = self._part(task.user_id).ops
        return self._run(
            ops.fail(task, error, retry, delay, max_retries, traceback, reason, details)
        )

    def extend(self, task: Task, seconds: float | None = None) -> datetime:
        return self._run(self._part(task.user_id).ops.extend(task, seconds))

    def extend_many(self, tasks: Sequence[Task], seconds: float | None = None) -> list[bool]:
        return self._drive(self._extend_many_flow(tasks, seconds)) if tasks else []

    def requeue(self, task: Task, delay: float = 0) -> TaskState:
        return self._run(self._part(task.user_id).ops.requeue(task, delay))

    def reclaim(self, limit: int = 1000) -> int:
        return self._drive(self._sum_flow(lambda p: p.ops.reclaim(limit)))

    def cancel(self, task_id: str) -> bool:
        return self._drive(self._by_id_flow(task_id, lambda p: p.ops.cancel(task_id)))

    def get(self, task_id: str) -> Task | None:
        return self._drive(self._get_flow(task_id))

    def retry(self, task_id: str) -> TaskState:
        return self._drive(self._by_id_flow(task_id, lambda p: p.ops.retry(task_id)))

    def result(self, task_id: str, timeout: float = 0, *, consume: bool = False) -> Any:
        return self._drive(self._sharded_result_flow(task_id, timeout, consume))

    def outcome(
        self, task_id: str, timeout: float = 0, *, consume: bool = False
    ) -> TaskOutcome | None:
        return self._drive(self._sharded_outcome_flow(task_id, timeout, consume))

    def list_tasks(
        self, state: TaskState | str | None = None, user_id: str | None = None,
        name: str | None = None, limit: int = 50, cursor: str | None = None,
    ) -> TaskPage:  # fmt: skip
        return self._drive(self._list_all_flow(state, user_id, name, limit, cursor))

    def cleanup_dependencies(self, batch: int = 500, *, passes: int | None = None) -> int:
        return self._drive(self._cleanup_all_flow(batch, passes))

    def next_wakeup(self) -> float | None:
        return self._drive(self._next_wakeup_flow())

    def maintain(self, batch: int = 1000) -> int:
        return self._drive(self._sum_flow(lambda p: p.ops.maintain(batch)))

    def place(self) -> int:
        return self._drive(self._sum_flow(lambda p: _first(p.ops.place())))

    def purge(self, batch: int = 1000) -> int:
        return self._drive(self._purge_all_flow(batch))

    def set_user_limits(
        self, user_id: str, *, weight: int = 1, max_in_flight: int | None = None
    ) -> None:
        self._run(self._part(user_id).ops.set_user_limits(user_id, weight, max_in_flight))

    def set_fairness(self, mode: Fairness) -> Fairness:
        was: list[Fairness] = self._drive(self._each(lambda p: p.ops.set_fairness(mode)))
        return was[0]

    def stats(self, user_limit: int = 100) -> QueueStats:
        return self._drive(self._stats_flow(user_limit))

    def wait_for_work(self, timeout: float) -> bool:
        timeout = self._bounded(timeout)
        if not self._cluster:
            return self._run(self.ops.wait_for_any([p.ops for p in self.parts], timeout))
        deadline = time.monotonic() + timeout
        while True:
            for part in self.parts:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                if self._run(part.ops.wait_for_work(min(left, TURN_SECONDS))):
                    return True

    def wait_and_pop(
        self, timeout: float, count: int = 1, worker_id: str = "",
        lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None, request_id: str | None = None,
    ) -> list[Task]:  # fmt: skip
        self.wait_for_work(timeout)
        return self.pop_batch(
            count, worker_id, lease_seconds, assigned_users=assigned_users,
            steal_targets=steal_targets, request_id=request_id,
        )  # fmt: skip


class AsyncShardedFairQueue(ShardedFlows, AsyncFairQueue):
    """The asyncio twin of ``ShardedFairQueue``."""

    def __init__(
        self, client: aredis.Redis | aredis.RedisCluster, queue: str, tags: Sequence[str],
        **options: Any,
    ) -> None:  # fmt: skip
        AsyncFairQueue.__init__(self, client, queue, **options)
        self._init_shards(client, tags, options)
        self._cluster = isinstance(client, aredis.RedisCluster)

    async def push(self, task: Task) -> Task:
        return await self._drive(self._push_one_flow(task))

    async def push_many(
        self, tasks: Iterable[Task], *, delays: Sequence[float | None] | None = None
    ) -> Pushed:
        return await self._drive(self._push_many_flow(tasks, delays))

    async def enqueue(
        self, name: str, payload: Any = None, *, user_id: str,
        priority: int = Priority.NORMAL, delay: float | timedelta | None = None,
        execute_after: datetime | None = None, depends_on: Sequence[str] = (),
        task_id: str | None = None, max_retries: int | None = None,
        timeout: float | None = None, keep_result: bool = True,
        result_ttl: int | None = None,
        on_dependency_failure: Literal["cancel", "wait"] = "cancel",
    ) -> Task:  # fmt: skip
        def build(part: QueueBase) -> Call[Task]:
            return part.ops.enqueue(
                name, payload, user_id=user_id, priority=priority, delay=delay,
                execute_after=execute_after, depends_on=depends_on, task_id=task_id,
                max_retries=max_retries, timeout=timeout, keep_result=keep_result,
                result_ttl=result_ttl, on_dependency_failure=on_dependency_failure,
            )  # fmt: skip

        return await self._drive(self._enqueue_flow(build, user_id))

    async def pop(
        self, worker_id: str = "", lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None,
    ) -> Task | None:  # fmt: skip
        request = _request(1, worker_id, lease_seconds, assigned_users, steal_targets, None)
        _, leased = await self._drive(self._lease_flow(request))
        return leased[0] if leased else None

    async def pop_batch(
        self, count: int, worker_id: str = "", lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None, request_id: str | None = None,
    ) -> list[Task]:  # fmt: skip
        request = _request(count, worker_id, lease_seconds, assigned_users, steal_targets,
                           request_id)  # fmt: skip
        return (await self._drive(self._lease_flow(request)))[1]

    async def complete_and_pop(
        self, done: Sequence[tuple[Task, Any]], count: int = 1, worker_id: str = "",
        lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None, request_id: str | None = None,
    ) -> tuple[list[bool], list[Task]]:  # fmt: skip
        request = _request(count, worker_id, lease_seconds, assigned_users, steal_targets,
                           request_id)  # fmt: skip
        acks, leased = await self._drive(self._lease_flow(request, done))
        return acks, leased

    async def complete(self, task: Task, result: Any = None) -> bool:
        return await self._run(self._part(task.user_id).ops.complete(task, result))

    async def fail(
        self, task: Task, error: str | BaseException = "", retry: bool = True,
        delay: float | None = None, *, max_retries: int | None = None,
        traceback: str | None = None, reason: str | None = None, details: Any = None,
    ) -> TaskState:  # fmt: skip
        ops = self._part(task.user_id).ops
        return await self._run(
            ops.fail(task, error, retry, delay, max_retries, traceback, reason, details)
        )

    async def extend(self, task: Task, seconds: float | None = None) -> datetime:
        return await self._run(self._part(task.user_id).ops.extend(task, seconds))

    async def extend_many(self, tasks: Sequence[Task], seconds: float | None = None) -> list[bool]:
        return await self._drive(self._extend_many_flow(tasks, seconds)) if tasks else []

    async def requeue(self, task: Task, delay: float = 0) -> TaskState:
        return await self._run(self._part(task.user_id).ops.requeue(task, delay))

    async def reclaim(self, limit: int = 1000) -> int:
        return await self._drive(self._sum_flow(lambda p: p.ops.reclaim(limit)))

    async def cancel(self, task_id: str) -> bool:
        return await self._drive(self._by_id_flow(task_id, lambda p: p.ops.cancel(task_id)))

    async def get(self, task_id: str) -> Task | None:
        return await self._drive(self._get_flow(task_id))

    async def retry(self, task_id: str) -> TaskState:
        return await self._drive(self._by_id_flow(task_id, lambda p: p.ops.retry(task_id)))

    async def result(self, task_id: str, timeout: float = 0, *, consume: bool = False) -> Any:
        return await self._drive(self._sharded_result_flow(task_id, timeout, consume))

    async def outcome(
        self, task_id: str, timeout: float = 0, *, consume: bool = False
    ) -> TaskOutcome | None:
        return await self._drive(self._sharded_outcome_flow(task_id, timeout, consume))

    async def list_tasks(
        self, state: TaskState | str | None = None, user_id: str | None = None,
        name: str | None = None, limit: int = 50, cursor: str | None = None,
    ) -> TaskPage:  # fmt: skip
        return await self._drive(self._list_all_flow(state, user_id, name, limit, cursor))

    async def cleanup_dependencies(self, batch: int = 500, *, passes: int | None = None) -> int:
        return await self._drive(self._cleanup_all_flow(batch, passes))

    async def next_wakeup(self) -> float | None:
        return await self._drive(self._next_wakeup_flow())

    async def maintain(self, batch: int = 1000) -> int:
        return await self._drive(self._sum_flow(lambda p: p.ops.maintain(batch)))

    async def place(self) -> int:
        return await self._drive(self._sum_flow(lambda p: _first(p.ops.place())))

    async def purge(self, batch: int = 1000) -> int:
        return await self._drive(self._purge_all_flow(batch))

    async def set_user_limits(
        self, user_id: str, *, weight: int = 1, max_in_flight: int | None = None
    ) -> None:
        await self._run(self._part(user_id).ops.set_user_limits(user_id, weight, max_in_flight))

    async def set_fairness(self, mode: Fairness) -> Fairness:
        was: list[Fairness] = await self._drive(self._each(lambda p: p.ops.set_fairness(mode)))
        return was[0]

    async def stats(self, user_limit: int = 100) -> QueueStats:
        return await self._drive(self._stats_flow(user_limit))

    async def wait_for_work(self, timeout: float) -> bool:
        timeout = self._bounded(timeout)
        if not self._cluster:
            return await self._run(self.ops.wait_for_any([p.ops for p in self.parts], timeout))
        waits = [asyncio.ensure_future(self._run(p.ops.wait_for_work(timeout))) for p in self.parts]
        try:
            for next_done in asyncio.as_completed(waits):
                if await next_done:
                    return True
            return False
        finally:
            for wait in waits:
                wait.cancel()

    async def wait_and_pop(
        self, timeout: float, count: int = 1, worker_id: str = "",
        lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None, request_id: str | None = None,
    ) -> list[Task]:  # fmt: skip
        await self.wait_for_work(timeout)
        return await self.pop_batch(
            count, worker_id, lease_seconds, assigned_users=assigned_users,
            steal_targets=steal_targets, request_id=request_id,
        )  # fmt: skip


def open_async(
    cls: type[AsyncFairQueue], url: str, client: aredis.Redis | aredis.RedisCluster,
    queue: str, shards: int | None, options: dict[str, Any],
) -> AsyncFairQueue:  # fmt: skip
    """``queue`` on the asyncio ``client`` of ``url``, with the shards the server holds
    (created with ``shards`` when new): the list is read over a short-lived blocking
    connection, for callers that open queues before their event loop runs."""
    cluster = isinstance(client, aredis.RedisCluster)
    with url_errors(url):
        probe = FairQueue.from_url(url, queue, cluster=cluster, shards=shards, **options)
        probe.close()
    tags = [p.ops.keys.tag or "" for p in getattr(probe, "parts", ())[1:]]
    return (
        AsyncShardedFairQueue(client, queue, tags, **options)
        if tags
        else cls(client, queue, **options)
    )


def _first(call: Call[tuple[int, int]]) -> Call[int]:
    """``place``'s call answering only how many it placed."""
    return Call(call.script, call.keys, call.args, lambda r: call.parse(r)[0])


for _name in NOT_SHARD_AWARE:
    setattr(ShardedFairQueue, _name, _refusal(_name, is_async=False))
    setattr(AsyncShardedFairQueue, _name, _refusal(_name, is_async=True))
