"""AsyncFairQueue: the asyncio client; same methods as ``FairQueue``, as coroutines.

Docstrings live on ``FairQueue``; both clients execute the calls built by
``fairque.core.ops``, so their behaviour is the same by construction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Literal, TypeVar

import redis.asyncio as aredis
from redis.exceptions import NoScriptError, ResponseError

from fairque.client.admin import AsyncAdminMethods
from fairque.client.base import Flow, QueueBase, connect, replayable_tasks, run_flow_async
from fairque.client.inspection import AsyncInspectionMethods
from fairque.client.quicksend import FAILED, AsyncQuickSender
from fairque.client.sharded_async import AsyncShardedMethods
from fairque.client.shardlayout import layout_flow, probe_layout
from fairque.common.urls import url_errors
from fairque.constraints.api import AsyncConstraintMethods
from fairque.core.records import Call, Leased, LeaseRequest, Pushed
from fairque.errors import StaleConstraints
from fairque.models import (
    Priority,
    Task,
    TaskOutcome,
    TaskPage,
    TaskState,
)
from fairque.schedules.api import AsyncScheduleMethods

T = TypeVar("T")


class AsyncFairQueue(
    AsyncAdminMethods,
    AsyncConstraintMethods,
    AsyncScheduleMethods,
    AsyncInspectionMethods,
    QueueBase,
):
    """The asyncio twin of ``FairQueue`` (see it for every method's contract)."""

    def __init__(
        self, client: aredis.Redis | aredis.RedisCluster, queue: str = "default", **options: Any
    ) -> None:
        super().__init__(client, queue, **options)
        self.client = client
        self._quick = AsyncQuickSender.for_client(client)

    @classmethod
    def from_url(
        cls, url: str, queue: str = "default", *, cluster: bool | None = None,
        shards: int | None = None, **options: Any,
    ) -> AsyncFairQueue:  # fmt: skip
        """Connect to ``url`` and open the queue (see ``FairQueue.from_url``); the
        shard list is read here over a short-lived blocking connection."""
        client: aredis.Redis | aredis.RedisCluster = connect(
            url, cluster, options, aredis.Redis.from_url, aredis.RedisCluster.from_url
        )
        return open_async(cls, url, client, queue, shards, options)

    @classmethod
    async def open(
        cls, client: aredis.Redis | aredis.RedisCluster, queue: str = "default", *,
        shards: int | None = None, **options: Any,
    ) -> AsyncFairQueue:  # fmt: skip
        """See ``FairQueue.open``."""
        plain = cls(client, queue, **options)
        layout = await plain._drive(layout_flow(plain, shards))
        return AsyncShardedFairQueue(client, queue, layout, **options) if layout.tags else plain

    async def _run(self, call: Call[T]) -> T:
        try:
            if call.script is None:
                raw = await self.client.execute_command(call.args[0], *call.keys, *call.args[1:])
            else:
                n, keys, args = len(call.keys), call.keys, call.args
                try:
                    raw = await self.client.evalsha(call.script.sha, n, *keys, *args)
                except NoScriptError:
                    raw = await self.client.eval(call.script.source, n, *keys, *args)
        except ResponseError as exc:
            self._reraise(exc)
        return call.parse(raw)

    async def _list(self) -> None:
        """See ``FairQueue._list``."""
        await self._drive(self._upkeep_flow())

    async def _run_push(self, call: Call[T]) -> T:
        """Push through ``_send_push``; then, when due, name the queue in the registry."""
        out = await self._send_push(call)
        if self._upkeep_due():
            await self._list()
        return out

    async def _send_push(self, call: Call[T]) -> T:
        """See ``FairQueue._send_push``."""
        quick = self._quick
        if quick is not None and call.script is not None:
            args = ("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)
            try:
                raw = await quick.send(args)
            except NoScriptError:
                raw = FAILED  # _run loads the script
            except ResponseError as exc:
                self._reraise(exc)
            if raw is not FAILED:
                return call.parse(raw)
        return await self._run(call)

    async def _send_pipeline(self, calls: Sequence[Call[Any]]) -> list[Any]:
        """See ``FairQueue._send_pipeline``."""
        pipe = self.client.pipeline(transaction=False)
        for call in calls:
            pipe.execute_command(*self._command(call))
        return await pipe.execute(raise_on_error=False)

    async def _drive(self, flow: Flow[T]) -> T:
        """See ``FairQueue._drive``."""
        return await run_flow_async(flow, self._run, self._send_pipeline)

    async def _settle(self, leased: Leased) -> Leased:
        """See ``FairQueue._settle``."""
        return await self._drive(self._settle_flow(leased)) if leased.undecodable else leased

    async def push(self, task: Task) -> Task:
        """See ``FairQueue.push``."""
        try:  # the common case, without the flow's machinery
            return await self._run_push(self.ops.push(task))
        except StaleConstraints:
            return await self._drive(self._repush_flow(lambda: self.ops.push(task)))

    async def push_many(
        self, tasks: Iterable[Task], *, delays: Sequence[float | None] | None = None
    ) -> Pushed:
        """See ``FairQueue.push_many``."""
        batch = replayable_tasks(tasks)
        flow = self._push_flow(lambda: self.ops.push_many(batch, delays))
        return await run_flow_async(flow, self._run_push, self._send_pipeline)

    async def enqueue(
        self,
        name: str,
        payload: Any = None,
        *,
        user_id: str,
        priority: int = Priority.NORMAL,
        delay: float | timedelta | None = None,
        execute_after: datetime | None = None,
        depends_on: Sequence[str] = (),
        task_id: str | None = None,
        max_retries: int | None = None,
        timeout: float | None = None,
        keep_result: bool = True,
        result_ttl: int | None = None,
        on_dependency_failure: Literal["cancel", "wait"] = "cancel",
    ) -> Task:
        """See ``FairQueue.enqueue``."""

        def call() -> Call[Task]:
            return self.ops.enqueue(
                name, payload, user_id=user_id, priority=priority, delay=delay,
                execute_after=execute_after, depends_on=depends_on, task_id=task_id,
                max_retries=max_retries, timeout=timeout, keep_result=keep_result,
                result_ttl=result_ttl, on_dependency_failure=on_dependency_failure,
            )  # fmt: skip

        try:  # the common case, without the flow's machinery
            return await self._run_push(call())
        except StaleConstraints:
            return await self._drive(self._repush_flow(call))

    async def pop(
        self,
        worker_id: str = "",
        lease_seconds: float | None = None,
        *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None,
        names: Sequence[str] | None = None,
    ) -> Task | None:
        """See ``FairQueue.pop``."""
        request = LeaseRequest(
            1, worker_id, lease_seconds, assigned_users, steal_targets, None, names
        )
        tasks = await self._settle(await self._run(self.ops.pop(request)))
        return tasks[0] if tasks else None

    async def pop_batch(
        self,
        count: int,
        worker_id: str = "",
        lease_seconds: float | None = None,
        *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None,
        request_id: str | None = None,
        names: Sequence[str] | None = None,
    ) -> list[Task]:
        """See ``FairQueue.pop_batch``."""
        request = LeaseRequest(
            count, worker_id, lease_seconds, assigned_users, steal_targets, request_id, names
        )
        return await self._settle(await self._run(self.ops.pop(request)))

    async def complete(self, task: Task, result: Any = None) -> bool:
        """See ``FairQueue.complete``."""
        return await self._run(self.ops.complete(task, result))

    async def complete_and_pop(
        self,
        done: Sequence[tuple[Task, Any]],
        count: int = 1,
        worker_id: str = "",
        lease_seconds: float | None = None,
        *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None,
        request_id: str | None = None,
        names: Sequence[str] | None = None,
    ) -> tuple[list[bool], list[Task]]:
        """See ``FairQueue.complete_and_pop``."""
        request = LeaseRequest(
            count, worker_id, lease_seconds, assigned_users, steal_targets, request_id, names
        )
        acks, leased = await self._run(self.ops.complete_and_pop(done, request))
        return acks, await self._settle(leased)

    async def fail(
        self,
        task: Task,
        error: str | BaseException = "",
        retry: bool = True,
        delay: float | None = None,
        *,
        max_retries: int | None = None,
        traceback: str | None = None,
        reason: str | None = None,
        details: Any = None,
    ) -> TaskState:
        """See ``FairQueue.fail``."""
        call = self.ops.fail(task, error, retry, delay, max_retries, traceback, reason, details)
        return await self._run(call)

    async def extend(self, task: Task, seconds: float | None = None) -> datetime:
        """See ``FairQueue.extend``."""
        return await self._run(self.ops.extend(task, seconds))

    async def extend_many(self, tasks: Sequence[Task], seconds: float | None = None) -> list[bool]:
        """See ``FairQueue.extend_many``."""
        if not tasks:
            return []
        return await self._run(self.ops.extend_many(tasks, seconds))

    async def requeue(self, task: Task, delay: float = 0) -> TaskState:
        """See ``FairQueue.requeue``."""
        return await self._run(self.ops.requeue(task, delay))

    async def reclaim(self, limit: int = 1000) -> int:
        """See ``FairQueue.reclaim``."""
        return await self._run(self.ops.reclaim(limit))

    async def cancel(self, task_id: str) -> bool:
        """See ``FairQueue.cancel``."""
        return await self._run(self.ops.cancel(task_id))

    async def get(self, task_id: str) -> Task | None:
        """See ``FairQueue.get``."""
        return await self._run(self.ops.get(task_id))

    async def retry(self, task_id: str) -> TaskState:
        """See ``FairQueue.retry``."""
        return await self._run(self.ops.retry(task_id))

    async def result(self, task_id: str, timeout: float = 0, *, consume: bool = False) -> Any:
        """See ``FairQueue.result``."""
        return await self._drive(self._result_flow(task_id, timeout, consume))

    async def list_tasks(
        self,
        state: TaskState | str | None = None,
        user_id: str | None = None,
        name: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> TaskPage:
        """See ``FairQueue.list_tasks``."""
        return await self._drive(self._list_tasks_flow(state, user_id, name, limit, cursor))

    async def outcome(
        self, task_id: str, timeout: float = 0, *, consume: bool = False
    ) -> TaskOutcome | None:
        """See ``FairQueue.outcome``."""
        return await self._drive(self._outcome_flow(task_id, timeout, consume))

    async def cleanup_dependencies(self, batch: int = 500, *, passes: int | None = None) -> int:
        """See ``FairQueue.cleanup_dependencies``."""
        return await self._drive(self._cleanup_dependencies_flow(batch, passes))

    async def next_wakeup(self) -> float | None:
        """See ``FairQueue.next_wakeup``."""
        return await self._run(self.ops.next_wakeup())

    async def wait_for_work(self, timeout: float) -> bool:
        """See ``FairQueue.wait_for_work``."""
        return await self._run(self.ops.wait_for_work(self._bounded(timeout)))

    async def wait_and_pop(
        self,
        timeout: float,
        count: int = 1,
        worker_id: str = "",
        lease_seconds: float | None = None,
        *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None,
        request_id: str | None = None,
        names: Sequence[str] | None = None,
    ) -> list[Task]:
        """See ``FairQueue.wait_and_pop``."""
        request = LeaseRequest(
            count, worker_id, lease_seconds, assigned_users, steal_targets, request_id, names
        )
        return await self._drive(self._wait_and_pop_flow(timeout, request))

    async def wake(self, n: int = 1) -> int:
        """See ``FairQueue.wake``."""
        return await self._run(self.ops.wake(n))

    async def close(self) -> None:
        """Close the underlying client's connections."""
        await self.client.aclose()

    async def __aenter__(self) -> AsyncFairQueue:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class AsyncShardedFairQueue(AsyncShardedMethods, AsyncFairQueue):
    """An ``AsyncFairQueue`` over the shards of a sharded queue (docs/howto/shards.md)."""


def open_async(
    cls: type[AsyncFairQueue], url: str, client: aredis.Redis | aredis.RedisCluster,
    queue: str, shards: int | None, options: dict[str, Any],
) -> AsyncFairQueue:  # fmt: skip
    """``queue`` on the asyncio ``client`` of ``url`` with the shards the server holds
    (created with ``shards`` when new), read over a short-lived blocking connection for
    callers that open queues before their event loop runs."""
    cluster = isinstance(client, aredis.RedisCluster)
    with url_errors(url):
        layout = probe_layout(url, cluster, queue, shards, options)
    if layout is not None and layout.tags:
        return AsyncShardedFairQueue(client, queue, layout, **options)
    return cls(client, queue, **options)
