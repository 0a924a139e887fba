"""The placement of a sharded queue (``Shards``): the shards' partitions, which one a
tenant lives in, and the control flow of every method that spans shards.

A sharded queue is one partition per shard (``fairque.core.shards``); each partition is
a ``QueueBase`` with its own keys, so every transition is still one script in one slot.
The flows here only choose partitions and merge answers: a tenant's writes go to its
shard, a read of a task id asks every shard in one pipeline, and a lease goes to the
shard whose ring stands lowest in virtual time among a random pair with ready work
(the power of two choices), so tenants on a busy shard are served at the pace of
tenants on a quiet one.
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import redis
import redis.asyncio as aredis

from fairque.client.base import Flow
from fairque.client.shards.choose import lifts_of, order_of
from fairque.client.shards.placement import Partition, Placement, Wait
from fairque.client.shards.reads import ShardedReads
from fairque.client.shards.rules import ShardedRules
from fairque.client.shards.schedules import ShardedSchedules
from fairque.core.checks import MAX_USER_ID, check_delays, check_identifier, check_task_list
from fairque.core.ops.plain import Stop
from fairque.core.ops.shards import Layout
from fairque.core.records import Call, Leased, LeaseRequest, Pushed, ShardState, request_id
from fairque.core.shards import shard_of
from fairque.errors import ValidationError
from fairque.models import Task, TaskPage, TaskState

if TYPE_CHECKING:
    from fairque.client.shards.placed import Placed

T = TypeVar("T")

#: Shards whose state one lease weighs before it chooses (the power of two choices).
SAMPLE = 2
#: Seconds a shard seen with no ready work is left out of the draw of ``_pair`` (while
#: some other shard was not seen so): pairs then weigh shards that can serve.
IDLE_TTL = 0.2
#: Seconds the shard states read beside a lease are trusted by the next lease.
STATE_TTL = 0.5
#: Seconds a shard's state read by one lease spares the next leases reading it again
#: (the shard a lease goes to is read beside it every time).
FRESH = 0.02
#: Lease request ids remembered with the shard they went to (a resend goes there).
REMEMBERED = 256
#: Between a lease token and the shard it was leased from (``Shards._route``).
TOKEN_MARK = "~"
#: Separator of the per-shard parts of a listing cursor.
CURSOR_SEP = "/"


def _again(
    part: Partition, tasks: list[Task], delays: list[Any] | None
) -> Callable[[], Call[Pushed]]:
    """The builder of ``part``'s push of ``tasks``, built now (so checked before any
    part is sent): it answers that call first, then builds it again (with the
    constraints the partition read since)."""
    built = [part.ops.push_many(tasks, delays)]

    def build() -> Call[Pushed]:
        return built.pop() if built else part.ops.push_many(tasks, delays)

    return build


class Shards(ShardedRules, ShardedSchedules, ShardedReads, Placement):
    """The placement of a queue of several shards: the shards' partitions, the flows
    that choose among them, and the merges of their answers."""

    def __init__(self, home: Placed, layout: Layout) -> None:
        super().__init__(home)
        client = home.client
        self._options: dict[str, Any] = home.options.model_dump()
        #: one partition per shard, shard 0 under the queue's own tag; the first
        #: ``_count`` are where tenants are placed, the rest are retired (drained)
        self._parts: tuple[Partition, ...] = tuple(
            Partition(client, home.queue, _tag=t, **self._options) for t in (None, *layout.tags)
        )
        self._count = layout.count
        #: one blocking wait cannot span the slots of a cluster's shards
        self._cluster = isinstance(client, (redis.RedisCluster, aredis.RedisCluster))
        self._rng = random.Random()
        #: lease request id -> the (shard, request id) pairs it was sent as: a resend
        #: goes to the same shards with the same ids
        self._sent: OrderedDict[str, list[tuple[int, str]]] = OrderedDict()
        #: the shard the last lease went to
        self._last = 0
        #: shard -> when it was last seen with no ready work (``_pair``)
        self._idle_at: dict[int, float] = {}
        #: the states the last lease read for the next one: (when, shards, states)
        self._states: tuple[float, tuple[int, ...], tuple[ShardState, ...]] = (0.0, (), ())
        self._due_at = {}
        #: shard -> (when, its state) as last read
        self._known: dict[int, tuple[float, ShardState]] = {}

    def adopt(self, layout: Layout) -> bool:
        """Follow a resize: new shards join, tenants are placed by the new count."""
        have = len(self._parts) - 1
        added = tuple(
            Partition(self.home.client, self.home.queue, _tag=t, **self._options)
            for t in layout.tags[have:]
        )
        self._parts = (*self._parts, *added)
        self._count = layout.count
        return True

    @property
    def parts(self) -> tuple[Partition, ...]:
        return self._parts

    @property
    def shards(self) -> int:
        return self._count

    @property
    def layout(self) -> Layout:
        return Layout(self._count, tuple(p.ops.keys.tag or "" for p in self._parts[1:]))

    def shard_of(self, user_id: str) -> int:
        return shard_of(user_id, self._count)

    def for_user(self, user_id: str) -> Partition:
        if type(user_id) is not str:  # a plain queue's script check says the same
            check_identifier(user_id, "user_id", MAX_USER_ID)
        return self._parts[shard_of(user_id, self._count)]

    def for_task(self, task: Task) -> tuple[Partition, Task]:
        shard, task = self._route(task)
        return self._parts[shard], task

    def _route(self, task: Task) -> tuple[int, Task]:
        """The shard a leased task was leased from, and the task as that shard knows it.

        A sharded client hands out lease tokens as ``'<token>~<shard>'`` (``_mark``), so
        an acknowledgement finds its shard from the token alone, wherever its tenant is
        placed now (the HTTP service builds the task from an id and a token); a token
        without the mark is shard 0's (one a client leased before the queue had shards)."""
        if not isinstance(task, Task) or not task.task_id:
            raise ValidationError("expected a Task returned by pop()")
        token = task.lease_token or ""
        raw, mark, shard = token.rpartition(TOKEN_MARK)
        if mark and shard.isdigit() and int(shard) < len(self._parts):
            return int(shard), task.model_copy(update={"lease_token": raw})
        return 0, task

    def _mark(self, leased: Iterable[Task], shard: int) -> None:
        """Mark the lease tokens of ``leased`` with ``shard`` (see ``_route``)."""
        for task in leased:
            if task.lease_token is not None:
                task.lease_token = f"{task.lease_token}{TOKEN_MARK}{shard}"

    def _pipeline(self, calls: tuple[Call[Any], ...]) -> Flow[list[Any]]:
        return (yield from self.home._pipeline(calls))

    def each(self, build: Callable[[Any], Call[T]]) -> Flow[list[T]]:
        return (yield from self._pipeline(tuple(build(p) for p in self._parts)))

    def waits(self, schedules: bool) -> list[Wait[bool]]:
        ops = [p.ops for p in self._parts]
        if self._cluster:
            if schedules:
                return [o.schedule_codec.wait_for_schedules for o in ops]
            return [o.wait_for_work for o in ops]
        home = self.home.ops
        if schedules:
            return [lambda timeout: home.wait_for_any_schedule(ops, timeout)]
        return [lambda timeout: home.wait_for_any(ops, timeout)]

    def stop_waits(self, worker_id: str) -> list[Wait[Stop | None]]:
        # each stop's token is marked with its shard, as the lease's was (``_mark``)
        marked = [(p.ops, f"{TOKEN_MARK}{i}") for i, p in enumerate(self._parts)]
        each = [[m] for m in marked] if self._cluster else [marked]
        return [partial(self.home.ops.wait_for_any_cancel, m, worker_id) for m in each]

    # pushes ---------------------------------------------------------------------
    def push_many(
        self, tasks: Iterable[Task], delays: Sequence[float | None] | None
    ) -> Flow[Pushed]:
        """Split the batch by shard; each shard's part is pushed atomically. Every part
        is built (and so checked) before any is sent: a bad task anywhere writes nothing.

        Raises:
            ValidationError: a task depends on a task of the batch in another shard.
        """
        batch = check_task_list(tasks)
        delays = check_delays(delays, len(batch))
        if not batch:
            raise ValidationError("push_many needs at least one task")
        for task in batch:
            if not isinstance(task, Task):
                raise ValidationError(f"expected a Task, got {type(task).__name__}")
        shard = [shard_of(t.user_id, self._count) for t in batch]
        where = {t.task_id: s for t, s in zip(batch, shard, strict=True) if t.task_id}
        for task, s in zip(batch, shard, strict=True):
            for dep in task.depends_on:
                if where.get(dep, s) != s:
                    raise ValidationError(
                        f"task {task.task_id or task.name!r} of user {task.user_id!r} depends on "
                        f"{dep!r}, a task of another shard: dependencies stay within a shard"
                    )
        plan: list[tuple[Partition, list[int], Callable[[], Call[Pushed]]]] = []
        for s, part in enumerate(self._parts):
            idx = [i for i, x in enumerate(shard) if x == s]
            if idx:
                sub_delays = None if delays is None else [delays[i] for i in idx]
                plan.append((part, idx, _again(part, [batch[i] for i in idx], sub_delays)))
        tasks_out: list[Task | None] = [None] * len(batch)
        created: list[bool] = [False] * len(batch)
        for part, idx, build in plan:
            pushed: Pushed = yield from part._push_flow(build)
            for i, t, c in zip(idx, pushed, pushed.created, strict=True):
                tasks_out[i], created[i] = t, c
        return Pushed([t for t in tasks_out if t is not None], created)

    # leases ---------------------------------------------------------------------
    def _candidates(self, request: LeaseRequest) -> list[int]:
        """The shards a lease may be served from: the assigned users' shards, and the
        steal targets' (every shard for ``"*"`` or with neither)."""
        names = [*(request.assigned_users or ()), *(request.steal_targets or ())]
        if not names or "*" in names:
            return list(range(len(self._parts)))
        retired = range(self._count, len(self._parts))  # may still hold their tasks
        return sorted({*(shard_of(u, self._count) for u in names), *retired})

    def _remember(self, req: str, sent: list[tuple[int, str]]) -> None:
        self._sent[req] = list(sent)
        self._sent.move_to_end(req)
        while len(self._sent) > REMEMBERED:
            self._sent.popitem(last=False)

    def lease(
        self, request: LeaseRequest, done: Sequence[tuple[Task, Any]] | None = None
    ) -> Flow[tuple[list[bool], Leased]]:
        """Finish ``done`` on their shards and lease up to ``request.count`` tasks from
        the shard that stands lowest among a random pair with ready work, then (for what
        it could not fill) from the other, then from every shard with ready work.

        One pipeline carries the finishes, the lease and the states of the pair the
        next lease will weigh (the other shard's only when the one at hand is older
        than ``FRESH``), so a busy client makes one round trip per lease, mostly to one
        node; the pair's states are read first only when none younger than
        ``STATE_TTL`` are at hand. A request id sent before goes to the shards it went
        to, with the ids it went as (each answers what the first send leased there)."""
        # the request checked as a plain queue checks it (nothing is sent)
        if done is None:
            self.home.ops.pop(request)
        else:
            self.home.ops.complete_and_pop((), request)
        done = done or ()
        groups: dict[int, list[int]] = {}
        routed = [self._route(task) for task, _ in done]
        for i, (shard, _) in enumerate(routed):
            groups.setdefault(shard, []).append(i)
        done = [(task, result) for (_, task), (_, result) in zip(routed, done, strict=True)]
        acks = [False] * len(done)
        req = request.request_id or request_id()
        candidates = self._candidates(request)
        ahead = self._pair(candidates)

        def send(target: int, req: str, count: int) -> Flow[Leased]:
            """One pipeline: the finishes on the other shards, the finishes and a lease
            of ``count`` on ``target`` (which answers the target's state beside), then
            the other shard of the next pair's state unless one younger than ``FRESH``
            is at hand: most leases are one call."""
            order = [*(s for s in groups if s != target), target]
            calls = tuple(
                self._parts[s].ops.complete_and_pop(
                    [done[i] for i in groups.get(s, ())],
                    request._replace(
                        count=count if s == target else 0,
                        request_id=req if s == target else request_id(),
                    ),
                    with_state=s == target and count > 0,
                )
                for s in order
            )
            stale = [s for s in ahead if s != target and not self._fresh(s)] if count else []
            reads = tuple(self._parts[s].ops.shard_state() for s in stale)
            answers = yield from self._pipeline(calls + reads)
            for s, (oks, _) in zip(order, answers[: len(calls)], strict=True):
                for i, ok in zip(groups.pop(s, ()), oks, strict=True):
                    acks[i] = ok
            got: Leased = answers[len(calls) - 1][1]
            if count:
                if got.state is not None:
                    self._saw([target], [got.state])
                self._saw(stale, answers[len(calls) :])
                if all(s in self._known for s in ahead):
                    self._keep_states(ahead, [self._known[s][1] for s in ahead])
            leased = yield from self._parts[target]._settle_flow(got)
            self._mark(leased, target)
            return leased

        out = Leased()
        if request.count <= 0:
            yield from send(next(iter(groups), 0), req, 0)
            return acks, out
        if req in self._sent:  # a resend: each shard answers what it leased the first time
            for shard, sub in self._sent[req]:
                out.extend((yield from send(shard, sub, request.count)))
            return acks, out
        sample, states = self._kept_states(candidates)
        kept = bool(states)
        if not kept:
            sample = self._pair(candidates)
            states = yield from self._pipeline(
                tuple(self._parts[s].ops.shard_state() for s in sample)
            )
            self._saw(sample, states)
        lifts = lifts_of(list(zip(sample, states, strict=True)))
        if lifts:  # shards whose virtual time stood still: no credit for it
            yield from self._pipeline(
                tuple(self._parts[s].ops.lift_floor(to) for s, to in lifts.items())
            )
            states = [
                replace(st, position=max(st.position, lifts[s]), floor=lifts[s])
                if s in lifts else st
                for s, st in zip(sample, states, strict=True)
            ]  # fmt: skip
            self._saw(sample, states)
        order = order_of(list(zip(sample, states, strict=True)), self._rng)
        rest = [s for s in candidates if s not in sample]
        sent: list[tuple[int, str]] = []
        while len(out) < request.count:
            if not order and rest:
                states = yield from self._pipeline(
                    tuple(self._parts[s].ops.shard_state() for s in rest)
                )
                self._saw(rest, states)
                order, rest = order_of(list(zip(rest, states, strict=True)), self._rng), []
            if not order and kept and not sent:  # kept states may be stale: read them
                states = yield from self._pipeline(
                    tuple(self._parts[s].ops.shard_state() for s in sample)
                )
                self._saw(sample, states)
                order, kept = order_of(list(zip(sample, states, strict=True)), self._rng), False
            if not order:
                if sent:
                    break
                order = [sample[0]]  # none looked ready: its lease call still places
            target = order.pop(0)
            sent.append((target, req if not sent else request_id()))
            self._remember(req, sent)
            self._last = target
            out.extend((yield from send(target, sent[-1][1], request.count - len(out))))
        return acks, out

    def _pair(self, candidates: Sequence[int]) -> list[int]:
        """The shards the next lease weighs: the one the last lease went to (its
        finishes then ride on the lease) and one other drawn at random, among those not
        seen idle in the last ``IDLE_TTL`` seconds when there are any."""
        if len(candidates) <= SAMPLE:
            return list(candidates)
        last = self._last if self._last in candidates else self._rng.choice(candidates)
        others = [s for s in candidates if s != last]
        since = time.monotonic() - IDLE_TTL
        busy = [s for s in others if self._idle_at.get(s, 0.0) < since]
        return [last, self._rng.choice(busy or others)]

    def _saw(self, shards: Sequence[int], states: Sequence[ShardState]) -> None:
        """Note the states just read, and which shards had no ready work (``_pair``
        draws among the others)."""
        now = time.monotonic()
        for shard, state in zip(shards, states, strict=True):
            self._known[shard] = (now, state)
            if state.ready:
                self._idle_at.pop(shard, None)
            else:
                self._idle_at[shard] = now

    def _fresh(self, shard: int) -> bool:
        """Whether a state of ``shard`` younger than ``FRESH`` is at hand."""
        known = self._known.get(shard)
        return known is not None and time.monotonic() - known[0] <= FRESH

    def _keep_states(self, shards: Sequence[int], states: Sequence[ShardState]) -> None:
        self._states = (time.monotonic(), tuple(shards), tuple(states))

    def _kept_states(self, candidates: Sequence[int]) -> tuple[list[int], list[ShardState]]:
        """The pair read by the last lease, if young enough and still candidates."""
        at, shards, states = self._states
        self._states = (0.0, (), ())
        if time.monotonic() - at > STATE_TTL or not set(shards) <= set(candidates):
            return [], []
        return list(shards), list(states)

    def wait_and_lease(self, timeout: float, request: LeaseRequest) -> None:
        self.home.ops.pop(request)  # a bad request is refused before the wait
        return

    def extend_many(self, tasks: Sequence[Task], seconds: float | None) -> Flow[list[bool]]:
        groups: dict[int, list[int]] = {}
        sent = [task._progress for task in tasks]
        routed = [self._route(task) for task in tasks]
        for i, (shard, _) in enumerate(routed):
            groups.setdefault(shard, []).append(i)
        copies = [task for _, task in routed]
        shards = list(groups)
        answers = yield from self._pipeline(
            tuple(
                self._parts[s].ops.extend_many([copies[i] for i in groups[s]], seconds)
                for s in shards
            )
        )
        out = [False] * len(tasks)
        for s, answer in zip(shards, answers, strict=True):
            for i, ok in zip(groups[s], answer, strict=True):
                out[i] = ok
        for task, copy, progress in zip(tasks, copies, sent, strict=True):  # the new
            task.lease_deadline = copy.lease_deadline  # deadlines, as a plain queue sets
            if not copy._progress and task._progress == progress:  # them on the caller's,
                task._progress = ""  # and the progress the heartbeat took
        return out

    # reads and changes by task id ---------------------------------------------------
    def locate(self, task_id: str) -> Flow[Partition]:
        found: list[Task | None] = yield from self.each(lambda p: p.ops.get(task_id))
        for part, task in zip(self._parts, found, strict=True):
            if task is not None:
                return part
        return self._parts[0]

    def get(self, task_id: str) -> Flow[Task | None]:
        found: list[Task | None] = yield from self.each(lambda p: p.ops.get(task_id))
        for shard, task in enumerate(found):
            if task is not None:
                self._mark([task], shard)
                return task
        return None

    # whole-queue reads and housekeeping --------------------------------------------
    def cleanup(self, batch: int, passes: int | None) -> Flow[int]:
        total = 0
        for part in self._parts:
            total += yield from part._cleanup_dependencies_flow(batch, passes)
        return total

    def purge_rest(self, batch: int) -> Flow[int]:
        total = 0
        for part in self._parts[1:]:
            while True:
                deleted, remaining = yield part.ops.purge(batch)
                total += deleted
                if remaining == 0:
                    break
        return total

    def list_tasks(
        self, state: TaskState | str | None, user_id: str | None, name: str | None,
        limit: int, cursor: str | None,
    ) -> Flow[TaskPage]:  # fmt: skip
        """``list_tasks``: one user's tasks from its shard; otherwise shard by shard
        (each shard newest first), the cursor ``'<shard>/<that shard's cursor>'``."""
        if user_id is not None:
            return (yield from self.for_user(user_id)._list_tasks_flow(
                state, user_id, name, limit, cursor
            ))  # fmt: skip
        shard, inner = 0, None
        if cursor is not None:
            head, sep, rest = str(cursor).partition(CURSOR_SEP)
            if not sep or not head.isdigit() or not int(head) < len(self._parts):
                raise ValidationError(f"cursor {cursor!r} is not a cursor of this queue")
            shard, inner = int(head), rest or None
        tasks: list[Task] = []
        while True:  # a page a shard leaves short is filled from the next shard
            page: TaskPage = yield from self._parts[shard]._list_tasks_flow(
                state, None, name, limit - len(tasks), inner
            )
            tasks.extend(page.tasks)
            if page.next_cursor is not None:
                return TaskPage(tasks=tasks, next_cursor=f"{shard}{CURSOR_SEP}{page.next_cursor}")
            if shard + 1 >= len(self._parts):
                return TaskPage(tasks=tasks)
            shard, inner = shard + 1, None
            if len(tasks) >= limit:  # the next shard, from its start
                return TaskPage(tasks=tasks, next_cursor=f"{shard}{CURSOR_SEP}")
