"""What the sync and async clients of a sharded queue share beside the flows: the
methods they refuse, how they build a lease request, and ``place``'s answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fairque.client.base import QueueBase
from fairque.core.records import Call, LeaseRequest
from fairque.errors import NotShardAware

#: Methods that change constraints or schedules, or run the scheduler: not across
#: shards yet (their reads answer from shard 0, where none can be defined).
NOT_SHARD_AWARE = (
    "acquire_scheduler_lock", "add_schedule", "apply_constraints", "define_constraint",
    "due_schedules", "fire_schedule", "pause_schedule", "release_scheduler_lock",
    "remove_constraint", "remove_schedule", "renew_scheduler_lock", "resume_schedule",
    "update_schedule", "wait_for_handover", "wait_for_schedules",
)  # fmt: skip
#: Longest blocking wait on one shard while a sync client on a cluster waits on all
#: shards in turn (one BLPOP cannot span slots there).
TURN_SECONDS = 0.05


def refusal(name: str, is_async: bool) -> Any:
    """The method a sharded client has for ``name``: it raises ``NotShardAware``."""

    def refuse(self: QueueBase, *args: Any, **kwargs: Any) -> Any:
        raise NotShardAware(
            f"{name}() does not span shards yet (queue {self.queue!r} has "
            f"{len(self.layout.tags) + 1} shards; docs/howto/shards.md)"
        )

    async def refuse_async(self: QueueBase, *args: Any, **kwargs: Any) -> Any:
        refuse(self, *args, **kwargs)

    chosen = refuse_async if is_async else refuse
    chosen.__name__ = name
    chosen.__doc__ = f"Refused on a sharded queue: ``{name}`` does not span shards yet."
    return chosen


def lease_request(
    count: int, worker_id: str, lease_seconds: float | None,
    assigned_users: Sequence[str] | None, steal_targets: Sequence[str] | None,
    request_id: str | None,
) -> LeaseRequest:  # fmt: skip
    """A ``LeaseRequest`` from a lease method's arguments."""
    return LeaseRequest(count, worker_id, lease_seconds, assigned_users, steal_targets, request_id)


def placed_count(call: Call[tuple[int, int]]) -> Call[int]:
    """``place``'s call answering only how many it placed."""
    return Call(call.script, call.keys, call.args, lambda r: call.parse(r)[0])
