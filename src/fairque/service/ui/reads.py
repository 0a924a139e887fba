"""Bounded reads of one queue for the dashboard and ``/metrics``.

Everything here reads keys named by ``fairque.core.keys`` (the same registries and lanes the
scripts keep) and never writes. Every read is bounded: the recent-service sample by
``SAMPLE``, the user scan by ``SCAN_USERS`` per call (a rolling scan, see ``ranking``),
so a page costs the same with 100,000 users.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fairque.client.aio import AsyncFairQueue

#: most recently ended or started tasks read to measure recent service
SAMPLE = 1000
#: users with ready work examined to rank tenants by backlog (a pipelined command costs
#: the client some 30 us, so ranking all of 100,000 users would take seconds)
SCAN_USERS = 1000
#: commands per pipeline round trip
CHUNK = 2000


def text(value: Any) -> str:
    """A reply value as text."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def number(value: Any) -> int | None:
    """A reply value as an int (None when missing)."""
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


async def run(q: AsyncFairQueue, commands: Sequence[Sequence[Any]]) -> list[Any]:
    """Run read commands in pipelined round trips of ``CHUNK``; replies in order."""
    out: list[Any] = []
    for start in range(0, len(commands), CHUNK):
        pipe = q.client.pipeline(transaction=False)
        for command in commands[start : start + CHUNK]:
            pipe.execute_command(*command)
        out.extend(await pipe.execute(raise_on_error=False))
    return [None if isinstance(r, Exception) else r for r in out]


async def server_ms(q: AsyncFairQueue) -> int:
    """The server's clock in milliseconds (the clock the scripts use)."""
    reply: Any = await q.client.time()
    if isinstance(reply, dict):  # a cluster client answers per node
        reply = next(iter(reply.values()))
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


@dataclass(frozen=True)
class Served:
    """One task that started recently: who, what, when (ms), and how it ended."""

    task_id: str
    user_id: str
    name: str
    state: str
    waiting_since: int
    started: int
    ended: int | None

    @property
    def wait_seconds(self) -> float:
        return max(0, self.started - self.waiting_since) / 1000

    @property
    def run_seconds(self) -> float | None:
        return None if self.ended is None else max(0, self.ended - self.started) / 1000


_FIELDS = ("user", "name", "state", "created", "run_at", "started", "ended")


async def recent_service(q: AsyncFairQueue, sample: int = SAMPLE) -> list[Served]:
    """The tasks started most recently, from the newest registry entries.

    Reads the ``sample`` newest entries of the FINISHED and FAILED registries (scored by
    expiry, so with one result TTL the newest entries ended last) and the running tasks'
    leases, then each task's times. A task's wait runs from its push (or its due time
    when delayed) to its latest start.
    """
    keys = q.ops.keys
    heads = await run(
        q,
        [
            ("ZRANGE", keys.finished, 0, sample - 1, "REV"),
            ("ZRANGE", keys.failed, 0, sample // 4 - 1, "REV"),
            ("ZRANGE", keys.leases, 0, sample // 4 - 1, "REV"),
        ],
    )
    ids = list(dict.fromkeys(text(i) for reply in heads if reply for i in reply))
    rows = await run(q, [("HMGET", keys.task(i), *_FIELDS) for i in ids])
    out = []
    for task_id, row in zip(ids, rows, strict=True):
        if not row or row[0] is None:
            continue
        user, name, state, created, run_at, started, ended = row
        start = number(started)
        if start is None:
            continue
        since = max(number(created) or 0, number(run_at) or 0)
        out.append(
            Served(task_id, text(user), text(name), text(state), since, start, number(ended))
        )
    out.sort(key=lambda s: s.started, reverse=True)
    return out


@dataclass
class UserLoad:
    """One user's load now."""

    user_id: str
    critical: int = 0
    normal: int = 0
    in_flight: int = 0
    weight: int = 1
    cap: int | None = None
    ring_rank: int | None = None
    capped: bool = False
    oldest_ms: int | None = None

    @property
    def ready(self) -> int:
        return self.critical + self.normal


async def ring_users(
    q: AsyncFairQueue, limit: int | None = None, offset: int = 0
) -> tuple[list[str], int]:
    """Up to ``limit`` users of the ring from rank ``offset`` (least recently served
    first), and the ring's size."""
    keys = q.ops.keys
    limit = SCAN_USERS if limit is None else limit
    if limit <= 0:  # (ZRANGE 0 -1 would be the whole ring)
        (size,) = await run(q, [("ZCARD", keys.ring)])
        return [], int(size or 0)
    users, size = await run(
        q, [("ZRANGE", keys.ring, offset, offset + limit - 1), ("ZCARD", keys.ring)]
    )
    return [text(u) for u in users or ()], int(size or 0)


@dataclass
class Ranking:
    """Backlogs (critical, normal) known for a queue's users and how they were gathered."""

    backlogs: dict[str, tuple[int, int]]
    ring_size: int
    scanned_now: int
    #: seconds since the stalest backlog in ``backlogs`` was read
    age: float


@dataclass
class _Scan:
    backlogs: dict[str, tuple[int, int]] = field(default_factory=dict)
    read_at: dict[str, float] = field(default_factory=dict)
    offset: int = 0


#: rolling scans, per client and queue
_SCANS: dict[tuple[int, str], _Scan] = {}
#: a backlog read longer ago than this is dropped from the ranking
MAX_AGE = 300.0


async def ranking(q: AsyncFairQueue, extra: Iterable[str] = (), scan: bool = True) -> Ranking:
    """Backlogs for ranking users, with bounded work per call.

    Each call reads the next ``SCAN_USERS`` users of the ring (wrapping around) plus
    ``extra``, and keeps what it read for ``MAX_AGE`` seconds, so successive calls (page
    loads, scrapes) cover every user of a ring of 100,000 while none costs more than a
    few thousand commands. Users whose lanes are empty are dropped.
    """
    state = _SCANS.setdefault((id(q.client), q.queue), _Scan())
    users, size = await ring_users(q, limit=SCAN_USERS if scan else 0, offset=state.offset)
    if scan and not users and state.offset:
        state.offset = 0
        users, size = await ring_users(q)
    if scan:
        state.offset = state.offset + len(users) if state.offset + len(users) < size else 0
    fresh = await backlogs(q, list(dict.fromkeys([*users, *extra])))
    now = time.monotonic()
    for user, lanes in fresh.items():
        if sum(lanes):
            state.backlogs[user], state.read_at[user] = lanes, now
        else:
            state.backlogs.pop(user, None)
            state.read_at.pop(user, None)
    for user in [u for u, at in state.read_at.items() if now - at > MAX_AGE]:
        del state.backlogs[user], state.read_at[user]
    age = now - min(state.read_at.values()) if state.read_at else 0.0
    return Ranking(dict(state.backlogs), size, len(users), age)


async def capped_users(q: AsyncFairQueue, limit: int | None = None) -> list[str]:
    """Up to ``limit`` users with ready work held out of the ring by their cap."""
    limit = SCAN_USERS if limit is None else limit
    reply = await run(q, [("SRANDMEMBER", q.ops.keys.capped, limit)])
    return sorted(text(u) for u in reply[0] or ())


async def backlogs(q: AsyncFairQueue, users: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Critical and normal lane lengths of ``users`` (two commands per user)."""
    keys = q.ops.keys
    commands: list[tuple[Any, ...]] = []
    for user in users:
        commands += [("LLEN", keys.critical(user)), ("ZCARD", keys.normal(user))]
    replies = await run(q, commands)
    return {
        user: (int(replies[2 * i] or 0), int(replies[2 * i + 1] or 0))
        for i, user in enumerate(users)
    }


async def loads(q: AsyncFairQueue, users: Iterable[str], now_ms: int) -> list[UserLoad]:
    """Everything the tenants page shows of ``users`` now (a few commands per user).

    The oldest waiting task is looked for among the head of the critical lane and the
    first five entries of the normal lane (ordered by virtual arrival, which is at most
    the aging horizon away from the push time).
    """
    keys = q.ops.keys
    names = list(dict.fromkeys(users))
    per_user = 9
    commands: list[tuple[Any, ...]] = []
    for user in names:
        commands += [
            ("LLEN", keys.critical(user)),
            ("ZCARD", keys.normal(user)),
            ("ZCOUNT", keys.held(user), f"({now_ms}", "+inf"),
            ("HGET", keys.weights, user),
            ("HGET", keys.caps, user),
            ("ZRANK", keys.ring, user),
            ("SISMEMBER", keys.capped, user),
            ("LRANGE", keys.critical(user), 0, 0),
            ("ZRANGE", keys.normal(user), 0, 4),
        ]
    replies = await run(q, commands)
    out: list[UserLoad] = []
    heads: list[tuple[UserLoad, list[str]]] = []
    for i, user in enumerate(names):
        r = replies[i * per_user : (i + 1) * per_user]
        load = UserLoad(
            user_id=user,
            critical=int(r[0] or 0),
            normal=int(r[1] or 0),
            in_flight=int(r[2] or 0),
            weight=number(r[3]) or 1,
            cap=number(r[4]) or None,
            ring_rank=number(r[5]),
            capped=bool(r[6]),
        )
        out.append(load)
        heads.append((load, [text(t) for t in (r[7] or [])] + [text(t) for t in (r[8] or [])]))
    created = await run(q, [("HGET", keys.task(t), "created") for _, ids in heads for t in ids])
    position = 0
    for load, ids in heads:
        times = [number(c) for c in created[position : position + len(ids)]]
        position += len(ids)
        known = [t for t in times if t is not None]
        load.oldest_ms = min(known) if known else None
    return out


async def weights(q: AsyncFairQueue, users: Sequence[str]) -> list[int]:
    """Round-robin weights of ``users`` (1 when unset): the whole (usually small) hash
    in one HGETALL, or one HMGET per thousand users when it is large."""
    key = q.ops.keys.weights
    (size,) = await run(q, [("HLEN", key)])
    if int(size or 0) <= 50_000:
        (flat,) = await run(q, [("HGETALL", key)])
        flat = flat or []
        items = flat.items() if isinstance(flat, dict) else zip(flat[::2], flat[1::2], strict=True)
        known = {text(u): number(w) or 1 for u, w in items}
        return [known.get(u, 1) for u in users]
    out: list[int] = []
    for start in range(0, len(users), 1000):
        chunk = users[start : start + 1000]
        reply = (await run(q, [("HMGET", q.ops.keys.weights, *chunk)]))[0] or [None] * len(chunk)
        out.extend(number(w) or 1 for w in reply)
    return out


async def oldest_queued_ms(q: AsyncFairQueue) -> int | None:
    """Push time (ms) of the task that has been QUEUED longest, or None."""
    reply = await run(q, [("ZRANGE", q.ops.keys.queued, 0, 0, "WITHSCORES")])
    found = reply[0] or []
    if found and isinstance(found[0], (list, tuple)):  # RESP3: [[member, score]]
        found = found[0]
    return int(float(found[1])) if len(found) >= 2 else None


async def memory(q: AsyncFairQueue) -> str | None:
    """The server's used memory as it reports it (e.g. ``12.5M``), or None."""
    try:
        info: Any = await q.client.info("memory")
    except Exception:  # a server without INFO (or a proxy forbidding it)
        return None
    if info and all(isinstance(v, dict) for v in info.values()):  # cluster: per node
        parts = [v.get("used_memory_human") for v in info.values()]
        return " + ".join(str(p) for p in parts if p) or None
    value = info.get("used_memory_human") if info else None
    return None if value is None else str(value)
