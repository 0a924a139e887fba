"""Builders of the calls that only a sharded queue makes: creating (or reading) its
shard list, kept in shard 0, and reading one shard's state to choose where to lease."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fairque.core.ops.base import OperationsBase
from fairque.core.ops.plain import PlainOperations, Stop, blocking_seconds, stop_of
from fairque.core.records import Call, ShardState, shard_state_of
from fairque.core.taskhash import text


@dataclass(frozen=True)
class Layout:
    """A sharded queue's shards as kept in shard 0 (``create_shards.lua``)."""

    count: int  #: the shards tenants are placed on (the first ``count``)
    tags: tuple[str, ...]  #: the tags of shards 1..M-1: placed on, then retired


def _layout(reply: Any) -> Layout:
    return Layout(int(reply[0]), tuple(text(t) for t in reply[1:]))


class ShardOperations(OperationsBase):
    """Builders of the shard calls (on shard 0's or any shard's operations)."""

    def create_shards(self, tags: Sequence[str]) -> Call[Layout]:
        """Make a new queue sharded with the shard tags ``tags`` (shards 1..N-1), or
        only read the layout with no tags; answers the layout the queue has."""
        return self._call("create_shards", list(tags), _layout)

    def resize(self, count: int, seen: int, tags: Sequence[str]) -> Call[Layout]:
        """Place tenants on the first ``count`` shards from now on, appending ``tags``
        to a list the caller saw ``seen`` tags in; answers the layout the queue has."""
        return self._call("resize", [count, seen, *tags], _layout)

    def wait_for_any(self, shards: Sequence[OperationsBase], timeout: float) -> Call[bool]:
        """Block until a push signals ready work on any of ``shards`` (one BLPOP over
        their wake lists: a server that is not a cluster only) or ``timeout`` passes."""
        keys = tuple(ops.keys.wake for ops in shards)
        return Call(None, keys, ("BLPOP", blocking_seconds(timeout)), lambda r: r is not None)

    def wait_for_any_schedule(self, shards: Sequence[OperationsBase], timeout: float) -> Call[bool]:
        """Block until a schedule changes on any of ``shards`` (one BLPOP over their
        schedules' wake-up lists: not on a cluster) or ``timeout`` passes."""
        keys = tuple(ops.keys.schedules_wake for ops in shards)
        return Call(None, keys, ("BLPOP", blocking_seconds(timeout)), lambda r: r is not None)

    def wait_for_any_cancel(
        self, shards: Sequence[tuple[PlainOperations, str]], worker_id: str, timeout: float
    ) -> Call[Stop | None]:
        """Block until a cancel takes a lease of ``worker_id`` away on any of ``shards``
        (one BLPOP over their stop lists: on a cluster, one shard per call) or
        ``timeout`` passes. Each shard comes with the mark its lease tokens carry on
        this client; the answer's token carries it too."""
        keys = tuple(ops.stops_key(worker_id) for ops, _ in shards)
        marks = {key: mark for key, (_, mark) in zip(keys, shards, strict=True)}

        def parse(reply: Any) -> Stop | None:
            stop = stop_of(reply)
            if stop is None:
                return None
            return Stop(stop.task_id, stop.lease_token + marks[text(reply[0])])

        return Call(None, keys, ("BLPOP", blocking_seconds(timeout)), parse)

    def lift_floor(self, position: int) -> Call[int]:
        """Lift this shard's floor, and its ring below it, to ``position`` (time mode)."""
        return self._call("lift_floor", [position], int)

    def shard_state(self) -> Call[ShardState]:
        """This partition's readiness and ring position (read only)."""
        return self._call("shard_state", [], shard_state_of)
