"""``fairque dispatch``: a ``Worker`` whose handler POSTs each task to an HTTP push worker.

Each job goes as MessagePack ``{task_id, name, argument, user_id, priority, attempt,
timeout_seconds}`` (``DispatchJob``); the endpoint answers with a result message,
which becomes the task's outcome. Leasing with request ids, batched heartbeats, backoff
while the server is away, the drain on SIGTERM, several queues and hooks are the
worker's own; this module only chooses the endpoint and turns its answer into an
outcome. The contract is ``docs/worker-openapi.json``.

- 2xx with a success message: the task finishes with its result.
- A failure message: the task fails with its reason, message and error
  (``should_retry`` decides whether it is retried).
- 5xx, a connection error or no answer in time: a failed attempt, retried.
- Any other status or an unreadable reply: the task fails for good.
- A task no endpoint of this dispatcher takes (its queue and a name glob) fails for
  good at once, saying so: given back, it would be leased again every few seconds
  for as long as nothing takes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import os
import socket
import threading
from collections.abc import Sequence
from typing import Any, Literal

import httpx
import msgspec
from msgspec import Struct

from fairque.client.aio import AsyncFairQueue
from fairque.config import WorkerConfig
from fairque.models import Task
from fairque.service.convert import wire_priority
from fairque.service.media import MSGPACK_TYPES
from fairque.service.settings import DispatchSettings, Endpoint
from fairque.service.wire_pull import (
    WorkerFailure,
    WorkerSuccess,
)
from fairque.tracing import running_trace
from fairque.worker import Context, Fail, Handler, Registry, Worker


class DispatchJob(Struct, kw_only=True):
    """What ``fairque dispatch`` POSTs to a push worker (MessagePack)."""

    task_id: str
    name: str
    argument: Any
    user_id: str
    priority: int | Literal["critical"]
    attempt: int
    timeout_seconds: float


#: the worker's own execution timeout is the endpoint's plus this margin: the POST's
#: timeout ends a slow answer first, with a message that names the endpoint
TIMEOUT_MARGIN = 5.0
_reply = msgspec.json.Decoder(WorkerSuccess | WorkerFailure)
_reply_packed = msgspec.msgpack.Decoder(WorkerSuccess | WorkerFailure)
_job = msgspec.msgpack.Encoder()
_HEADERS = {"Content-Type": "application/msgpack", "Accept": "application/msgpack"}


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


class Dispatch:
    """The handler: picks the endpoint of a task, POSTs it and reads the answer.

    Each endpoint takes at most its ``concurrency`` jobs at once; the worker's slots
    are the endpoints' together.
    """

    def __init__(self, endpoints: Sequence[Endpoint], http: httpx.AsyncClient) -> None:
        self.endpoints = list(endpoints)
        self.http = http
        self._slots = {id(e): asyncio.Semaphore(e.concurrency) for e in self.endpoints}

    def endpoint(self, queue: str, name: str) -> Endpoint | None:
        """The first endpoint of ``queue`` that takes tasks named ``name``."""
        return next((e for e in self.endpoints if e.queue == queue and matches(e, name)), None)

    async def __call__(self, ctx: Context) -> Any:
        task = ctx.task
        endpoint = self.endpoint(ctx.queue.queue, task.name)
        if endpoint is None:
            raise Fail(
                f"no endpoint of dispatcher {ctx.worker_id} takes task name {task.name!r} "
                f"on queue {ctx.queue.queue!r}",
                retry=False,
            )
        async with self._slots[id(endpoint)]:
            return await self._send(task, endpoint)

    async def _send(self, task: Task, endpoint: Endpoint) -> Any:
        timeout = task.timeout or endpoint.timeout_seconds
        job = DispatchJob(
            task_id=task.task_id or "", name=task.name, argument=task.payload,
            user_id=task.user_id, priority=wire_priority(task.priority),
            attempt=task.retry_count + 1, timeout_seconds=timeout,
        )  # fmt: skip
        headers = _HEADERS
        traceparent = running_trace() or task.trace_context
        if traceparent is not None:  # the endpoint's work joins the task's trace
            headers = {**_HEADERS, "traceparent": traceparent}
        try:
            response = await self.http.post(
                endpoint.url, content=_job.encode(job), headers=headers, timeout=timeout
            )
        except httpx.TimeoutException:
            raise Fail(f"timeout: no answer from {endpoint.url} in {timeout:g}s",
                       kind="timeout") from None  # fmt: skip
        except httpx.HTTPError as exc:
            raise Fail(f"{endpoint.url}: {type(exc).__name__}: {exc}") from None
        if response.status_code >= 500:
            raise Fail(_describe(response))
        if response.status_code >= 300:
            raise Fail(_describe(response), retry=False)
        try:
            reply = decode_reply(response)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise Fail(f"the endpoint's reply is no result message: {exc}", retry=False) from None
        if isinstance(reply, WorkerSuccess):
            return reply.result
        raise Fail(reply.message, retry=reply.should_retry, kind=reply.reason, details=reply.error)


class EndpointRegistry(Registry):
    """A registry whose one handler, ``Dispatch``, takes every task name."""

    def __init__(self, dispatch: Dispatch) -> None:
        super().__init__()
        longest = max((e.timeout_seconds for e in dispatch.endpoints), default=0.0)
        self.handler = Handler(
            name="dispatch", func=dispatch, is_async=True, arity=-1,
            timeout=longest + TIMEOUT_MARGIN,
        )  # fmt: skip

    def get(self, name: str) -> Handler | None:
        return self.handler

    def handled(self) -> tuple[str, ...] | None:
        return None


def _describe(response: httpx.Response) -> str:
    return f"HTTP {response.status_code} from {response.request.url}: {response.text[:500]}"


def default_worker_id() -> str:
    return f"dispatch-{socket.gethostname()}-{os.getpid()}"


def worker_config(settings: DispatchSettings, base: WorkerConfig | None = None) -> WorkerConfig:
    """The dispatcher's worker settings: ``base`` (the ``worker:`` section) with its id,
    slots and lease taken from the endpoints."""
    endpoints = settings.endpoints
    return (base or WorkerConfig()).model_copy(
        update={
            "id": settings.worker_id or default_worker_id(),
            "queues": list(dict.fromkeys(e.queue for e in endpoints)),
            "max_concurrent_tasks": sum(e.concurrency for e in endpoints),
            "lease_seconds": min(e.lease_seconds for e in endpoints),
            "assigned_users": [],
            "steal_targets": [],
            "burst": False,
        }
    )


async def run_dispatch(
    url: str,
    settings: DispatchSettings,
    options: dict[str, Any] | None = None,
    stop: asyncio.Event | None = None,
    worker: WorkerConfig | None = None,
) -> None:
    """Dispatch every configured queue until ``stop`` is set (or SIGINT/SIGTERM).

    Args:
        url: the server.
        settings: the ``dispatch:`` section (at least one endpoint).
        options: queue options.
        stop: set to stop (a graceful drain, as SIGTERM does).
        worker: the ``worker:`` section: grace period, server wait, logging... (its
            id, queues, slots and lease come from ``settings``).
    """
    if not settings.endpoints:
        raise ValueError("dispatch needs at least one endpoint")
    config = worker_config(settings, worker)
    first = await asyncio.to_thread(
        AsyncFairQueue.from_url, url, config.queues[0], **(options or {})
    )
    queues = [first] + [
        await AsyncFairQueue.open(first.client, n, **(options or {})) for n in config.queues[1:]
    ]
    limits = httpx.Limits(max_connections=config.max_concurrent_tasks + 4)
    try:
        async with httpx.AsyncClient(limits=limits) as http:
            registry = EndpointRegistry(Dispatch(settings.endpoints, http))
            runner = Worker(queues, registry, config)
            watch = asyncio.create_task(_stop_on(stop, runner)) if stop is not None else None
            try:
                # signal handlers can only be set from the main thread
                main = threading.current_thread() is threading.main_thread()
                await runner.run_async(install_signals=main)
            finally:
                if watch is not None:
                    watch.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await watch
    finally:
        await first.close()


async def _stop_on(stop: asyncio.Event, worker: Worker) -> None:
    await stop.wait()
    worker.request_stop()
