"""The administration methods of ``FairQueue`` and ``AsyncFairQueue``: worker
registrations, per-user limits, stats and metrics, maintenance and purge.

Both clients inherit them from here; each method only sends the call that
``fairque.core.ops`` builds (the parity test holds the two to the same signatures).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from fairque.client.shardlayout import layout_flow, resize_flow
from fairque.models import Fairness, QueueMetrics, QueueStats, TenantReport, WorkerInfo

if TYPE_CHECKING:
    from fairque.client.base import Flow
    from fairque.core.ops import Operations
    from fairque.core.ops.shards import Layout
    from fairque.core.records import Call

T = TypeVar("T")


class AdminMethods:
    """Administration on the blocking client."""

    ops: Operations

    if TYPE_CHECKING:

        def _run(self, call: Call[T]) -> T: ...

        def _drive(self, flow: Flow[T]) -> T: ...

        def _purge_flow(self, batch: int) -> Flow[int]: ...

        def _list(self) -> None: ...

        def _adopt_layout(self, layout: Layout) -> None: ...

    def queues(self) -> list[str]:
        """Every queue the server's registry names, sorted: each queue a client pushed
        to or a worker served (named again within a minute after a purge elsewhere),
        until it is purged."""
        return self._run(self.ops.known_queues())

    def maintain(self, batch: int = 1000) -> int:
        """Housekeeping, bounded by ``batch`` per registry: drop expired ids from the
        FINISHED/FAILED/CANCELED registries and expired worker registrations.

        Tasks pushed one at a time and not yet placed in their lanes are placed first
        (up to 500), as a lease call does. Workers call this periodically; returns how
        many entries were removed.
        """
        return self._run(self.ops.maintain(batch))

    def place(self) -> int:
        """Place the tasks pushed one at a time now, up to 500.

        ``push`` of one plain task writes the task and one entry in the queue's intake;
        placing puts it into the QUEUED registry, its listing indexes and its user's
        lane, and the user into the ring. Every lease call places first, and the reads
        that need it (``list_tasks``, ``user_loads``, ``wait_place``...) place the whole
        intake themselves. Returns how many tasks were placed.
        """
        return self._run(self.ops.place())[0]

    def purge(self, batch: int = 1000) -> int:
        """Delete every task and all state of this queue; returns the tasks deleted."""
        return self._drive(self._purge_flow(batch))

    def register_worker(self, info: WorkerInfo, ttl_seconds: float) -> int:
        """Register or refresh a worker; forgets workers silent for ``ttl_seconds``."""
        self._list()
        return self._run(self.ops.register_worker(info, ttl_seconds))

    def unregister_worker(self, worker_id: str) -> bool:
        """Remove a worker's registration."""
        return self._run(self.ops.unregister_worker(worker_id))

    def workers(self) -> list[WorkerInfo]:
        """Registered workers with the age of their last heartbeat."""
        return self._run(self.ops.workers())

    def set_user_limits(
        self,
        user_id: str,
        *,
        weight: int | None = None,
        max_in_flight: int | None = None,
        max_queued: int | None = None,
    ) -> None:
        """Set the limits of ``user_id`` that are given; a limit left None stays as it is.

        Args:
            user_id: the tenant.
            weight: its share of worker time (time mode) or of turns (count mode), as a
                multiple of a user of weight 1; 1 resets it.
            max_in_flight: at most this many of its tasks leased at once, counted from
                unexpired leases; 0 removes the cap.
            max_queued: its backlog quota: a push that would take its tasks in QUEUED,
                SCHEDULED or DEFERRED past this raises ``QuotaExceeded``; 0 removes its
                own quota (the queue's ``max_queued_per_user`` applies again).

        Raises:
            ValidationError: a limit is out of range or not an integer.
        """
        self._run(self.ops.set_user_limits(user_id, weight, max_in_flight, max_queued))

    def set_fairness(self, mode: Fairness) -> Fairness:
        """Make the queue fair by worker time (``"time"``) or by turns (``"count"``).

        The mode is kept on the server, so every producer and worker of the queue
        follows it at once; the ring keeps its order across the change, and leases in
        flight finish under the new mode. Returns the mode the queue had.

        Raises:
            ValidationError: ``mode`` is neither ``"time"`` nor ``"count"``.
        """
        return self._run(self.ops.set_fairness(mode))

    def fairness(self) -> Fairness:
        """What the queue is fair by: ``"time"`` (the default) or ``"count"``."""
        return self._run(self.ops.fairness())

    def tenants(self, limit: int = 20) -> TenantReport:
        """What the ``limit`` most recently leased users were served (leases, outcomes,
        worker time, wait histogram), the rest summed, and the queue's worker time."""
        return self._run(self.ops.tenants(limit))

    def stats(self, user_limit: int = 100) -> QueueStats:
        """Counts per state, counters and the load of up to ``user_limit`` ready users."""
        return self._run(self.ops.stats(user_limit))

    def metrics(self) -> QueueMetrics:
        """Counters and wait/run-time histograms, kept by the scripts in each transition.

        One read of one hash; see ``QueueMetrics`` for what each figure counts and
        ``HISTOGRAM_BOUNDS_SECONDS`` for the buckets.
        """
        return self._run(self.ops.metrics())

    def xcom_push(self, key: str, value: Any, ttl: float = 86_400) -> None:
        """Share ``value`` under ``key`` for ``ttl`` seconds (tasks of a workflow)."""
        self._run(self.ops.xcom_push(key, value, ttl))

    def xcom_pull(self, key: str, default: Any = None) -> Any:
        """The value shared under ``key``, or ``default`` when absent or expired."""
        found, value = self._run(self.ops.xcom_pull(key))
        return value if found else default

    def resize(self, shards: int) -> int:
        """Place tenants on ``shards`` shards from now on (1..1024), while producers and
        workers run; returns the count before. Nothing moves: tasks stay in the shard
        they were pushed to, and workers drain shards past the new count (retired).
        Every client follows within ``LAYOUT_EVERY`` seconds (docs/howto/shards.md).

        Raises:
            ConfigError: ``shards`` is out of range.
        """
        before, layout = self._drive(resize_flow(self.ops, shards))
        self._adopt_layout(layout)
        return before

    def refresh_layout(self) -> int:
        """Read the queue's shard layout now, as clients do every ``LAYOUT_EVERY``
        seconds beside their calls: a client made as shard 0's (the constructor, or
        ``from_url`` while the server was down) serves every shard from then on.
        Returns how many shards tenants are placed on.
        """
        layout = self._drive(layout_flow(self, None))  # type: ignore[arg-type]
        self._adopt_layout(layout)
        return layout.count


class AsyncAdminMethods:
    """Administration on the asyncio client (documented on ``AdminMethods``)."""

    ops: Operations

    if TYPE_CHECKING:

        async def _run(self, call: Call[T]) -> T: ...

        async def _drive(self, flow: Flow[T]) -> T: ...

        def _purge_flow(self, batch: int) -> Flow[int]: ...

        async def _list(self) -> None: ...

        def _adopt_layout(self, layout: Layout) -> None: ...

    async def queues(self) -> list[str]:
        """See ``AdminMethods.queues``."""
        return await self._run(self.ops.known_queues())

    async def maintain(self, batch: int = 1000) -> int:
        """See ``AdminMethods.maintain``."""
        return await self._run(self.ops.maintain(batch))

    async def place(self) -> int:
        """See ``AdminMethods.place``."""
        return (await self._run(self.ops.place()))[0]

    async def purge(self, batch: int = 1000) -> int:
        """See ``AdminMethods.purge``."""
        return await self._drive(self._purge_flow(batch))

    async def register_worker(self, info: WorkerInfo, ttl_seconds: float) -> int:
        """See ``AdminMethods.register_worker``."""
        await self._list()
        return await self._run(self.ops.register_worker(info, ttl_seconds))

    async def unregister_worker(self, worker_id: str) -> bool:
        """See ``AdminMethods.unregister_worker``."""
        return await self._run(self.ops.unregister_worker(worker_id))

    async def workers(self) -> list[WorkerInfo]:
        """See ``AdminMethods.workers``."""
        return await self._run(self.ops.workers())

    async def set_user_limits(
        self,
        user_id: str,
        *,
        weight: int | None = None,
        max_in_flight: int | None = None,
        max_queued: int | None = None,
    ) -> None:
        """See ``AdminMethods.set_user_limits``."""
        await self._run(self.ops.set_user_limits(user_id, weight, max_in_flight, max_queued))

    async def set_fairness(self, mode: Fairness) -> Fairness:
        """See ``AdminMethods.set_fairness``."""
        return await self._run(self.ops.set_fairness(mode))

    async def fairness(self) -> Fairness:
        """See ``AdminMethods.fairness``."""
        return await self._run(self.ops.fairness())

    async def tenants(self, limit: int = 20) -> TenantReport:
        """See ``AdminMethods.tenants``."""
        return await self._run(self.ops.tenants(limit))

    async def stats(self, user_limit: int = 100) -> QueueStats:
        """See ``AdminMethods.stats``."""
        return await self._run(self.ops.stats(user_limit))

    async def metrics(self) -> QueueMetrics:
        """See ``AdminMethods.metrics``."""
        return await self._run(self.ops.metrics())

    async def xcom_push(self, key: str, value: Any, ttl: float = 86_400) -> None:
        """See ``AdminMethods.xcom_push``."""
        await self._run(self.ops.xcom_push(key, value, ttl))

    async def xcom_pull(self, key: str, default: Any = None) -> Any:
        """See ``AdminMethods.xcom_pull``."""
        found, value = await self._run(self.ops.xcom_pull(key))
        return value if found else default

    async def resize(self, shards: int) -> int:
        """See ``AdminMethods.resize``."""
        before, layout = await self._drive(resize_flow(self.ops, shards))
        self._adopt_layout(layout)
        return before

    async def refresh_layout(self) -> int:
        """See ``AdminMethods.refresh_layout``."""
        layout = await self._drive(layout_flow(self, None))  # type: ignore[arg-type]
        self._adopt_layout(layout)
        return layout.count
