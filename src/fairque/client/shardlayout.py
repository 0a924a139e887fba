"""Creating, opening and resizing a sharded queue's layout (kept in shard 0): the flows
``FairQueue.open``, ``AsyncFairQueue.open`` and ``resize`` run (no I/O here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fairque.core.ops.shards import Layout
from fairque.core.shards import check_shards, choose_tags
from fairque.errors import ConfigError

if TYPE_CHECKING:
    from fairque.client.base import Flow, QueueBase
    from fairque.core.ops import Operations

#: Times ``resize`` reads the layout again when another resize changed it first.
RESIZE_TRIES = 5


def layout_flow(ops_owner: QueueBase, shards: int | None) -> Flow[Layout]:
    """Create or open the queue's shard layout.

    Raises:
        ConfigError: ``shards`` differs from the count the server holds.
    """
    ops = ops_owner.ops
    if shards is not None:
        check_shards(shards)
    layout: Layout = yield ops.create_shards(())
    if shards is not None and shards > 1 and layout.count == 1 and not layout.tags:
        layout = yield ops.create_shards(choose_tags(ops.queue, shards))
    count = layout.count
    if shards is not None and shards != count:
        raise ConfigError(
            f"queue {ops.queue!r} has {count} shard{'s' if count > 1 else ''}, not {shards}"
            + ("; it already holds tasks" if count == 1 else "")
            + f": resize it (q.resize(shards={shards}))"
        )
    return layout


def resize_flow(ops: Operations, shards: int) -> Flow[tuple[int, Layout]]:
    """``resize``: place tenants on ``shards`` shards from now on; the count before,
    and the layout after. Another resize racing this one wins or loses whole: this
    one reads the layout again and tries again (at most ``RESIZE_TRIES`` times).

    Raises:
        ConfigError: ``shards`` is not 1..1024, or other resizes kept winning.
    """
    check_shards(shards)
    for _ in range(RESIZE_TRIES):
        layout: Layout = yield ops.create_shards(())
        if layout.count == shards:
            return shards, layout
        tags = choose_tags(ops.queue, shards, layout.tags)[len(layout.tags) :]
        after: Layout = yield ops.resize(shards, len(layout.tags), tags)
        if after.count == shards:
            return layout.count, after
    raise ConfigError(f"queue {ops.queue!r}: other resizes kept changing its shards; try again")
