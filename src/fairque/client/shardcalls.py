"""What the sync and async clients of a sharded queue share beside the flows: how
long a sync wait stays on one shard, how they build a lease request, and ``place``'s
answer."""

from __future__ import annotations

from collections.abc import Sequence

from fairque.core.records import Call, LeaseRequest

#: Longest blocking wait on one shard while a sync client on a cluster waits on all
#: shards in turn (one BLPOP cannot span slots there).
TURN_SECONDS = 0.05


def lease_request(
    count: int, worker_id: str, lease_seconds: float | None,
    assigned_users: Sequence[str] | None, steal_targets: Sequence[str] | None,
    request_id: str | None, names: Sequence[str] | None = None,
) -> LeaseRequest:  # fmt: skip
    """A ``LeaseRequest`` from a lease method's arguments."""
    return LeaseRequest(
        count, worker_id, lease_seconds, assigned_users, steal_targets, request_id, names
    )


def placed_count(call: Call[tuple[int, int]]) -> Call[int]:
    """``place``'s call answering only how many it placed."""
    return Call(call.script, call.keys, call.args, lambda r: call.parse(r)[0])
