"""What one bearer token may reach: queues and tenants (names or ``fnmatch`` patterns).

A scope narrows what a token's role allows; it never widens it. ``None`` for either
part means every queue or every tenant.

A tenant-scoped token sees only its tenants' tasks: another tenant's task answers as an
unknown id does. So that a task id chosen by one tenant cannot run into another's, the
ids a tenant-scoped token chooses are kept under the task's tenant (``stored_id``): the
token pushes, reads and cancels ``order-1`` and sees ``order-1``; the queue keeps
``4:acme:order-1`` (the tenant's length first, so no two tenants' forms meet), which is
what a token of the whole queue sees. Ids the queue generates are unique already and
kept as they are.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

#: characters that make a name a pattern (``fnmatch``)
PATTERN_CHARS = frozenset("*?[")


def is_pattern(name: str) -> bool:
    """Whether ``name`` is an ``fnmatch`` pattern rather than a name."""
    return bool(PATTERN_CHARS.intersection(name))


def matches(name: str, allowed: Sequence[str]) -> bool:
    """Whether ``name`` is one of ``allowed`` or matches one of its patterns."""
    return any(name == a or (is_pattern(a) and fnmatch.fnmatchcase(name, a)) for a in allowed)


@dataclass(frozen=True)
class Scope:
    """The queues and tenants a token may reach (``None``: all of them)."""

    queues: tuple[str, ...] | None = None
    tenants: tuple[str, ...] | None = None
    #: whether the token reads tasks' payloads and results (else they read as null)
    payloads: bool = True

    @property
    def by_tenant(self) -> bool:
        """Whether the token is held to some tenants."""
        return self.tenants is not None

    def allows_queue(self, name: str) -> bool:
        return self.queues is None or matches(name, self.queues)

    def allows_tenant(self, user_id: str) -> bool:
        return self.tenants is None or matches(user_id, self.tenants)

    @property
    def tenant_names(self) -> tuple[str, ...]:
        """The tenants the scope names exactly (not through a pattern)."""
        return tuple(t for t in self.tenants or () if not is_pattern(t))

    @property
    def own_tenant(self) -> str | None:
        """The tenant a push that names none is taken as: the scope's only tenant, when
        it names exactly one and no pattern."""
        if self.tenants is not None and len(self.tenants) == 1 and not is_pattern(self.tenants[0]):
            return self.tenants[0]
        return None

    def stored_id(self, task_id: str, user_id: str) -> str:
        """The id the queue keeps for ``task_id`` chosen by this token for ``user_id``."""
        if self.tenants is None:
            return task_id
        return f"{len(user_id)}:{user_id}:{task_id}"

    def candidates(self, task_id: str) -> list[str]:
        """The stored ids ``task_id`` may name for this token: under each tenant it
        names exactly, then as it is (an id the queue generated, or one shown whole)."""
        if self.tenants is None:
            return [task_id]
        return [*(self.stored_id(task_id, t) for t in self.tenant_names), task_id]

    def shown_id(self, stored: str, user_id: str) -> str:
        """The id this token sees for the stored id of a task of ``user_id``: its own
        choice for a tenant it names exactly, else the stored id (which it reads by)."""
        if self.tenants is None or user_id not in self.tenant_names:
            return stored
        prefix = f"{len(user_id)}:{user_id}:"
        return stored[len(prefix) :] if stored.startswith(prefix) else stored


#: the scope of a token that may reach everything (and of every request without tokens)
EVERYTHING = Scope()
