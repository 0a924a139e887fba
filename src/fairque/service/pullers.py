"""HTTP pull workers in the worker registry, as Python workers are.

A pull worker names itself in each lease request (``worker_id``, its own choice). The
server registers it in the queue's worker registry and refreshes the registration on
its lease, extend and outcome calls, so ``GET /workers``, ``fairque status``, the
Workers page and ``fairque_workers_alive`` list it beside the Python workers. The
registration expires like theirs when the worker falls silent (``ttl``), with no call to
leave.

What the registration says is what this server saw: the tasks it leased to the worker
and holds until an outcome or the lease's end (``in_flight``), the outcomes recorded
(``processed``, ``failed``), the last lease request's ``max_tasks`` (``concurrency``)
and the client's address (``host``). A worker whose calls are spread over several
server processes is registered by each with its own figures; the last refresh shows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from fairque.client.aio import AsyncFairQueue
from fairque.models import Task, WorkerInfo

#: at most one registry write per worker this often (seconds; a new worker's first call
#: writes at once): a busy pull worker costs one write per 5 s, not one per lease
REFRESH_SECONDS = 5.0
#: pull workers remembered per server at most (the least recently seen is dropped)
MAX_WORKERS = 10_000


@dataclass
class Puller:
    """One pull worker as this server saw it."""

    worker_id: str
    queue: str
    host: str
    started_at: datetime
    concurrency: int = 1
    assigned_users: list[str] = field(default_factory=list)
    steal_targets: list[str] = field(default_factory=list)
    #: the task names it leases (empty: any)
    names: list[str] = field(default_factory=list)
    #: task id -> lease deadline (monotonic seconds) of the tasks it holds
    held: dict[str, float] = field(default_factory=dict)
    processed: int = 0
    failed: int = 0
    seen: float = 0.0
    written: float = float("-inf")
    ttl: float = 60.0

    def info(self) -> WorkerInfo:
        return WorkerInfo(
            worker_id=self.worker_id, queue=self.queue, host=self.host, pid=0,
            started_at=self.started_at, concurrency=self.concurrency,
            in_flight=len(self.held), processed=self.processed, failed=self.failed,
            assigned_users=self.assigned_users, steal_targets=self.steal_targets, kind="http",
            names=self.names,
        )  # fmt: skip


class Pullers:
    """The pull workers of one server, by queue and worker id."""

    def __init__(self, ttl_seconds: float) -> None:
        self.ttl = ttl_seconds
        self._workers: dict[tuple[str, str], Puller] = {}
        #: (queue, task id) -> the worker this server leased it to
        self._holders: dict[tuple[str, str], Puller] = {}

    async def leased(
        self,
        q: AsyncFairQueue,
        worker_id: str,
        host: str,
        concurrency: int,
        assigned_users: list[str] | None,
        steal_targets: list[str] | None,
        lease_seconds: float,
        wait_seconds: float,
        tasks: list[Task],
        *,
        names: list[str] | None = None,
    ) -> None:
        """A lease request of ``worker_id`` (for ``names``: None, any) was answered with
        ``tasks``."""
        now = time.monotonic()
        key = (q.queue, worker_id)
        p = self._workers.pop(key, None)
        if p is None:
            p = Puller(worker_id, q.queue, host, datetime.now(timezone.utc))
            if len(self._workers) >= MAX_WORKERS:
                self._forget(next(iter(self._workers.values())))
        self._workers[key] = p  # the most recently seen last
        p.host, p.concurrency, p.seen = host, concurrency, now
        p.assigned_users, p.steal_targets = list(assigned_users or []), list(steal_targets or [])
        p.names = list(names or [])
        # silent between calls for its wait, or for a task's run (extend keeps it alive)
        p.ttl = max(self.ttl, wait_seconds + lease_seconds + REFRESH_SECONDS)
        for task in tasks:
            p.held[task.task_id or ""] = now + lease_seconds
            self._holders[(q.queue, task.task_id or "")] = p
        await self._refresh(q, p, now)

    async def extended(self, q: AsyncFairQueue, task_id: str, seconds: float) -> None:
        """The lease of ``task_id`` was extended by ``seconds`` (a heartbeat)."""
        p = self._holders.get((q.queue, task_id))
        if p is None or task_id not in p.held:
            return
        now = time.monotonic()
        p.held[task_id] = now + seconds
        self._touch(p, now)
        await self._refresh(q, p, now)

    async def ended(self, q: AsyncFairQueue, task_id: str, failed: bool | None) -> None:
        """An outcome of ``task_id`` was recorded (``failed`` says which), or refused
        (None: the lease was gone; the task is no longer held and counts nowhere)."""
        p = self._holders.pop((q.queue, task_id), None)
        if p is None:
            return
        if p.held.pop(task_id, None) is not None and failed is not None:
            if failed:
                p.failed += 1
            else:
                p.processed += 1
        now = time.monotonic()
        self._touch(p, now)
        await self._refresh(q, p, now)

    def _touch(self, p: Puller, now: float) -> None:
        """``p`` was seen now: it moves to the end of the sweep's order."""
        p.seen = now
        self._workers[(p.queue, p.worker_id)] = self._workers.pop((p.queue, p.worker_id), p)

    async def _refresh(self, q: AsyncFairQueue, p: Puller, now: float) -> None:
        """Write ``p``'s registration when it is due; counted from the leases it holds
        (one whose lease ended without an outcome is no longer held)."""
        for task_id in [t for t, deadline in p.held.items() if deadline <= now]:
            del p.held[task_id]
            if self._holders.get((p.queue, task_id)) is p:
                del self._holders[(p.queue, task_id)]
        if now - p.written >= REFRESH_SECONDS:  # a new worker's first call writes at once
            p.written = now
            await q.register_worker(p.info(), ttl_seconds=p.ttl)
        self._sweep(now)

    def _sweep(self, now: float) -> None:
        """Forget the workers silent past their registration (oldest first)."""
        while self._workers:
            oldest = next(iter(self._workers.values()))
            if now - oldest.seen <= oldest.ttl:
                return
            self._forget(oldest)

    def _forget(self, p: Puller) -> None:
        self._workers.pop((p.queue, p.worker_id), None)
        for task_id in p.held:
            if self._holders.get((p.queue, task_id)) is p:
                del self._holders[(p.queue, task_id)]
