"""Test harness for the in-process worker tests: queues, workers, polling, hooks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import redis

from fairque import (
    AsyncFairQueue,
    Context,
    Hooks,
    Registry,
    Task,
    TaskState,
    Worker,
    WorkerConfig,
    WorkerInfo,
)
from fairque.core.keys import QueueKeys
from fairque.worker import Outcome
from helpers.servers import ServerInfo, SyncClient
from helpers.support import PATIENCE, unique_queue


class Harness:
    """Builds queues and workers on one server; stops and closes everything afterwards."""

    def __init__(self, server: ServerInfo) -> None:
        self.server = server
        self.queues: list[AsyncFairQueue] = []
        self.runs: list[tuple[Worker, asyncio.Task[None]]] = []

    def queue(
        self, name: str | None = None, socket_timeout: float | None = None, **options: Any
    ) -> AsyncFairQueue:
        """A queue of ``options``; ``socket_timeout``: its client's, which bounds how long
        one blocking wait (a parked worker's) may last (redis-py's default: 5 s)."""
        opts: dict[str, Any] = {"retry_base_seconds": 0.01, **options}
        url = self.server.url
        if socket_timeout is not None:
            url += f"{'&' if '?' in url else '?'}socket_timeout={socket_timeout:g}"
        cluster = self.server.cluster
        q = AsyncFairQueue.from_url(url, name or unique_queue(), cluster=cluster, **opts)
        self.queues.append(q)
        return q

    def start(
        self, q: AsyncFairQueue, registry: Registry, hooks: tuple[Hooks, ...] = (), **cfg: Any
    ) -> Worker:
        settings: dict[str, Any] = {"poll_interval_seconds": 0.2, "shutdown_grace_seconds": 1.0}
        worker = Worker(q, registry, WorkerConfig(**{**settings, **cfg}), hooks=hooks)
        self.runs.append((worker, asyncio.create_task(worker.run_async())))
        return worker

    async def stop(self, worker: Worker, timeout: float = 10.0) -> None:
        worker.request_stop()
        job = next(job for w, job in self.runs if w is worker)
        await asyncio.wait_for(job, timeout)

    async def close(self) -> None:
        for worker, job in self.runs:
            if not job.done():
                worker.request_stop()
                worker.request_stop()
        jobs = {job for _, job in self.runs}
        if jobs:
            _, stuck = await asyncio.wait(jobs, timeout=10)
            while stuck:  # a lost heartbeat cancel (see SwallowingQueue): cancel the worker
                for job in stuck:
                    job.cancel()
                _, stuck = await asyncio.wait(stuck, timeout=1)
        await asyncio.gather(*jobs, return_exceptions=True)
        for q in self.queues:
            await q.close()


async def wait_state(
    q: AsyncFairQueue, task_id: str | None, *states: TaskState, timeout: float = PATIENCE
) -> Task:
    assert task_id is not None
    deadline = time.monotonic() + timeout
    while True:
        try:
            t = await q.get(task_id)
        except redis.ConnectionError:
            # this poll's own connection died with a restarted server: poll again (the
            # worker under test is what must ride the outage out, not this read)
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
            continue
        if t is not None and t.state in states:
            return t
        if time.monotonic() > deadline:
            raise AssertionError(f"task {task_id} is {t and t.state}, expected {states}")
        await asyncio.sleep(0.02)


async def eventually(check: Callable[[], bool], timeout: float = PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def wait_registered(q: AsyncFairQueue, worker_id: str) -> WorkerInfo:
    deadline = time.monotonic() + 10
    while True:
        listed = {w.worker_id: w for w in await q.workers()}
        if worker_id in listed:
            return listed[worker_id]
        assert time.monotonic() < deadline, f"worker {worker_id} did not register"
        await asyncio.sleep(0.02)


def stored_result(client: SyncClient, q: AsyncFairQueue, task_id: str | None) -> Any:
    assert task_id is not None
    raw = cast("bytes | None", client.hget(QueueKeys(q.queue).task(task_id), "result"))
    return None if raw is None else json.loads(raw)


class Recorder(Hooks):
    """Records every hook call (sync and async methods mixed)."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.outcomes: list[Outcome] = []

    def on_startup(self, worker: Worker) -> None:
        self.events.append(("startup", worker.id))

    async def before_task(self, ctx: Context) -> None:
        self.events.append(("before", ctx.task.name))

    def after_task(self, ctx: Context, outcome: Outcome) -> None:
        self.events.append(("after", ctx.task.name, outcome.state, outcome.result))
        self.outcomes.append(outcome)

    async def on_shutdown(self, worker: Worker) -> None:
        self.events.append(("shutdown", worker.in_flight))


class Broken(Hooks):
    """Every hook raises; the worker must log and carry on."""

    def on_startup(self, worker: Worker) -> None:
        raise RuntimeError("startup hook")

    async def before_task(self, ctx: Context) -> None:
        raise RuntimeError("before hook")

    def after_task(self, ctx: Context, outcome: Outcome) -> None:
        raise RuntimeError("after hook")


class SwallowingQueue(AsyncFairQueue):
    """A real queue whose armed ``register_worker`` (the heartbeat's call) eats one cancel.

    That is what redis-py 8 does on Python < 3.12 when a cancel lands while a command is
    being sent (``asyncio.wait_for`` around the socket write, CPython gh-86296): the
    command completes and the ``CancelledError`` is lost.  Here the window is made wide.
    """

    armed = False
    inside: asyncio.Event

    async def register_worker(self, info: WorkerInfo, ttl_seconds: float) -> int:
        result = await super().register_worker(info, ttl_seconds)
        if self.armed:
            self.armed = False
            self.inside.set()
            with contextlib.suppress(asyncio.CancelledError):  # swallowed, as described above
                await asyncio.sleep(5)
        return result


class FlakyQueue(AsyncFairQueue):
    """A real queue whose next call of each method named in ``broken`` raises once.

    It stands for a dropped connection, to prove the worker retries and loses nothing.
    ``complete_and_pop`` only fails when it carries completions.
    """

    broken: set[str] = set()

    def _trip(self, name: str) -> None:
        if name in self.broken:
            self.broken.discard(name)
            raise redis.exceptions.ConnectionError(f"injected failure in {name}")

    async def complete_and_pop(
        self, done: Sequence[tuple[Task, Any]], count: int = 1, *args: Any, **kwargs: Any
    ) -> tuple[list[bool], list[Task]]:
        if done:
            self._trip("complete_and_pop")
        return await super().complete_and_pop(done, count, *args, **kwargs)

    async def wait_and_pop(self, timeout: float, *args: Any, **kwargs: Any) -> list[Task]:
        self._trip("wait_and_pop")
        return await super().wait_and_pop(timeout, *args, **kwargs)

    async def register_worker(self, info: WorkerInfo, ttl_seconds: float) -> int:
        self._trip("register_worker")
        return await super().register_worker(info, ttl_seconds)


class Sleeper:
    """Handlers ``sleep`` and ``sleep_h`` (timeout 0.25 s): sleep ``payload`` seconds, counting."""

    def __init__(self) -> None:
        self.registry = Registry()
        self.started = self.running = self.peak = self.cancelled = 0
        self.registry.register(self.sleep, name="sleep")
        self.registry.register(self.sleep, name="sleep_h", timeout=0.25)

    async def sleep(self, payload: float) -> float:
        self.started += 1
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(payload)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.running -= 1
        return payload
