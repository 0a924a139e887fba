"""Argument checks at the door: bad input raises a ``FairqueError`` naming the field.

Every check here runs before anything is sent to the server, so a rejected call
leaves the keyspace untouched. The limits are part of the public contract:

- a duration (delay, timeout, lease, TTL, retry base...) is a finite number of
  seconds of at most ``MAX_SECONDS`` (10 years); ``execute_after`` is at most that
  far in the future;
- a user id, task id, task name or worker id is a string of valid Unicode (no lone
  surrogates) and at most 256 characters; user ids, task ids and names also carry
  no control characters;
- a task has at most ``MAX_DEPENDENCIES`` upstreams; ``push_many`` takes at most
  ``MAX_BATCH`` tasks; ``pop_batch`` leases at most ``MAX_POP_COUNT`` tasks.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from fairque.errors import SerializationError, ValidationError

if TYPE_CHECKING:
    from fairque.core.codec import Serializer

#: Longest duration accepted anywhere (seconds): 10 years.
MAX_SECONDS = 10 * 365 * 86_400
#: Longest user id accepted.
MAX_USER_ID = 256
#: Longest task id / task name accepted.
MAX_TASK_ID = 256
#: Longest worker id accepted.
MAX_WORKER_ID = 256
#: Longest XCom key accepted.
MAX_XCOM_KEY = 256
#: Most upstream tasks one task may depend on.
MAX_DEPENDENCIES = 1_000
#: Most tasks one ``push_many`` call may carry.
MAX_BATCH = 10_000
#: Most tasks one pop may lease.
MAX_POP_COUNT = 10_000
#: Largest ``user_limit`` of ``stats`` and ``limit`` of ``reclaim``.
MAX_SCAN = 1_000_000
#: Largest per-user round-robin weight.
MAX_WEIGHT = 1_000
#: Largest task cost: the slots of a cap or concurrency limit and the tokens of a rate
#: limit one task takes (each slot is one member of a sorted set while it runs).
MAX_COST = 1_000
#: Longest dedup key (``Dedup.key``), in characters
MAX_DEDUP_KEY = 256
#: A W3C trace context's ``traceparent`` (version, trace id, parent span id, flags)
TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
#: Largest per-user in-flight cap.
MAX_IN_FLIGHT = 1_000_000
#: the largest backlog quota ``set_user_limits(max_queued=)`` takes
MAX_QUEUED = 1_000_000_000
#: the longest message a handler's progress report carries (``Task.report_progress``)
MAX_PROGRESS_MESSAGE = 1_000
#: How far (seconds of worker time over its weight) a tenant may be ahead of the least
#: served one in time mode (``set_fairness(max_lead_seconds=)``): the default, the most.
DEFAULT_MAX_LEAD = 60.0
MAX_LEAD = 30 * 86_400.0

# control characters and lone surrogates (which cannot be encoded as UTF-8)
_BAD_CHAR = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def plain_identifier(value: object, limit: int) -> bool:
    """True for a string that ``identifier_problem`` accepts (the fast path's test)."""
    if type(value) is not str or not 0 < len(value) <= limit:
        return False
    if value.isascii():  # printable ASCII has no control character: no regex needed
        return value.isprintable()
    return _BAD_CHAR.search(value) is None


def identifier_problem(value: str, what: str, limit: int) -> str | None:
    """Why ``value`` is not a valid identifier (None when it is)."""
    if plain_identifier(value, limit):
        return None
    if not value:
        return f"{what} must not be empty"
    if len(value) > limit:
        return f"{what} is longer than {limit} characters"
    bad = _BAD_CHAR.search(value)
    if bad is not None:
        if _SURROGATE.match(bad.group()):
            return f"{what} must be valid Unicode (it holds a lone surrogate)"
        return f"{what} must not contain control characters"
    return None


def check_identifier(value: object, what: str, limit: int) -> str:
    """``value`` if it is a valid identifier string, else a ``ValidationError``."""
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string, got {type(value).__name__}", field=what)
    problem = identifier_problem(value, what, limit)
    if problem is not None:
        raise ValidationError(problem, field=what)
    return value


def check_text(value: object, what: str, limit: int, *, empty: bool = True) -> str:
    """A free-form string (worker id, key): valid Unicode, at most ``limit`` characters."""
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string, got {type(value).__name__}", field=what)
    if not value and not empty:
        raise ValidationError(f"{what} must not be empty", field=what)
    if len(value) > limit:
        raise ValidationError(f"{what} is longer than {limit} characters", field=what)
    if not value.isascii() and _SURROGATE.search(value):
        raise ValidationError(
            f"{what} must be valid Unicode (it holds a lone surrogate)", field=what
        )
    return value


def seconds_ms(seconds: object, what: str) -> int:
    """``seconds`` (a number or a timedelta) as whole milliseconds.

    Raises:
        ValidationError: not a number (bool and str are not numbers), NaN, infinite,
            negative or longer than ``MAX_SECONDS``; the message names ``what``.
    """
    if isinstance(seconds, timedelta):
        seconds = seconds.total_seconds()
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ValidationError(f"{what} must be a number of seconds, got {seconds!r}", field=what)
    if not 0 <= seconds <= MAX_SECONDS:  # also false for NaN
        if seconds < 0:
            raise ValidationError(f"{what} must not be negative, got {seconds!r}", field=what)
        raise ValidationError(
            f"{what} must be a finite number of seconds up to {MAX_SECONDS} (10 years), "
            f"got {seconds!r}",
            field=what,
        )
    return round(seconds * 1000)


def run_us_text(seconds: object) -> str:
    """A handler's measured run (seconds, or None: not reported) as the whole
    microseconds a script takes ('' for None).

    Raises:
        ValidationError: not None nor a finite number of seconds from 0 to 10 years.
    """
    if seconds is None:
        return ""
    seconds_ms(seconds, "run_seconds")
    return str(round(float(seconds) * 1_000_000))  # type: ignore[arg-type]


def check_max_lead(seconds: object) -> int:
    """``max_lead_seconds``: more than 0 and at most 30 days; the lead in microseconds."""
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not 0 < seconds <= MAX_LEAD
    ):
        raise ValidationError(
            f"max_lead_seconds must be a number of seconds above 0 and at most {MAX_LEAD:g},"
            f" got {seconds!r}"
        )
    return max(round(seconds * 1_000_000), 1)


def check_timeout(timeout: object) -> None:
    """Reject a ``result()`` timeout that is not a number of seconds from 0 to 10 years."""
    if isinstance(timeout, timedelta):
        raise ValidationError(f"timeout must be a number of seconds, got {timeout!r}")
    seconds_ms(timeout, "timeout")


def check_wait(timeout: object) -> float:
    """A blocking wait: a positive number of seconds up to 10 years (not a timedelta)."""
    if isinstance(timeout, timedelta):
        raise ValidationError(f"timeout must be a number of seconds, got {timeout!r}")
    seconds_ms(timeout, "timeout")
    if not timeout:
        raise ValidationError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)  # type: ignore[arg-type]


def check_int(value: object, what: str, low: int, high: int) -> int:
    """``value`` if it is an int (not a bool) from ``low`` to ``high``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{what} must be an integer {low}..{high}, got {value!r}")
    if not low <= value <= high:
        raise ValidationError(f"{what} must be an integer {low}..{high}, got {value!r}")
    return int(value)


def check_user_list(users: object, what: str) -> list[str]:
    """A worker's ``assigned_users`` / ``steal_targets`` as a list of user ids."""
    if users is None:
        return []
    if isinstance(users, (str, bytes)) or not isinstance(users, Iterable):
        raise ValidationError(f"{what} must be a list of user ids, not {type(users).__name__}")
    out = list(users)
    for u in out:
        if not isinstance(u, str) or not u:
            raise ValidationError(f"{what} must contain non-empty user ids, got {u!r}")
        problem = identifier_problem(u, f"{what} entry", MAX_USER_ID)
        if problem is not None:
            raise ValidationError(problem)
    return out


def check_name_list(names: object) -> list[str]:
    """The task names a worker handles (None: any name) as a list of distinct names."""
    if names is None:
        return []
    if isinstance(names, (str, bytes)) or not isinstance(names, Iterable):
        raise ValidationError(
            f"names must be a list of task names, not {type(names).__name__}", field="names"
        )
    out = list(dict.fromkeys(names))
    if not out:
        raise ValidationError("names must name at least one task (None: any name)", field="names")
    for n in out:
        if not isinstance(n, str) or not n:
            raise ValidationError(
                f"names must contain non-empty task names, got {n!r}", field="names"
            )
        problem = identifier_problem(n, "names entry", MAX_TASK_ID)
        if problem is not None:
            raise ValidationError(problem, field="names")
    return out


def check_task_id(task_id: object) -> str:
    """A task id argument (``get``, ``cancel``, ``result``...)."""
    if not isinstance(task_id, str) or not task_id:
        raise ValidationError(f"task_id must be a non-empty string, got {task_id!r}")
    return check_identifier(task_id, "task_id", MAX_TASK_ID)


def check_xcom_key(key: object) -> str:
    """An XCom key: a non-empty string of valid Unicode, at most 256 characters."""
    if not isinstance(key, str) or not key or len(key) > MAX_XCOM_KEY:
        raise ValidationError(
            f"xcom key must be a non-empty string of at most {MAX_XCOM_KEY} characters, got {key!r}"
        )
    return check_text(key, "xcom key", MAX_XCOM_KEY)


def check_worker_id(worker_id: object) -> str:
    """A worker id: a string of valid Unicode, at most 256 characters (may be empty)."""
    return check_text(worker_id, "worker_id", MAX_WORKER_ID)


def check_stopped_worker(worker_id: object) -> str:
    """The worker whose cancels to wait for: a worker id, not empty (a lease names
    its worker)."""
    if not check_worker_id(worker_id):
        raise ValidationError("waiting for cancels needs the worker's id, got ''")
    return worker_id  # type: ignore[return-value]


def check_pop(count: object, worker_id: object, lease_seconds: object) -> int:
    """A pop's count, worker id and lease; returns the lease in milliseconds."""
    check_int(count, "count", 1, MAX_POP_COUNT)
    check_worker_id(worker_id)
    lease_ms = seconds_ms(lease_seconds, "lease_seconds")
    if lease_ms <= 0:
        raise ValidationError("lease_seconds must be positive")
    return lease_ms


def check_user_limits(
    user_id: object, weight: object, max_in_flight: object, max_queued: object = None
) -> tuple[str, str, str]:
    """``set_user_limits``' arguments, as the script takes them: each limit as text, or
    ``""`` for one not given (left as it is)."""
    if not isinstance(user_id, str) or not user_id:
        raise ValidationError("user_id must be a non-empty string")
    check_identifier(user_id, "user_id", MAX_USER_ID)
    out = []
    for name, value, low, high in (
        ("weight", weight, 1, MAX_WEIGHT),
        ("max_in_flight", max_in_flight, 0, MAX_IN_FLIGHT),
        ("max_queued", max_queued, 0, MAX_QUEUED),
    ):
        if value is None:
            out.append("")
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(
                f"{name} must be an integer from {low} to {high}, or None to leave it"
                f" as it is; got {value!r}",
                field=name,
            )
        out.append(str(check_int(value, name, low, high)))
    return out[0], out[1], out[2]


#: the largest byte quota ``set_user_limits(max_bytes=)`` takes (1 TiB)
MAX_BYTES = 1 << 40


def check_max_bytes(value: object) -> str:
    """``set_user_limits(max_bytes=)`` as the script takes it: ``""`` for None (left as
    it is), else an integer from 0 (removed) to ``MAX_BYTES``."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(
            f"max_bytes must be an integer from 0 to {MAX_BYTES}, or None to leave it as it"
            f" is; got {value!r}",
            field="max_bytes",
        )
    return str(check_int(value, "max_bytes", 0, MAX_BYTES))


def _fraction(value: object, name: str, floor: bool) -> float | None:
    """A share's bound: None, or a number in [0, 1) (a floor) or (0, 1] (a ceiling)."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
        if (0 <= number < 1) if floor else (0 < number <= 1):
            return number
    wanted = "at least 0 and below 1 (0: none)" if floor else "above 0 and at most 1 (1: none)"
    raise ValidationError(
        f"{name} must be a fraction {wanted}, or None to leave it; got {value!r}", field=name
    )


def check_share(floor: object, ceiling: object) -> tuple[str, str]:
    """``set_user_limits``' share arguments as the script takes them: a floor in
    [0, 1) (0: none) and a ceiling in (0, 1] (1: none), each as text or ``""`` when not
    given; both given, the floor below the ceiling."""
    low, high = _fraction(floor, "floor", True), _fraction(ceiling, "ceiling", False)
    if low is not None and high is not None and low >= high:
        raise ValidationError(f"floor ({low}) must be below ceiling ({high})", field="floor")
    return ("" if low is None else repr(low)), ("" if high is None else repr(high))


def check_group(group: object, field: str = "group") -> str:
    """A group id: an identifier as a user id is (``""`` where the caller allows it is
    its own business)."""
    if not isinstance(group, str) or not group:
        raise ValidationError(f"{field} must be a non-empty string, got {group!r}", field=field)
    return check_identifier(group, field, MAX_USER_ID)


def check_task_list(tasks: object) -> list[Any]:
    """``push_many``'s tasks as a list: an iterable of at most ``MAX_BATCH`` items."""
    if type(tasks) is list:  # the common case skips the ABC checks
        out: list[Any] = tasks
    elif isinstance(tasks, (str, bytes, Mapping)) or not isinstance(tasks, Iterable):
        raise ValidationError(f"tasks must be a list of Task, not {type(tasks).__name__}")
    else:
        out = list(tasks)
    if len(out) > MAX_BATCH:
        raise ValidationError(f"tasks: {len(out)} in one batch; the limit is {MAX_BATCH}")
    return out


def check_delays(delays: object, n: int) -> Sequence[Any] | None:
    """``push_many``'s delays: None or a sequence of ``n`` delays."""
    if delays is None:
        return None
    if type(delays) is not list and (
        isinstance(delays, (str, bytes)) or not isinstance(delays, Sequence)
    ):
        raise ValidationError(f"delays must be a list, not {type(delays).__name__}")
    if len(delays) != n:
        raise ValidationError(f"{len(delays)} delays given for {n} tasks")
    return delays


def error_text(error: object) -> str:
    """A failure's error message as storable text.

    A handler's exception message may hold lone surrogates (bytes decoded with
    ``surrogateescape``); they are written as ``\\udcxx`` escapes so the failure
    is recorded instead of being lost to an encoding error.
    """
    if isinstance(error, BaseException):
        error = f"{type(error).__name__}: {error}"
    text = str(error)
    if not text.isascii() and _SURROGATE.search(text):
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def non_finite_path(value: Any) -> str | None:
    """Where ``value`` holds a NaN or infinite float (``['a'][3]``), or None.

    Walks what the JSON encoder turns into arrays and objects (dicts, lists, tuples,
    dataclasses, enum values) without recursion.
    """
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return path or "the value itself"
        elif isinstance(item, dict):
            stack.extend((v, f"{path}[{k!r}]") for k, v in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))
        elif isinstance(item, enum.Enum):
            stack.append((item.value, path))
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            fields = dataclasses.fields(item)
            stack.extend((getattr(item, f.name), f"{path}.{f.name}") for f in fields)
    return None


def dump_value(serializer: Serializer, value: Any, what: str) -> bytes:
    """``serializer.dumps(value)``; a failure names ``what`` (payload, result...)."""
    try:
        return serializer.dumps(value)
    except SerializationError as exc:
        raise SerializationError(f"{what}: {exc}", field=what) from exc
