"""What a process counts of its own calls, flushed into the queue's metrics.

The scripts keep what the queue promises (charges, quotas, caps, backlogs, leases); the
observability counters and histograms of the hot path are counted here, by the process
that leased, completed, failed or gave back the tasks, and added to the server at most
once a second in one ``flush_metrics`` call: the stats hash's ``popped``,
``completed``, ``busy_us`` and ``failed_attempts``, its ``wait_ms`` and ``run_ms``
histograms, and the same per tenant (``busy_us``, ``done``, ``failed``, ``wait_ms``).

A flush is numbered (``Tally.process``, ``seq``): a resent flush adds nothing, and a
flush whose reply was lost is sent again with its number until one answers, while the
counts made meanwhile wait for the next. A process killed without a flush loses what it
counted since its last one (at most about a second of work). The counts of one request
answered twice (a lease resent with its request id, a completion resent with its
lease) are counted once. A tally is not locked: a blocking client shared by threads
may lose a count when two of them count at once (metrics, not promises).
"""

from __future__ import annotations

import math
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fairque.core.histogram import HISTOGRAM_BOUNDS_SECONDS, HISTOGRAM_STEPS_PER_DOUBLING
from fairque.models import Task

#: seconds between two flushes of one client (at most; ``QueueBase._flush_due``)
FLUSH_EVERY = 1.0
#: requests remembered so that one answered twice is counted once
REMEMBERED = 4096
#: leases remembered (owner, start) for the attempts ended by their id and token alone
LEASES_KEPT = 65_536

_NB = len(HISTOGRAM_BOUNDS_SECONDS)
_STEPS = HISTOGRAM_STEPS_PER_DOUBLING / math.log(2)


def bucket_of(ms: float) -> int:
    """The histogram bucket (1-based, as the stats hash names it) of ``ms``: 1 up to
    1 ms, i for values above 2^((i-2)/4) ms and up to 2^((i-1)/4) ms, the last (NB + 1)
    above 2^22 ms. A value on a bound is in the bucket it closes."""
    if ms <= 1:
        return 1
    return min(math.ceil(math.log(ms) * _STEPS - 1e-9) + 1, _NB + 1)


def waited(flat: Sequence[Any] | Mapping[Any, Any]) -> float:
    """A leased task's 'waited' field (ms) in its HGETALL reply, 0 when absent."""
    if not isinstance(flat, list):
        found = dict(flat)
        value = found.get(b"waited", found.get("waited"))
    else:
        value = None
        for key in (b"waited", "waited"):
            try:
                at = flat.index(key)
                while at % 2:  # a value that reads 'waited', not the field
                    at = flat.index(key, at + 1)
            except ValueError:
                continue
            value = flat[at + 1]
            break
    try:
        return float(value) if value is not None else 0.0
    except (TypeError, ValueError):
        return 0.0


class Tally:
    """One partition's counts in one process, and its numbered flushes."""

    def __init__(self) -> None:
        #: this process's flush id (one per client partition)
        self.process = uuid.uuid4().hex[:16]
        self._seq = 0
        self._queue: dict[str, float] = {}
        self._tenants: dict[str, dict[str, float]] = {}
        self._sending: tuple[int, list[Any]] | None = None
        self._seen: OrderedDict[str, None] = OrderedDict()
        #: (task id, lease token) -> (owner, lease start) of what this process leased
        self._leases: OrderedDict[tuple[str | None, str | None], tuple[str, float]] = OrderedDict()

    def _first(self, request: str) -> bool:
        """Whether ``request`` is counted for the first time (and remember it)."""
        seen = self._seen
        if request in seen:
            return False
        seen[request] = None
        if len(seen) > REMEMBERED:
            seen.popitem(last=False)
        return True

    def _count(self, user: str | None, field: str, n: float) -> None:
        """Add ``n`` to ``field`` of the queue and of ``user`` (None: the queue alone)."""
        self._queue[field] = self._queue.get(field, 0) + n
        if user is not None:
            mine = self._tenants.setdefault(user, {})
            mine[field] = mine.get(field, 0) + n

    def leased(self, tasks: Iterable[Task], waits: Sequence[float], request: str) -> None:
        """Count a lease request's tasks and how long each waited (``waits``, ms, in
        the order of the tasks; a task past its end has no wait counted)."""
        if not self._first("L" + request):
            return
        n, kept = 0, self._leases
        for n, task in enumerate(tasks, 1):
            if n <= len(waits):
                ms = max(waits[n - 1], 0.0)
                self._count(task.user_id, f"wait_ms:{bucket_of(ms)}", 1)
                self._count(task.user_id, "wait_ms:sum", ms)
            started = task.started_at
            kept[task.task_id, task.lease_token] = (
                task.user_id,
                time.time() if started is None else started.timestamp(),
            )
        while len(kept) > LEASES_KEPT:
            kept.popitem(last=False)
        if n:
            self._queue["popped"] = self._queue.get("popped", 0) + n

    def ended(self, task: Task, outcome: str | None) -> None:
        """Count an attempt this process ended: ``outcome`` 'done', 'failed' or None
        (given back). Its run is the handler's as the worker measured it, never more
        than the time since the lease started (this process's clock against the
        server's start), which is the run when none was measured. A task named by its
        id and lease token alone (no lease start: an HTTP worker's outcome) is counted
        for its owner when this process leased it, else for the queue alone."""
        if not self._first(f"E{task.task_id} {task.lease_token}"):
            return
        known = self._leases.pop((task.task_id, task.lease_token), None)
        run, started = task.run_seconds, task.started_at
        user: str | None = task.user_id
        if started is not None:
            since = started.timestamp()
        elif known is not None:
            user, since = known
        else:
            user, since = None, None
        if since is not None:
            seen = time.time() - since
            run = seen if run is None else min(run, seen)
        ms = max(run or 0.0, 0.0) * 1000
        self._count(user, "busy_us", round(ms * 1000))
        if outcome is None:
            return
        field = "completed" if outcome == "done" else "failed_attempts"
        self._queue[field] = self._queue.get(field, 0) + 1
        if user is not None:
            mine = self._tenants.setdefault(user, {})
            mine[outcome] = mine.get(outcome, 0) + 1
        self._count(user, f"run_ms:{bucket_of(ms)}", 1)
        self._count(user, "run_ms:sum", ms)

    def pending(self) -> bool:
        """Whether there are counts to flush (or a flush to send again)."""
        return bool(self._queue or self._tenants or self._sending)

    def take(self) -> list[Any] | None:
        """``flush_metrics``'s ARGV for the next flush (the one in flight again when its
        reply was lost), or None when there is nothing to send."""
        if self._sending is not None:
            return self._sending[1]
        if not (self._queue or self._tenants):
            return None
        self._seq += 1
        args: list[Any] = [self.process, self._seq]
        _fields(args, self._queue)
        for user, fields in self._tenants.items():
            args.append(user)
            _fields(args, fields)
        self._queue, self._tenants = {}, {}
        self._sending = (self._seq, args)
        return args

    def sent(self) -> None:
        """The flush in flight was added (or found added): the next one is new."""
        self._sending = None


def _fields(args: list[Any], fields: dict[str, float]) -> None:
    """Append the count of ``fields`` with an increment, then those (field, increment)."""
    pairs = [(name, round(value)) for name, value in fields.items()]
    pairs = [(name, value) for name, value in pairs if value]
    args.append(len(pairs))
    for name, value in pairs:
        args.extend((name, value))
