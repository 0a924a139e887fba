"""Constraints: rate and concurrency limits on the tasks a matcher selects.

A constraint matches tasks by name (a glob), optionally by payload fields (equality, or
membership in a list of values) and by user ids, and limits them to ``rate`` starts per
``per`` seconds (GCRA: one key per bucket, an exact burst, no window edges) and/or to
``concurrency`` tasks running at once (counted from unexpired leases). With
``per_user=True`` every tenant has its own bucket.

Matchers run here, in Python, when a task is pushed: the ids of the buckets a task
falls in are stored with it (the task hash's ``cons`` field), so the lease script
checks keyed state only. A task over a limit is parked in its bucket and goes back to
its lane, in its place, when the limit frees.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from fairque.core.checks import MAX_USER_ID, check_identifier
from fairque.errors import ValidationError

#: most constraints one queue holds
MAX_CONSTRAINTS = 1000
#: a constraint id: letters, digits, '_', '-', '.' (it is part of key names)
_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
#: longest rate period (one day) and largest limits
MAX_PERIOD_SECONDS = 86_400.0
MAX_LIMIT = 1_000_000
_SCALARS = (str, int, float, bool, type(None))


def check_constraint_id(value: Any) -> str:
    """``value`` if it is a valid constraint id, else a ``ValidationError``."""
    if not isinstance(value, str) or not _ID.match(value):
        raise ValidationError(
            f"constraint id must be 1-128 letters, digits, '_', '-' or '.', got {value!r}"
        )
    return value


def _check_value(value: Any, what: str) -> Any:
    if not isinstance(value, _SCALARS):
        raise ValidationError(f"{what}: a payload value to match must be a JSON scalar")
    return value


def _check_limit(value: Any, what: str, low: int = 1) -> int:
    if type(value) is not int or not low <= value <= MAX_LIMIT:
        raise ValidationError(f"{what} must be an integer from {low} to {MAX_LIMIT}, got {value!r}")
    return value


@dataclass(frozen=True)
class Constraint:
    """A limit on the tasks its matcher selects.

    Args:
        id: the constraint's name (letters, digits, ``_ - .``).
        name: glob over task names (``fnmatch``: ``*``, ``?``, ``[...]``).
        payload: payload fields to match: ``{"field": value}`` (equality) or
            ``{"field": [v1, v2]}`` (membership). A task whose payload is not a mapping,
            or lacks the field, does not match.
        users: only these users' tasks match (empty: every user).
        rate: at most ``rate`` tasks start per ``per`` seconds (None: no rate limit).
        per: the rate's period in seconds.
        burst: how many tasks may start at once after an idle spell (default 1:
            evenly spaced, ``per / rate`` apart).
        concurrency: at most this many matched tasks run at once (None: no limit).
        per_user: each user gets its own bucket (its own rate and concurrency).

    Raises:
        ValidationError: a field is invalid (nothing is written then).
    """

    id: str
    name: str = "*"
    payload: Mapping[str, Any] = field(default_factory=dict)
    users: tuple[str, ...] = ()
    rate: int | None = None
    per: float = 1.0
    burst: int = 1
    concurrency: int | None = None
    per_user: bool = False

    def __post_init__(self) -> None:
        check_constraint_id(self.id)
        if not isinstance(self.name, str) or not 0 < len(self.name) <= 256:
            raise ValidationError("constraint name must be a glob of 1-256 characters")
        if not isinstance(self.payload, Mapping):
            raise ValidationError("constraint payload must be a mapping of field -> value(s)")
        matched: dict[str, Any] = {}
        for key, value in self.payload.items():
            if not isinstance(key, str):
                raise ValidationError("constraint payload: field names must be strings")
            if isinstance(value, list | tuple | set | frozenset):
                values = [_check_value(v, key) for v in value]
                if not values:
                    raise ValidationError(f"constraint payload: {key}: an empty list")
                matched[key] = values
            else:
                matched[key] = _check_value(value, key)
        object.__setattr__(self, "payload", matched)
        if isinstance(self.users, str) or not isinstance(self.users, Sequence):
            raise ValidationError("constraint users must be a list of user ids")
        users = tuple(check_identifier(u, "user_id", MAX_USER_ID) for u in self.users)
        object.__setattr__(self, "users", users)
        if self.rate is not None:
            _check_limit(self.rate, "rate")
        if self.concurrency is not None:
            _check_limit(self.concurrency, "concurrency")
        if self.rate is None and self.concurrency is None:
            raise ValidationError("a constraint needs a rate or a concurrency limit (or both)")
        per = self.per
        if isinstance(per, bool) or not isinstance(per, int | float):
            raise ValidationError(f"per must be a number of seconds, got {per!r}")
        if not 0.001 <= per <= MAX_PERIOD_SECONDS:
            raise ValidationError(f"per must be from 0.001 to {MAX_PERIOD_SECONDS:g} seconds")
        object.__setattr__(self, "per", float(per))
        _check_limit(self.burst, "burst")
        if type(self.per_user) is not bool:
            raise ValidationError("per_user must be true or false")

    # matching -------------------------------------------------------------------
    def matches(self, name: str, payload: Any, user_id: str) -> bool:
        """Whether a task of ``name`` with ``payload`` pushed by ``user_id`` matches."""
        if self.users and user_id not in self.users:
            return False
        if self.name != "*" and self._glob.match(name) is None:
            return False
        if self.payload:
            if not isinstance(payload, Mapping):
                return False
            for key, want in self.payload.items():
                if key not in payload:
                    return False
                got = payload[key]
                if isinstance(want, list):
                    if not any(_same(got, w) for w in want):
                        return False
                elif not _same(got, want):
                    return False
        return True

    @functools.cached_property
    def _glob(self) -> re.Pattern[str]:
        return re.compile(fnmatch.translate(self.name))

    def bucket(self, user_id: str) -> str:
        """The bucket a matching task of ``user_id`` counts in."""
        return f"{self.id}:{user_id}" if self.per_user else self.id

    # storage --------------------------------------------------------------------
    @property
    def interval_us(self) -> int:
        """GCRA emission interval: microseconds between two starts (0: no rate)."""
        if self.rate is None:
            return 0
        return max(1, round(self.per * 1_000_000 / self.rate))

    def to_dict(self) -> dict[str, Any]:
        """The definition as plain data (the YAML/HTTP shape)."""
        return {
            "id": self.id,
            "name": self.name,
            "payload": dict(self.payload),
            "users": list(self.users),
            "rate": self.rate,
            "per": self.per,
            "burst": self.burst,
            "concurrency": self.concurrency,
            "per_user": self.per_user,
        }

    def dumps(self) -> bytes:
        """The stored form: the definition plus the numbers the lease script reads
        (``interval_us``, ``tau_us``: how far ahead of its schedule a burst may run)."""
        return self._stored(self.rate, self.burst, self.concurrency)

    def _stored(self, rate: int | None, burst: int, concurrency: int | None) -> bytes:
        data = self.to_dict()
        interval = max(1, round(self.per * 1_000_000 / rate)) if rate else 0
        data["interval_us"] = interval
        data["tau_us"] = (burst - 1) * interval
        data["limit"] = concurrency or 0
        return orjson.dumps(data)

    def shares(self, shards: int) -> list[bytes]:
        """The stored forms of this constraint on each shard of a queue of ``shards``.

        A per-user constraint is whole on every shard (a user lives in one). A global
        one is split: shard ``i`` gets ``rate // shards`` starts per ``per`` (one more
        for the first ``rate % shards``), concurrency and burst likewise (a burst share
        is at least 1), so the shares of a limit add up to the limit.

        Raises:
            ValidationError: a global rate or concurrency is below ``shards`` (a shard
                would get none of it).
        """
        if shards == 1 or self.per_user:
            return [self.dumps()] * shards
        for what, value in (("rate", self.rate), ("concurrency", self.concurrency)):
            if value is not None and value < shards:
                raise ValidationError(
                    f"constraint {self.id!r}: a {what} of {value} cannot be split over "
                    f"{shards} shards (each needs at least 1): raise it or make it per_user",
                    field=what,
                )

        def share(value: int, i: int) -> int:
            return value // shards + (1 if i < value % shards else 0)

        return [
            self._stored(
                None if self.rate is None else share(self.rate, i),
                max(1, share(self.burst, i)),
                None if self.concurrency is None else share(self.concurrency, i),
            )
            for i in range(shards)
        ]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Constraint:
        """A constraint from plain data (YAML, HTTP, storage); unknown keys are errors.

        Raises:
            ValidationError: bad or unknown fields.
        """
        if not isinstance(data, Mapping):
            raise ValidationError("a constraint must be a mapping")
        known = {"id", "name", "payload", "users", "rate", "per", "burst", "concurrency",
                 "per_user"}  # fmt: skip
        extra = set(data) - known - {"interval_us", "tau_us", "limit"}
        if extra:
            raise ValidationError(f"constraint: unknown field(s) {', '.join(sorted(extra))}")
        values = {k: v for k, v in data.items() if k in known}
        if "users" in values and isinstance(values["users"], list):
            values["users"] = tuple(values["users"])
        if "id" not in values:
            raise ValidationError("constraint: id is required")
        return cls(**values)

    @classmethod
    def loads(cls, raw: bytes | str) -> Constraint:
        """A constraint from its stored form."""
        return cls.from_dict(orjson.loads(raw))


def _same(got: Any, want: Any) -> bool:
    """JSON equality: ``1 == True`` is not a match, ``1 == 1.0`` is."""
    if isinstance(got, bool) or isinstance(want, bool):
        return type(got) is type(want) and got == want
    return bool(got == want)


@dataclass(frozen=True)
class ConstraintSet:
    """The constraints a client matches pushed tasks against, as of ``version``."""

    version: int = 0
    constraints: tuple[Constraint, ...] = ()

    def buckets(self, name: str, payload: Any, user_id: str) -> str:
        """The stored ``cons`` value of a task: a JSON array of its buckets ('' none)."""
        if not self.constraints:
            return ""
        found = [c.bucket(user_id) for c in self.constraints if c.matches(name, payload, user_id)]
        return orjson.dumps(found).decode() if found else ""


@dataclass(frozen=True)
class ConstraintInfo:
    """A constraint and its current state.

    Attributes:
        constraint: the definition.
        running: unexpired leases of matched tasks (all buckets).
        parked: matched tasks passed over and waiting for the limit to free.
        buckets: per bucket (the id, or ``'<id>:<user>'``): ``(running, parked)``.
    """

    constraint: Constraint
    running: int = 0
    parked: int = 0
    buckets: dict[str, tuple[int, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the CLI and the HTTP service."""
        return {
            **self.constraint.to_dict(),
            "running": self.running,
            "parked": self.parked,
            "buckets": {b: {"running": r, "parked": p} for b, (r, p) in self.buckets.items()},
        }


def constraint_list(value: Any) -> list[Constraint]:
    """Constraints from plain data: a list of mappings, or a mapping id -> fields.

    Raises:
        ValidationError: a bad entry, or one id twice.
    """
    items: list[Mapping[str, Any]]
    if isinstance(value, Mapping):
        items = []
        for key, fields in value.items():
            if not isinstance(fields, Mapping):
                raise ValidationError(f"constraint {key!r} must be a mapping")
            items.append({"id": key, **fields})
    elif isinstance(value, list):
        items = value
    else:
        raise ValidationError("constraints must be a list or a mapping of id -> fields")
    out = [Constraint.from_dict(item) for item in items]
    ids = [c.id for c in out]
    if len(set(ids)) != len(ids):
        raise ValidationError("constraints: an id appears twice")
    return out
