"""The constraint methods of ``FairQueue`` and ``AsyncFairQueue``.

Both clients inherit them from here; each method only sends the call that
``fairque.core.ops`` builds (the parity test holds the two to the same signatures).
A change reads the shard layout first: a client made before the queue had shards
turns into a client of all of them and makes the change on every shard. A
client matches the tasks it pushes against the constraints it last read; the push
script refuses a push matched against an older set, and the client then reloads the
set and pushes again (``QueueBase._push_flow``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from fairque.constraints.model import Constraint, ConstraintInfo, ConstraintSet
from fairque.errors import ConstraintNotFound, ValidationError

if TYPE_CHECKING:
    from fairque.core.ops import Operations
    from fairque.core.records import Call

T = TypeVar("T")


def constraint_from(constraint: Constraint | None, fields: dict[str, Any]) -> Constraint:
    """``constraint``, or one built from keyword fields.

    Raises:
        ValidationError: both given, or a keyword that is not a ``Constraint`` field.
    """
    if constraint is not None and fields:
        raise ValidationError("give a Constraint or its fields as keywords, not both")
    if constraint is not None:
        return constraint
    known = {f.name for f in dataclasses.fields(Constraint)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ValidationError(
            f"unknown constraint field {unknown[0]!r} (the fields: {', '.join(sorted(known))})",
            field=unknown[0],
        )
    if "id" not in fields:
        raise ValidationError("a constraint needs an id", field="id")
    return Constraint(**fields)


def _found(constraint_id: str, infos: list[ConstraintInfo]) -> ConstraintInfo:
    if not infos:
        raise ConstraintNotFound(f"no constraint {constraint_id}")
    return infos[0]


class ConstraintMethods:
    """Constraints on the blocking client."""

    ops: Operations

    if TYPE_CHECKING:

        def _run(self, call: Call[T]) -> T: ...

        def refresh_layout(self) -> int: ...

    def _now_sharded(self, name: str) -> bool:
        """Read the layout before a change: True when the queue has shards since this
        client was made (it now serves them all, and ``name`` is the sharded method,
        which writes every shard; this one would write the first shard alone)."""
        self.refresh_layout()
        return getattr(type(self), name) is not getattr(ConstraintMethods, name)

    def define_constraint(self, constraint: Constraint | None = None, **fields: Any) -> Constraint:
        """Add a constraint or replace its definition; give a ``Constraint`` or its
        fields as keywords. The same definition again changes nothing.

        Tasks pushed from now on are matched against it; a raised limit lets parked
        tasks go at once.

        Raises:
            ValidationError: a field is invalid, or the queue holds 1,000 constraints
                (nothing is written).
        """
        found = constraint_from(constraint, fields)
        if self._now_sharded("define_constraint"):
            return self.define_constraint(found)
        self._run(self.ops.define_constraint(found))
        self.ops.codec.constraints = self._run(self.ops.constraints(usage=False))[0]
        return found

    def remove_constraint(self, constraint_id: str) -> bool:
        """Remove a constraint; its parked tasks go back to their lanes. False when
        there was none."""
        if self._now_sharded("remove_constraint"):
            return self.remove_constraint(constraint_id)
        removed = self._run(self.ops.remove_constraint(constraint_id))
        self.ops.codec.constraints = self._run(self.ops.constraints(usage=False))[0]
        return removed

    def constraints(self) -> list[ConstraintInfo]:
        """Every constraint with its use: running (unexpired leases) and parked tasks,
        in total and per bucket. Also refreshes the set this client matches against."""
        found, infos = self._run(self.ops.constraints())
        self.ops.codec.constraints = found
        return infos

    def constraint(self, constraint_id: str) -> ConstraintInfo:
        """One constraint with its use.

        Raises:
            ConstraintNotFound: no constraint has this id.
        """
        return _found(constraint_id, self._run(self.ops.constraints(constraint_id))[1])

    def apply_constraints(
        self, constraints: Iterable[Constraint], *, prune: bool = False
    ) -> ConstraintSet:
        """Define every constraint of ``constraints`` (the YAML ``constraints:``
        section); with ``prune``, remove the queue's other constraints. Returns the set
        the queue holds afterwards."""
        wanted = list(constraints)
        if self._now_sharded("apply_constraints"):
            return self.apply_constraints(wanted, prune=prune)
        for c in wanted:
            self._run(self.ops.define_constraint(c))
        if prune:
            keep = {c.id for c in wanted}
            held = self._run(self.ops.constraints(usage=False))[0]
            for c in held.constraints:
                if c.id not in keep:
                    self._run(self.ops.remove_constraint(c.id))
        found = self._run(self.ops.constraints(usage=False))[0]
        self.ops.codec.constraints = found
        return found


class AsyncConstraintMethods:
    """Constraints on the asyncio client (the same methods as coroutines)."""

    ops: Operations

    if TYPE_CHECKING:

        async def _run(self, call: Call[T]) -> T: ...

        async def refresh_layout(self) -> int: ...

    async def _now_sharded(self, name: str) -> bool:
        """See ``ConstraintMethods._now_sharded``."""
        await self.refresh_layout()
        return getattr(type(self), name) is not getattr(AsyncConstraintMethods, name)

    async def define_constraint(
        self, constraint: Constraint | None = None, **fields: Any
    ) -> Constraint:
        """See ``FairQueue.define_constraint``."""
        found = constraint_from(constraint, fields)
        if await self._now_sharded("define_constraint"):
            return await self.define_constraint(found)
        await self._run(self.ops.define_constraint(found))
        self.ops.codec.constraints = (await self._run(self.ops.constraints(usage=False)))[0]
        return found

    async def remove_constraint(self, constraint_id: str) -> bool:
        """See ``FairQueue.remove_constraint``."""
        if await self._now_sharded("remove_constraint"):
            return await self.remove_constraint(constraint_id)
        removed = await self._run(self.ops.remove_constraint(constraint_id))
        self.ops.codec.constraints = (await self._run(self.ops.constraints(usage=False)))[0]
        return removed

    async def constraints(self) -> list[ConstraintInfo]:
        """See ``FairQueue.constraints``."""
        found, infos = await self._run(self.ops.constraints())
        self.ops.codec.constraints = found
        return infos

    async def constraint(self, constraint_id: str) -> ConstraintInfo:
        """See ``FairQueue.constraint``."""
        return _found(constraint_id, (await self._run(self.ops.constraints(constraint_id)))[1])

    async def apply_constraints(
        self, constraints: Iterable[Constraint], *, prune: bool = False
    ) -> ConstraintSet:
        """See ``FairQueue.apply_constraints``."""
        wanted = list(constraints)
        if await self._now_sharded("apply_constraints"):
            return await self.apply_constraints(wanted, prune=prune)
        for c in wanted:
            await self._run(self.ops.define_constraint(c))
        if prune:
            keep = {c.id for c in wanted}
            held = (await self._run(self.ops.constraints(usage=False)))[0]
            for c in held.constraints:
                if c.id not in keep:
                    await self._run(self.ops.remove_constraint(c.id))
        found = (await self._run(self.ops.constraints(usage=False)))[0]
        self.ops.codec.constraints = found
        return found
