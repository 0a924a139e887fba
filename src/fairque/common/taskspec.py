"""The one outward shape of a task to enqueue: the HTTP API's body, the command line's
task files and the reference's field table.

``FIELDS`` is the table. ``check_fields`` checks a decoded JSON object against it (as
JSON types go: a number is never read from a string, ``true`` is not an integer, and
``47.0`` is an integer, as JSON Schema counts it); ``task_of`` then builds the engine's
``Task`` and delay, and names every problem by the outward names. The HTTP API builds
its body type from the same table (``fairque.service.wire``). Values are checked once,
by the engine (``Task`` and the push), so every door refuses the same input with the
same words.

The command line's older names (``delay``, ``timeout``, ``result_ttl``, and priority
``6`` for the critical lane) are read for this release and then no longer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal

from fairque.core.checks import MAX_COST, MAX_DEPENDENCIES, MAX_SECONDS, MAX_TASK_ID
from fairque.dedup import Dedup
from fairque.errors import ValidationError
from fairque.models import Priority, Task

Kind = Literal["id", "any", "priority", "seconds", "integer", "boolean", "time", "ids", "choice"]


@dataclass(frozen=True)
class SpecField:
    """One field of the outward task: its JSON kind, its bounds and what it means."""

    name: str
    kind: Kind
    description: str
    #: the ``Task`` attribute it sets (None: a push option, the delay)
    attr: str | None
    required: bool = False
    #: the value when the field is absent (None: the queue's or worker's default)
    default: Any = None
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()


FIELDS: tuple[SpecField, ...] = (
    SpecField("name", "id", "the task's name: the handler that runs it", "name", required=True),
    SpecField("user_id", "id", "the tenant the task belongs to", "user_id", required=True),
    SpecField("payload", "any", "the handler's argument: any value", "payload"),
    SpecField("priority", "priority", '1 to 5 (highest), or "critical" for the critical lane',
              "priority", default=3, low=1, high=5),
    SpecField("delay_seconds", "seconds", "run it no earlier than this many seconds from now",
              None, low=0, high=MAX_SECONDS),
    SpecField("execute_after", "time",
              "run it no earlier than this time (ISO 8601; UTC when it names no zone)",
              "execute_after"),
    SpecField("task_id", "id", "its id (default: a new one); pushing an id that exists "
              "answers the stored task", "task_id"),
    SpecField("depends_on", "ids", "ids of tasks that must finish first", "depends_on",
              default=(), high=MAX_DEPENDENCIES),
    SpecField("on_dependency_failure", "choice",
              "when an upstream fails or is canceled: cancel this task too, or wait",
              "on_dependency_failure", default="cancel", choices=("cancel", "wait")),
    SpecField("max_retries", "integer", "retries after failed attempts (default: the queue's)",
              "max_retries", low=0, high=1000),
    SpecField("timeout_seconds", "seconds", "its execution timeout (default: the worker's)",
              "timeout", low=0.001, high=MAX_SECONDS),
    SpecField("keep_result", "boolean", "keep its result for result()", "keep_result",
              default=True),
    SpecField("result_ttl_seconds", "integer",
              "how long its result is kept (default: the queue's)", "result_ttl",
              low=0, high=MAX_SECONDS),
    SpecField("cost", "integer",
              "the slots of its tenant's cap and of its concurrency limits and the tokens of "
              "its rate limits it takes, and the multiple of its run that fair share counts",
              "cost", default=1, low=1, high=MAX_COST),
    SpecField("dedup_key", "id", "merge into the task its tenant has waiting with this key "
              "(QUEUED, SCHEDULED or DEFERRED) instead of adding one: see dedup_mode", None),
    SpecField("dedup_mode", "choice", 'with dedup_key: "keep" (answer the waiting task; the '
              'default), "replace" (give it this payload) or "debounce" (give it this payload '
              "and start it debounce_seconds from now)", None,
              choices=("keep", "replace", "debounce")),
    SpecField("debounce_seconds", "seconds", "the debounce window", None, low=0,
              high=MAX_SECONDS),
    SpecField("debounce_max_seconds", "seconds", "the longest a debounced task waits after "
              "its first push (default: ten windows)", None, low=0, high=MAX_SECONDS),
)  # fmt: skip
BY_NAME = {f.name: f for f in FIELDS}
#: the outward name of each engine name a problem may carry
OUTWARD = {f.attr: f.name for f in FIELDS if f.attr is not None} | {"delay": "delay_seconds"}
#: the command line's older names, read for this release
OLD_NAMES = {"delay": "delay_seconds", "timeout": "timeout_seconds",
             "result_ttl": "result_ttl_seconds"}  # fmt: skip

_WANTED: dict[Kind, str] = {
    "id": "a string", "any": "any JSON value", "priority": 'an integer 1..5, or "critical"',
    "seconds": "a number of seconds", "integer": "an integer", "boolean": "true or false",
    "time": "an ISO 8601 time (a string)", "ids": "a list of task ids",
    "choice": "one of the listed values",
}  # fmt: skip


def outward(name: str) -> str:
    """The outward name of an engine's field name (``timeout`` -> ``timeout_seconds``;
    a path keeps its tail: ``depends_on.3``)."""
    head, dot, rest = name.partition(".")
    return OUTWARD.get(head, head) + dot + rest


def normalized(item: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``item`` under the outward names (older names read as the new ones), and the name
    each field was given by, for the problems."""
    fields: dict[str, Any] = {}
    written: dict[str, str] = {}
    for key, value in item.items():
        name = OLD_NAMES.get(key, key)
        if name == "priority" and value == Priority.CRITICAL and type(value) is int:
            value = "critical"  # 6, the command line's older spelling
        fields[name], written[name] = value, key
    return fields, written


def _integral(value: Any) -> bool:
    return (type(value) is int) or (type(value) is float and value.is_integer())


def _kind_ok(spec: SpecField, value: Any) -> bool:
    kind = spec.kind
    if kind == "any":
        return True
    if kind in ("id", "time"):
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return _integral(value)
    if kind == "seconds":
        return type(value) in (int, float) and math.isfinite(value)
    if kind == "priority":
        return value == "critical" or _integral(value)
    if kind == "ids":
        return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
    return value in spec.choices  # choice


def check_fields(item: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The problems of a task given as a decoded JSON object under the outward names:
    required fields, unknown fields and JSON kinds (values are the engine's to check)."""
    problems = [(f.name, "is required") for f in FIELDS if f.required and item.get(f.name) is None]
    for key, value in item.items():
        spec = BY_NAME.get(key)
        if spec is None:
            problems.append((key, f"unknown field (known: {', '.join(BY_NAME)})"))
        elif value is None:
            if spec.default is not None:
                problems.append((key, f"must be {_WANTED[spec.kind]}, got null"))
        elif not _kind_ok(spec, value):
            wanted = _WANTED[spec.kind]
            if spec.kind == "choice":
                wanted = " or ".join(repr(c) for c in spec.choices)
            problems.append((key, f"must be {wanted}, got {_shown(value)}"))
    return problems


#: fields taken as they are, and the ones converted on the way (outward name, attribute)
_AS_IS = tuple((f.name, f.attr) for f in FIELDS if f.attr and f.kind in ("id", "any", "seconds",
               "boolean", "choice"))  # fmt: skip
_CONVERTED = tuple(f for f in FIELDS if f.attr and f.kind in ("priority", "integer", "time", "ids"))


def task_of(item: Mapping[str, Any]) -> tuple[Task, float | None]:
    """The engine's task and delay for a checked item (``check_fields``).

    Raises:
        ValidationError: the engine refuses a value; its problems carry outward names.
    """
    get = item.get
    values = {attr: value for name, attr in _AS_IS if (value := get(name)) is not None}
    for spec in _CONVERTED:
        value = get(spec.name)
        if value is None:
            continue
        if spec.kind == "priority" and value == "critical":
            value = Priority.CRITICAL
        elif type(value) is float and spec.kind in ("integer", "priority"):
            value = int(value)
        elif spec.kind == "time":
            value = parse_time(value, spec.name)
        elif spec.kind == "ids":
            value = tuple(value)
        values[str(spec.attr)] = value
    delay = get("delay_seconds")
    if delay is not None and values.get("execute_after") is not None:
        raise ValidationError(
            "give delay_seconds or execute_after, not both",
            [("delay_seconds", "give delay_seconds or execute_after, not both")],
        )
    values["dedup"] = dedup_of(item)
    try:
        task = Task(**values)
    except ValidationError as exc:
        raise ValidationError(str(exc), [(outward(f), m) for f, m in exc.problems]) from None
    return task, delay


#: the outward names of ``Dedup``'s fields (a problem of the whole: the window's)
_DEDUP_NAMES = {"key": "dedup_key", "mode": "dedup_mode", "window": "debounce_seconds",
                "max_wait": "debounce_max_seconds", "": "debounce_seconds"}  # fmt: skip


def dedup_of(item: Mapping[str, Any]) -> Dedup | None:
    """The ``Dedup`` the outward fields ``dedup_key``... ask for (None: no key).

    Raises:
        ValidationError: a bad key or mode, a window without a debounce, or a
            debounce without one; the problems carry outward names.
    """
    given = {name: item.get(outer) for name, outer in _DEDUP_NAMES.items() if name}
    if given["key"] is None:
        extra = [_DEDUP_NAMES[n] for n, v in given.items() if v is not None]
        if extra:
            problem = "needs dedup_key"
            raise ValidationError(f"{extra[0]}: {problem}", [(n, problem) for n in extra])
        return None
    try:
        return Dedup(**{name: value for name, value in given.items() if value is not None})
    except ValidationError as exc:
        problems = [(_DEDUP_NAMES.get(f, f), m) for f, m in exc.problems]
        raise ValidationError(str(exc), problems) from None


def parse_time(value: str, field: str) -> datetime:
    """An ISO 8601 time (UTC when it names no zone).

    Raises:
        ValidationError: ``value`` is not one (the problem names ``field``).
    """
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        problem = f"not an ISO 8601 time: {value[:MAX_TASK_ID]!r}"
        raise ValidationError(f"{field}: {problem}", [(field, problem)]) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _shown(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
