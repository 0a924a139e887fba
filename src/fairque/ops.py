"""Sans-IO core: every queue operation built once as (script, keys, args, parse).

``FairQueue`` and ``AsyncFairQueue`` only execute the ``Call`` objects built here, so
the two clients cannot drift apart. Each builder is named after the Lua script it
calls (``pop`` calls ``lua/pop.lua``). How a task is stored is ``fairque.taskhash``'s
business; the records passed around are in ``fairque.records``.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar, overload

from fairque.checks import (
    MAX_SCAN,
    MAX_TASK_ID,
    MAX_USER_ID,
    check_delays,
    check_identifier,
    check_pop,
    check_task_list,
    check_user_limits,
    check_user_list,
    dump_value,
    error_text,
    plain_identifier,
)
from fairque.checks import check_int as _check_int
from fairque.checks import seconds_ms as _seconds_ms
from fairque.codec import Serializer, get_serializer
from fairque.constraints import (
    MAX_CONSTRAINTS,
    Constraint,
    ConstraintInfo,
    ConstraintSet,
    check_constraint_id,
)
from fairque.dependencies import dependency_order
from fairque.errors import LeaseLost, ValidationError
from fairque.keys import QueueKeys, validate_queue_name
from fairque.models import (
    Priority,
    QueueStats,
    Task,
    TaskOutcome,
    TaskPage,
    TaskState,
    UserStats,
    WorkerInfo,
)
from fairque.options import QueueOptions
from fairque.plain_ops import PlainOperations
from fairque.records import Call as Call
from fairque.records import EncodedResult as EncodedResult
from fairque.records import Leased as Leased
from fairque.records import LeaseRequest as LeaseRequest
from fairque.records import Pushed as Pushed
from fairque.records import request_id as request_id
from fairque.schedule_ops import DueSchedules, FireOutcome, ScheduleCodec, StoredSchedule
from fairque.schedules import Schedule
from fairque.scripts import load_all
from fairque.taskhash import TaskCodec, ms_to_dt, raw, text

T = TypeVar("T")

#: most tasks one ``list_tasks`` page holds
MAX_PAGE = 500
#: index entries one filtered ``list_tasks`` page examines at most
LIST_SCAN = 1000
_WALKS = frozenset("sunr")

#: stats.lua counts the registries in the order TaskState defines them
_STATE_ORDER = tuple(TaskState)
#: result.lua's codes of the ended states
_OUTCOME_STATES = {1: TaskState.FINISHED, 2: TaskState.FAILED, 3: TaskState.CANCELED}
_PRIORITY_TYPES = (int, Priority)


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


#: longest traceback and failure reason kept (characters; a longer traceback keeps its end)
MAX_TRACEBACK = 65_536
MAX_REASON = 64


def _optional_text(value: str | None, what: str, limit: int) -> str:
    """``value`` as the script's argument ('' for None), a traceback cut to its end."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string, got {type(value).__name__}")
    if len(value) > limit:
        if what != "traceback":
            raise ValidationError(f"{what} is longer than {limit} characters")
        value = "...\n" + value[-limit:]
    return value


def _entries(reply: list[Any]) -> list[Any]:
    """The entries of a push reply: a new plain task pushed alone answers its entry
    ``{0, state, created_ms}`` without the list around it (see push.lua)."""
    return [reply] if type(reply[0]) is int else reply


class Operations(PlainOperations):
    """Builds the calls of one queue; shared by the sync and async clients.

    Each script has one builder here, named after it; the calls that are a single
    plain command (``get``, waits, ``wake``, XCom) come from ``PlainOperations``.
    """

    def __init__(self, queue: str, options: QueueOptions) -> None:
        self.queue = validate_queue_name(queue)
        self.options = options
        self.keys = QueueKeys(self.queue)
        self.serializer: Serializer = get_serializer(options.serializer)
        self.codec = TaskCodec(self.serializer, options)
        self.scripts = load_all()
        self._none = EncodedResult(self.serializer.dumps(None))
        self._horizon_us = round(options.aging_horizon_seconds * 1_000_000)
        self._base_ms = round(options.retry_base_seconds * 1000)
        self._failed_ttl_ms = round(options.failed_ttl_seconds * 1000)
        self._script_keys = {
            name: tuple(getattr(self.keys, key) for key in script.key_names)
            for name, script in self.scripts.items()
        }
        # _push_head of one task, up to the request id
        self._quick_head = (
            options.ordering, self._horizon_us, options.on_duplicate, 1, self._failed_ttl_ms
        )  # fmt: skip

    def _call(self, name: str, args: Sequence[Any], parse: Callable[[Any], T]) -> Call[T]:
        """A call of script ``name``: its KEYS are the ones its header names, in order."""
        return Call(self.scripts[name], self._script_keys[name], tuple(args), parse)

    def _push_head(self, n: int) -> list[Any]:
        """The push script's arguments before the per-task records.

        The request id tells a resend of this push from another push of the same id:
        the created task keeps it, so a resend still answers "created" (and, with
        ``on_duplicate="error"``, is not a duplicate).
        """
        on_dup = self.options.on_duplicate
        return [
            self.options.ordering,
            self._horizon_us,
            on_dup,
            n,
            self._failed_ttl_ms,
            request_id(),
            self.codec.constraints.version,
        ]

    # pushes ---------------------------------------------------------------------
    def push_many(
        self, tasks: Iterable[Task], delays: Sequence[float | timedelta | None] | None = None
    ) -> Call[Pushed]:
        """Push tasks atomically; ``delays[i]`` (seconds) delays task i.

        Upstreams inside the batch are sent before their dependents; a cycle is
        rejected before anything reaches the server. The answer says per task
        whether this push created it (``Pushed.created``).
        """
        tasks = check_task_list(tasks)
        delays = check_delays(delays, len(tasks))
        encode = self.codec.encode
        given: list[tuple[Task, dict[str, Any]]] = []
        records = []
        seen: set[str] = set()
        for i, task in enumerate(tasks):
            if not isinstance(task, Task):
                raise ValidationError(f"expected a Task, got {type(task).__name__}")
            values = dict(task.__dict__)
            record = encode(values, delays[i] if delays is not None else None)
            if record.id in seen:
                raise ValidationError(f"task id {record.id!r} appears twice in one batch")
            seen.add(record.id)
            given.append((task, values))
            records.append(record)
        if not given:
            raise ValidationError("push_many needs at least one task")
        args = self._push_head(len(given))
        if any(v["depends_on"] for _, v in given):
            order = dependency_order([(v["task_id"], v["depends_on"]) for _, v in given])
            for i in order:
                args.extend(records[i])
            # the reply follows the order sent; answer in the order given
            sent_at = [0] * len(order)
            for n, i in enumerate(order):
                sent_at[i] = n
            position: list[int] | None = sent_at
        else:  # nothing to reorder
            position = None
            for record in records:
                args.extend(record)
        pushed, created = self.codec.pushed, self.codec.created

        def parse(reply: list[Any]) -> Pushed:
            reply = _entries(reply)
            entries = reply if position is None else [reply[p] for p in position]
            return Pushed(
                [pushed(e, v, t) for e, (t, v) in zip(entries, given, strict=True)],
                [created(e) for e in entries],
            )

        return self._call("push", args, parse)

    def push(self, task: Task) -> Call[Task]:
        """Push one task (``push``); one with dependencies goes as a batch of one."""
        if not isinstance(task, Task):
            raise ValidationError(f"expected a Task, got {type(task).__name__}")
        if task.depends_on:
            batch = self.push_many([task])
            return Call(batch.script, batch.keys, batch.args, lambda r: batch.parse(r)[0])
        codec = self.codec
        values = dict(task.__dict__)
        record = codec.encode(values)
        args = (*self._quick_head, request_id(), codec.constraints.version, *record)
        return self._call("push", args, lambda r: codec.pushed(_entries(r)[0], values, task))

    def enqueue(
        self,
        name: str,
        payload: Any,
        *,
        user_id: str,
        priority: int,
        delay: float | timedelta | None,
        execute_after: datetime | None,
        depends_on: Sequence[str],
        task_id: str | None,
        max_retries: int | None,
        timeout: float | None,
        keep_result: bool,
        result_ttl: int | None,
        on_dependency_failure: str,
    ) -> Call[Task]:
        """Build one task and push it (``enqueue``).

        The common call (plain ids, no delay, dependencies, timeout or result TTL)
        skips the Task model: its few arguments are checked directly. Anything else,
        and anything those checks doubt, takes the full model, whose errors are the
        ones users see.
        """
        simple = (
            delay is None
            and execute_after is None
            and not depends_on
            and timeout is None
            and result_ttl is None
            and on_dependency_failure == "cancel"
            and type(keep_result) is bool
            and type(priority) in _PRIORITY_TYPES
            and 1 <= priority <= 6
            and (max_retries is None or (type(max_retries) is int and 0 <= max_retries <= 1000))
            and plain_identifier(name, MAX_TASK_ID)
            and plain_identifier(user_id, MAX_USER_ID)
            and (task_id is None or plain_identifier(task_id, MAX_TASK_ID))
        )
        if not simple:
            if delay is not None and execute_after is not None:
                raise ValidationError("give either delay or execute_after, not both")
            if delay is not None:
                _seconds_ms(delay, "delay")
            task = Task(
                user_id=user_id, name=name, payload=payload, priority=priority, task_id=task_id,
                max_retries=max_retries, execute_after=execute_after, depends_on=depends_on,
                timeout=timeout, keep_result=keep_result, result_ttl=result_ttl,
                on_dependency_failure=on_dependency_failure,
            )  # fmt: skip
            batch = self.push_many([task], [delay])
            return Call(batch.script, batch.keys, batch.args, lambda r: batch.parse(r)[0])
        codec = self.codec
        # one read of the random source makes the task id (when not given) and the
        # request id (see _push_head)
        ids = os.urandom(24).hex()
        values, record = codec.encode_plain(
            name, payload, user_id, priority, task_id or ids[:32], max_retries, keep_result
        )
        args = (*self._quick_head, ids[32:], codec.constraints.version, *record)
        return self._call("push", args, lambda r: codec.pushed(_entries(r)[0], values, None))

    # leases ---------------------------------------------------------------------
    def _lease_args(self, request: LeaseRequest) -> list[Any]:
        """``pop.lua``'s ARGV for ``request``: nine values, then the two user lists
        (``complete_and_pop.lua`` takes its completions between them, at index 9)."""
        count, worker_id, lease_seconds, assigned_users, steal_targets, req = request
        lease = self.options.lease_seconds if lease_seconds is None else lease_seconds
        lease_ms = check_pop(count, worker_id, lease)
        assigned = check_user_list(assigned_users, "assigned_users")
        steal = check_user_list(steal_targets, "steal_targets")
        return [
            count, worker_id, lease_ms, self._base_ms, self._failed_ttl_ms,
            self.options.maintenance_batch, self.options.ordering, self._horizon_us,
            req or request_id(), len(assigned), *assigned, len(steal), *steal,
        ]  # fmt: skip

    @overload
    def pop(self, request: LeaseRequest, /) -> Call[Leased]: ...

    @overload
    def pop(
        self,
        count: int,
        worker_id: str,
        lease_seconds: float | None,
        assigned_users: Sequence[str] | None,
        steal_targets: Sequence[str] | None,
        req: str | None = None,
        /,
    ) -> Call[Leased]: ...

    def pop(self, request: LeaseRequest | int, /, *fields: Any) -> Call[Leased]:
        """Lease up to ``request.count`` tasks (the fields may also be given one by one).

        A resend of the same call (same request id) returns the tasks the first run
        leased; without a request id a new one is made here.
        """
        if not isinstance(request, LeaseRequest):
            request = LeaseRequest(request, *fields)
        return self._call("pop", self._lease_args(request), self.codec.leased)

    @overload
    def complete_and_pop(
        self, done: Sequence[tuple[Task, Any]], request: LeaseRequest, /
    ) -> Call[tuple[list[bool], Leased]]: ...

    @overload
    def complete_and_pop(
        self,
        done: Sequence[tuple[Task, Any]],
        count: int,
        worker_id: str,
        lease_seconds: float | None,
        assigned_users: Sequence[str] | None,
        steal_targets: Sequence[str] | None,
        req: str | None = None,
        /,
    ) -> Call[tuple[list[bool], Leased]]: ...

    def complete_and_pop(
        self, done: Sequence[tuple[Task, Any]], request: LeaseRequest | int, /, *fields: Any
    ) -> Call[tuple[list[bool], Leased]]:
        """Finish ``done`` (task, result) pairs and lease up to ``request.count`` tasks
        (0: only finish).

        A resend of the same call (same request id) answers the completions the same
        way and returns the tasks the first run leased.
        """
        if not isinstance(request, LeaseRequest):
            request = LeaseRequest(request, *fields)
        count = request.count
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValidationError(f"count must be a non-negative integer, got {count!r}")
        # a lease of none is checked as a lease of one, then sent with count 0
        args = self._lease_args(request if count else request._replace(count=1))
        args[0] = count
        completions: list[Any] = [len(done)]
        for task, result in done:
            completions.extend(self._completion(task, result))
        leased = self.codec.leased

        def parse(reply: list[Any]) -> tuple[list[bool], Leased]:
            acks, tasks = reply
            return [int(a) == 1 for a in acks], leased(tasks)

        args[9:9] = completions
        return self._call("complete_and_pop", args, parse)

    # acknowledgements and the rest ----------------------------------------------
    def encode_result(self, result: Any) -> EncodedResult:
        """``result`` serialized once; an ``EncodedResult`` passes through unchanged.

        Raises:
            SerializationError: the result cannot be serialized.
        """
        if isinstance(result, EncodedResult):
            return result
        return EncodedResult(dump_value(self.serializer, result, "result"))

    @staticmethod
    def _lease_of(task: Task) -> tuple[str, str]:
        if not isinstance(task, Task) or not task.task_id:
            raise ValidationError("expected a Task returned by pop()")
        if not task.lease_token:
            raise LeaseLost(f"task {task.task_id} holds no lease (it was not popped)")
        return task.task_id, task.lease_token

    def _completion(self, task: Task, result: Any) -> tuple[str, str, int, bytes]:
        """One completion's four values: task id, lease token, has result (0|1), result.

        A ``None`` result is sent (and kept) like any other, so a task that returned
        None reads differently from one whose result was consumed or has expired.
        """
        task_id, token = self._lease_of(task)
        if result is None:
            return task_id, token, 1, self._none
        return task_id, token, 1, self.encode_result(result)

    def complete(self, task: Task, result: Any) -> Call[bool]:
        """Finish a leased task (False when the lease was lost)."""
        args = [*self._completion(task, result), self.options.ordering, self._horizon_us]
        return self._call("complete", args, lambda r: int(r) == 1)

    def fail(
        self,
        task: Task,
        error: str | BaseException,
        retry: bool,
        delay: float | None,
        max_retries: int | None = None,
        traceback: str | None = None,
        reason: str | None = None,
        details: Any = None,
    ) -> Call[TaskState]:
        """Record a failed attempt; retry (SCHEDULED) or FAILED.

        ``max_retries`` (when not None) replaces the task's own retry budget for this
        decision, e.g. a handler's ``@task(max_retries=...)``. ``traceback``,
        ``reason`` (a short kind, e.g. ``"timeout"``) and ``details`` (any value the
        serializer takes) are kept as the task's own fields beside the error.
        """
        task_id, token = self._lease_of(task)
        delay_ms = -1 if delay is None else _seconds_ms(delay, "delay")
        budget = -1 if max_retries is None else _check_int(max_retries, "max_retries", 0, 1000)
        extra = (
            _optional_text(traceback, "traceback", MAX_TRACEBACK),
            _optional_text(reason, "reason", MAX_REASON),
            b"" if details is None else dump_value(self.serializer, details, "details"),
        )
        return self._fail_call(task_id, token, error_text(error), retry, delay_ms, budget, extra)

    def _fail_call(
        self,
        task_id: str,
        token: str,
        error: str,
        retry: bool,
        delay_ms: int,
        budget: int,
        extra: tuple[str, str, bytes] = ("", "", b""),
    ) -> Call[TaskState]:
        args = [
            task_id, token, error, 1 if retry else 0, self._base_ms, self._failed_ttl_ms,
            delay_ms, budget, *extra,
        ]  # fmt: skip
        return self._call("fail", args, lambda r: TaskState(text(r)))

    def fail_undecodable(self, leased: Leased) -> list[Call[TaskState]]:
        """FAILED, without retries, for each leased task that could not be decoded."""
        return [
            self._fail_call(task_id, token, error, False, -1, -1)
            for task_id, token, error in leased.undecodable
        ]

    def extend(self, task: Task, seconds: float | None) -> Call[datetime]:
        """Extend a held lease to now + seconds."""
        task_id, token = self._lease_of(task)
        ms = _seconds_ms(self.options.lease_seconds if seconds is None else seconds, "seconds")
        if ms <= 0:
            raise ValidationError("seconds must be positive")

        def parse(reply: Any) -> datetime:
            deadline = ms_to_dt(reply)
            assert deadline is not None
            task.lease_deadline = deadline
            return deadline

        return self._call("extend", [task_id, token, ms], parse)

    def extend_many(self, tasks: Sequence[Task], seconds: float | None) -> Call[list[bool]]:
        """Extend several held leases in one call; False for each lease that was lost."""
        ms = _seconds_ms(self.options.lease_seconds if seconds is None else seconds, "seconds")
        if ms <= 0:
            raise ValidationError("seconds must be positive")
        args: list[Any] = [ms]
        for task in tasks:
            args.extend(self._lease_of(task))

        def parse(reply: list[Any]) -> list[bool]:
            out = []
            for task, deadline in zip(tasks, reply, strict=True):
                if int(deadline) >= 0:
                    task.lease_deadline = ms_to_dt(deadline)
                out.append(int(deadline) >= 0)
            return out

        return self._call("extend_many", args, parse)

    def requeue(self, task: Task, delay: float) -> Call[TaskState]:
        """Give a leased task back without counting a failed attempt."""
        task_id, token = self._lease_of(task)
        delay_ms = _seconds_ms(delay, "delay")
        args = [task_id, token, delay_ms, self.options.ordering, self._horizon_us]
        return self._call("requeue", args, lambda r: TaskState(text(r)))

    def reclaim(self, limit: int) -> Call[int]:
        """Reclaim up to ``limit`` expired leases."""
        _check_int(limit, "limit", 1, MAX_SCAN)
        return self._call("reclaim", [limit, self._base_ms, self._failed_ttl_ms], int)

    def cancel(self, task_id: str) -> Call[bool]:
        """Cancel a task that has not ended."""
        self._check_id(task_id)
        args = [task_id, self._failed_ttl_ms, request_id()]
        return self._call("cancel", args, lambda r: int(r) == 1)

    def result(
        self, task_id: str, consume: bool, watch_seconds: float, req: str = ""
    ) -> Call[TaskOutcome | None]:
        """A task's outcome (None: unknown, expired or consumed); a pending task's
        outcome has only its state.

        ``watch_seconds > 0`` registers the caller as a waiter when the task is pending.
        ``consume`` reads the outcome once: ``req`` names the read, so its resend gets
        the outcome again while every other read gets None.
        """
        self._check_id(task_id)
        loads = self.serializer.loads

        def value(raw_value: Any) -> Any:
            return loads(raw_value if isinstance(raw_value, bytes) else raw_value.encode())

        def parse(reply: list[Any]) -> TaskOutcome | None:
            code = int(reply[0])
            if code == 4:
                return TaskOutcome(task_id=task_id, state=TaskState(text(reply[1])))
            if code not in _OUTCOME_STATES:
                return None
            result, error, ended, tb, reason, details = (
                None if v is None or v is False else v for v in reply[1:7]
            )
            return TaskOutcome(
                task_id=task_id,
                state=_OUTCOME_STATES[code],
                result=None if result is None else value(result),
                has_result=code == 1 and result is not None,
                error=None if error is None else text(error),
                traceback=None if tb is None else text(tb),
                reason=None if reason is None else text(reason),
                details=None if details is None else value(details),
                ended_at=ms_to_dt(ended),
            )

        watch_ms = max(round(watch_seconds * 1000), 0)
        args = [task_id, 1 if consume else 0, 1 if watch_ms else 0, watch_ms + 1000, req]
        return self._call("result", args, parse)

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

    def cleanup_dependencies(self, offset: int, limit: int) -> Call[tuple[int, int, int]]:
        """One pass of dependency repair: (examined, canceled, next offset)."""
        return self._call(
            "cleanup_dependencies",
            [offset, limit, self._failed_ttl_ms],
            lambda r: (int(r[0]), int(r[1]), int(r[2])),
        )

    def next_wakeup(self) -> Call[float | None]:
        """Seconds until a scheduled task is due or a lease expires (None: nothing pending)."""

        def parse(reply: Any) -> float | None:
            return None if int(reply) < 0 else int(reply) / 1000

        return self._call("next_wakeup", [], parse)

    def retry(self, task_id: str) -> Call[TaskState]:
        """Re-queue a FAILED or CANCELED task with a fresh retry budget."""
        self._check_id(task_id)
        args = [task_id, self.options.ordering, self._horizon_us, request_id()]
        return self._call("retry", args, lambda r: TaskState(text(r)))

    def purge(self, limit: int) -> Call[tuple[int, int]]:
        """Delete up to ``limit`` tasks; returns (deleted, remaining)."""
        return self._call("purge", [limit], lambda r: (int(r[0]), int(r[1])))

    def register_worker(self, info: WorkerInfo, ttl_seconds: float) -> Call[int]:
        """Register or refresh a worker; forget workers silent for ``ttl_seconds``."""
        args = [info.worker_id, info.model_dump_json(), round(ttl_seconds * 1000)]
        return self._call("register_worker", args, int)

    def unregister_worker(self, worker_id: str) -> Call[bool]:
        """Remove a worker's registration."""
        return self._call("unregister_worker", [worker_id], lambda r: int(r) == 1)

    def workers(self) -> Call[list[WorkerInfo]]:
        """The registered workers, with the age of their last heartbeat."""

        def parse(reply: list[Any]) -> list[WorkerInfo]:
            out = []
            for i in range(0, len(reply), 2):
                info = WorkerInfo.model_validate_json(reply[i])
                out.append(info.model_copy(update={"last_seen_seconds": int(reply[i + 1]) / 1000}))
            return out

        return self._call("workers", [], parse)

    def set_user_limits(self, user_id: str, weight: int, max_in_flight: int | None) -> Call[None]:
        """Set a user's round-robin weight and in-flight cap."""
        cap = check_user_limits(user_id, weight, max_in_flight)
        return self._call("set_user_limits", [user_id, weight, cap], lambda r: None)

    def stats(self, user_limit: int) -> Call[QueueStats]:
        """A snapshot of counts, counters and per-user load."""
        _check_int(user_limit, "user_limit", 0, MAX_SCAN)

        def parse(reply: list[Any]) -> QueueStats:
            counts, counters, users, active, capped = reply
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
            )

        return self._call("stats", [max(user_limit, 1)], parse)

    def maintain(self, limit: int) -> Call[int]:
        """Remove up to ``limit`` expired entries per terminal registry and expired
        worker registrations; returns how many entries were removed."""
        _check_int(limit, "batch", 1, MAX_SCAN)
        return self._call("maintain", [limit], int)

    # schedules: fairque.schedule_ops builds their arguments and reads the replies ------
    @property
    def schedule_codec(self) -> ScheduleCodec:
        """The schedule scripts' arguments and parsers (made on first use)."""
        codec: ScheduleCodec | None = self.__dict__.get("_schedule_codec")
        if codec is None:
            codec = self.__dict__["_schedule_codec"] = ScheduleCodec(
                self.keys, self.serializer, self.codec
            )
        return codec

    def add_schedule(self, schedule: Schedule) -> Call[Schedule]:
        """Store a new schedule (the same definition again is a no-op)."""
        return self._call("add_schedule", *self.schedule_codec.add_schedule(schedule))

    def update_schedule(self, schedule: Schedule) -> Call[Schedule]:
        """Replace a schedule's definition."""
        return self._call("update_schedule", *self.schedule_codec.update_schedule(schedule))

    def remove_schedule(self, schedule_id: str) -> Call[bool]:
        """Delete a schedule (False: there was none)."""
        return self._call("remove_schedule", *self.schedule_codec.remove_schedule(schedule_id))

    def pause_schedule(self, schedule_id: str) -> Call[Schedule]:
        """Stop a schedule from firing."""
        return self._call("pause_schedule", *self.schedule_codec.pause_schedule(schedule_id))

    def resume_schedule(self, schedule_id: str) -> Call[Schedule]:
        """Let a paused schedule fire again, from now on."""
        return self._call("resume_schedule", *self.schedule_codec.resume_schedule(schedule_id))

    def schedules(self, limit: int) -> Call[list[Schedule]]:
        """Up to ``limit`` schedules, soonest next slot first."""
        return self._call("schedules", *self.schedule_codec.schedules(limit))

    def due_schedules(self, limit: int) -> Call[DueSchedules]:
        """The leader's read: server time, due schedules, the next slot after them."""
        return self._call("due_schedules", *self.schedule_codec.due_schedules(limit))

    def fire_schedule(self, stored: StoredSchedule, now_ms: int, token: str) -> Call[FireOutcome]:
        """Fire a due schedule's slots as its misfire policy plans them at ``now_ms``."""
        built = self.schedule_codec.fire_schedule(
            stored, now_ms, token, self.options.ordering, self._horizon_us
        )
        return self._call("fire_schedule", *built)

    def acquire_scheduler_lock(self, token: str, ttl: float) -> Call[tuple[bool, float]]:
        """Take the scheduler lock for ``ttl`` seconds: (acquired, seconds it lasts)."""
        built = self.schedule_codec.acquire_scheduler_lock(token, ttl)
        return self._call("acquire_scheduler_lock", *built)

    def renew_scheduler_lock(self, token: str, ttl: float) -> Call[bool]:
        """Extend the scheduler lock held by ``token`` (False: it is lost)."""
        built = self.schedule_codec.renew_scheduler_lock(token, ttl)
        return self._call("renew_scheduler_lock", *built)

    def release_scheduler_lock(self, token: str) -> Call[bool]:
        """Give up the scheduler lock held by ``token`` (compare and delete)."""
        built = self.schedule_codec.release_scheduler_lock(token)
        return self._call("release_scheduler_lock", *built)

    # constraints: fairque.constraints holds the models and the matcher -------------
    def define_constraint(self, constraint: Constraint) -> Call[int]:
        """Add or replace a constraint; the constraints version after it."""
        if not isinstance(constraint, Constraint):
            raise ValidationError(f"expected a Constraint, got {type(constraint).__name__}")
        args = [constraint.id, constraint.dumps(), MAX_CONSTRAINTS]
        return self._call("define_constraint", args, int)

    def remove_constraint(self, constraint_id: str) -> Call[bool]:
        """Remove a constraint (False: there was none); its parked tasks go back."""
        check_constraint_id(constraint_id)
        return self._call("remove_constraint", [constraint_id, request_id()], lambda r: r == 1)

    def constraints(
        self, constraint_id: str | None = None, usage: bool = True
    ) -> Call[tuple[ConstraintSet, list[ConstraintInfo]]]:
        """The queue's constraints (one, with ``constraint_id``) as a matcher set and,
        with ``usage``, each with its buckets' running and parked counts."""
        if constraint_id is not None:
            check_constraint_id(constraint_id)

        def parse(reply: list[Any]) -> tuple[ConstraintSet, list[ConstraintInfo]]:
            infos = []
            for _, raw_def, use in reply[1:]:
                buckets = {
                    text(use[i]): (int(use[i + 1]), int(use[i + 2])) for i in range(0, len(use), 3)
                }
                infos.append(
                    ConstraintInfo(
                        Constraint.loads(raw(raw_def)),
                        sum(r for r, _ in buckets.values()),
                        sum(p for _, p in buckets.values()),
                        buckets,
                    )
                )
            infos.sort(key=lambda i: i.constraint.id)
            found = tuple(i.constraint for i in infos)
            return ConstraintSet(int(reply[0]), found), infos

        args = [constraint_id or "", "1" if usage else "0"]
        return self._call("constraints", args, parse)
