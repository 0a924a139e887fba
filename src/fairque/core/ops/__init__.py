"""Sans-IO core: every queue operation built once as (script, keys, args, parse).

``FairQueue`` and ``AsyncFairQueue`` only execute the ``Call`` objects built here, so
the two clients cannot drift apart. Each builder is named after the Lua script it
calls (``pop`` calls ``lua/pop.lua``); the builders live by concern in the modules of
this package (tasks, leases, inspection, schedules, constraints, plain commands), and
``Operations`` is all of them over one queue. How a task is stored is
``fairque.core.taskhash``'s business; the records passed around are in
``fairque.core.records``.
"""

from __future__ import annotations

from fairque.core.ops.constraints import ConstraintOperations
from fairque.core.ops.inspection import LIST_SCAN, MAX_PAGE, InspectionOperations, make_cursor
from fairque.core.ops.leases import MAX_TRACEBACK, LeaseOperations
from fairque.core.ops.plain import PlainOperations
from fairque.core.ops.schedules import ScheduleOperations
from fairque.core.ops.shards import ShardOperations
from fairque.core.ops.tasks import TaskOperations

__all__ = ["LIST_SCAN", "MAX_PAGE", "MAX_TRACEBACK", "Operations", "make_cursor"]


class Operations(
    TaskOperations,
    LeaseOperations,
    InspectionOperations,
    ScheduleOperations,
    ConstraintOperations,
    ShardOperations,
    PlainOperations,
):
    """Builds the calls of one queue; shared by the sync and async clients.

    Each script has one builder, named after it; the calls that are a single plain
    command (``get``, waits, ``wake``, XCom, ``metrics``) come from ``PlainOperations``.
    """
