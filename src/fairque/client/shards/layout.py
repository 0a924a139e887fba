"""Creating, opening and resizing a sharded queue's layout (kept in shard 0): the flows
``FairQueue.open``, ``AsyncFairQueue.open`` and ``resize`` run (no I/O here)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import redis
from redis.exceptions import NoScriptError, ResponseError

from fairque.client.base import QueueBase, run_flow
from fairque.client.shards.rules import shard_operations, spread_flow
from fairque.core.ops.shards import Layout
from fairque.core.shards import check_shards, choose_tags
from fairque.errors import ConfigError

if TYPE_CHECKING:
    from fairque.client.base import Flow
    from fairque.core.ops import Operations
    from fairque.core.records import Call

T = TypeVar("T")

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
        tags = choose_tags(ops.queue, shards)
        # constraints defined before the queue was sharded get their shares first
        yield from spread_flow(shard_operations(ops, Layout(shards, tuple(tags))))
        layout = yield ops.create_shards(tags)
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
        ValidationError: a global constraint's limit is below the new shard count
            (nothing changes).
    """
    check_shards(shards)
    for _ in range(RESIZE_TRIES):
        layout: Layout = yield ops.create_shards(())
        if layout.count == shards:
            return shards, layout
        tags = choose_tags(ops.queue, shards, layout.tags)[len(layout.tags) :]
        if tags:  # the constraints' shares over the longer list, before it takes tenants
            grown = Layout(shards, (*layout.tags, *tags))
            yield from spread_flow(shard_operations(ops, grown))
        after: Layout = yield ops.resize(shards, len(layout.tags), tags)
        if tags:  # shares over the list as it is (a constraint defined meanwhile, or
            # another resize that won)
            yield from spread_flow(shard_operations(ops, after))
        if after.count == shards:
            return layout.count, after
    raise ConfigError(f"queue {ops.queue!r}: other resizes kept changing its shards; try again")


def probe_layout(
    url: str, cluster: bool, queue: str, shards: int | None, options: dict[str, Any]
) -> Layout | None:
    """The queue's layout, read (or created with ``shards``) over a short-lived blocking
    connection: for the asyncio client, which opens queues before its loop may run.
    None when the server cannot be reached and no count was named.

    Raises:
        ConfigError: as ``layout_flow``.
    """
    client: Any = (redis.RedisCluster if cluster else redis.Redis).from_url(url)

    def run(call: Call[T]) -> T:
        keys, args, script = call.keys, call.args, call.script
        assert script is not None  # the layout is read and written by scripts only
        try:
            try:
                raw = client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                raw = client.eval(script.source, len(keys), *keys, *args)
        except ResponseError as exc:
            owner._reraise(exc)
        return call.parse(raw)

    def no_pipeline(calls: Any) -> list[Any]:  # pragma: no cover - the flow sends none
        raise NotImplementedError

    try:
        owner = QueueBase(client, queue, **options)
        return run_flow(layout_flow(owner, shards), run, no_pipeline)
    except (redis.ConnectionError, redis.TimeoutError):
        if shards is not None:
            raise
        return None
    finally:
        client.close()
