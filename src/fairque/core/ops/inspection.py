"""Builders of the reading calls: task listings, stats, workers, and the bounded reads
of lanes, ring, leases and buckets that the dashboard and ``/metrics`` show.

Everything an upper floor (dashboard, ``/metrics``, the CLI, the HTTP listing) reads
of a queue is built here or in ``fairque.core.ops.plain``, over the key table.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from fairque.core.checks import MAX_SCAN, MAX_TASK_ID, MAX_USER_ID, check_identifier
from fairque.core.checks import check_int as _check_int
from fairque.core.ops.base import OperationsBase
from fairque.core.ops.plain import histogram_from
from fairque.core.records import Call
from fairque.core.taskhash import hash_items, ms_to_dt, raw, text
from fairque.errors import ValidationError
from fairque.memory import MemoryReport, NodeMemory
from fairque.models import (
    Priority,
    QueueStats,
    StartedTask,
    Task,
    TaskPage,
    TaskState,
    TenantReport,
    TenantService,
    UserLoad,
    UserStats,
    WorkerInfo,
)

#: most tasks one ``list_tasks`` page holds
MAX_PAGE = 500
#: index entries one filtered ``list_tasks`` page examines at most
LIST_SCAN = 1000
_WALKS = frozenset("sunr")

#: stats.lua counts the registries in the order TaskState defines them
_STATE_ORDER = tuple(TaskState)


def make_cursor(walk: str, score: Any, task_id: str) -> str:
    """The opaque cursor of a ``list_tasks`` page: its walk, score and last id."""
    raw_cursor = f"{walk}\n{int(float(text(score)))}\n{task_id}".encode()
    return base64.urlsafe_b64encode(raw_cursor).decode().rstrip("=")


def read_cursor(cursor: str) -> tuple[str, int, str]:
    """The (walk, score, task id) in a cursor ``make_cursor`` made.

    Raises:
        ValidationError: ``cursor`` is not one.
    """
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        walk, score, task_id = base64.urlsafe_b64decode(padded).decode().split("\n", 2)
        if walk not in _WALKS or not task_id:
            raise ValueError(walk)
        return walk, int(score), task_id
    except (ValueError, TypeError):
        raise ValidationError("cursor: not a cursor list_tasks returned") from None


class InspectionOperations(OperationsBase):
    """Reads of a queue's registries and counters."""

    def list_tasks(
        self,
        state: TaskState | str | None,
        user_id: str | None,
        name: str | None,
        limit: int,
        cursor: str | None,
    ) -> Call[TaskPage]:
        """One page of tasks, newest first (see ``lua/list_tasks.lua`` for the order)."""
        if state is not None:
            try:
                state = TaskState(state.upper() if isinstance(state, str) else state)
            except ValueError:
                choices = ", ".join(s.value for s in TaskState)
                raise ValidationError(f"state must be one of {choices}, got {state!r}") from None
        if user_id is not None:
            check_identifier(user_id, "user_id", MAX_USER_ID)
        if name is not None:
            check_identifier(name, "name", MAX_TASK_ID)
        if state is None and user_id is None and name is None:
            raise ValidationError("list_tasks needs a state, a user_id or a name")
        _check_int(limit, "limit", 1, MAX_PAGE)
        walk, score, after = read_cursor(cursor) if cursor else ("", 0, "")
        codec = self.codec

        def parse(reply: list[Any]) -> TaskPage:
            tasks, next_walk, next_score, next_id = reply
            nxt = text(next_walk)
            return TaskPage(
                tasks=[codec.task_from_hash(flat) for flat in tasks],
                next_cursor=make_cursor(nxt, next_score, text(next_id)) if nxt else None,
            )

        args = [
            state.value if state is not None else "", user_id or "", name or "", limit,
            LIST_SCAN, walk, score, after,
        ]  # fmt: skip
        return self._call("list_tasks", args, parse)

    def workers(self) -> Call[list[WorkerInfo]]:
        """The registered workers, with the age of their last heartbeat."""

        def parse(reply: list[Any]) -> list[WorkerInfo]:
            out = []
            for i in range(0, len(reply), 2):
                info = WorkerInfo.model_validate_json(reply[i])
                out.append(info.model_copy(update={"last_seen_seconds": int(reply[i + 1]) / 1000}))
            return out

        return self._call("workers", [], parse)

    def tenants(self, limit: int) -> Call[TenantReport]:
        """What the ``limit`` most recently leased users were served, and the rest."""
        _check_int(limit, "limit", 1, MAX_SCAN)

        def parse(reply: list[Any]) -> TenantReport:
            mode, known, totals = reply[0], reply[1], _int_fields(reply[2])
            named = [
                _tenant(
                    text(reply[i]), int(reply[i + 1]), reply[i + 2], _int_fields(reply[i + 3])
                ).model_copy(update={"backlog": int(reply[i + 4]), **_limits(reply[i + 3])})
                for i in range(3, len(reply), 5)
            ]
            whole = _tenant("", 1, None, {
                "wait_ms:sum": totals.get("wait_ms:sum", 0),
                **{k: v for k, v in totals.items() if k.startswith("wait_ms:")},
                "done": totals.get("completed", 0),
                "failed": totals.get("failed_attempts", 0),
                "busy_us": totals.get("busy_us", 0),
            })  # fmt: skip
            return TenantReport(
                queue=self.queue,
                fairness="count" if text(mode) == "count" else "time",
                tenants=named,
                others=_rest(whole, named),
                users_known=int(known),
                busy_seconds=whole.busy_seconds,
            )

        return self._call("tenants", [limit], parse)

    def stats(self, user_limit: int) -> Call[QueueStats]:
        """A snapshot of counts, counters and per-user load."""
        _check_int(user_limit, "user_limit", 0, MAX_SCAN)

        def parse(reply: list[Any]) -> QueueStats:
            counts, counters, users, active, capped, mode = reply
            return QueueStats(
                queue=self.queue,
                counts={s: int(c) for s, c in zip(_STATE_ORDER, counts, strict=True)},
                # the histograms' buckets ('<name>:<bucket>') are metrics()'s business
                counters={
                    text(counters[i]): int(counters[i + 1])
                    for i in range(0, len(counters), 2)
                    if b":" not in raw(counters[i])
                },
                users=[
                    UserStats(
                        user_id=text(users[i]),
                        ready=int(users[i + 1]),
                        in_flight=int(users[i + 2]),
                        weight=int(users[i + 3]),
                        max_in_flight=int(users[i + 4]) or None,
                    )
                    for i in range(0, len(users), 5)
                ],
                active_users=int(active),
                capped_users=int(capped),
                fairness="count" if text(mode) == "count" else "time",
            )

        args = [max(user_limit, 1), self.options.ordering, self._horizon_us]
        return self._call("stats", args, parse)

    # bounded reads of plain commands (the dashboard, /metrics, the CLI) ----------------
    def server_time(self) -> Call[int]:
        """The server's clock in ms (the clock the scripts use)."""
        return Call(None, (), ("TIME",), _time_ms)

    def server_memory(self) -> Call[str | None]:
        """The server's used memory as it reports it (``12.5M``; a cluster: per node)."""
        return Call(None, (), ("INFO", "memory"), _memory)

    def memory_report(self) -> Call[MemoryReport]:
        """The server's memory, limit and eviction policy (each node of a cluster)."""
        return Call(None, (), ("INFO", "memory"), _memory_report)

    def recent_heads(self, sample: int) -> tuple[Call[list[str]], ...]:
        """The newest ``sample`` FINISHED entries, and a quarter as many FAILED and
        running ones (the registries of ended tasks are scored by expiry, so with one
        result TTL the newest entries ended last)."""
        _check_int(sample, "sample", 4, MAX_SCAN * 10)
        keys = self.keys
        return (
            Call(None, (keys.finished,), ("ZRANGE", 0, sample - 1, "REV"), _texts),
            Call(None, (keys.failed,), ("ZRANGE", 0, sample // 4 - 1, "REV"), _texts),
            Call(None, (keys.leases,), ("ZRANGE", 0, sample // 4 - 1, "REV"), _texts),
        )

    def started_task(self, task_id: str) -> Call[StartedTask | None]:
        """One task's times, if it has started (None: gone, or never started)."""

        def parse(row: Any) -> StartedTask | None:
            if not row or row[0] is None:
                return None
            user, name, state, created, run_at, started, ended = row
            start = _number(started)
            if start is None:
                return None
            since = max(_number(created) or 0, _number(run_at) or 0)
            return StartedTask(
                task_id, text(user), text(name), text(state), since, start, _number(ended)
            )

        fields = ("user", "name", "state", "created", "run_at", "started", "ended")
        return Call(None, (self.keys.task(task_id),), ("HMGET", *fields), parse)

    def ring_page(self, offset: int, limit: int) -> tuple[Call[list[str]], Call[int]]:
        """Up to ``limit`` users of the ring from rank ``offset`` (least recently served
        first), and the ring's size."""
        _check_int(offset, "offset", 0, 2**53)
        _check_int(limit, "limit", 1, MAX_SCAN * 10)
        ring = self.keys.ring
        return (
            Call(None, (ring,), ("ZRANGE", offset, offset + limit - 1), _texts),
            self.ring_size(),
        )

    def ring_size(self) -> Call[int]:
        """Users with ready work in the ring."""
        return Call(None, (self.keys.ring,), ("ZCARD",), _int)

    def capped_sample(self, limit: int) -> Call[list[str]]:
        """Up to ``limit`` users held out of the ring by their cap (any of them)."""
        _check_int(limit, "limit", 1, MAX_SCAN * 10)
        return Call(None, (self.keys.capped,), ("SRANDMEMBER", limit), _texts)

    def lane_lengths(self, user_id: str) -> tuple[Call[int], Call[int]]:
        """The lengths of a user's critical and normal lanes."""
        keys = self.keys
        return (
            Call(None, (keys.critical(user_id),), ("LLEN",), _int),
            Call(None, (keys.normal(user_id),), ("ZCARD",), _int),
        )

    def user_load(self, user_id: str, now_ms: int) -> tuple[Call[Any], ...]:
        """What ``UserLoad`` shows of a user (``load_from`` reads the answers), and the
        heads of its lanes (ids; their push times give its oldest waiting task)."""
        keys = self.keys
        return (
            *self.lane_lengths(user_id),
            Call(None, (keys.held(user_id),), ("ZCOUNT", f"({now_ms}", "+inf"), _int),
            Call(None, (keys.weights,), ("HGET", user_id), _number),
            Call(None, (keys.caps,), ("HGET", user_id), _number),
            Call(None, (keys.ring,), ("ZRANK", user_id), _number),
            Call(None, (keys.capped,), ("SISMEMBER", user_id), bool),
            Call(None, (keys.backlog,), ("HGET", user_id), _number),
            Call(None, (keys.quotas,), ("HGET", user_id), _number),
            Call(None, (keys.backlog,), ("HGET", f"{user_id}\0b"), _number),
            Call(None, (keys.quotas,), ("HGET", f"{user_id}\0b"), _number),
            Call(None, (keys.critical(user_id),), ("LRANGE", 0, 0), _texts),
            # ordered by virtual arrival, at most the aging horizon from push time
            Call(None, (keys.normal(user_id),), ("ZRANGE", 0, 4), _texts),
        )

    @staticmethod
    def load_from(user_id: str, answers: Sequence[Any], oldest_ms: int | None) -> UserLoad:
        """The ``UserLoad`` of ``user_load``'s answers."""
        critical, normal, in_flight, weight, cap, rank, capped, queued, quota = answers[:9]
        held, max_bytes = answers[9:11]
        return UserLoad(
            user_id, critical, normal, in_flight, weight or 1, cap or None, rank, capped,
            oldest_ms, queued or 0, quota or None, held or 0, max_bytes or None,
        )  # fmt: skip

    def created_ms(self, task_id: str) -> Call[int | None]:
        """A task's push time (ms; None: gone)."""
        return Call(None, (self.keys.task(task_id),), ("HGET", "created"), _number)

    def weights_size(self) -> Call[int]:
        """Users with a weight set."""
        return Call(None, (self.keys.weights,), ("HLEN",), _int)

    def all_weights(self) -> Call[dict[str, int]]:
        """Every weight set, by user."""

        def parse(reply: Any) -> dict[str, int]:
            return {text(u): _number(w) or 1 for u, w in hash_items(reply)}

        return Call(None, (self.keys.weights,), ("HGETALL",), parse)

    def weights_of(self, users: Sequence[str]) -> Call[list[int]]:
        """The weights of ``users`` (1 when unset)."""

        def parse(reply: Any) -> list[int]:
            return [_number(w) or 1 for w in reply or [None] * len(users)]

        return Call(None, (self.keys.weights,), ("HMGET", *users), parse)

    def oldest_queued(self) -> Call[int | None]:
        """Push time (ms) of the task QUEUED longest (None: nothing is)."""

        def parse(reply: Any) -> int | None:
            found = reply or []
            if found and isinstance(found[0], (list, tuple)):  # RESP3: [[member, score]]
                found = found[0]
            return int(float(found[1])) if len(found) >= 2 else None

        return Call(None, (self.keys.queued,), ("ZRANGE", 0, 0, "WITHSCORES"), parse)

    def task_links(self, task_id: str) -> tuple[Call[list[str]], Call[list[str]]]:
        """The tasks that ``task_id`` blocks, and those it still waits for."""
        self._check_id(task_id)
        keys = self.keys
        return (
            Call(None, (keys.deps_blocked(task_id),), ("SMEMBERS",), _sorted_texts),
            Call(None, (keys.deps_waiting(task_id),), ("SMEMBERS",), _sorted_texts),
        )

    def lane_place(self, task: Task) -> tuple[Call[Any], ...]:
        """A QUEUED task's place in its lane, its user's critical lane length, its
        user's rank in the ring and the ring's size."""
        keys, user = self.keys, task.user_id
        place = (
            Call(None, (keys.critical(user),), ("LPOS", task.task_id), _number)
            if task.priority is Priority.CRITICAL
            else Call(None, (keys.normal(user),), ("ZRANK", task.task_id), _number)
        )
        return (
            place,
            Call(None, (keys.critical(user),), ("LLEN",), _int),
            Call(None, (keys.ring,), ("ZRANK", user), _number),
            self.ring_size(),
        )

    def task_buckets(self, task_id: str) -> Call[tuple[list[str], str | None, bool]]:
        """The constraint buckets a task counts in, the one it is parked in, and whether
        it is set aside instead (the workers that leased it do not handle its name)."""

        def parse(reply: Any) -> tuple[list[str], str | None, bool]:
            cons, parked = reply
            try:
                buckets = [str(b) for b in json.loads(cons)] if cons else []
            except (ValueError, TypeError):
                buckets = []
            where = text(parked) if parked else None
            if where is not None and where.startswith("~"):  # set_aside.lua's bucket
                return buckets, None, True
            return buckets, where, False

        return Call(None, (self.keys.task(task_id),), ("HMGET", "cons", "parked"), parse)

    def bucket_use(self, bucket: str, now_ms: int) -> tuple[Call[int], Call[float | None]]:
        """A bucket's unexpired leases, and when its limit frees (ms; None: not held)."""
        keys = self.keys
        return (
            Call(None, (keys.constraint_held(bucket),), ("ZCOUNT", f"({now_ms}", "+inf"), _int),
            Call(None, (keys.constraint_due,), ("ZSCORE", bucket), _float),
        )


def _texts(reply: Any) -> list[str]:
    return [text(v) for v in reply or ()]


def _sorted_texts(reply: Any) -> list[str]:
    return sorted(_texts(reply))


def _int(reply: Any) -> int:
    return int(reply or 0)


def _number(value: Any) -> int | None:
    """A reply value as an int (None when missing or not a number)."""
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _time_ms(reply: Any) -> int:
    if isinstance(reply, dict):  # a cluster client may answer per node
        reply = next(iter(reply.values()))
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


def _per_node(info: Any) -> list[tuple[str, dict[str, Any]]]:
    """An ``INFO memory`` reply as (node, fields) pairs: a cluster answers per node, a
    standalone server once (node ``""``)."""
    if info and all(isinstance(v, dict) for v in info.values()):
        return [(text(k), v) for k, v in info.items()]
    return [("", info or {})]


def _memory_report(info: Any) -> MemoryReport:
    nodes = _per_node(info)
    return MemoryReport(
        tuple(
            NodeMemory(
                node=name,
                used_bytes=int(fields.get("used_memory", 0)),
                max_bytes=int(fields.get("maxmemory", 0)),
                policy=str(fields.get("maxmemory_policy", "noeviction")),
            )
            for name, fields in nodes
        )
    )


def _memory(info: Any) -> str | None:
    parts = [fields.get("used_memory_human") for _, fields in _per_node(info)]
    return " + ".join(str(p) for p in parts if p) or None


#: the tenant hash's fields that are not counts (``QueueKeys.tenant``)
_TENANT_TEXT = frozenset({"group", "share", "counted"})


def _int_fields(flat: Any) -> dict[str, int]:
    """A flat HGETALL reply's integer fields (an estimate's decimals are dropped; the
    tenant hash's text fields are left out)."""
    items = ((text(k), v) for k, v in hash_items(flat))
    return {k: int(float(v)) for k, v in items if k not in _TENANT_TEXT}


def _limits(flat: Any) -> dict[str, Any]:
    """A tenant hash's group and share (``TenantService`` fields), as far as it has them."""
    fields = {text(k): text(v) for k, v in hash_items(flat) if text(k) in ("group", "share")}
    out: dict[str, Any] = {}
    if "group" in fields:
        out["group"] = fields["group"]
    if "share" in fields:
        floor, ceiling = (float(x) for x in fields["share"].split())
        out["floor"], out["ceiling"] = floor or None, (ceiling if ceiling < 1 else None)
    return out


def _tenant(user: str, weight: int, last: Any, fields: dict[str, int]) -> TenantService:
    wait = histogram_from(fields, "wait_ms")
    return TenantService(
        user_id=user,
        weight=weight,
        last_lease=None if last is None else ms_to_dt(int(float(last))),
        started=wait.count,
        finished=fields.get("done", 0),
        failed=fields.get("failed", 0),
        busy_seconds=fields.get("busy_us", 0) / 1_000_000,
        wait_time=wait,
    )


def _rest(whole: TenantService, named: Sequence[TenantService]) -> TenantService:
    """The queue's totals less the named users' (never below zero: a user's counts that
    expired or were purged are still in the totals)."""
    counts = [
        max(0, total - sum(t.wait_time.counts[i] for t in named))
        for i, total in enumerate(whole.wait_time.counts)
    ]
    wait = whole.wait_time.model_copy(
        update={
            "counts": counts,
            "count": sum(counts),
            "sum": max(0.0, whole.wait_time.sum - sum(t.wait_time.sum for t in named)),
        }
    )
    return TenantService(
        user_id="",
        started=wait.count,
        finished=max(0, whole.finished - sum(t.finished for t in named)),
        failed=max(0, whole.failed - sum(t.failed for t in named)),
        busy_seconds=max(0.0, whole.busy_seconds - sum(t.busy_seconds for t in named)),
        wait_time=wait,
    )
