"""``fairque dispatch``: lease tasks fairly and POST each to an HTTP push worker.

Each job goes as MessagePack ``{task_id, name, argument, user_id, priority,
attempt, timeout_seconds}`` (``wire.DispatchJob``); the endpoint answers with a
result message, which becomes the task's outcome. 5xx answers, connection errors
and timeouts are retryable failures; 4xx answers and unreadable replies are not.
While an endpoint works, the task's lease is extended. The contract is
``docs/worker-openapi.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
import os
import signal
import socket
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import httpx
import msgspec
from redis.exceptions import RedisError

from fairque.client.aio import AsyncFairQueue
from fairque.core.pauses import pass_on_cancellation, pause_unless
from fairque.errors import FairqueError, LeaseLost
from fairque.models import Task, WorkerInfo
from fairque.service.convert import record_failure, wire_priority
from fairque.service.media import MSGPACK_TYPES
from fairque.service.settings import DispatchSettings, Endpoint
from fairque.service.wire import DispatchJob, WorkerFailure, WorkerSuccess

log = logging.getLogger("fairque.dispatch")

#: an unmatched task goes back to the queue for this long (another worker may take it)
UNMATCHED_DELAY = 5.0
#: seconds a dispatcher's worker registration lasts without a refresh
REGISTRATION_TTL = 30.0
_reply = msgspec.json.Decoder(WorkerSuccess | WorkerFailure)
_reply_packed = msgspec.msgpack.Decoder(WorkerSuccess | WorkerFailure)
_job = msgspec.msgpack.Encoder()


def matches(endpoint: Endpoint, name: str) -> bool:
    """True when ``endpoint`` takes tasks named ``name`` (no globs: every name)."""
    return not endpoint.names or any(fnmatch.fnmatchcase(name, g) for g in endpoint.names)


def decode_reply(response: httpx.Response) -> WorkerSuccess | WorkerFailure:
    """The endpoint's result message (MessagePack or JSON by its Content-Type).

    Raises:
        msgspec.DecodeError: the reply is not a result message.
    """
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    decoder = _reply_packed if media in MSGPACK_TYPES else _reply
    reply: WorkerSuccess | WorkerFailure = decoder.decode(response.content)
    return reply


class QueueDispatcher:
    """Leases one queue's tasks and sends each to the first endpoint that takes it."""

    def __init__(
        self,
        queue: AsyncFairQueue,
        endpoints: Sequence[Endpoint],
        http: httpx.AsyncClient,
        worker_id: str,
    ) -> None:
        self.queue = queue
        self.endpoints = list(endpoints)
        self.http = http
        self.worker_id = worker_id
        self.slots = {id(e): asyncio.Semaphore(e.concurrency) for e in self.endpoints}
        self.capacity = sum(e.concurrency for e in self.endpoints)
        self.lease_seconds = min(e.lease_seconds for e in self.endpoints)
        self.running: set[asyncio.Task[None]] = set()
        self.started_at = datetime.now(timezone.utc)
        self.processed = 0
        self.failed = 0

    def info(self) -> WorkerInfo:
        """This dispatcher as a registered worker (``fairque status``, ``GET /workers``)."""
        return WorkerInfo(
            worker_id=self.worker_id, queue=self.queue.queue, host=socket.gethostname(),
            pid=os.getpid(), started_at=self.started_at, concurrency=self.capacity,
            in_flight=len(self.running), processed=self.processed, failed=self.failed,
        )  # fmt: skip

    async def heartbeat(self, stop: asyncio.Event) -> None:
        """Keep the registration fresh until ``stop``; then remove it."""
        while not stop.is_set():
            with contextlib.suppress(FairqueError, RedisError):
                await self.queue.register_worker(self.info(), ttl_seconds=REGISTRATION_TTL)
            await pause_unless(stop, REGISTRATION_TTL / 3)
        with contextlib.suppress(FairqueError, RedisError):
            await self.queue.unregister_worker(self.worker_id)

    async def run(self, stop: asyncio.Event) -> None:
        """Lease and dispatch until ``stop`` is set; then wait for the jobs in flight."""
        while not stop.is_set():
            free = self.capacity - len(self.running)
            if free <= 0:
                await asyncio.wait(self.running, return_when=asyncio.FIRST_COMPLETED)
                continue
            try:
                tasks = await self.queue.wait_and_pop(1.0, free, self.worker_id, self.lease_seconds)
            except (FairqueError, RedisError) as exc:  # unreachable: wait, then again
                log.warning("lease failed on %s: %s", self.queue.queue, exc)
                await pause_unless(stop, 1.0)
                continue
            for task in tasks:
                job = asyncio.create_task(self.handle(task))
                self.running.add(job)
                job.add_done_callback(self.running.discard)
        if self.running:
            await asyncio.wait(self.running)

    async def handle(self, task: Task) -> None:
        """Send one task to its endpoint; record the outcome."""
        endpoint = next((e for e in self.endpoints if matches(e, task.name)), None)
        if endpoint is None:
            log.warning("no endpoint takes %r (task %s): given back", task.name, task.task_id)
            with contextlib.suppress(FairqueError):
                await self.queue.requeue(task, UNMATCHED_DELAY)
            return
        async with self.slots[id(endpoint)]:
            heartbeat = asyncio.create_task(self._keep_lease(task, endpoint))
            try:
                await self._send(task, endpoint, heartbeat)
            except LeaseLost:
                log.info("task %s: lease lost (canceled or expired)", task.task_id)
            except Exception:  # one job's trouble must not stop the dispatcher
                log.exception("task %s: recording its outcome failed", task.task_id)
            finally:
                heartbeat.cancel()

    async def _keep_lease(self, task: Task, endpoint: Endpoint) -> None:
        while True:
            await asyncio.sleep(endpoint.lease_seconds / 3)
            pass_on_cancellation()  # one a command swallowed (see fairque.core.pauses)
            await self.queue.extend(task, endpoint.lease_seconds)

    async def _send(self, task: Task, endpoint: Endpoint, heartbeat: asyncio.Task[None]) -> None:
        timeout = task.timeout or endpoint.timeout_seconds
        job = DispatchJob(
            task_id=task.task_id or "", name=task.name, argument=task.payload,
            user_id=task.user_id, priority=wire_priority(task.priority),
            attempt=task.retry_count + 1, timeout_seconds=timeout,
        )  # fmt: skip
        post = asyncio.create_task(
            self.http.post(
                endpoint.url,
                content=_job.encode(job),
                headers={"Content-Type": "application/msgpack", "Accept": "application/msgpack"},
                timeout=timeout,
            )
        )
        done, _ = await asyncio.wait({post, heartbeat}, return_when=asyncio.FIRST_COMPLETED)
        if heartbeat in done and post not in done:
            post.cancel()
            heartbeat.result()  # raises LeaseLost: nobody may record an outcome now
        try:
            response = post.result()
        except httpx.TimeoutException:
            await self._fail(task, "timeout", f"no answer from {endpoint.url} in {timeout:g}s")
            return
        except httpx.HTTPError as exc:
            await self._fail(task, "other", f"{endpoint.url}: {type(exc).__name__}: {exc}")
            return
        if response.status_code >= 500:
            await self._fail(task, "other", _describe(response))
        elif response.status_code >= 300:
            await self._fail(task, "other", _describe(response), retry=False)
        else:
            await self._record(task, response)

    async def _record(self, task: Task, response: httpx.Response) -> None:
        try:
            reply = decode_reply(response)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            await self._fail(task, "other", f"the endpoint's reply is no result message: {exc}",
                             retry=False)  # fmt: skip
            return
        if isinstance(reply, WorkerSuccess):
            if not await self.queue.complete(task, reply.result):
                raise LeaseLost(f"task {task.task_id}")
            self.processed += 1
            return
        self.failed += 1
        await record_failure(
            self.queue, task, reply.reason, reply.message, reply.error, retry=reply.should_retry
        )

    async def _fail(self, task: Task, reason: str, message: str, *, retry: bool = True) -> None:
        log.info("task %s failed (%s): %s", task.task_id, "retry" if retry else "final", message)
        self.failed += 1
        await record_failure(self.queue, task, reason, message, None, retry=retry)


def _describe(response: httpx.Response) -> str:
    return f"HTTP {response.status_code} from {response.request.url}: {response.text[:500]}"


def default_worker_id() -> str:
    return f"dispatch-{socket.gethostname()}-{os.getpid()}"


async def run_dispatch(
    url: str,
    settings: DispatchSettings,
    options: dict[str, Any] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Dispatch every configured queue until ``stop`` is set (or SIGINT/SIGTERM)."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
    by_queue: dict[str, list[Endpoint]] = {}
    for endpoint in settings.endpoints:
        by_queue.setdefault(endpoint.queue, []).append(endpoint)
    worker_id = settings.worker_id or default_worker_id()
    first: AsyncFairQueue | None = None
    limits = httpx.Limits(max_connections=sum(e.concurrency for e in settings.endpoints) + 4)
    async with httpx.AsyncClient(limits=limits) as http:
        dispatchers = []
        for name, endpoints in by_queue.items():
            if first is None:
                first = await asyncio.to_thread(
                    AsyncFairQueue.from_url, url, name, **(options or {})
                )
                q = first
            else:
                q = AsyncFairQueue(first.client, name, **(options or {}))
            dispatchers.append(QueueDispatcher(q, endpoints, http, worker_id))
        log.info("dispatching %s as %s", ", ".join(by_queue), worker_id)
        try:
            await asyncio.gather(
                *(d.run(stop) for d in dispatchers), *(d.heartbeat(stop) for d in dispatchers)
            )
        finally:
            if first is not None:
                await first.close()
