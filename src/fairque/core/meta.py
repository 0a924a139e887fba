"""The queue's meta hash (``QueueKeys.meta``), field by field: its clocks and its settings.

The scripts keep two kinds of field there. **Clocks** move with the queue's transitions
(the ring's clock, the lease sequence, the fair floor). **Settings** say which features
the queue uses now, so a lease knows in one read which stages it needs; each is set by
the script that turns its feature on and cleared by the one that turns it off, so a
queue's mode is its settings, not its history. The loader refuses a script that names a
field this table does not declare (``fairque.core.scripts.check_meta``); a test holds
each setting to a script that sets it and one that clears it, but ``costly`` (below).
"""

from __future__ import annotations

from typing import Literal, NamedTuple


class MetaField(NamedTuple):
    """One field of the meta hash: a clock or a setting, and what it holds."""

    kind: Literal["clock", "setting"]
    meaning: str


META: dict[str, MetaField] = {
    "fair": MetaField(
        "setting", "'count' or 'time': what the queue is fair by (set_fairness; absent: time)"
    ),
    "fair_op": MetaField("clock", "request id and answer of the last fairness switch"),
    "max_lead": MetaField("setting", "how far a tenant's tag may lead the floor (us)"),
    "floor": MetaField("clock", "the time-fair floor: the least start tag in the ring"),
    "clock": MetaField("clock", "the ring's virtual clock (count mode)"),
    "lease": MetaField("clock", "the lease sequence: each lease's token counts on from it"),
    "due": MetaField("clock", "no lease expires and no scheduled task is due before it (ms)"),
    "mono": MetaField("clock", "the last push time handed out, kept monotonic (us)"),
    "joined": MetaField("clock", "the tag of the last user that joined the ring (time mode)"),
    "dedup_at": MetaField("clock", "where maintain's scan of the dedup keys stopped"),
    "shards": MetaField("setting", "the queue's shard layout (create_shards, resize)"),
    "costly": MetaField(
        "setting",
        "'1': a task of cost > 1 was pushed, so a lease reads each task's cost (set by"
        " push and fire_schedule; still kept once set: clearing it needs a count of the"
        " live tasks of cost > 1)",
    ),
    "counted": MetaField(
        "setting",
        "'1': a tenant has a group or a share, so the ring's joins and leaves keep"
        " 'weights' (set by set_user_limits with the first, cleared with the last)",
    ),
    "weights": MetaField(
        "clock", "the top-level weights of the users in the ring, while 'counted' is set"
    ),
    "group_caps": MetaField(
        "setting",
        "'1': a group has an in-flight cap, so a grouped tenant's lease looks for it (set"
        " by set_group_limits with the first cap, cleared with the last)",
    ),
    "group_backlogs": MetaField(
        "setting",
        "'1': a group has a backlog quota, so the queue keeps its groups' backlogs (set"
        " by set_group_limits with the first quota, cleared with the last)",
    ),
    "group_quotas": MetaField("clock", "how many groups have a backlog quota"),
}
