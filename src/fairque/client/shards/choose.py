"""Which shard a lease goes to, from the states of a sample of shards: the order to
lease from them, and the shards whose virtual time must be lifted first (no I/O)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from fairque.core.records import ShardState

#: Virtual microseconds a shard's floor may lag behind another's before the client lifts
#: it (more than sampling ever leaves between shards that serve; less than idleness).
LIFT_SLACK = 1_000_000


def order_of(states: Sequence[tuple[int, ShardState]], rng: random.Random) -> list[int]:
    """The sampled shards with ready work, in the order to lease from them.

    Time mode: the lowest ring position (start tag) first, so shards advance together
    in virtual time. Count mode: a draw weighted by the users waiting in each ring, so
    every user gets turns at the same pace wherever it lives.
    """
    ready = [(i, s) for i, s in states if s.ready]
    if all(s.timed for _, s in ready):
        return [i for i, _ in sorted(ready, key=lambda pair: pair[1].position)]
    order: list[int] = []
    while ready:
        weights = [max(s.users, 1) for _, s in ready]
        pick = rng.choices(range(len(ready)), weights)[0]
        order.append(ready.pop(pick)[0])
    return order


def lifts_of(states: Sequence[tuple[int, ShardState]]) -> dict[int, int]:
    """The shards to lift, and to what: in time mode, each whose floor (where its virtual
    time stands) lags more than ``LIFT_SLACK`` behind the highest floor of the others
    weighed with it (a shard that was idle, or that a resize just added)."""
    if len(states) < 2 or not all(s.timed for _, s in states):
        return {}
    top = max(s.floor for _, s in states)
    return {i: top for i, s in states if s.floor < top - LIFT_SLACK}
