"""Sans-IO core: every queue operation built once as (script, keys, args, parse).

``FairQueue`` and ``AsyncFairQueue`` only execute the ``Call`` objects built here, so
the two clients cannot drift apart.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Generic, TypeVar

import orjson
from redis.exceptions import ResponseError

from fairque.checks import (
    MAX_SCAN,
    check_delays,
    check_pop,
    check_task_id,
    check_task_list,
    check_user_limits,
    check_user_list,
    check_wait,
    check_xcom_key,
    dump_value,
    error_text,
)
from fairque.checks import check_int as _check_int
from fairque.checks import check_timeout as check_timeout  # used by both clients
from fairque.checks import seconds_ms as _seconds_ms
from fairque.codec import Serializer, get_serializer
from fairque.errors import (
    DependencyCycleError,
    FairqueError,
    LeaseLost,
    PayloadTooLarge,
    SerializationError,
    TaskCanceled,
    TaskFailed,
    ValidationError,
    script_error,
)
from fairque.keys import QueueKeys, validate_queue_name
from fairque.models import (
    MAX_TASK_ID,
    MAX_USER_ID,
    Priority,
    QueueStats,
    Task,
    TaskState,
    UserStats,
    WorkerInfo,
    plain_identifier,
)
from fairque.options import QueueOptions
from fairque.scripts import Script, load_all

T = TypeVar("T")

_STATE_ORDER = (
    TaskState.SCHEDULED,
    TaskState.DEFERRED,
    TaskState.QUEUED,
    TaskState.STARTED,
    TaskState.FINISHED,
    TaskState.FAILED,
    TaskState.CANCELED,
)


class EncodedResult(bytes):
    """A result already serialized with the queue's serializer (sent as it is)."""


class Leased(list[Task]):
    """The tasks one lease request returned.

    ``undecodable`` holds ``(task_id, lease_token, error)`` for leased tasks whose stored
    data could not be decoded; the clients fail those on their own.
    """

    def __init__(self) -> None:
        super().__init__()
        self.undecodable: list[tuple[str, str, str]] = []


def request_id() -> str:
    """A new id for one request: the same id on a resend lets a script recognise it."""
    return os.urandom(8).hex()


@dataclass(frozen=True)
class Call(Generic[T]):
    """One round trip: a script (or a plain command when ``script`` is None)."""

    script: Script | None
    keys: tuple[str, ...]
    args: tuple[Any, ...]
    parse: Callable[[Any], T]


def translate_error(exc: ResponseError) -> FairqueError | ResponseError:
    """Turn a script's ``FQERR <code> <detail>`` error reply into its exception."""
    message = str(exc)
    marker = message.find("FQERR ")
    if marker < 0:
        return exc
    code_text, _, detail = message[marker + 6 :].partition(" ")
    try:
        code = int(code_text)
    except ValueError:
        return exc
    return script_error(code, detail.split(" script:", 1)[0].strip())


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _raw(value: Any) -> bytes:
    """A reply value as the bytes a non-decoding client returns."""
    return value if isinstance(value, bytes) else str(value).encode()


def _optional_text(value: bytes | None) -> str | None:
    return None if value is None else value.decode()


def _ms_to_dt(value: Any) -> datetime | None:
    if value is None or value == b"" or value == "":
        return None
    return datetime.fromtimestamp(int(value) / 1000, tz=timezone.utc)


_PRIORITIES = {str(int(p)).encode(): p for p in Priority}
_STATES = {s.value.encode(): s for s in TaskState}
_TASK_FIELDS = frozenset(Task.model_fields)


def _stored_task(**values: Any) -> Task:
    """A Task from trusted, complete stored values, without validation.

    Does what ``Task.model_construct`` does for a complete set of fields, minus the
    per-field default handling that made it the costliest step of leasing a task.
    """
    if values.keys() != _TASK_FIELDS:  # pragma: no cover - guards edits of task_from_hash
        raise AssertionError(f"fields missing: {sorted(_TASK_FIELDS - values.keys())}")
    task = object.__new__(Task)
    object.__setattr__(task, "__dict__", values)
    object.__setattr__(task, "__pydantic_fields_set__", set(_TASK_FIELDS))
    object.__setattr__(task, "__pydantic_extra__", None)
    object.__setattr__(task, "__pydantic_private__", None)
    return task


_PRIORITY_TYPES = (int, Priority)


class Operations:
    """Builds the calls of one queue; shared by the sync and async clients."""

    def __init__(self, queue: str, options: QueueOptions) -> None:
        self.queue = validate_queue_name(queue)
        self.options = options
        self.keys = QueueKeys(self.queue)
        self.serializer: Serializer = get_serializer(options.serializer)
        self.scripts = load_all()
        self._horizon_us = round(options.aging_horizon_seconds * 1_000_000)
        self._base_ms = round(options.retry_base_seconds * 1000)
        self._failed_ttl_ms = round(options.failed_ttl_seconds * 1000)
        self._script_keys = {
            name: tuple(getattr(self.keys, key) for key in script.key_names)
            for name, script in self.scripts.items()
        }

    def _call(self, name: str, args: Sequence[Any], parse: Callable[[Any], T]) -> Call[T]:
        """A call of script ``name``: its KEYS are the ones its header names, in order."""
        return Call(self.scripts[name], self._script_keys[name], tuple(args), parse)

    # tasks <-> hashes -----------------------------------------------------------
    def task_from_hash(self, flat: Sequence[Any] | Mapping[Any, Any]) -> Task:
        """Build a Task from an HGETALL reply (flat list or mapping).

        This runs once per leased task: fields are looked up as the bytes the server
        sent, and only the text fields are decoded.
        """
        raw: dict[Any, Any]
        if type(flat) is list or not isinstance(flat, Mapping):
            it = iter(flat)
            raw = dict(zip(it, it, strict=True))
        else:
            raw = dict(flat)
        if raw and type(next(iter(raw))) is not bytes:  # a client that decodes replies
            raw = {_raw(k): _raw(v) for k, v in raw.items()}
        get = raw.get
        payload, timeout, deps = get(b"payload"), get(b"timeout"), get(b"deps")
        return _stored_task(
            task_id=raw[b"id"].decode(),
            user_id=raw[b"user"].decode(),
            name=raw[b"name"].decode(),
            payload=self.serializer.loads(payload) if payload is not None else None,
            priority=_PRIORITIES[raw[b"prio"]],
            retry_count=int(get(b"retries", 0)),
            max_retries=int(get(b"max_retries", 0)),
            created_at=_ms_to_dt(get(b"created")),
            execute_after=_ms_to_dt(get(b"run_at")),
            state=_STATES.get(get(b"state", b"")),
            depends_on=tuple(orjson.loads(deps)) if deps else (),
            on_dependency_failure=get(b"on_dep_fail", b"cancel").decode(),
            timeout=int(timeout) / 1000 if timeout is not None else None,
            keep_result=get(b"keep_result", b"1") == b"1",
            result_ttl=round(int(get(b"result_ttl", 0)) / 1000),
            error=_optional_text(get(b"error")),
            lease_token=_optional_text(get(b"lease")),
            worker_id=_optional_text(get(b"worker")),
            lease_deadline=_ms_to_dt(get(b"deadline")),
            started_at=_ms_to_dt(get(b"started")),
            ended_at=_ms_to_dt(get(b"ended")),
        )

    def _encode_task(self, task: Task) -> tuple[Task, list[Any]]:
        if not isinstance(task, Task):
            raise ValidationError(f"expected a Task, got {type(task).__name__}")
        payload = self._dump_payload(task.payload)
        task_id = task.task_id or uuid.uuid4().hex
        max_retries = self.options.max_retries if task.max_retries is None else task.max_retries
        ttl_s = self.options.result_ttl_seconds if task.result_ttl is None else task.result_ttl
        run_at_ms = -1
        if task.execute_after is not None:
            run_at_ms = round(task.execute_after.timestamp() * 1000)
        timeout_ms = -1 if task.timeout is None else round(task.timeout * 1000)
        updates = {
            "task_id": task_id,
            "max_retries": max_retries,
            "result_ttl": round(ttl_s),
        }
        prepared = task.model_copy(update=updates)
        args = [
            task_id, task.user_id, task.name, payload, int(task.priority), max_retries,
            -1, run_at_ms, timeout_ms, 1 if task.keep_result else 0, round(ttl_s * 1000),
            orjson.dumps(list(task.depends_on)).decode() if task.depends_on else "",
            task.on_dependency_failure,
        ]  # fmt: skip
        return prepared, args

    def _dump_payload(self, payload: Any) -> bytes:
        try:  # inline (not dump_value): this runs on every push
            data = self.serializer.dumps(payload)
        except SerializationError as exc:
            raise SerializationError(f"payload: {exc}") from exc
        if len(data) > self.options.max_payload_bytes:
            raise PayloadTooLarge(
                f"payload is {len(data)} bytes; the limit is {self.options.max_payload_bytes}"
            )
        return data

    def _push_head(self, n: int) -> list[Any]:
        """The push script's arguments before the per-task values.

        Only ``on_duplicate="error"`` needs a request id (to tell its own resend from a
        duplicate); otherwise an existing id is a no-op anyway.
        """
        on_dup = self.options.on_duplicate
        req = request_id() if on_dup == "error" else ""
        return [self.options.ordering, self._horizon_us, on_dup, n, self._failed_ttl_ms, req]

    # operations -----------------------------------------------------------------
    def push_many(
        self, tasks: Iterable[Task], delays: Sequence[float | timedelta | None] | None = None
    ) -> Call[list[Task]]:
        """Push tasks atomically; ``delays[i]`` (seconds) delays task i.

        Upstreams inside the batch are sent before their dependents; a cycle is
        rejected before anything reaches the server.
        """
        tasks = check_task_list(tasks)
        delays = check_delays(delays, len(tasks))
        encoded: list[tuple[Task, list[Any]]] = []
        seen: set[str] = set()
        for i, task in enumerate(tasks):
            p, task_args = self._encode_task(task)
            delay = delays[i] if delays is not None else None
            if delay is not None:
                if p.execute_after is not None:
                    raise ValidationError("give either delay or execute_after, not both")
                task_args[6] = _seconds_ms(delay, "delay")
            task_id = p.task_id or ""
            if task_id in seen:
                raise ValidationError(f"task id {task_id!r} appears twice in one batch")
            seen.add(task_id)
            encoded.append((p, task_args))
        if not encoded:
            raise ValidationError("push_many needs at least one task")
        order = dependency_order([p for p, _ in encoded])
        args = self._push_head(len(encoded))
        for i in order:
            args.extend(encoded[i][1])
        prepared = [encoded[i][0] for i in order]
        position = {i: n for n, i in enumerate(order)}

        def parse(reply: list[Any]) -> list[Task]:
            out = []
            for n in range(len(prepared)):
                p, entry = prepared[position[n]], reply[position[n]]
                if int(entry[0]) == 1:
                    out.append(self.task_from_hash(entry[1]))
                else:
                    out.append(
                        p.model_copy(
                            update={
                                "state": TaskState(_text(entry[1])),
                                "created_at": _ms_to_dt(entry[2]) if len(entry) > 2 else None,
                                "retry_count": 0,
                            }
                        )
                    )
            return out

        return self._call("push", args, parse)

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
        data = self._dump_payload(payload)
        tid = task_id or uuid.uuid4().hex
        retries = self.options.max_retries if max_retries is None else max_retries
        ttl_s = self.options.result_ttl_seconds
        args = self._push_head(1)
        args += [
            tid, user_id, name, data, int(priority), retries, -1, -1, -1,
            1 if keep_result else 0, round(ttl_s * 1000), "", "cancel",
        ]  # fmt: skip

        def parse(reply: list[Any]) -> Task:
            entry = reply[0]
            if int(entry[0]) == 1:
                return self.task_from_hash(entry[1])
            return _stored_task(
                task_id=tid, user_id=user_id, name=name, payload=payload,
                priority=Priority(priority), retry_count=0, max_retries=retries,
                created_at=_ms_to_dt(entry[2]) if len(entry) > 2 else None, execute_after=None,
                state=_STATES[_raw(entry[1])], depends_on=(), on_dependency_failure="cancel",
                timeout=None, keep_result=keep_result, result_ttl=round(ttl_s), error=None,
                lease_token=None, worker_id=None, lease_deadline=None, started_at=None,
                ended_at=None,
            )  # fmt: skip

        return self._call("push", args, parse)

    def pop(
        self,
        count: int,
        worker_id: str,
        lease_seconds: float | None,
        assigned_users: Sequence[str] | None,
        steal_targets: Sequence[str] | None,
        req: str | None = None,
    ) -> Call[Leased]:
        """Lease up to ``count`` tasks; ``req`` identifies the request (made here when None).

        A resend of the same call (same ``req``) returns the tasks the first run leased.
        """
        lease = self.options.lease_seconds if lease_seconds is None else lease_seconds
        lease_ms = check_pop(count, worker_id, lease)
        assigned = check_user_list(assigned_users, "assigned_users")
        steal = check_user_list(steal_targets, "steal_targets")
        args: list[Any] = [
            count, worker_id, lease_ms, self._base_ms, self._failed_ttl_ms,
            self.options.maintenance_batch, self.options.ordering, self._horizon_us,
            req or request_id(), len(assigned), *assigned, len(steal), *steal,
        ]  # fmt: skip
        return self._call("pop", args, self.leased)

    def complete_and_pop(
        self,
        done: Sequence[tuple[Task, Any]],
        count: int,
        worker_id: str,
        lease_seconds: float | None,
        assigned_users: Sequence[str] | None,
        steal_targets: Sequence[str] | None,
        req: str | None = None,
    ) -> Call[tuple[list[bool], Leased]]:
        """Finish ``done`` (task, result) pairs and lease up to ``count`` tasks.

        A resend of the same call (same ``req``) answers the completions the same way
        and returns the tasks the first run leased.
        """
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValidationError(f"count must be a non-negative integer, got {count!r}")
        head = self.pop(max(count, 1), worker_id, lease_seconds, assigned_users, steal_targets, req)
        pop_args = list(head.args)
        pop_args[0] = count
        completions: list[Any] = [len(done)]
        for task, result in done:
            task_id, token = self._lease_of(task)
            has_result = result is not None
            data = self.encode_result(result) if has_result else b""
            completions.extend((task_id, token, 1 if has_result else 0, data))
        args = [*pop_args[:9], *completions, *pop_args[9:]]

        def parse(reply: list[Any]) -> tuple[list[bool], Leased]:
            acks, leased = reply
            return [int(a) == 1 for a in acks], self.leased(leased)

        return self._call("complete_and_pop", args, parse)

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

    def complete(self, task: Task, result: Any) -> Call[bool]:
        """Finish a leased task (False when the lease was lost)."""
        task_id, token = self._lease_of(task)
        has_result = result is not None
        data = self.encode_result(result) if has_result else b""
        return self._call(
            "complete",
            [task_id, token, 1 if has_result else 0, data, self.options.ordering, self._horizon_us],
            lambda r: int(r) == 1,
        )

    def fail(
        self,
        task: Task,
        error: str | BaseException,
        retry: bool,
        delay: float | None,
        max_retries: int | None = None,
    ) -> Call[TaskState]:
        """Record a failed attempt; retry (SCHEDULED) or FAILED.

        ``max_retries`` (when not None) replaces the task's own retry budget for this
        decision, e.g. a handler's ``@task(max_retries=...)``.
        """
        task_id, token = self._lease_of(task)
        delay_ms = -1 if delay is None else _seconds_ms(delay, "delay")
        budget = -1 if max_retries is None else _check_int(max_retries, "max_retries", 0, 1000)
        return self._fail_call(task_id, token, error_text(error), retry, delay_ms, budget)

    def _fail_call(
        self, task_id: str, token: str, error: str, retry: bool, delay_ms: int, budget: int
    ) -> Call[TaskState]:
        args = [
            task_id, token, error, 1 if retry else 0, self._base_ms, self._failed_ttl_ms,
            delay_ms, budget,
        ]  # fmt: skip
        return self._call("fail", args, lambda r: TaskState(_text(r)))

    def leased(self, reply: Sequence[Any]) -> Leased:
        """Decode a lease reply. A task that cannot be decoded does not take the batch
        with it: it is listed in ``Leased.undecodable`` for ``fail_undecodable``."""
        out = Leased()
        for flat in reply:
            try:
                out.append(self.task_from_hash(flat))
            except Exception as exc:  # any decoding problem of one stored task
                fields = dict(zip(flat[::2], flat[1::2], strict=True))
                out.undecodable.append(
                    (_text(fields.get(b"id", fields.get("id", b""))),
                     _text(fields.get(b"lease", fields.get("lease", b""))),
                     f"undecodable task: {type(exc).__name__}: {exc}")
                )  # fmt: skip
        return out

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
            deadline = _ms_to_dt(reply)
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
                    task.lease_deadline = _ms_to_dt(deadline)
                out.append(int(deadline) >= 0)
            return out

        return self._call("extend_many", args, parse)

    def requeue(self, task: Task, delay: float) -> Call[TaskState]:
        """Give a leased task back without counting a failed attempt."""
        task_id, token = self._lease_of(task)
        delay_ms = _seconds_ms(delay, "delay")
        args = [task_id, token, delay_ms, self.options.ordering, self._horizon_us]
        return self._call("requeue", args, lambda r: TaskState(_text(r)))

    def reclaim(self, limit: int) -> Call[int]:
        """Reclaim up to ``limit`` expired leases."""
        _check_int(limit, "limit", 1, MAX_SCAN)
        return self._call("reclaim", [limit, self._base_ms, self._failed_ttl_ms], int)

    def cancel(self, task_id: str) -> Call[bool]:
        """Cancel a task that has not ended."""
        self._check_id(task_id)
        args = [task_id, self._failed_ttl_ms, request_id()]
        return self._call("cancel", args, lambda r: int(r) == 1)

    def get(self, task_id: str) -> Call[Task | None]:
        """Read one task (a plain HGETALL)."""
        self._check_id(task_id)

        def parse(reply: Any) -> Task | None:
            return self.task_from_hash(reply) if reply else None

        return Call(None, (self.keys.task(task_id),), ("HGETALL",), parse)

    def result(self, task_id: str, consume: bool, watch_seconds: float) -> Call[tuple[int, Any]]:
        """A task's outcome: (0 missing|1 finished|2 failed|3 canceled|4 pending, value).

        ``watch_seconds > 0`` registers the caller as a waiter when the task is pending.
        """
        self._check_id(task_id)

        def parse(reply: list[Any]) -> tuple[int, Any]:
            code = int(reply[0])
            if code == 1:
                raw = reply[1]
                if raw is None or raw is False:
                    return 1, None
                return 1, self.serializer.loads(raw if isinstance(raw, bytes) else raw.encode())
            if code in (2, 3, 4):
                return code, _text(reply[1])
            return 0, None

        watch_ms = max(round(watch_seconds * 1000), 0)
        args = [task_id, 1 if consume else 0, 1 if watch_ms else 0, watch_ms + 1000]
        return self._call("result", args, parse)

    def wait_done(self, task_id: str, timeout: float) -> Call[bool]:
        """Block until the task's ending script signals, or ``timeout`` seconds pass."""
        done = self.keys.done(task_id)
        wait = max(round(timeout, 3), 0.001)
        return Call(None, (done, done), ("BLMOVE", "RIGHT", "LEFT", wait), lambda r: r is not None)

    def cleanup_dependencies(self, offset: int, limit: int) -> Call[tuple[int, int, int]]:
        """One pass of dependency repair: (examined, canceled, next offset)."""
        return self._call(
            "cleanup_dependencies",
            [offset, limit, self._failed_ttl_ms],
            lambda r: (int(r[0]), int(r[1]), int(r[2])),
        )

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

    def next_wakeup(self) -> Call[float | None]:
        """Seconds until a scheduled task is due or a lease expires (None: nothing pending)."""

        def parse(reply: Any) -> float | None:
            return None if int(reply) < 0 else int(reply) / 1000

        return self._call("next_wakeup", [], parse)

    def wait_for_work(self, timeout: float) -> Call[bool]:
        """Block until a push signals ready work or ``timeout`` seconds pass."""
        timeout = check_wait(timeout)
        # BLPOP's timeout has millisecond resolution; never round a short wait to 0 (forever)
        wait = max(round(timeout, 3), 0.001)
        return Call(None, (self.keys.wake,), ("BLPOP", wait), lambda r: r is not None)

    def wake(self, n: int) -> Call[int]:
        """Push ``n`` wake-up tokens, so up to ``n`` idle workers look at the queue again."""
        _check_int(n, "n", 1, 64)
        return Call(None, (self.keys.wake,), ("LPUSH", *("1" * n)), int)

    def retry(self, task_id: str) -> Call[TaskState]:
        """Re-queue a FAILED or CANCELED task with a fresh retry budget."""
        self._check_id(task_id)
        args = [task_id, self.options.ordering, self._horizon_us, request_id()]
        return self._call("retry", args, lambda r: TaskState(_text(r)))

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
                counters={
                    _text(counters[i]): int(counters[i + 1]) for i in range(0, len(counters), 2)
                },
                users=[
                    UserStats(
                        user_id=_text(users[i]),
                        ready=int(users[i + 1]),
                        in_flight=int(users[i + 2]),
                    )
                    for i in range(0, len(users), 3)
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

    _check_id = staticmethod(check_task_id)


def dependency_order(tasks: Sequence[Task]) -> list[int]:
    """Indexes of ``tasks`` with in-batch upstreams first (stable otherwise).

    Raises:
        DependencyCycleError: the in-batch dependencies form a cycle (named in the message).
    """
    index = {t.task_id: i for i, t in enumerate(tasks)}
    ups: list[list[int]] = [[index[d] for d in t.depends_on if d in index] for t in tasks]
    for t in tasks:
        if t.task_id in t.depends_on:
            raise DependencyCycleError(f"task {t.task_id} depends on itself")
    order: list[int] = []
    state = [0] * len(tasks)  # 0 new, 1 on the current path, 2 placed
    for root in range(len(tasks)):
        if state[root]:
            continue
        stack: list[tuple[int, int]] = [(root, 0)]
        state[root] = 1
        while stack:
            node, child = stack[-1]
            if child < len(ups[node]):
                stack[-1] = (node, child + 1)
                nxt = ups[node][child]
                if state[nxt] == 1:
                    path = [tasks[n].task_id for n, _ in stack]
                    cycle = [*path[path.index(tasks[nxt].task_id) :], tasks[nxt].task_id]
                    raise DependencyCycleError("dependency cycle: " + " -> ".join(map(str, cycle)))
                if state[nxt] == 0:
                    state[nxt] = 1
                    stack.append((nxt, 0))
            else:
                stack.pop()
                state[node] = 2
                order.append(node)
    return order


def outcome_value(task_id: str, code: int, value: Any) -> Any:
    """Turn a ``result`` reply into the value or the matching exception."""
    if code == 2:
        raise TaskFailed(f"task {task_id} failed: {value}")
    if code == 3:
        raise TaskCanceled(f"task {task_id} was canceled{': ' + value if value else ''}")
    return value


def blocking_limit(client: Any) -> float | None:
    """The longest blocking wait ``client`` allows before its socket timeout fires.

    redis-py clients may carry a ``socket_timeout`` (redis-py 8 sets 5 s by default);
    a BLPOP or BLMOVE longer than that would fail with a TimeoutError, so blocking
    waits are cut into pieces shorter than it.
    """
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if kwargs is None:
        kwargs = getattr(getattr(client, "nodes_manager", None), "connection_kwargs", None) or {}
    # redis-py 8 keeps its 5 s default out of connection_kwargs; assume it when unsure
    timeout = kwargs.get("socket_timeout", kwargs.get("orig_socket_timeout", 5.0))
    if not timeout:
        return None
    return max(float(timeout) - 0.5, float(timeout) / 2)
