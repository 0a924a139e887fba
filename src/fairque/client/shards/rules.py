"""Constraints on a sharded queue: every shard holds every constraint, so a lease on
any shard checks its limits in that shard's slot (one script, as on a plain queue).

A per-user constraint is whole on every shard and exact, since a user lives in one
shard. A global one is split into shares that add up to its limit
(``Constraint.shares``): each shard holds its share exactly under racing workers, so
the queue as a whole never passes the limit; a shard cannot lend its unused share to
another. Shares are taken over every shard of the list (retired ones too: they may
still hold matched tasks), and a resize writes the new shares before the new shards
take tenants (``spread_flow``). docs/howto/shards.md says the same for users.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fairque.client.base import Flow
from fairque.constraints.model import Constraint, ConstraintInfo, ConstraintSet
from fairque.core.ops import Operations
from fairque.errors import ValidationError

if TYPE_CHECKING:
    from fairque.client.shards.placed import Placed
    from fairque.client.shards.placement import Partition
    from fairque.core.ops.shards import Layout


def shard_operations(ops: Operations, layout: Layout) -> list[Operations]:
    """The operations of every shard of ``layout``, ``ops`` (shard 0's) first."""
    return [ops, *(Operations(ops.queue, ops.options, tag) for tag in layout.tags)]


def spread_flow(
    shards: Sequence[Operations], constraints: Sequence[Constraint] | None = None
) -> Flow[None]:
    """Write each of ``constraints`` (default: those shard 0 holds) to every one of
    ``shards`` with its share, in shard order (a resize that grows the list lowers the
    old shards' shares before the new shards get theirs). A shard that holds its share
    already is left as it is.

    Raises:
        ValidationError: a global limit cannot be split over this many shards (checked
            for every constraint before anything is written).
    """
    if constraints is None:
        constraints = (yield shards[0].constraints(usage=False))[0].constraints
    forms = [(c, c.shares(len(shards))) for c in constraints]
    for i, ops in enumerate(shards):
        for constraint, stored in forms:
            yield ops.define_constraint(constraint, stored[i])


def merge_infos(answers: Sequence[list[ConstraintInfo]]) -> list[ConstraintInfo]:
    """One ``ConstraintInfo`` per constraint: use summed over the shards, per bucket."""
    merged: dict[str, ConstraintInfo] = {}
    for infos in answers:
        for info in infos:
            have = merged.get(info.constraint.id)
            if have is None:
                merged[info.constraint.id] = ConstraintInfo(
                    info.constraint, info.running, info.parked, dict(info.buckets)
                )
                continue
            buckets = dict(have.buckets)
            for name, (running, parked) in info.buckets.items():
                r, p = buckets.get(name, (0, 0))
                buckets[name] = (r + running, p + parked)
            merged[info.constraint.id] = ConstraintInfo(
                have.constraint, have.running + info.running, have.parked + info.parked, buckets
            )
    return [merged[k] for k in sorted(merged)]


class ShardedRules:
    """The constraint flows of a sharded queue (``Shards`` mixes them in)."""

    _parts: tuple[Partition, ...]
    home: Placed

    if TYPE_CHECKING:

        def each(self, build: Any) -> Flow[list[Any]]: ...

        def adopt(self, layout: Layout) -> Any: ...

        def _pipeline(self, calls: tuple[Any, ...]) -> Flow[list[Any]]: ...

    def constraints(
        self, constraint_id: str | None = None, usage: bool = True
    ) -> Flow[list[ConstraintInfo]]:
        """Every shard's constraints, merged; each partition matches its pushes against
        its own shard's set from then on."""
        answers: list[tuple[ConstraintSet, list[ConstraintInfo]]] = yield from self.each(
            lambda p: p.ops.constraints(constraint_id, usage)
        )
        for part, (found, _) in zip(self._parts, answers, strict=True):
            if constraint_id is None:
                part.ops.codec.constraints = found
        if constraint_id is None:
            self.home.ops.codec.constraints = answers[0][0]
        return merge_infos([infos for _, infos in answers])

    def _grown_flow(self) -> Flow[bool]:
        """Read the layout; True (and follow it) when a resize added shards."""
        layout: Layout = yield self.home.ops.create_shards(())
        grown = len(layout.tags) + 1 > len(self._parts)
        self.adopt(layout)
        return grown

    def define(self, constraints: Sequence[Constraint]) -> Flow[list[ConstraintInfo]]:
        """Define ``constraints`` on every shard with their shares (every split checked
        before anything is written); again on every shard when a resize added shards
        meanwhile (shares are taken over the new list). Answers the merged set after."""
        for c in constraints:
            if not isinstance(c, Constraint):
                raise ValidationError(f"expected a Constraint, got {type(c).__name__}")
        while True:
            yield from spread_flow([p.ops for p in self._parts], constraints)
            if not (yield from self._grown_flow()):
                break
        infos: list[ConstraintInfo] = yield from self.constraints(usage=False)
        return infos

    def remove_constraint(self, constraint_id: str) -> Flow[bool]:
        """Remove the constraint from every shard (and from shards a resize added)."""
        removed = False
        done = 0
        while True:
            answers: list[bool] = yield from self._pipeline(
                tuple(p.ops.remove_constraint(constraint_id) for p in self._parts[done:])
            )
            removed = removed or any(answers)
            done = len(self._parts)
            if not (yield from self._grown_flow()):
                break
        yield from self.constraints(usage=False)
        return removed
