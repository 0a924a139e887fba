"""Builders of the lease calls: lease, complete, fail, extend, give back, reclaim,
and the maintenance and worker registration that ride on the same registries.

``_lease_args`` is the one lease request every lease call sends first; the completions
of ``complete_and_pop`` follow it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar, overload

from fairque.core.checks import (
    MAX_POP_COUNT,
    MAX_SCAN,
    check_name_list,
    check_pop,
    check_user_list,
    dump_value,
    error_text,
)
from fairque.core.checks import check_int as _check_int
from fairque.core.checks import seconds_ms as _seconds_ms
from fairque.core.ops.base import OperationsBase
from fairque.core.records import (
    Call,
    EncodedResult,
    Leased,
    LeaseRequest,
    request_id,
    shard_state_of,
)
from fairque.core.tally import waited
from fairque.core.taskhash import ms_to_dt, text
from fairque.errors import LeaseLost, PayloadTooLarge, ValidationError
from fairque.models import Task, TaskState, WorkerInfo

T = TypeVar("T")

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


class LeaseOperations(OperationsBase):
    """Everything a worker sends about the tasks it leases."""

    #: the last names list checked, and its checked copy (a worker's list is reused)
    _names_seen: tuple[tuple[str, ...], list[str]] | None = None

    def _lease_args(self, request: LeaseRequest) -> list[Any]:
        """``pop.lua``'s ARGV for ``request``: nine values, then the two user lists and
        the handled names (``complete_and_pop.lua`` takes the same prefix, then its
        completions)."""
        count, worker_id, lease_seconds, assigned_users, steal_targets, req, names, most = request
        lease = self.options.lease_seconds if lease_seconds is None else lease_seconds
        lease_ms = check_pop(count, worker_id, lease)
        assigned = check_user_list(assigned_users, "assigned_users")
        steal = check_user_list(steal_targets, "steal_targets")
        # a worker sends the same tuple (its registry's) with every lease: checked once
        seen = self._names_seen
        if seen is not None and names is seen[0]:
            handled = seen[1]
        else:
            handled = check_name_list(names)
            if isinstance(names, tuple):  # immutable: the check holds while it is reused
                self._names_seen = (names, handled)
        return [
            count, worker_id, lease_ms, self._base_ms, self._failed_ttl_ms,
            self.options.maintenance_batch, self.options.ordering, self._horizon_us,
            req or request_id(), len(assigned), *assigned, len(steal), *steal,
            len(handled), *handled,
            "" if most is None else _check_int(most, "max_held", 1, MAX_POP_COUNT),
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
        names: Sequence[str] | None = None,
        /,
    ) -> Call[Leased]: ...

    def pop(self, request: LeaseRequest | int, /, *fields: Any) -> Call[Leased]:
        """Lease up to ``request.count`` tasks (the fields may also be given one by one).

        A resend of the same call (same request id) returns the tasks the first run
        leased; without a request id a new one is made here.
        """
        if not isinstance(request, LeaseRequest):
            request = LeaseRequest(request, *fields)
        args = self._lease_args(request)
        return self._call("pop", args, self._counted(args[8]))

    def _counted(self, req: str) -> Callable[[Any], Leased]:
        """The parse of a lease reply that counts its tasks (``tally``) once per request."""
        leased, tally = self.codec.leased, self.tally

        def parse(reply: Any) -> Leased:
            out = leased(reply)
            if out:  # (an undecodable task has no wait counted)
                waits = [waited(flat) for flat in reply] if len(out) == len(reply) else []
                tally.leased(out, waits, req)
            return out

        return parse

    @overload
    def complete_and_pop(
        self, done: Sequence[tuple[Task, Any]], request: LeaseRequest, /, *,
        with_state: bool = False,
    ) -> Call[tuple[list[bool], Leased]]: ...  # fmt: skip

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
        names: Sequence[str] | None = None,
        /,
        *,
        with_state: bool = False,
    ) -> Call[tuple[list[bool], Leased]]: ...

    def complete_and_pop(
        self, done: Sequence[tuple[Task, Any]], request: LeaseRequest | int, /, *fields: Any,
        with_state: bool = False,
    ) -> Call[tuple[list[bool], Leased]]:  # fmt: skip
        """Finish ``done`` (task, result) pairs and lease up to ``request.count`` tasks
        (0: only finish); ``with_state``: the leased tasks carry the shard's state after
        the lease (``Leased.state``), which a sharded client weighs next.

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
        # the completions follow the lease request (pop.lua's ARGV is their prefix)
        args.append(len(done))
        for task, result in done:
            args.extend(self._completion(task, result))
        if with_state:
            args.append("1")
        leased, ended = self._counted(args[8]), self.tally.ended

        def parse(reply: list[Any]) -> tuple[list[bool], Leased]:
            acks, tasks, *state = reply
            out = leased(tasks)
            if state:
                out.state = shard_state_of(state[0])
            oks = [int(a) == 1 for a in acks]
            for (task, _), ok in zip(done, oks, strict=True):
                if ok:
                    ended(task, "done")
            return oks, out

        return self._call("complete_and_pop", args, parse)

    def encode_result(self, result: Any) -> EncodedResult:
        """``result`` serialized once; an ``EncodedResult`` passes through unchanged.

        Raises:
            SerializationError: the result cannot be serialized.
            PayloadTooLarge: it is over ``max_payload_bytes`` (a result is kept for
                ``result_ttl_seconds``: it is bounded as a payload is).
        """
        if isinstance(result, EncodedResult):
            return result
        data = dump_value(self.serializer, result, "result")
        if len(data) > self.options.max_payload_bytes:
            raise PayloadTooLarge(
                f"result is {len(data)} bytes; the limit is {self.options.max_payload_bytes}"
                " (max_payload_bytes)",
                field="result",
            )
        return EncodedResult(data)

    @staticmethod
    def _lease_of(task: Task) -> tuple[str, str]:
        if not isinstance(task, Task) or not task.task_id:
            raise ValidationError("expected a Task returned by pop()")
        if not task.lease_token:
            raise LeaseLost(f"task {task.task_id} holds no lease (it was not popped)")
        return task.task_id, task.lease_token

    def _completion(self, task: Task, result: Any) -> tuple[str, str, int, bytes, str]:
        """One completion's five values: task id, lease token, has result (0|1), result,
        the handler's run (``Task.run_seconds`` in us; '': not reported).

        A ``None`` result is sent (and kept) like any other, so a task that returned
        None reads differently from one whose result was consumed or has expired.
        """
        task_id, token = self._lease_of(task)
        if result is None:
            return task_id, token, 1, self._none, task._run_us
        return task_id, token, 1, self.encode_result(result), task._run_us

    def complete(self, task: Task, result: Any) -> Call[bool]:
        """Finish a leased task (False when the lease was lost)."""
        *values, run_us = self._completion(task, result)
        args = [*values, self.options.ordering, self._horizon_us, run_us]
        tally = self.tally

        def parse(reply: Any) -> bool:
            if int(reply) != 1:
                return False
            tally.ended(task, "done")
            return True

        return self._call("complete", args, parse)

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
        call = self._fail_call(
            task_id, token, error_text(error), retry, delay_ms, budget, extra, task._run_us
        )
        return self._ended(call, task, "failed")

    def _ended(self, call: Call[T], task: Task, outcome: str | None) -> Call[T]:
        """``call`` (an attempt's end), counting the attempt (``tally``) when it answers."""
        parse, ended = call.parse, self.tally.ended

        def counted(reply: Any) -> T:
            out = parse(reply)
            ended(task, outcome)
            return out

        return Call(call.script, call.keys, call.args, counted)

    def _fail_call(
        self,
        task_id: str,
        token: str,
        error: str,
        retry: bool,
        delay_ms: int,
        budget: int,
        extra: tuple[str, str, bytes] = ("", "", b""),
        run_us: str = "",
    ) -> Call[TaskState]:
        args = [
            task_id, token, error, 1 if retry else 0, self._base_ms, self._failed_ttl_ms,
            delay_ms, budget, *extra, run_us,
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

        sent = task._progress

        def parse_sent(reply: Any) -> datetime:
            if task._progress == sent:  # taken: the next heartbeat sends none
                task._progress = ""
            return parse(reply)

        return self._call("extend", [task_id, token, ms, task._run_us, sent], parse_sent)

    def extend_many(self, tasks: Sequence[Task], seconds: float | None) -> Call[list[bool]]:
        """Extend several held leases in one call; False for each lease that was lost."""
        ms = _seconds_ms(self.options.lease_seconds if seconds is None else seconds, "seconds")
        if ms <= 0:
            raise ValidationError("seconds must be positive")
        args: list[Any] = [ms]
        sent = [task._progress for task in tasks]
        for task, progress in zip(tasks, sent, strict=True):
            args.extend(self._lease_of(task))
            args.append(task._run_us)
            args.append(progress)

        def parse(reply: list[Any]) -> list[bool]:
            out = []
            for task, deadline, progress in zip(tasks, reply, sent, strict=True):
                if int(deadline) >= 0:
                    task.lease_deadline = ms_to_dt(deadline)
                    if task._progress == progress:  # taken: the next heartbeat sends none
                        task._progress = ""
                out.append(int(deadline) >= 0)
            return out

        return self._call("extend_many", args, parse)

    def requeue(self, task: Task, delay: float) -> Call[TaskState]:
        """Give a leased task back without counting a failed attempt."""
        task_id, token = self._lease_of(task)
        delay_ms = _seconds_ms(delay, "delay")
        args = [task_id, token, delay_ms, self.options.ordering, self._horizon_us, task._run_us]
        return self._ended(self._call("requeue", args, lambda r: TaskState(text(r))), task, None)

    def reclaim(self, limit: int) -> Call[int]:
        """Reclaim up to ``limit`` expired leases."""
        _check_int(limit, "limit", 1, MAX_SCAN)
        return self._call("reclaim", [limit, self._base_ms, self._failed_ttl_ms], int)

    def next_wakeup(self) -> Call[float | None]:
        """Seconds until a scheduled task is due or a lease expires (None: nothing pending)."""

        def parse(reply: Any) -> float | None:
            return None if int(reply) < 0 else int(reply) / 1_000_000

        return self._call("next_wakeup", [], parse)

    def place(self) -> Call[tuple[int, int]]:
        """Place the first tasks pushed one at a time (what a lease call does first);
        returns how many were placed and how many are left."""
        args = [self.options.ordering, self._horizon_us]
        return self._call("place", args, lambda r: (int(r[0]), int(r[1])))

    def maintain(self, limit: int) -> Call[int]:
        """Remove up to ``limit`` expired entries per terminal registry and expired
        worker registrations; returns how many entries were removed."""
        _check_int(limit, "batch", 1, MAX_SCAN)
        return self._call("maintain", [limit, self.options.ordering, self._horizon_us], int)

    def register_worker(self, info: WorkerInfo, ttl_seconds: float) -> Call[int]:
        """Register or refresh a worker; forget workers silent for ``ttl_seconds``."""
        args = [info.worker_id, info.model_dump_json(), round(ttl_seconds * 1000)]
        return self._call("register_worker", args, int)

    def flush_metrics(self) -> Call[int] | None:
        """The flush of this partition's counts (``tally``), or None when it has none;
        1 when the server added them, 0 for a resent flush it had added already."""
        args = self.tally.take()
        if args is None:
            return None
        tally = self.tally

        def parse(reply: Any) -> int:
            tally.sent()
            return int(reply)

        return self._call("flush_metrics", args, parse)

    def unregister_worker(self, worker_id: str) -> Call[bool]:
        """Remove a worker's registration."""
        return self._call("unregister_worker", [worker_id], lambda r: int(r) == 1)
