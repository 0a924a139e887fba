"""The operations that are one plain Redis command, not a script.

Reading a task, blocking on a task's end or on ready work, waking idle workers and
XCom values need no transition, so no Lua: each is a single command on one key of
the queue, built here as a ``Call`` without a script. ``Operations`` (``fairque.core.ops``)
inherits these builders; everything that changes a task's state is a script there.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from fairque.core.checks import (
    DEFAULT_MAX_LEAD,
    check_stopped_worker,
    check_wait,
    check_xcom_key,
    dump_value,
)
from fairque.core.checks import check_int as _check_int
from fairque.core.checks import seconds_ms as _seconds_ms
from fairque.core.keys import QUEUE_REGISTRY
from fairque.core.ops.base import OperationsBase
from fairque.core.records import Call
from fairque.core.taskhash import text
from fairque.errors import PayloadTooLarge, ValidationError
from fairque.models import (
    HISTOGRAM_BOUNDS_SECONDS,
    Fairness,
    Histogram,
    QueueMetrics,
    Task,
)


class PlainOperations(OperationsBase):
    """Builders of the plain-command calls."""

    def fairness(self) -> Call[Fairness]:
        """What the queue is fair by (a plain HGET of its counters; absent: the default)."""

        def parse(reply: Any) -> Fairness:
            return "count" if reply is not None and text(reply) == "count" else "time"

        return Call(None, (self.keys.meta,), ("HGET", "fair"), parse)

    def max_lead(self) -> Call[float]:
        """How far (seconds of worker time over weight) a tenant may be ahead of the
        queue's floor in time mode (a plain HGET; absent: the default)."""

        def parse(reply: Any) -> float:
            return DEFAULT_MAX_LEAD if reply is None else int(reply) / 1e6

        return Call(None, (self.keys.meta,), ("HGET", "max_lead"), parse)

    def get(self, task_id: str) -> Call[Task | None]:
        """Read one task (a plain HGETALL)."""
        self._check_id(task_id)

        def parse(reply: Any) -> Task | None:
            return self.codec.task_from_hash(reply) if reply else None

        return Call(None, (self.keys.task(task_id),), ("HGETALL",), parse)

    def wait_done(self, task_id: str, timeout: float) -> Call[bool]:
        """Block until the task's ending script signals, or ``timeout`` seconds pass."""
        done = self.keys.done(task_id)
        wait = max(round(timeout, 3), 0.001)
        return Call(None, (done, done), ("BLMOVE", "RIGHT", "LEFT", wait), lambda r: r is not None)

    def xcom_push(self, key: str, value: Any, ttl: float) -> Call[None]:
        """Store a shared value under ``key`` for ``ttl`` seconds."""
        self._check_xcom_key(key)
        ttl_ms = _seconds_ms(ttl, "ttl")
        if ttl_ms <= 0:
            raise ValidationError("ttl must be positive")
        data = dump_value(self.serializer, value, "xcom value")
        if len(data) > self.options.max_payload_bytes:
            raise PayloadTooLarge(
                f"value is {len(data)} bytes; the limit is {self.options.max_payload_bytes}"
            )
        return Call(None, (self.keys.xcom(key),), ("SET", data, "PX", ttl_ms), lambda r: None)

    def xcom_pull(self, key: str) -> Call[tuple[bool, Any]]:
        """Read a shared value: (found, value)."""
        self._check_xcom_key(key)

        def parse(reply: Any) -> tuple[bool, Any]:
            if reply is None:
                return False, None
            return True, self.serializer.loads(
                reply if isinstance(reply, bytes) else reply.encode()
            )

        return Call(None, (self.keys.xcom(key),), ("GET",), parse)

    _check_xcom_key = staticmethod(check_xcom_key)

    def list_queue(self) -> Call[int]:
        """Name this queue in the server's registry of queues (``QUEUE_REGISTRY``)."""
        return Call(None, (QUEUE_REGISTRY,), ("SADD", self.keys.queue), int)

    def unlist_queue(self) -> Call[int]:
        """Take this queue out of the registry (after a purge)."""
        return Call(None, (QUEUE_REGISTRY,), ("SREM", self.keys.queue), int)

    def known_queues(self) -> Call[list[str]]:
        """Every queue the registry names, sorted."""
        return Call(None, (QUEUE_REGISTRY,), ("SMEMBERS",), lambda r: sorted(text(n) for n in r))

    def wait_for_work(self, timeout: float) -> Call[bool]:
        """Block until a push signals ready work or ``timeout`` seconds pass."""
        wait = blocking_seconds(timeout)
        return Call(None, (self.keys.wake,), ("BLPOP", wait), lambda r: r is not None)

    def wait_for_cancel(self, worker_id: str, timeout: float) -> Call[Stop | None]:
        """Block until a cancel takes a lease of ``worker_id`` away, or ``timeout``
        seconds pass: the task and the token of the lease it took (one per call)."""
        wait = blocking_seconds(timeout)
        return Call(None, (self.stops_key(worker_id),), ("BLPOP", wait), stop_of)

    def stops_key(self, worker_id: str) -> str:
        """The list cancels of ``worker_id``'s leases go to (``QueueKeys.stops``)."""
        return self.keys.stops(check_stopped_worker(worker_id))

    def wake(self, n: int) -> Call[int]:
        """Push ``n`` wake-up tokens, so up to ``n`` idle workers look at the queue again."""
        _check_int(n, "n", 1, 64)
        return Call(None, (self.keys.wake,), ("LPUSH", *("1" * n)), int)

    def metrics(self) -> Call[QueueMetrics]:
        """The counters and histograms the scripts keep (a plain HGETALL of ``stats``)."""
        queue = self.keys.queue

        def parse(reply: Any) -> QueueMetrics:
            items = (
                reply.items()
                if isinstance(reply, dict)
                else zip(reply[::2], reply[1::2], strict=True)
            )
            fields = {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in items}
            return QueueMetrics(
                queue=queue,
                pushed=fields.get("pushed", 0),
                popped=fields.get("popped", 0),
                finished=fields.get("completed", 0),
                failed=fields.get("failed", 0),
                canceled=fields.get("canceled", 0),
                retried=fields.get("retried", 0),
                reclaimed=fields.get("reclaimed", 0),
                lease_lost=fields.get("lease_lost", 0),
                requeued=fields.get("requeued", 0),
                schedule_fired=fields.get("schedule_fired", 0),
                schedule_skipped=fields.get("schedule_skipped", 0),
                wait_time=histogram_from(fields, "wait_ms"),
                run_time=histogram_from(fields, "run_ms"),
            )

        return Call(None, (self.keys.stats,), ("HGETALL",), parse)


def histogram_from(fields: dict[str, int], name: str) -> Histogram:
    """Histogram ``name`` from the stats hash (fields '<name>:<bucket>', 1-based, and
    '<name>:sum' in ms)."""
    counts = [fields.get(f"{name}:{i}", 0) for i in range(1, len(HISTOGRAM_BOUNDS_SECONDS) + 2)]
    return Histogram(counts=counts, sum=fields.get(f"{name}:sum", 0) / 1000, count=sum(counts))


class Stop(NamedTuple):
    """A lease a cancel took away: what ``wait_for_cancel`` answers."""

    task_id: str
    lease_token: str


def stop_of(reply: Any) -> Stop | None:
    """A BLPOP reply on a stop list (``[key, '<task id> <token>']``), or None."""
    if reply is None:
        return None
    task_id, _, token = text(reply[1]).partition(" ")
    return Stop(task_id, token)


def blocking_seconds(timeout: float) -> float:
    """A BLPOP timeout: millisecond resolution, and a short wait never rounded to 0
    (which would block forever)."""
    return max(round(check_wait(timeout), 3), 0.001)
