"""Builders of the constraint calls; ``fairque.constraints.model`` holds the models and
the matcher."""

from __future__ import annotations

from typing import Any

from fairque.constraints.model import (
    MAX_CONSTRAINTS,
    Constraint,
    ConstraintInfo,
    ConstraintSet,
    check_constraint_id,
)
from fairque.core.ops.base import OperationsBase
from fairque.core.records import Call, request_id
from fairque.core.taskhash import raw, text
from fairque.errors import ValidationError


class ConstraintOperations(OperationsBase):
    """Define, remove and read constraints."""

    def define_constraint(self, constraint: Constraint, stored: bytes | None = None) -> Call[int]:
        """Add or replace a constraint; the constraints version after it. ``stored``:
        the form to store (a shard's share, ``Constraint.shares``; default whole)."""
        if not isinstance(constraint, Constraint):
            raise ValidationError(f"expected a Constraint, got {type(constraint).__name__}")
        args = [constraint.id, constraint.dumps() if stored is None else stored, MAX_CONSTRAINTS]
        return self._call("define_constraint", args, int)

    def remove_constraint(self, constraint_id: str) -> Call[bool]:
        """Remove a constraint (False: there was none); its parked tasks go back."""
        check_constraint_id(constraint_id)
        return self._call("remove_constraint", [constraint_id, request_id()], lambda r: r == 1)

    def constraints(
        self, constraint_id: str | None = None, usage: bool = True
    ) -> Call[tuple[ConstraintSet, list[ConstraintInfo]]]:
        """The queue's constraints (one, with ``constraint_id``) as a matcher set and,
        with ``usage``, each with its buckets' running and parked counts."""
        if constraint_id is not None:
            check_constraint_id(constraint_id)

        def parse(reply: list[Any]) -> tuple[ConstraintSet, list[ConstraintInfo]]:
            infos = []
            for _, raw_def, use in reply[1:]:
                buckets = {
                    text(use[i]): (int(use[i + 1]), int(use[i + 2])) for i in range(0, len(use), 3)
                }
                infos.append(
                    ConstraintInfo(
                        Constraint.loads(raw(raw_def)),
                        sum(r for r, _ in buckets.values()),
                        sum(p for _, p in buckets.values()),
                        buckets,
                    )
                )
            infos.sort(key=lambda i: i.constraint.id)
            found = tuple(i.constraint for i in infos)
            return ConstraintSet(int(reply[0]), found), infos

        args = [constraint_id or "", "1" if usage else "0"]
        return self._call("constraints", args, parse)
