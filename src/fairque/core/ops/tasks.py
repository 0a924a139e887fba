"""Builders of the task calls: push, enqueue, cancel, retry, results, purge, and the
per-user limits. Each builder is named after the script it calls."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from fairque.core.checks import (
    MAX_TASK_ID,
    MAX_USER_ID,
    check_delays,
    check_group,
    check_max_bytes,
    check_max_lead,
    check_share,
    check_task_list,
    check_user_limits,
    plain_identifier,
)
from fairque.core.checks import seconds_ms as _seconds_ms
from fairque.core.dependencies import dependency_order
from fairque.core.ops.base import OperationsBase
from fairque.core.records import Call, Pushed, request_id
from fairque.core.taskhash import hash_items, ms_to_dt, text
from fairque.dedup import Dedup
from fairque.errors import ValidationError
from fairque.models import (
    FAIRNESS_MODES,
    Fairness,
    Priority,
    Task,
    TaskOutcome,
    TaskState,
)
from fairque.reads import GroupLoad
from fairque.tracing import pushing_trace

#: result.lua's codes of the ended states
_OUTCOME_STATES = {1: TaskState.FINISHED, 2: TaskState.FAILED, 3: TaskState.CANCELED}
_PRIORITY_TYPES = (int, Priority)


def _plain(record: Sequence[Any]) -> bool:
    """Whether a push record (``PushRecord``'s slots) is a plain task, one that
    ``push_one.lua`` takes: no delay, due time, timeout, dependencies, buckets, dedup
    key or trace context, and a cost of 1."""
    return (
        record[6] == -1 and record[7] == -1 and record[8] == -1 and not record[11]
        and not record[13] and record[14] == 1 and not record[15] and not record[16]
    )  # fmt: skip


class TaskOperations(OperationsBase):
    """Pushes and the calls on one task by id."""

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
            self._max_queued,
        ]

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
        trace = pushing_trace()  # the producer span's (fairque.tracing), if any
        given: list[tuple[Task, dict[str, Any]]] = []
        records = []
        seen: set[str] = set()
        for i, task in enumerate(tasks):
            if not isinstance(task, Task):
                raise ValidationError(f"expected a Task, got {type(task).__name__}")
            values = dict(task.__dict__)
            if trace is not None and values["trace_context"] is None:
                values["trace_context"] = trace
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
        args.append(self._max_bytes)  # after the tasks: push.lua's last value
        pushed, created = self.codec.pushed, self.codec.created

        def parse(reply: list[Any]) -> Pushed:
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
        trace = pushing_trace()
        if trace is not None and values["trace_context"] is None:
            values["trace_context"] = trace
        record = codec.encode(values)
        if not _plain(record):
            args = [*self._push_head(1), *record, self._max_bytes]
            return self._call("push", args, lambda r: codec.pushed(r[0], values, task))
        return self._push_one(request_id(), record, lambda r: codec.pushed(r, values, task))

    def _push_one(
        self, req: str, record: Sequence[Any], parse: Callable[[Any], Task]
    ) -> Call[Task]:
        """``push_one.lua``'s call of a plain task's push record."""
        args = (
            *self._one_head, req, self.codec.constraints.version, record[0], record[1],
            record[2], record[3], record[4], record[5], record[9], record[10],
            self._max_queued, self._max_bytes,
        )  # fmt: skip
        return self._call("push_one", args, parse)

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
        cost: int = 1,
        dedup: Dedup | None = None,
    ) -> Call[Task]:
        """Build one task and push it (``enqueue``).

        The common call (plain ids, no delay, dependencies, timeout or result TTL)
        skips the Task model: its few arguments are checked directly. Anything else,
        and anything those checks doubt, takes the full model, whose errors are the
        ones users see.
        """
        trace = pushing_trace()
        simple = (
            trace is None
            and delay is None
            and execute_after is None
            and not depends_on
            and timeout is None
            and result_ttl is None
            and on_dependency_failure == "cancel"
            and cost == 1
            and type(cost) is int
            and dedup is None
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
                on_dependency_failure=on_dependency_failure, cost=cost, dedup=dedup,
                trace_context=trace,
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
        if record[13]:  # matched constraints: the general push
            args = [*self._push_head(1), *record, self._max_bytes]
            args[5] = ids[32:]  # the request id, from the same read
            return self._call("push", args, lambda r: codec.pushed(r[0], values, None))
        return self._push_one(ids[32:], record, lambda r: codec.pushed(r, values, None))

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

    def cleanup_dependencies(self, offset: int, limit: int) -> Call[tuple[int, int, int]]:
        """One pass of dependency repair: (examined, canceled, next offset)."""
        return self._call(
            "cleanup_dependencies",
            [offset, limit, self._failed_ttl_ms],
            lambda r: (int(r[0]), int(r[1]), int(r[2])),
        )

    def retry(self, task_id: str) -> Call[TaskState]:
        """Re-queue a FAILED or CANCELED task with a fresh retry budget."""
        self._check_id(task_id)
        args = [task_id, self.options.ordering, self._horizon_us, request_id()]
        return self._call("retry", args, lambda r: TaskState(text(r)))

    def bulk_retry(self, task_ids: Sequence[str], state: TaskState) -> Call[int]:
        """Re-queue those of ``task_ids`` in ``state`` (FAILED or CANCELED) with a fresh
        retry budget; answers how many."""
        args = [self.options.ordering, self._horizon_us, request_id(), state.value, *task_ids]
        return self._call("bulk_retry", args, int)

    def bulk_delete(self, task_ids: Sequence[str], state: TaskState) -> Call[int]:
        """Delete those of ``task_ids`` in ``state`` (FAILED or CANCELED) now; answers
        how many."""
        return self._call("bulk_delete", [request_id(), state.value, *task_ids], int)

    def purge(self, limit: int) -> Call[tuple[int, int]]:
        """Delete up to ``limit`` tasks; returns (deleted, remaining)."""
        return self._call("purge", [limit], lambda r: (int(r[0]), int(r[1])))

    def set_fairness(self, mode: str, max_lead_seconds: float | None = None) -> Call[Fairness]:
        """Make the queue fair by worker time or by turns, and optionally set how far a
        tenant may be ahead of the floor; answers the previous mode."""
        if mode not in FAIRNESS_MODES:
            raise ValidationError(
                f"fairness must be one of {', '.join(FAIRNESS_MODES)}, got {mode!r}"
            )
        lead = "" if max_lead_seconds is None else str(check_max_lead(max_lead_seconds))
        return self._call(
            "set_fairness", [mode, request_id(), lead], lambda r: cast(Fairness, text(r))
        )

    def set_user_limits(
        self,
        user_id: str,
        weight: int | None,
        max_in_flight: int | None,
        max_queued: int | None = None,
        group: str | None = None,
        floor: float | None = None,
        ceiling: float | None = None,
        max_bytes: int | None = None,
    ) -> Call[None]:
        """Set a user's weight, in-flight cap, backlog quota, group, share and byte quota;
        None leaves one as it is (a group of ``""`` takes the user out of its group)."""
        limits = check_user_limits(user_id, weight, max_in_flight, max_queued)
        grouping = ["", ""] if group is None else ["1", group and check_group(group)]
        share = check_share(floor, ceiling)
        args = [user_id, *limits, *grouping, *share, check_max_bytes(max_bytes)]
        return self._call("set_user_limits", args, lambda r: None)

    def set_group_limits(
        self,
        group_id: str,
        weight: int | None,
        floor: float | None = None,
        ceiling: float | None = None,
        max_in_flight: int | None = None,
        max_queued: int | None = None,
    ) -> Call[None]:
        """Set a group's weight (1 resets it), share, in-flight cap and backlog quota (0
        removes either); None leaves one as it is."""
        check_group(group_id, "group_id")
        weight_arg, cap_arg, quota_arg = check_user_limits(
            group_id, weight, max_in_flight, max_queued
        )
        share = check_share(floor, ceiling)
        args = [group_id, weight_arg, *share, cap_arg, quota_arg]
        return self._call("set_group_limits", args, lambda r: None)

    def group_hash(self, group_id: str) -> Call[dict[str, str]]:
        """A group's hash (its limits, backlog and ring weight), for ``group_load``."""
        check_group(group_id, "group_id")

        def parse(reply: Any) -> dict[str, str]:
            return {text(k): text(v) for k, v in hash_items(reply)}

        return Call(None, (self.keys.group(group_id),), ("HGETALL",), parse)


def group_load(group_id: str, hashes: Sequence[dict[str, str]]) -> GroupLoad:
    """A group's ``GroupLoad`` from its hash in each partition: its limits as they were
    set (each partition holds them), its backlog and ring weight summed."""
    limits = next((h for h in hashes if h.keys() - {"backlog", "active", "counted"}), {})
    floor, ceiling = (float(x) for x in limits.get("share", "0 1").split())
    return GroupLoad(
        group_id,
        weight=int(limits.get("weight", 1)),
        floor=floor or None,
        ceiling=ceiling if ceiling < 1 else None,
        max_in_flight=int(limits["cap"]) if "cap" in limits else None,
        max_queued=int(limits["quota"]) if "quota" in limits else None,
        queued=sum(int(h.get("backlog", 0)) for h in hashes),
        active=sum(int(h.get("active", 0)) for h in hashes),
    )
