"""The task hash: how a ``Task`` is stored, field by field, and the codec both ways.

Each task lives in one hash, ``fq:{<queue>}:task:<id>`` (``QueueKeys.task``). The hash
field is the short name the scripts read and write (``prio``, ``retries``, ``run_at``,
``lease``...), the ``Task`` attribute the public name. ``FIELDS`` is the one table that
maps them and says which slot of the push record (``PushRecord``: the per-task values
in ``push.lua``'s ARGV) carries each field in. The decoder (``TaskCodec.task_from_hash``)
is driven by ``FIELDS``; the encoder (``TaskCodec.encode``) fills the push record whose
slots it names. Four fields are left out of a task that has their stock values
(``STOCK``), and ``retries`` until an attempt fails: a missing field reads as that
value, in Python and in the scripts. Tests hold ``FIELDS`` to ``Task``, to ``push.lua``'s
header, to every hash the scripts write, and to this copy for readers of the Lua side:

=====================  ============  =============  ===========================================
Task attribute         hash field    push slot      stored value (times in ms since the epoch)
=====================  ============  =============  ===========================================
task_id                id            id             the task id
user_id                user          user           the owner (tenant)
name                   name          name           the handler name
payload                payload       payload        bytes of the queue's serializer
priority               prio          prio           1..5; 6 = CRITICAL (the critical lane)
retry_count            retries       -              failed attempts so far (push writes 0)
max_retries            max_retries   max_retries    the retry budget
created_at             created       -              push time (server clock)
execute_after          run_at        run_at_ms      due time (push also takes delay_ms)
state                  state         -              a ``TaskState`` value
depends_on             deps          deps           JSON array of upstream ids
on_dependency_failure  on_dep_fail   on_dep_fail    'cancel' | 'wait' (kept with deps only)
timeout                timeout       timeout_ms     handler timeout
keep_result            keep_result   keep_result    '1' keep the result, '0' drop it
result_ttl             result_ttl    result_ttl_ms  how long a result is kept
cost                   cost          cost           slots and tokens it takes (kept only
                                                    when more than 1)
dedup                  dedup         dedup          '<mode> <window ms> <max wait ms>
                                                    <key>' of a push with a ``Dedup``
trace_context          trace         trace          the W3C traceparent of the span that
                                                    pushed it (tracing on)
error                  error         -              the last error message
lease_token            lease         -              fencing token of the current lease
worker_id              worker        -              the worker holding the lease, or the last one
lease_deadline         deadline      -              lease expiry
lease_capped           capped        -              '1' when the current lease holds a slot
                                                    of a cap (its user's or group's), '0'
                                                    when not (written on queues with caps)
started_at             started       -              start of the current attempt
ended_at               ended         -              when the task ended
traceback              traceback     -              the last failure's traceback (fail)
failure_reason         reason        -              the last failure's kind, e.g. 'timeout'
progress               progress      -              the handler's last reported fraction
                                                    done (a heartbeat carries it)
progress_message       progress_msg  -              the message reported with it
-                      details       -              the last failure's data, serialized
-                      result        -              the serialized result (complete writes
                                                    it; a None result is stored too)
-                      consumed      -              request id of the read that consumed
                                                    the outcome (fetch once)
-                      cut_lease     -              the lease token a cancel took away (its
                                                    worker's extend learns of the cancel)
-                      op            -              '<request id> <answer>' of the last
                                                    recorded transition (a resend's answer)
-                      pushed        -              request id of the push that created the
                                                    task (a resend still answers "created")
-                      cons          cons           JSON array of the constraint buckets the
                                                    task counts in (fairque.constraints.model)
-                      parked        -              the constraint bucket the task is parked
                                                    in while over its limit (still QUEUED)
-                      bytes         -              its payload's length, when it was pushed
                                                    under a byte quota (counted against it
                                                    until it ends)
-                      ptag          -              '<tag> <lane score> <bucket>': its place
                                                    in a global bucket's fair order, from
                                                    its first wait there until it starts
-                      fair          -              time-fair mode: '<charged> <weight>
                                                    <estimate> <start>' of the current lease
                                                    (what its owner's tag moved by so far,
                                                    in virtual us; the weight over the
                                                    cost and the estimate, ms or '-', at
                                                    the lease; its start, us)
-                      gheld         -              the group whose in-flight cap the
                                                    current lease holds slots of
-                      waited        -              ms it waited ready before this lease
=====================  ============  =============  ===========================================
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

import orjson

from fairque.constraints.model import ConstraintSet
from fairque.core.bypasses import stored_task
from fairque.core.checks import seconds_ms
from fairque.core.codec import Serializer
from fairque.core.options import QueueOptions
from fairque.core.records import Leased
from fairque.dedup import Dedup
from fairque.errors import PayloadTooLarge, SerializationError, ValidationError
from fairque.models import Priority, Task, TaskState


def text(value: Any) -> str:
    """A reply value as text (bytes from a raw client, str from a decoding one)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def hash_items(reply: Any) -> Iterable[tuple[Any, Any]]:
    """A hash read's (``HGETALL``) field and value pairs, whether the client answered a
    dict or a flat list (an empty reply: none)."""
    flat = reply or []
    return flat.items() if isinstance(flat, dict) else zip(flat[::2], flat[1::2], strict=True)


def raw(value: Any) -> bytes:
    """A reply value as the bytes a non-decoding client returns."""
    return value if isinstance(value, bytes) else str(value).encode()


def ms_to_dt(value: Any) -> datetime | None:
    """Milliseconds since the epoch (server time) as an aware datetime; '' is None."""
    if value is None or value == b"" or value == "":
        return None
    return datetime.fromtimestamp(int(value) / 1000, tz=timezone.utc)


_PRIORITIES = {str(int(p)).encode(): p for p in Priority}
_PRIORITY_OF = {int(p): p for p in Priority}
_STATES = {s.value.encode(): s for s in TaskState}
#: ``Field.missing`` of a field every stored task has: its absence fails the decoding.
REQUIRED: Any = object()


@dataclass(frozen=True)
class Field:
    """One field of the task hash (see the module's table)."""

    attr: str | None  # the Task attribute; None for fields only the scripts read
    hash: str  # the field's name in the hash, as the scripts spell it
    push: str | None  # the PushRecord slot that carries it in; None: the scripts set it
    decode: Callable[[bytes], Any] | None  # stored bytes -> value (None: the serializer)
    missing: Any = None  # the value of an absent field (REQUIRED: none may be absent)


def _ids(value: bytes) -> tuple[str, ...]:
    return tuple(orjson.loads(value)) if value else ()


def _ms_seconds(value: bytes) -> float:
    return int(value) / 1000


def _ms_whole_seconds(value: bytes) -> int:
    return round(int(value) / 1000)


def _flag(value: bytes) -> bool:
    return value == b"1"


_text = bytes.decode
#: Converters whose results ``task_from_hash`` keeps, by stored value (at most
#: ``_MEMO_SIZE`` per field): the values repeat from task to task, and the results are
#: immutable (a datetime, a number), so tasks may share them.
_MEMOIZED: frozenset[Callable[[Any], Any]] = frozenset(
    {ms_to_dt, _ms_seconds, _ms_whole_seconds, int}
)
_MEMO_SIZE = 256
#: The stock task's values of four fields (``lua/includes/task_stock.lua``): a task with
#: all four stores none of them, so a queued task costs the server fewer bytes; a task
#: that differs in any stores all four. A missing field reads as its stock value.
STOCK: dict[str, Any] = {
    "priority": Priority.NORMAL, "max_retries": 3, "keep_result": True, "result_ttl": 86_400,
}  # fmt: skip
FIELDS: tuple[Field, ...] = (
    Field("task_id", "id", "id", _text, REQUIRED),
    Field("user_id", "user", "user", _text, REQUIRED),
    Field("name", "name", "name", _text, REQUIRED),
    Field("payload", "payload", "payload", None),
    Field("priority", "prio", "prio", _PRIORITIES.__getitem__, STOCK["priority"]),
    Field("retry_count", "retries", None, int, 0),
    Field("max_retries", "max_retries", "max_retries", int, STOCK["max_retries"]),
    Field("created_at", "created", None, ms_to_dt),
    Field("execute_after", "run_at", "run_at_ms", ms_to_dt),
    Field("state", "state", None, _STATES.get),
    Field("depends_on", "deps", "deps", _ids, ()),
    Field("on_dependency_failure", "on_dep_fail", "on_dep_fail", _text, "cancel"),
    Field("timeout", "timeout", "timeout_ms", _ms_seconds),
    Field("keep_result", "keep_result", "keep_result", _flag, STOCK["keep_result"]),
    Field("result_ttl", "result_ttl", "result_ttl_ms", _ms_whole_seconds, STOCK["result_ttl"]),
    Field("cost", "cost", "cost", int, 1),
    Field("dedup", "dedup", "dedup", Dedup.from_stored),
    Field("trace_context", "trace", "trace", _text),
    Field("error", "error", None, _text),
    Field("lease_token", "lease", None, _text),
    Field("worker_id", "worker", None, _text),
    Field("lease_deadline", "deadline", None, ms_to_dt),
    Field("lease_capped", "capped", None, _flag, False),
    Field("started_at", "started", None, ms_to_dt),
    Field("ended_at", "ended", None, ms_to_dt),
    Field("traceback", "traceback", None, _text),
    Field("failure_reason", "reason", None, _text),
    Field("progress", "progress", None, float),
    Field("progress_message", "progress_msg", None, _text),
    Field(None, "details", None, None),
    Field(None, "result", None, None),
    Field(None, "consumed", None, None),
    Field(None, "cut_lease", None, None),
    Field(None, "op", None, None),
    Field(None, "pushed", None, None),
    Field(None, "cons", "cons", None),
    Field(None, "parked", None, None),
    Field(None, "bytes", None, None),
    Field(None, "ptag", None, None),
    Field(None, "fair", None, None),
    Field(None, "gheld", None, None),
    Field(None, "waited", None, None),
)
_TASK_FIELDS = frozenset(Task.model_fields)


class PushRecord(NamedTuple):
    """One task's values in ``push.lua``'s ARGV, in its order (17 per task).

    The slots are named as ``push.lua``'s header names them; ``-1`` stands for "none"
    in the numeric slots. ``delay_ms`` is the one slot no hash field keeps: the script
    turns it into ``run_at``.
    """

    id: str
    user: str
    name: str
    payload: bytes
    prio: int
    max_retries: int
    delay_ms: int
    run_at_ms: int
    timeout_ms: int
    keep_result: int
    result_ttl_ms: int
    deps: str
    on_dep_fail: str
    cons: str
    cost: int
    dedup: str
    trace: str


#: A task's field values before the queue fills its defaults (``TaskCodec.encode_plain``).
_BLANK: dict[str, Any] = dict.fromkeys(Task.model_fields)
_BLANK.update(
    retry_count=0,
    depends_on=(),
    on_dependency_failure="cancel",
    keep_result=True,
    cost=1,
    lease_capped=False,
)


class TaskCodec:
    """Turns Tasks into push records and task hashes back into Tasks, for one queue."""

    def __init__(self, serializer: Serializer, options: QueueOptions) -> None:
        self.serializer = serializer
        self.options = options
        #: the queue's constraints as this client last read them (matched at push)
        self.constraints = ConstraintSet()
        #: the last creation time ``pushed`` converted: (as sent, as a datetime)
        self._created: tuple[Any, datetime | None] = (None, None)
        self._decoders = tuple(
            (f.attr, f.hash.encode(), f.decode or serializer.loads, f.missing)
            for f in FIELDS
            if f.attr is not None
        )
        # the lease path's decoding (``task_from_hash``): each hash field's attribute and
        # converter, with a memo of its conversions for the fields whose values recur
        # (the times a script run stamps on every task it leases, the retry settings)
        self._by_key: dict[bytes, tuple[str, Callable[[Any], Any], dict[Any, Any] | None]] = {
            key: (attr, decode, {} if decode in _MEMOIZED else None)
            for attr, key, decode, _ in self._decoders
        }
        self._template = {attr: missing for attr, _, _, missing in self._decoders}
        self._required = tuple(a for a, _, _, missing in self._decoders if missing is REQUIRED)

    def task_from_hash(self, flat: Sequence[Any] | Mapping[Any, Any]) -> Task:
        """Build a Task from an HGETALL reply (flat list or mapping).

        This runs once per leased task: a flat list of bytes (what the scripts return
        to a raw client) is read in one pass, each field converted as ``FIELDS`` says
        into a copy of the defaults; anything else, or a hash that fails that pass,
        takes ``_from_fields``, which gives the same task or raises the same error.

        Raises:
            KeyError: a required field is absent or the priority is unknown.
        """
        if type(flat) is list and flat and type(flat[0]) is bytes:
            values = self._template.copy()
            by_key = self._by_key
            it = iter(flat)
            try:
                for key, value in zip(it, it, strict=True):
                    entry = by_key.get(key)
                    if entry is None:
                        continue
                    attr, decode, memo = entry
                    if memo is None:
                        values[attr] = decode(value)
                        continue
                    got = memo.get(value)
                    if got is None:
                        got = decode(value)
                        if len(memo) >= _MEMO_SIZE:
                            memo.clear()
                        memo[value] = got
                    values[attr] = got
            except Exception:  # decoded again below, where it fails as it always did
                return self._from_fields(flat)
            for attr in self._required:
                if values[attr] is REQUIRED:
                    return self._from_fields(flat)
            return stored_task(values)
        return self._from_fields(flat)

    def _from_fields(self, flat: Sequence[Any] | Mapping[Any, Any]) -> Task:
        """``task_from_hash`` for any reply: the fields looked up one by one, in
        ``FIELDS``'s order."""
        fields: dict[Any, Any]
        if type(flat) is list or not isinstance(flat, Mapping):
            it = iter(flat)
            fields = dict(zip(it, it, strict=True))
        else:
            fields = dict(flat)
        if fields and type(next(iter(fields))) is not bytes:  # a client that decodes replies
            fields = {raw(k): raw(v) for k, v in fields.items()}
        get = fields.get
        values: dict[str, Any] = {}
        for attr, key, decode, missing in self._decoders:
            value = get(key)
            if value is not None:
                values[attr] = decode(value)
            elif missing is REQUIRED:
                raise KeyError(key)
            else:
                values[attr] = missing
        return stored_task(values)

    def leased(self, reply: Sequence[Any]) -> Leased:
        """Decode a lease reply. A task that cannot be decoded does not take the batch
        with it: it is listed in ``Leased.undecodable`` for the clients to fail."""
        out = Leased()
        for flat in reply:
            try:
                out.append(self.task_from_hash(flat))
            except Exception as exc:  # any decoding problem of one stored task
                fields = dict(zip(flat[::2], flat[1::2], strict=True))
                out.undecodable.append(
                    (text(fields.get(b"id", fields.get("id", b""))),
                     text(fields.get(b"lease", fields.get("lease", b""))),
                     f"undecodable task: {type(exc).__name__}: {exc}")
                )  # fmt: skip
        return out

    def dump_payload(self, payload: Any) -> bytes:
        """``payload`` serialized, within the queue's ``max_payload_bytes``."""
        try:  # inline (not checks.dump_value): this runs on every push
            data = self.serializer.dumps(payload)
        except SerializationError as exc:
            raise SerializationError(f"payload: {exc}", field="payload") from exc
        if len(data) > self.options.max_payload_bytes:
            raise PayloadTooLarge(
                f"payload is {len(data)} bytes; the limit is {self.options.max_payload_bytes}",
                field="payload",
            )
        return data

    def encode(self, values: dict[str, Any], delay: float | timedelta | None = None) -> PushRecord:
        """The push record of a task given as its field values (``Task.__dict__``).

        Fills in ``values`` the defaults the queue decides: ``task_id`` (a new one),
        ``max_retries`` and ``result_ttl``. ``delay`` (seconds) delays the task; it
        excludes ``execute_after``.

        Raises:
            ValidationError: a bad delay, or both delay and execute_after.
            SerializationError: the payload does not serialize.
            PayloadTooLarge: the payload is over the queue's limit.
        """
        payload = self.dump_payload(values["payload"])
        options = self.options
        task_id = values["task_id"] or os.urandom(16).hex()
        max_retries = values["max_retries"]
        if max_retries is None:
            max_retries = options.max_retries
        ttl_s = values["result_ttl"]
        if ttl_s is None:
            ttl_s = options.result_ttl_seconds
        after, timeout, deps = values["execute_after"], values["timeout"], values["depends_on"]
        delay_ms = -1
        if delay is not None:
            if after is not None:
                raise ValidationError("give either delay or execute_after, not both", field="delay")
            delay_ms = seconds_ms(delay, "delay")
        values["task_id"], values["max_retries"] = task_id, max_retries
        values["result_ttl"] = round(ttl_s)
        return PushRecord(
            id=task_id,
            user=values["user_id"],
            name=values["name"],
            payload=payload,
            prio=int(values["priority"]),
            max_retries=max_retries,
            delay_ms=delay_ms,
            run_at_ms=-1 if after is None else round(after.timestamp() * 1000),
            timeout_ms=-1 if timeout is None else round(timeout * 1000),
            keep_result=1 if values["keep_result"] else 0,
            result_ttl_ms=round(ttl_s * 1000),
            deps=orjson.dumps(list(deps)).decode() if deps else "",
            on_dep_fail=values["on_dependency_failure"],
            cons=self.constraints.buckets(values["name"], values["payload"], values["user_id"]),
            cost=values["cost"],
            dedup="" if values["dedup"] is None else values["dedup"].stored(),
            trace=values["trace_context"] or "",
        )

    def encode_plain(
        self,
        name: str,
        payload: Any,
        user_id: str,
        priority: int,
        task_id: str,
        max_retries: int | None,
        keep_result: bool,
    ) -> tuple[dict[str, Any], tuple[Any, ...]]:
        """What ``encode`` makes, for ``enqueue``'s common call (no delay, dependencies,
        timeout or result TTL; arguments already checked, the id given) and without
        building a Task first: the task's field values, defaults filled, and its push
        record as a tuple.

        Raises:
            SerializationError: the payload does not serialize.
            PayloadTooLarge: the payload is over the queue's limit.
        """
        data = self.dump_payload(payload)
        options = self.options
        if max_retries is None:
            max_retries = options.max_retries
        ttl_s = options.result_ttl_seconds
        values = _BLANK.copy()
        values["task_id"], values["user_id"], values["name"] = task_id, user_id, name
        values["payload"], values["priority"] = payload, _PRIORITY_OF[priority]
        values["max_retries"], values["keep_result"] = max_retries, keep_result
        values["result_ttl"] = round(ttl_s)
        constraints = self.constraints
        cons = constraints.buckets(name, payload, user_id) if constraints.constraints else ""
        # the slots of PushRecord, in its order
        record = (task_id, user_id, name, data, int(priority), max_retries, -1, -1, -1,
                  1 if keep_result else 0, round(ttl_s * 1000), "", "cancel", cons, 1,
                  "", "")  # fmt: skip
        return values, record

    @staticmethod
    def created(entry: Sequence[Any]) -> bool:
        """Whether the push whose reply holds ``entry`` created the task: a new task
        (``{0, ...}``), or one this same request created before (a resend: ``{1, hash,
        1}``)."""
        code = int(entry[0])
        return code == 0 or (code == 1 and len(entry) > 2 and int(entry[2]) == 1)

    def pushed(self, entry: Sequence[Any], values: dict[str, Any], task: Task | None) -> Task:
        """The Task one entry of ``push.lua``'s reply stands for.

        ``{1, <hash>}``: the id existed; the stored task. ``{0, state, created_ms}`` or
        ``{2, state}`` (ended and expired within the last minute): the task pushed,
        from its encoded ``values``, with the state the script gave it. ``task`` is the
        Task those values came from (None: ``plain`` made them); the answer is a copy.
        """
        if int(entry[0]) == 1:
            return self.task_from_hash(entry[1])
        values = values.copy()  # a resent call parses its reply again
        values["state"] = _STATES[raw(entry[1])]
        if len(entry) > 2:
            # the tasks of one batch share their creation time: convert it once
            created = entry[2]
            if created != self._created[0]:
                self._created = (created, ms_to_dt(created))
            values["created_at"] = self._created[1]
            after = values["execute_after"]
            if after is not None and after.timestamp() * 1000 <= int(created):
                values["execute_after"] = None  # already due: stored without one
        else:
            values["created_at"] = None
        values["retry_count"] = 0
        if task is None or type(task) is Task:  # without pydantic's copy machinery
            return stored_task(values)
        return task.model_copy(update=values)
