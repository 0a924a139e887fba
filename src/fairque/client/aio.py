"""AsyncFairQueue: the asyncio client, and the source of the blocking one.

``FairQueue`` (``fairque.client.queue``) is generated from the classes here by
``tools/unasync.py``: the same methods, documentation and calls, without ``await``.
Both execute the calls built by ``fairque.core.ops``, so their behaviour is the same by
construction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Sized
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Literal, TypeVar

import redis.asyncio as aredis
from redis.exceptions import NoScriptError, ResponseError

from fairque.client.admin import AsyncAdminMethods
from fairque.client.base import Flow, connect, replayable_tasks, run_flow_async
from fairque.client.inspection import AsyncInspectionMethods
from fairque.client.quicksend import FAILED, AsyncQuickSender
from fairque.client.shards.layout import layout_flow, probe_layout
from fairque.client.waiting import AsyncWaitMethods
from fairque.common.urls import url_errors
from fairque.constraints.api import AsyncConstraintMethods
from fairque.core.records import Call, LeaseRequest, Pushed
from fairque.dedup import Dedup
from fairque.errors import StaleConstraints
from fairque.models import (
    Priority,
    Task,
    TaskOutcome,
    TaskPage,
    TaskState,
)
from fairque.schedules.api import AsyncScheduleMethods
from fairque.tracing import sending

T = TypeVar("T")


class AsyncFairQueue(
    AsyncAdminMethods,
    AsyncConstraintMethods,
    AsyncScheduleMethods,
    AsyncInspectionMethods,
    AsyncWaitMethods,
):
    """A fair, multi-tenant task queue on one Redis-compatible server or cluster: the
    asyncio client.

    Args:
        client: a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster``
            (``decode_responses=False``).
        queue: the queue name; all of its keys share the hash tag ``{queue}``.
        **options: queue options (see ``QueueOptions``): ``ordering``,
            ``aging_horizon_seconds``, ``lease_seconds``, ``retry_base_seconds``,
            ``max_retries``, ``max_payload_bytes``, ``serializer``, ...

    Raises:
        ConfigError: an option or the queue name is invalid.
    """

    def __init__(
        self, client: aredis.Redis | aredis.RedisCluster, queue: str = "default", **options: Any
    ) -> None:
        super().__init__(client, queue, **options)
        self.client: aredis.Redis | aredis.RedisCluster = client
        self._quick = AsyncQuickSender.for_client(client)

    @classmethod
    def from_url(
        cls, url: str, queue: str = "default", *, cluster: bool | None = None,
        shards: int | None = None, **options: Any,
    ) -> AsyncFairQueue:  # fmt: skip
        """Connect to ``url`` and ``open`` the queue; a cluster is detected unless
        ``cluster`` says otherwise. With no ``shards``, a server that cannot be reached
        yet gives a client of shard 0 (docs/howto/shards.md)."""
        client: aredis.Redis | aredis.RedisCluster = connect(
            url, cluster, options, aredis.Redis.from_url, aredis.RedisCluster.from_url
        )
        return open_async(cls, url, client, queue, shards, options)

    @classmethod
    async def open(
        cls, client: aredis.Redis | aredis.RedisCluster, queue: str = "default", *,
        shards: int | None = None, **options: Any,
    ) -> AsyncFairQueue:  # fmt: skip
        """Open ``queue`` with the shards the server holds, or create it with ``shards``
        (1..1024) when it is new.

        Raises:
            ConfigError: ``shards`` is out of range or differs from the server's count.
        """
        opened = cls(client, queue, **options)
        opened._adopt_layout(await opened._drive(layout_flow(opened, shards)))
        return opened

    async def _run(self, call: Call[T]) -> T:
        if self._flush_due():  # before the call: its answer is not held up by a flush
            await self._drive(self._metrics_flow())
        try:
            if call.script is None:
                # redis-py types the asyncio command, not the blocking one
                raw = await self.client.execute_command(  # type: ignore[no-untyped-call,unused-ignore]
                    call.args[0], *call.keys, *call.args[1:]
                )
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
        """Name the queue in the server's registry when that is due."""
        await self._drive(self._upkeep_flow())

    async def _run_push(self, call: Call[T]) -> T:
        """Push through ``_send_resendable``; then, when due, name the queue in the registry."""
        out = await self._send_resendable(call)
        if self._upkeep_due():
            await self._list()
        return out

    async def _send_resendable(self, call: Call[T]) -> T:
        """``_run`` for calls safe to send twice (see ``quicksend``): the lean sender."""
        quick = self._quick
        if quick is not None and call.script is not None:
            if self._flush_due():
                await self._drive(self._metrics_flow())
            args = ("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)
            try:
                raw = await quick.send(args)
            except NoScriptError:  # _run loads the script
                raw = FAILED
            except ResponseError as exc:
                self._reraise(exc)
            if raw is not FAILED:
                return call.parse(raw)
        return await self._run(call)

    async def _send_pipeline(self, calls: Sequence[Call[Any]]) -> list[Any]:
        """Send ``calls`` in one pipeline; their raw replies, errors included."""
        pipe = self.client.pipeline(transaction=False)
        for call in calls:
            pipe.execute_command(*self._command(call))
        return await pipe.execute(raise_on_error=False)

    async def _drive_resendable(self, flow: Flow[T]) -> T:
        """``_drive`` for the lease family: its calls take ``_send_resendable``."""
        return await run_flow_async(flow, self._send_resendable, self._send_pipeline)

    async def _drive(self, flow: Flow[T]) -> T:
        """Run one of the control flows ``QueueBase`` writes once for both clients."""
        return await run_flow_async(flow, self._run, self._send_pipeline)

    async def push(self, task: Task) -> Task:
        """Push one task; returns it with ``task_id``, ``state`` and ``created_at`` filled.

        An existing ``task_id`` is a no-op that returns the stored task (or raises
        ``DuplicateTask`` with ``on_duplicate="error"``).

        Raises:
            ValidationError: the payload does not serialize or is too large.
        """
        part = self._place.for_user(task.user_id)
        with sending(self.queue, 1, task.user_id):
            try:  # the common case, without the flow's machinery
                return await self._run_push(part.ops.push(task))
            except StaleConstraints:
                return await self._drive(part._repush_flow(lambda: part.ops.push(task)))

    async def push_many(
        self, tasks: Iterable[Task], *, delays: Sequence[float | None] | None = None
    ) -> Pushed:
        """Push a batch atomically: all tasks are written or none is.

        Args:
            tasks: the tasks.
            delays: optional per-task delay in seconds (None: no delay), same length.

        Returns:
            The tasks as stored, in the order given; ``created[i]`` (a list beside
            them) is False when task i's id already existed (nothing was written for
            it). A resend of this same call after a lost reply answers as it did.
        """
        batch = replayable_tasks(tasks)
        with sending(self.queue, len(batch) if isinstance(batch, Sized) else 0, None):
            flow = self._place.push_many(batch, delays)
            return await run_flow_async(flow, self._run_push, self._send_pipeline)

    async def enqueue(
        self, name: str, payload: Any = None, *, user_id: str,
        priority: int = Priority.NORMAL, delay: float | timedelta | None = None,
        execute_after: datetime | None = None, depends_on: Sequence[str] = (),
        task_id: str | None = None, max_retries: int | None = None,
        timeout: float | None = None, keep_result: bool = True, result_ttl: int | None = None,
        on_dependency_failure: Literal["cancel", "wait"] = "cancel", cost: int = 1,
        dedup: Dedup | None = None,
    ) -> Task:  # fmt: skip
        """Build and push a task in one call (``delay`` in seconds or a timedelta);
        with ``dedup``, the answer may be the task already waiting with its key."""

        part = self._place.for_user(user_id)

        def call() -> Call[Task]:
            return part.ops.enqueue(
                name, payload, user_id=user_id, priority=priority, delay=delay,
                execute_after=execute_after, depends_on=depends_on, task_id=task_id,
                max_retries=max_retries, timeout=timeout, keep_result=keep_result,
                result_ttl=result_ttl, on_dependency_failure=on_dependency_failure, cost=cost,
                dedup=dedup,
            )  # fmt: skip

        with sending(self.queue, 1, user_id):
            try:  # the common case, without the flow's machinery
                return await self._run_push(call())
            except StaleConstraints:
                return await self._drive(part._repush_flow(call))

    async def pop(
        self, worker_id: str = "", lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None, names: Sequence[str] | None = None,
    ) -> Task | None:  # fmt: skip
        """Lease the next task by the fairness rules, or None when nothing is ready."""
        request = LeaseRequest(
            1, worker_id, lease_seconds, assigned_users, steal_targets, None, names
        )
        _, tasks = await self._drive_resendable(self._place.lease(request))
        return tasks[0] if tasks else None

    async def pop_batch(
        self, count: int, worker_id: str = "", lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None, request_id: str | None = None,
        names: Sequence[str] | None = None, max_held: int | None = None,
    ) -> list[Task]:  # fmt: skip
        """Lease up to ``count`` tasks in one round trip, round robin across users.

        ``request_id`` (optional, any short string unique per request): sending the
        same request again, e.g. after a connection error, returns the tasks the first
        send leased instead of leasing more. ``names`` (None: any): the task names the
        caller handles; a task with another name is set aside until a caller that
        handles it leases, and holds up no other task meanwhile. ``max_held`` (None:
        no bound): the most leases ``worker_id`` may hold at once, counted by the server
        from its unexpired leases; a request past it leases what is left, or none.
        """
        request = LeaseRequest(count, worker_id, lease_seconds, assigned_users, steal_targets,
                               request_id, names, max_held)  # fmt: skip
        return (await self._drive_resendable(self._place.lease(request)))[1]

    async def complete(self, task: Task, result: Any = None) -> bool:
        """Finish a leased task; False when its lease was lost (nothing changes then)."""
        part, task = self._place.for_task(task)
        return await self._run(part.ops.complete(task, result))

    async def complete_and_pop(
        self, done: Sequence[tuple[Task, Any]], count: int = 1, worker_id: str = "",
        lease_seconds: float | None = None, *,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None, request_id: str | None = None,
        names: Sequence[str] | None = None, max_held: int | None = None,
    ) -> tuple[list[bool], list[Task]]:  # fmt: skip
        """Finish several tasks and lease up to ``count`` more in one round trip.

        Args:
            done: (task, result) pairs of leased tasks that succeeded.
            count: tasks to lease afterwards (0: only finish).
            request_id: see ``pop_batch``; completions are safe to resend anyway.
            max_held: see ``pop_batch``.

        Returns:
            One bool per finished task (False: its lease was lost), and the leased tasks.
        """
        request = LeaseRequest(count, worker_id, lease_seconds, assigned_users, steal_targets,
                               request_id, names, max_held)  # fmt: skip
        acks, leased = await self._drive_resendable(self._place.lease(request, done))
        return acks, leased

    async def fail(
        self, task: Task, error: str | BaseException = "", retry: bool = True,
        delay: float | None = None, *, max_retries: int | None = None,
        traceback: str | None = None, reason: str | None = None, details: Any = None,
    ) -> TaskState:  # fmt: skip
        """Record a failed attempt: SCHEDULED for a retry, or FAILED when none is left.

        Args:
            task: the leased task.
            error: the error kept on the task.
            retry: False fails the task for good.
            delay: seconds before the retry (None: exponential backoff).
            max_retries: the retry budget to judge by instead of the task's own (a
                handler's ``@task(max_retries=...)``).
            traceback: the failure's traceback, kept as the task's ``traceback`` (at
                most 64 KiB: a longer one keeps its end).
            reason: the failure's kind (e.g. ``"timeout"``), kept as the task's
                ``failure_reason``.
            details: any value the serializer takes, describing the failure; read
                back through ``outcome``.

        Raises:
            LeaseLost: the task's lease expired or was taken over.
        """
        part, task = self._place.for_task(task)
        call = part.ops.fail(task, error, retry, delay, max_retries, traceback, reason, details)
        return await self._run(call)

    async def extend(self, task: Task, seconds: float | None = None) -> datetime:
        """Extend the task's lease to now + ``seconds``; returns the new deadline.

        Raises:
            CancelRequested: the task was canceled while this lease held it (a
                ``LeaseLost``): stop working on it.
            LeaseLost: the task's lease expired or was taken over.
        """
        part, routed = self._place.for_task(task)
        task.lease_deadline = await self._run(part.ops.extend(routed, seconds))
        return task.lease_deadline

    async def extend_many(self, tasks: Sequence[Task], seconds: float | None = None) -> list[bool]:
        """Extend several leases in one round trip (a worker's heartbeat).

        Returns:
            One bool per task: False when that task's lease was lost.
        """
        if not tasks:
            return []
        return await self._drive(self._place.extend_many(tasks, seconds))

    async def requeue(self, task: Task, delay: float = 0) -> TaskState:
        """Give a leased task back without counting a failure (QUEUED or SCHEDULED).

        Raises:
            LeaseLost: the task's lease expired or was taken over.
        """
        part, task = self._place.for_task(task)
        return await self._run(part.ops.requeue(task, delay))

    async def reclaim(self, limit: int = 1000) -> int:
        """Reclaim up to ``limit`` expired leases now; returns how many."""
        return await self._drive(self._place.sum(lambda p: p.ops.reclaim(limit)))

    async def cancel(self, task_id: str) -> bool:
        """Cancel a task that has not ended; False when it had already ended.

        Raises:
            TaskNotFound: no such task.
        """
        return await self._drive(self._place.by_id(task_id, lambda p: p.ops.cancel(task_id)))

    async def get(self, task_id: str) -> Task | None:
        """The task with this id, or None when it does not exist (or expired)."""
        return await self._drive(self._place.get(task_id))

    async def retry(self, task_id: str) -> TaskState:
        """Re-queue a FAILED or CANCELED task with a fresh retry budget.

        Raises:
            TaskNotFound: no such task.
            InvalidTransition: the task is not FAILED or CANCELED.
        """
        return await self._drive(self._place.by_id(task_id, lambda p: p.ops.retry(task_id)))

    async def result(self, task_id: str, timeout: float = 0, *, consume: bool = False) -> Any:
        """The result of a task, waiting up to ``timeout`` seconds for it to end.

        Waiting blocks on a per-task key that the ending script signals (no polling).

        Args:
            task_id: the task.
            timeout: seconds to wait for a task that has not ended (0: do not wait).
            consume: read the outcome once (a failure or cancellation too): later reads
                get None.

        Returns:
            The handler's return value; None when it returned None, when the result
            was not kept, consumed or expired, or when no such task exists (``outcome``
            tells these apart).

        Raises:
            TaskFailed: the task FAILED (the message holds its error).
            TaskCanceled: the task was CANCELED.
            ResultTimeout: the task had not ended within ``timeout``.
        """
        return await self._drive(self._place.result(task_id, timeout, consume))

    async def list_tasks(
        self, state: TaskState | str | None = None, user_id: str | None = None,
        name: str | None = None, limit: int = 50, cursor: str | None = None,
    ) -> TaskPage:  # fmt: skip
        """One page of tasks, newest first, and the cursor of the next page.

        Stays fast on large queues: a state alone walks that state's registry (newest
        by its time: due time, push time, ready time, lease deadline, or expiry for
        ended tasks); a user and/or a name walks the smaller of their indexes (every
        task by creation time, newest created first) and checks each entry, at most
        1,000 entries a page, so a filtered page may be short or even empty while
        ``next_cursor`` still leads on. Tasks that end or move between pages are
        listed where they are when their page is read.

        Args:
            state: only tasks in this state (a ``TaskState`` or its name).
            user_id: only this user's tasks.
            name: only tasks of this name.
            limit: tasks per page, 1..500.
            cursor: ``next_cursor`` of the previous page (None: the first page).

        Raises:
            ValidationError: no state, user or name given; a bad limit or cursor.
        """
        return await self._drive(self._place.list_tasks(state, user_id, name, limit, cursor))

    async def outcome(
        self, task_id: str, timeout: float = 0, *, consume: bool = False
    ) -> TaskOutcome | None:
        """How a task ended (state, result or error, end time), in one call.

        Waits up to ``timeout`` seconds for a task that has not ended, like ``result``
        (no polling); raises nothing for a failure: the outcome describes it.

        Args:
            task_id: the task.
            timeout: seconds to wait for the task to end (0: do not wait).
            consume: read the outcome once (FINISHED, FAILED or CANCELED alike): later
                reads get None. A resend of this call after a lost reply still gets it.

        Returns:
            The outcome; for a task still pending when the wait ends, an outcome with
            only its ``state``; None when no such task exists, it expired, or its
            outcome was consumed.
        """
        return await self._drive(self._place.outcome(task_id, timeout, consume))

    async def cleanup_dependencies(self, batch: int = 500, *, passes: int | None = None) -> int:
        """Cancel DEFERRED tasks whose upstream expired before finishing; returns how many.

        Walks the DEFERRED registry ``batch`` tasks per call until it wraps around, or
        for at most ``passes`` calls, resuming where this client's last call stopped.
        """
        return await self._drive(self._place.cleanup(batch, passes))

    async def next_wakeup(self) -> float | None:
        """Seconds until a scheduled task is due or a lease expires; None if neither."""
        return await self._drive(self._place.next_wakeup())

    async def wake(self, n: int = 1) -> int:
        """Wake up to ``n`` idle workers (1..64); returns the tokens now waiting."""
        return await self._run(self.ops.wake(n))

    async def flush_metrics(self) -> None:
        """Send what this client counted since its last flush now (done at most once a
        second before a call, and by ``close``; a worker does it when it stops)."""
        await self._drive(self._metrics_flow())

    async def close(self) -> None:
        """Flush this client's counts, then close the underlying client's connections."""
        try:
            await self.flush_metrics()
        finally:
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
    opened = cls(client, queue, **options)
    if layout is not None:
        opened._adopt_layout(layout)
    return opened
