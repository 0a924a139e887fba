"""Random interleavings of every queue transition, with resent commands, against a real server.

A Hypothesis state machine drives one private queue per example through push,
push_many (with dependencies inside the batch), pop and pop_batch with short
leases, complete, complete_and_pop, fail, extend, requeue, cancel, retry, reclaim,
per-user caps and real lease expiry (it sleeps past leases). Any script call may be executed twice,
the same ``Call`` object sent again as a client does after a lost reply; the second
reply is the answer, and where the contract says so it must equal the first.

The model knows each task's state, the lease a worker holds on it and its
successful completions. Where timing decides (a lease expiring while a script
runs, a delayed task coming due) it accepts every outcome the rules allow, then
learns the one the server chose. After every step the server is checked against
the model: registries, lanes, ring and caps, leases and in-flight counts,
dependency sets, counters, and that every key of the queue belongs to something.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

import pytest
from helpers.servers import ServerInfo, SyncClient, connect
from helpers.support import server_ms, unique_queue
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from fairque import FairQueue, LeaseLost, Priority, Task, TaskState
from fairque.core.keys import QueueKeys
from fairque.core.records import Call
from fairque.errors import InvalidTransition

pytestmark = pytest.mark.faults

T = TypeVar("T")
S = TaskState
USERS = ("ua", "ub", "uc")
NAMES = ("job", "again")
ENDED = frozenset({S.FINISHED, S.FAILED, S.CANCELED})
REGISTRY = {
    S.SCHEDULED: "delayed",
    S.DEFERRED: "deferred",
    S.QUEUED: "queued",
    S.STARTED: "leases",
    S.FINISHED: "finished",
    S.FAILED: "failed",
    S.CANCELED: "canceled",
}
FIXED_KEYS = frozenset(
    [*REGISTRY.values(), "ring", "meta", "stats", "weights", "caps", "turns", "capped", "wake",
     "workers", "workers:seen", "ends", "active", "intake", "backlog", "quotas"]
    # the in-flight counter hash, until in-flight work is counted from held leases
    + ([] if hasattr(QueueKeys, "held") else ["inflight"])
)  # fmt: skip
LEASE = st.sampled_from([0.2, 0.3, 0.5])
PICK = st.integers(0, 255)
DELAY = st.sampled_from([None, None, None, None, 0.1, 60.0])


@dataclass
class Model:
    """What the model knows about one task."""

    task_id: str
    user: str
    prio: int
    max_retries: int
    deps: tuple[str, ...]
    state: TaskState
    retries: int = 0
    token: str | None = None
    deadline: int = 0  # lease deadline (ms, server time) while STARTED
    due: int = 0  # due time (ms, server time) while SCHEDULED
    wins: set[str] = field(default_factory=set)  # lease tokens whose complete() succeeded


@dataclass
class Sent(Generic[T]):
    """The outcomes of a call sent once, or twice (a resend after a lost reply)."""

    first: T | Exception
    second: T | Exception | None
    replayed: bool

    @property
    def answer(self) -> T | Exception:
        """The reply the client acts on: the resend's when there was one."""
        return self.second if self.replayed else self.first  # type: ignore[return-value]


@dataclass
class Step:
    """What one rule allows: per task the states it may be in afterwards."""

    t0: int
    t1: int = 0
    allowed: dict[str, set[TaskState]] = field(default_factory=dict)
    leased: dict[str, str] = field(default_factory=dict)  # task id -> token given out
    requeued: set[str] = field(default_factory=set)
    retried: set[str] = field(default_factory=set)


def _same(a: Any, b: Any) -> bool:
    """Equal outcomes: equal values, or exceptions of the same type."""
    if isinstance(a, Exception) or isinstance(b, Exception):
        return type(a) is type(b)
    return bool(a == b)


def _lease_view(tasks: Any) -> list[tuple[str | None, str | None]]:
    return [(t.task_id, t.lease_token) for t in tasks]


class QueueMachine(RuleBasedStateMachine):
    """One private queue per example, checked against the model after every step."""

    client: ClassVar[SyncClient]

    def __init__(self) -> None:
        super().__init__()
        self.q = FairQueue(self.client, unique_queue("sm"), retry_base_seconds=0.05)
        self.k = QueueKeys(self.q.queue)
        self.tasks: dict[str, Model] = {}
        self.held: dict[str, Task] = {}  # the lease a worker holds, by task id
        self.stale: list[Task] = []  # leases that ended: their tokens must be refused
        self.caps: dict[str, int] = {}
        self.acks: dict[tuple[str, str, str], Any] = {}  # (kind, task, token) -> answer
        self.seq = 0

    def teardown(self) -> None:
        keys = list(self.client.scan_iter(match=self._pattern(), count=1000))
        for key in keys:
            self.client.delete(key)

    # sending ------------------------------------------------------------------------
    def _send(self, call: Call[T], twice: bool) -> Sent[T]:
        def once() -> T | Exception:
            try:
                return self.q._run(call)
            except (LeaseLost, InvalidTransition) as exc:
                return exc

        first = once()
        return Sent(first, once() if twice else None, twice)

    def _now(self) -> int:
        return server_ms(self.client)

    def _new_id(self) -> str:
        self.seq += 1
        return f"t{self.seq}"

    def _pattern(self) -> str:
        return self.k.prefix.replace("{", "\\{").replace("}", "\\}") + "*"

    # settling: check what the server did against what the step allows ---------------
    def _read(self) -> dict[str, dict[bytes, bytes]]:
        pipe = self.client.pipeline(transaction=False)
        ids = list(self.tasks)
        for task_id in ids:
            pipe.hgetall(self.k.task(task_id))
        return dict(zip(ids, pipe.execute(), strict=True))

    def _settle(self, step: Step) -> None:
        step.t1 = step.t1 or self._now()
        seen = self._read()
        new = {}
        for task_id, h in seen.items():
            assert h, f"task {task_id} vanished"
            new[task_id] = S(h[b"state"].decode())
        for task_id, m in self.tasks.items():
            old, now = m.state, new[task_id]
            h = seen[task_id]
            allowed = step.allowed.get(task_id, {old})
            if old is S.DEFERRED and now is not old and now not in allowed:
                ups = [new[d] for d in m.deps if d in new]
                if now in (S.QUEUED, S.STARTED):  # released (and leased in the same call)
                    assert all(u is S.FINISHED for u in ups), f"{task_id} released early: {ups}"
                elif now is S.CANCELED:
                    assert S.FAILED in ups or S.CANCELED in ups, f"{task_id} canceled: {ups}"
                else:
                    raise AssertionError(f"{task_id}: DEFERRED -> {now}")
            else:
                assert now in allowed, f"{task_id}: {old} -> {now}, allowed {allowed}"
            if now is S.DEFERRED:
                ups = [new[d] for d in m.deps if d in new]
                assert not all(u is S.FINISHED for u in ups), f"{task_id} never released"
                assert not {S.FAILED, S.CANCELED} & set(ups), f"{task_id} kept"
            retries = int(h.get(b"retries", b"0"))
            if old is S.STARTED and now is S.SCHEDULED and task_id not in step.requeued:
                assert retries == m.retries + 1 <= m.max_retries, (task_id, retries)
            elif task_id in step.retried:
                assert retries == 0, (task_id, retries)
            else:
                assert retries == m.retries, (task_id, old, now, retries, m.retries)
            token = h.get(b"lease", b"").decode() or None
            if now is S.STARTED and (old is not S.STARTED or token != m.token):
                assert step.leased.get(task_id) == token, (
                    f"{task_id} leased (token {token}) but not in the answer {step.leased}"
                )
            m.state, m.retries, m.token = now, retries, token
            m.deadline = int(h.get(b"deadline", b"0"))
            m.due = int(h.get(b"run_at", b"0")) if now is S.SCHEDULED else 0
        for task_id in list(self.held):
            m = self.tasks[task_id]
            if m.state is not S.STARTED or m.token != self.held[task_id].lease_token:
                self.stale.append(self.held.pop(task_id))
        del self.stale[:-4]

    def _expiring(self, step: Step) -> None:
        """A script that reclaims expired leases ran between ``t0`` and ``t1``."""
        for task_id, m in self.tasks.items():
            if m.state is S.STARTED and m.deadline <= step.t1:
                after = S.SCHEDULED if m.retries < m.max_retries else S.FAILED
                step.allowed[task_id] = {after} if m.deadline <= step.t0 else {after, S.STARTED}

    # pushing ------------------------------------------------------------------------
    def _expect_new(self, task: Task, delay: float | None, batch: dict[str, S]) -> S:
        ups = [batch.get(d) or self.tasks[d].state for d in task.depends_on]
        if S.FAILED in ups or S.CANCELED in ups:
            return S.CANCELED
        if any(u is not S.FINISHED for u in ups):
            return S.DEFERRED
        return S.SCHEDULED if delay else S.QUEUED

    def _push(
        self, tasks: list[Task], delays: list[float | None], twice: bool, quick: bool
    ) -> None:
        step = Step(self._now())
        known = {t.task_id: self.tasks[t.task_id].state for t in tasks if t.task_id in self.tasks}
        first: list[Task]
        out: list[Task]
        if quick:  # enqueue: the common path, the id made by the client library
            t = tasks[0]
            one = self._send(self.q.ops.enqueue(
                t.name, None, user_id=t.user_id, priority=int(t.priority), delay=delays[0],
                execute_after=None, depends_on=(), task_id=t.task_id, max_retries=t.max_retries,
                timeout=None, keep_result=True, result_ttl=None, on_dependency_failure="cancel",
            ), twice)  # fmt: skip
            assert isinstance(one.first, Task)
            assert isinstance(one.answer, Task)
            first, out = [one.first], [one.answer]
        else:
            many = self._send(self.q.ops.push_many(tasks, delays), twice)
            assert isinstance(many.first, list)
            assert isinstance(many.answer, list)
            first, out = many.first, many.answer
        fresh = len({t.task_id for t in out} - set(self.tasks))
        pushed = int(self.client.hget(self.k.stats, "pushed") or 0)
        assert pushed == len(self.tasks) + fresh, (
            f"{len(self.tasks) + fresh} tasks, {pushed} pushes"
        )
        batch: dict[str, S] = {}
        for task, delay, got, got1 in zip(tasks, delays, out, first, strict=True):
            tid = got.task_id or ""
            if twice:
                fields = ("task_id", "user_id", "priority", "state", "created_at", "max_retries")
                a, b = (tuple(getattr(x, f) for f in fields) for x in (got1, got))
                assert a == b, f"push resent: first {a}, second {b}"
            if tid in known:
                assert got.state is known[tid], f"existing {tid}: {got.state}"
                continue
            expected = self._expect_new(task, delay, batch)
            batch[tid] = expected
            assert got.state is expected, f"pushed {tid}: {got.state}, expected {expected}"
            self.tasks[tid] = Model(tid, task.user_id, int(task.priority),
                                    task.max_retries or 0, task.depends_on, expected)  # fmt: skip
        self._settle(step)

    @rule(
        user=st.sampled_from(USERS),
        prio=st.sampled_from([Priority.CRITICAL, Priority.NORMAL, Priority.LOW, Priority.HIGH]),
        own_id=st.booleans(),
        delay=DELAY,
        retries=st.integers(0, 2),
        quick=st.booleans(),
        twice=st.booleans(),
    )
    def push(
        self,
        user: str,
        prio: Priority,
        own_id: bool,
        delay: float | None,
        retries: int,
        quick: bool,
        twice: bool,
    ) -> None:
        task = Task(user_id=user, name="job", priority=prio, max_retries=retries,
                    task_id=self._new_id() if own_id else None)  # fmt: skip
        self._push([task], [delay], twice, quick)

    @precondition(lambda self: bool(self.tasks))
    @rule(pick=PICK, quick=st.booleans(), twice=st.booleans())
    def push_existing_id(self, pick: int, quick: bool, twice: bool) -> None:
        """A caller pushing an id that exists gets the stored task; nothing changes."""
        task_id = self._nth(pick, list(self.tasks))
        m = self.tasks[task_id]
        task = Task(user_id=m.user, name="again", priority=Priority.CRITICAL, task_id=task_id)
        self._push([task], [None], twice, quick)

    @initialize(
        data=st.data(),
        size=st.integers(2, 4),
        cap=st.sampled_from([None, 1, 2]),
        twice=st.booleans(),
    )
    def seed(self, data: st.DataObject, size: int, cap: int | None, twice: bool) -> None:
        """Every example starts with some work, and often a capped user (Hypothesis
        favours short examples, where a cap would rarely be reached)."""
        if cap is not None:
            self.set_user_limits(USERS[0], cap, twice)
        self.push_many(data, size, twice)

    @rule(data=st.data(), size=st.integers(1, 3), twice=st.booleans())
    def push_many(self, data: st.DataObject, size: int, twice: bool) -> None:
        tasks: list[Task] = []
        delays: list[float | None] = []
        for i in range(size):
            deps: list[str] = []
            if i:  # upstreams pushed earlier in the same batch
                ids = [t.task_id or "" for t in tasks]
                deps += data.draw(st.lists(st.sampled_from(ids), max_size=2, unique=True))
            if self.tasks and data.draw(st.integers(0, 3)) == 0:
                deps.append(self._nth(data.draw(PICK), list(self.tasks)))
            delay = None if deps else data.draw(DELAY)
            tasks.append(Task(
                user_id=data.draw(st.sampled_from(USERS)), name="job", task_id=self._new_id(),
                priority=data.draw(st.sampled_from([Priority.CRITICAL, Priority.NORMAL])),
                max_retries=data.draw(st.integers(0, 2)), depends_on=tuple(deps),
            ))  # fmt: skip
            delays.append(delay)
        self._push(tasks, delays, twice, quick=False)

    # leasing ------------------------------------------------------------------------
    @rule(lease=LEASE, twice=st.booleans())
    def pop(self, lease: float, twice: bool) -> None:
        self._lease(1, lease, twice)

    @rule(count=st.integers(2, 4), lease=LEASE, twice=st.booleans())
    def pop_batch(self, count: int, lease: float, twice: bool) -> None:
        self._lease(count, lease, twice)

    @precondition(lambda self: bool(self.tasks))
    @rule(pick=PICK, count=st.integers(0, 3), lease=LEASE, twice=st.booleans())
    def complete_and_pop(self, pick: int, count: int, lease: float, twice: bool) -> None:
        task = self._pick(pick)
        if task is not None:
            self._lease(count, lease, twice, task)

    def _lease(self, count: int, lease: float, twice: bool, done: Task | None = None) -> None:
        step = Step(self._now())
        current = done is not None and self._current(done)
        acks: list[bool] = []
        if done is None:
            sent = self._send(self.q.ops.pop(count, f"w{count}", lease, None, None), twice)
            first, answer = sent.first, sent.answer
        else:
            call = self.q.ops.complete_and_pop([(done, {"id": done.task_id})], count, "wc", lease,
                                               None, None)  # fmt: skip
            both = self._send(call, twice)
            assert isinstance(both.first, tuple), both.first
            assert isinstance(both.answer, tuple), both.answer
            (acks_first, first), (acks, answer) = both.first, both.answer
            assert acks_first == acks, f"complete_and_pop resent: acks {acks_first}, {acks}"
        ring_after = self.client.zcard(self.k.ring)
        step.t1 = self._now()
        assert isinstance(answer, list)
        assert isinstance(first, list)
        if twice:
            assert _lease_view(answer) == _lease_view(first), "lease request resent: other leases"
        if count:  # maintenance runs with the lease request
            self._expiring(step)
        for task_id, m in self.tasks.items():
            if m.state is S.QUEUED:
                step.allowed[task_id] = {S.QUEUED, S.STARTED}
            elif m.state is S.SCHEDULED and m.due <= step.t1 and count:
                promoted = {S.QUEUED, S.STARTED}
                step.allowed[task_id] = promoted if m.due <= step.t0 else {S.SCHEDULED, *promoted}
        if done is not None:
            tid, token = done.task_id or "", done.lease_token or ""
            if current and (acks[0] or self.tasks[tid].deadline > step.t1):
                assert acks == [True], f"complete_and_pop of a held lease answered {acks}"
                step.allowed[tid] = {S.FINISHED}
                self.tasks[tid].wins.add(token)
                self.acks[("complete", tid, token)] = True
            elif ("complete", tid, token) in self.acks:
                assert acks == [True], f"complete resent late with its winning token: {acks}"
            else:
                assert acks == [False], f"complete_and_pop with a lost lease answered {acks}"
        for t in answer:
            assert t.state is S.STARTED, t
            assert t.lease_token, t
            step.leased[t.task_id or ""] = t.lease_token
        assert len(step.leased) == len(answer), "a task leased twice in one answer"
        if len(answer) < count:
            assert ring_after == 0, f"{len(answer)} of {count} leased, ring still has users"
        self._settle(step)
        for t in answer:
            self.held[t.task_id or ""] = t
        for user, cap in self.caps.items():
            got = sum(1 for t in answer if t.user_id == user)
            if got:
                live = self._live(user, step.t1)
                assert live <= cap, f"{user}: {live} leases after a lease request, cap {cap}"

    def _live(self, user: str, at: int) -> int:
        """The user's leases known to run past ``at``."""
        return sum(
            1
            for m in self.tasks.values()
            if m.user == user and m.state is S.STARTED and m.deadline > at
        )

    @rule(twice=st.booleans())
    def reclaim(self, twice: bool) -> None:
        step = Step(self._now())
        sent = self._send(self.q.ops.reclaim(1000), twice)
        step.t1 = self._now()
        before = {tid: m.state for tid, m in self.tasks.items()}
        self._expiring(step)
        self._settle(step)
        moved = sum(
            1
            for tid, m in self.tasks.items()
            if before[tid] is S.STARTED and m.state in (S.SCHEDULED, S.FAILED)
        )
        counts = [sent.first, sent.second] if twice else [sent.first]
        total = sum(n for n in counts if isinstance(n, int))
        assert total == moved, f"reclaim answered {sent.first}/{sent.second}, {moved} moved"

    @precondition(lambda self: bool(self.tasks))
    @rule(pick=PICK)
    def wait_for_expiry(self, pick: int) -> None:
        """Sleep past one lease (it expires on its own) or until a delayed task is due."""
        pool = sorted(
            m.deadline if m.state is S.STARTED else m.due
            for m in self.tasks.values()
            if m.state in (S.STARTED, S.SCHEDULED)
        )
        if not pool:
            return
        deadline = self._nth(pick, pool)
        pause = (deadline - self._now()) / 1000 + 0.01
        if 0 < pause <= 0.6:
            time.sleep(pause)

    # acknowledging ------------------------------------------------------------------
    @staticmethod
    def _nth(pick: int, pool: list[T]) -> T:
        """Choose from a list that depends on timing without changing what is drawn."""
        return pool[pick % len(pool)]

    def _pick(self, pick: int) -> Task | None:
        """A lease a worker holds, or (one time in three) one it lost."""
        held, stale = list(self.held.values()), self.stale
        pool = (stale or held) if pick % 3 == 0 else (held or stale)
        return self._nth(pick // 3, pool) if pool else None

    def _current(self, task: Task) -> bool:
        m = self.tasks[task.task_id or ""]
        return m.state is S.STARTED and m.token == task.lease_token

    def _ack(self, kind: str, task: Task, call: Call[T], twice: bool, success: T) -> T | Exception:
        """Send an acknowledgement and check its answer; ``success`` is the held lease's.

        A lease the worker no longer holds is refused (False or ``LeaseLost``) and
        changes nothing, except that the same acknowledgement, sent again with a token
        it already succeeded with, gets its first answer again (a late resend).
        """
        tid, token = task.task_id or "", task.lease_token or ""
        current = self._current(task)
        t0 = self._now()
        sent = self._send(call, twice)
        t1 = self._now()
        lost: T | Exception = False if kind == "complete" else LeaseLost()  # type: ignore[assignment]
        answer = sent.answer
        if twice:
            assert _same(sent.first, sent.second), f"{kind} resent: {sent.first}, {sent.second}"
        prior = self.acks.get((kind, tid, token))
        if current and not (_same(answer, lost) and self.tasks[tid].deadline <= t1):
            assert _same(answer, success), f"{kind} of a held lease answered {answer!r}"
            assert answer == success, f"{kind} of a held lease answered {answer!r}"
            self.acks[(kind, tid, token)] = answer
            step = Step(t0, t1)
            if kind != "extend":
                step.allowed[tid] = {S.FINISHED if kind == "complete" else S(answer)}
            step.requeued.update([tid] if kind == "requeue" else [])
            if kind == "complete":
                self.tasks[tid].wins.add(token)
            self._settle(step)
        else:
            if kind == "complete" and prior is not None:
                assert answer is True, f"complete resent late with its winning token: {answer}"
            elif prior is not None:
                assert _same(answer, lost) or answer == prior, f"late {kind}: {answer!r}"
            else:
                assert _same(answer, lost), f"{kind} with a lost lease answered {answer!r}"
            self._settle(Step(t0, t1))
        return answer

    @precondition(lambda self: bool(self.tasks))
    @rule(pick=PICK, twice=st.booleans())
    def complete(self, pick: int, twice: bool) -> None:
        task = self._pick(pick)
        if task is None:
            return
        self._ack("complete", task, self.q.ops.complete(task, {"id": task.task_id}), twice, True)

    @precondition(lambda self: bool(self.tasks))
    @rule(pick=PICK, retry=st.booleans(), twice=st.booleans())
    def fail(self, pick: int, retry: bool, twice: bool) -> None:
        task = self._pick(pick)
        if task is None:
            return
        m = self.tasks[task.task_id or ""]
        expected = S.SCHEDULED if retry and m.retries < m.max_retries else S.FAILED
        self._ack("fail", task, self.q.ops.fail(task, "boom", retry, None), twice, expected)

    @precondition(lambda self: bool(self.tasks))
    @rule(pick=PICK, delay=st.sampled_from([0, 0, 0.1]), twice=st.booleans())
    def requeue(self, pick: int, delay: float, twice: bool) -> None:
        task = self._pick(pick)
        if task is None:
            return
        expected = S.SCHEDULED if delay else S.QUEUED
        self._ack("requeue", task, self.q.ops.requeue(task, delay), twice, expected)

    @precondition(lambda self: bool(self.tasks))
    @rule(pick=PICK, seconds=LEASE, twice=st.booleans())
    def extend(self, pick: int, seconds: float, twice: bool) -> None:
        task = self._pick(pick)
        if task is None:
            return
        call = self.q.ops.extend(task, seconds)
        current = self._current(task)
        t0 = self._now()
        sent = self._send(call, twice)
        t1 = self._now()
        answer = sent.answer
        if current and not (
            isinstance(answer, LeaseLost) and self.tasks[task.task_id or ""].deadline <= t1
        ):
            assert isinstance(answer, datetime), f"extend of a held lease: {answer!r}"
            if twice:
                assert isinstance(sent.first, datetime)
                assert answer >= sent.first, (sent.first, answer)
        else:
            assert isinstance(answer, LeaseLost), f"extend with a lost lease answered {answer!r}"
            if twice:
                assert isinstance(sent.first, LeaseLost), f"extend resent: {sent.first!r}"
        self._settle(Step(t0, t1))
        if isinstance(answer, datetime):
            assert self.tasks[task.task_id or ""].deadline == round(answer.timestamp() * 1000)

    # operators ----------------------------------------------------------------------
    @precondition(lambda self: bool(self.tasks))
    @rule(pick=PICK, twice=st.booleans())
    def cancel(self, pick: int, twice: bool) -> None:
        tid = self._nth(pick, list(self.tasks))
        m = self.tasks[tid]
        step = Step(self._now())
        sent = self._send(self.q.ops.cancel(tid), twice)
        expected = m.state not in ENDED
        if sent.replayed:
            assert sent.first == sent.second, f"cancel resent: {sent.first}, {sent.second}"
        assert sent.answer is expected, f"cancel of a {m.state} task answered {sent.answer}"
        if expected:
            step.allowed[tid] = {S.CANCELED}
        self._settle(step)

    @precondition(lambda self: bool(self.tasks))
    @rule(pick=PICK, twice=st.booleans())
    def retry(self, pick: int, twice: bool) -> None:
        """Mostly of a FAILED or CANCELED task; of any other when there is none."""
        ended = [t for t, m in self.tasks.items() if m.state in (S.FAILED, S.CANCELED)]
        tid = self._nth(pick, ended or list(self.tasks))
        m = self.tasks[tid]
        step = Step(self._now())
        sent = self._send(self.q.ops.retry(tid), twice)
        if sent.replayed:
            assert _same(sent.first, sent.second), f"retry resent: {sent.first}, {sent.second}"
        if m.state in (S.FAILED, S.CANCELED):
            assert sent.answer is S.QUEUED, f"retry answered {sent.answer}"
            step.allowed[tid] = {S.QUEUED}
            step.retried.add(tid)
        else:
            assert isinstance(sent.answer, InvalidTransition), f"retry of {m.state}: {sent.answer}"
        self._settle(step)

    @rule(user=st.sampled_from(USERS), cap=st.sampled_from([None, 1, 2]), twice=st.booleans())
    def set_user_limits(self, user: str, cap: int | None, twice: bool) -> None:
        step = Step(self._now())
        self._send(self.q.ops.set_user_limits(user, 1, 0 if cap is None else cap), twice)
        if cap is None:
            self.caps.pop(user, None)
        else:
            self.caps[user] = cap
        self._settle(step)

    # invariants ---------------------------------------------------------------------
    @invariant()
    def server_matches_model(self) -> None:
        k, r = self.k, self.client
        t0 = self._now()
        stats = self.q.stats()
        t1 = self._now()
        pipe = r.pipeline(transaction=False)
        for name in REGISTRY.values():
            pipe.zrange(k.prefix + name, 0, -1, withscores=True)
        for user in USERS:
            pipe.lrange(k.critical(user), 0, -1)
            pipe.zrange(k.normal(user), 0, -1)
            pipe.zrange(k.prefix + f"held:{user}", 0, -1, withscores=True)
        pipe.zrange(k.ring, 0, -1)
        pipe.smembers(k.capped)
        pipe.hgetall(k.caps)
        pipe.hgetall(k.prefix + "inflight")
        pipe.hgetall(k.stats)
        for tid in self.tasks:
            pipe.hgetall(k.task(tid))
            pipe.smembers(k.deps_waiting(tid))
            pipe.smembers(k.deps_blocked(tid))
        replies = iter(pipe.execute())

        def text(values: Any) -> list[str]:
            return [v.decode() for v in values]

        regs = {state: {m.decode(): int(s) for m, s in next(replies)} for state in REGISTRY}
        crit, norm, held = {}, {}, {}
        for user in USERS:
            crit[user] = text(next(replies))
            norm[user] = text(next(replies))
            held[user] = {m.decode(): int(s) for m, s in next(replies)}
        ring = set(text(next(replies)))
        capped = set(text(next(replies)))
        caps = {a.decode(): int(b) for a, b in next(replies).items()}
        inflight = {a.decode(): int(b) for a, b in next(replies).items()}
        counters = {a.decode(): int(b) for a, b in next(replies).items()}
        hashes, waiting, blocked = {}, {}, {}
        for tid in self.tasks:
            hashes[tid] = next(replies)
            waiting[tid] = set(text(next(replies)))
            blocked[tid] = set(text(next(replies)))

        # every task is in exactly the registry of its state, the one the model expects
        for tid, m in self.tasks.items():
            state = S(hashes[tid][b"state"].decode())
            assert state is m.state, f"{tid}: server {state}, model {m.state}"
            places = [s for s, members in regs.items() if tid in members]
            assert places == [state], f"{tid} is {state} but in registries {places}"
        for state, members in regs.items():
            unknown = set(members) - set(self.tasks)
            assert not unknown, f"{REGISTRY[state]} holds unknown tasks {unknown}"

        # QUEUED tasks sit in exactly their user's lane, once; lanes hold nothing else
        ready: dict[str, int] = {}
        for user in USERS:
            mine = {t for t, m in self.tasks.items() if m.user == user and m.state is S.QUEUED}
            lane = crit[user] + norm[user]
            assert sorted(lane) == sorted(mine), f"{user} lanes {lane}, QUEUED {sorted(mine)}"
            assert all(self.tasks[t].prio == 6 for t in crit[user]), crit[user]
            assert all(self.tasks[t].prio < 6 for t in norm[user]), norm[user]
            ready[user] = len(lane)

        # leases: every STARTED task has its deadline registered and its token stored
        started: dict[str, list[Model]] = {u: [] for u in USERS}
        for tid, m in self.tasks.items():
            h = hashes[tid]
            if m.state is S.STARTED:
                started[m.user].append(m)
                assert regs[S.STARTED][tid] == int(h[b"deadline"]) == m.deadline, tid
                assert h.get(b"lease", b"").decode() == m.token, tid
            else:
                assert b"lease" not in h, f"{tid} {m.state} keeps a lease"
                assert b"deadline" not in h, f"{tid} {m.state} keeps a deadline"
            assert len(m.wins) <= 1, f"{tid} completed successfully {len(m.wins)} times"
            if m.wins:
                assert m.state is S.FINISHED, f"{tid} completed, now {m.state}"

        # in flight: counted from unexpired leases
        users_stats = {u.user_id: u for u in stats.users}
        for user in USERS:
            leases = {m.task_id: m.deadline for m in started[user]}
            if hasattr(k, "held"):
                assert held[user] == leases, f"{user} held {held[user]}, leases {leases}"
            else:
                assert inflight.get(user, 0) == len(leases), f"{user} inflight {inflight}"
            low = sum(1 for d in leases.values() if d > t1)
            high = sum(1 for d in leases.values() if d > t0)
            got = users_stats[user].in_flight if user in users_stats else 0
            assert low <= got <= high, f"{user}: stats in_flight {got}, unexpired {low}..{high}"

        # the ring: users with ready work that their cap does not hold out
        assert caps == self.caps, f"caps {caps}, model {self.caps}"
        assert not ring & capped, f"in the ring and capped: {ring & capped}"
        with_work = {u for u, n in ready.items() if n}
        assert ring <= with_work, f"ring {ring}, users with ready work {with_work}"
        assert with_work - capped <= ring, f"ready users {with_work} missing from ring {ring}"
        for user in capped:
            cap = self.caps.get(user, 0)
            assert cap, f"{user} capped without a cap"
            assert len(started[user]) >= cap, f"{user} capped: cap {cap}, {started[user]}"
        for user, cap in self.caps.items():
            live = sum(1 for m in started[user] if m.deadline > t1)
            assert live < cap or user not in ring, f"{user} at its cap {cap} is in the ring"

        # dependencies: a DEFERRED task waits exactly for its unfinished upstreams
        for tid, m in self.tasks.items():
            if m.state is S.DEFERRED:
                pending = {d for d in m.deps if self.tasks[d].state is not S.FINISHED}
                assert waiting[tid] == pending, f"{tid} waits for {waiting[tid]}, not {pending}"
                for up in pending:
                    assert tid in blocked[up], f"{up} does not list {tid} as blocked"
            else:
                assert not waiting[tid], f"{tid} is {m.state} yet waits for {waiting[tid]}"

        # counters: nothing written twice
        finished = sum(1 for m in self.tasks.values() if m.wins)
        assert counters.get("pushed", 0) == len(self.tasks), f"pushed {counters}"
        assert counters.get("completed", 0) == finished, f"completed {counters}, {finished}"
        # ... nor in any user's service counts (a resent completion charges nothing)
        done = sum(int(self.client.hget(self.k.tenant(u), "done") or 0) for u in USERS)
        assert done == finished, f"users' completions {done}, {finished} won"

        # each user's backlog is its tasks waiting to run, whatever was resent
        waiting_states = (S.QUEUED, S.SCHEDULED, S.DEFERRED)
        want = Counter(m.user for m in self.tasks.values() if m.state in waiting_states)
        raw: dict[bytes, bytes] = self.client.hgetall(self.k.backlog)  # type: ignore[assignment]
        kept = {k.decode(): int(v) for k, v in raw.items()}
        assert kept == dict(want), f"backlog {kept}, the model's {dict(want)}"

        # no orphan keys: each key is a fixed one or belongs to a task or user
        for key in self._keys():
            self._owned(key.decode())

    def _keys(self) -> Iterator[bytes]:
        yield from self.client.scan_iter(match=self._pattern(), count=1000)

    def _owned(self, key: str) -> None:
        rest = key[len(self.k.prefix) :]
        kind, _, name = rest.rpartition(":")
        if rest in FIXED_KEYS:
            return
        if kind in ("crit", "norm", "held", "tenant"):
            assert name in USERS, f"orphan key {key}"
        elif kind in ("task", "deps:blocked"):
            assert name in self.tasks, f"orphan key {key}"
        elif kind == "gone":
            assert name in self.tasks, f"orphan key {key}"
            assert self.client.pttl(key) != -1, f"{key} never expires"
        elif kind == "deps:waiting":
            assert self.tasks[name].state is S.DEFERRED, f"orphan key {key}"
        elif kind in ("uidx", "nidx"):
            # the listing's indexes: a known user or name, members only tasks pushed
            assert name in (USERS if kind == "uidx" else NAMES), f"orphan key {key}"
            members: list[bytes] = self.client.zrange(key, 0, -1)  # type: ignore[assignment]
            stray = [m.decode() for m in members]
            assert set(stray) <= set(self.tasks), f"{key} lists unknown tasks"
        elif kind in ("fetch", "stops", "flushed"):  # (flushed: a process's last flush)
            assert self.client.pttl(key) != -1, f"{key} never expires"
        else:
            raise AssertionError(f"unknown key {key}")


CI = bool(os.environ.get("CI"))
#: Examples per server kind: the scripts are the same everywhere, so the other kinds run
#: a third as many (what differs there is the server and the client's resends).
#: ``FAIRQUE_STATEFUL_EXAMPLES`` sets every kind's.
EXAMPLES = {"valkey": 60}
OTHER_KINDS_EXAMPLES = 20
SETTINGS = settings(
    stateful_step_count=40,
    deadline=None,
    derandomize=CI,
    # shrinking replays sleeps through leases for minutes; CI reports the failure unshrunk
    phases=[Phase.explicit, Phase.reuse, Phase.generate, *([] if CI else [Phase.shrink])],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.timeout(600)  # shrinking a failure sleeps through leases again
def test_random_interleavings_with_resent_calls(server: ServerInfo) -> None:
    client = connect(server)
    QueueMachine.client = client
    try:
        examples = os.environ.get("FAIRQUE_STATEFUL_EXAMPLES")
        count = int(examples) if examples else EXAMPLES.get(server.kind, OTHER_KINDS_EXAMPLES)
        run_state_machine_as_test(QueueMachine, settings=settings(SETTINGS, max_examples=count))
    finally:
        client.close()
