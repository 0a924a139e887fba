"""The part of a client that routes through a placement: it holds the placement, swaps
it when the queue's layout changes, and does the upkeep a client does beside its calls
(naming the queue in the registry, reading the layout, flushing what it counted)."""

from __future__ import annotations

import time
from typing import Any, TypeVar

import redis

from fairque.client.base import LAYOUT_EVERY, Flow, QueueBase
from fairque.client.shards.one import OnePlace
from fairque.client.shards.placement import Placement
from fairque.client.shards.spread import Shards
from fairque.core.ops.shards import Layout
from fairque.core.tally import FLUSH_EVERY
from fairque.errors import FairqueError

T = TypeVar("T")


class Placed(QueueBase):
    """A client that routes through a ``Placement``: the part every client shares."""

    client: Any

    def __init__(self, client: Any, queue: str, **options: Any) -> None:
        super().__init__(client, queue, **options)
        self.client = client
        self._place: Placement = OnePlace(self)
        #: when this client reads the queue's shard layout again (a resize elsewhere)
        self._layout_at = time.monotonic() + LAYOUT_EVERY
        #: when this client flushes its counts again (monotonic; ``_flush_due``)
        self._flush_at = 0.0

    @property
    def shards(self) -> int:
        """How many shards the queue places tenants on (1: not sharded)."""
        return self._place.shards

    def shard_of(self, user_id: str) -> int:
        """The shard ``user_id``'s new tasks go to (0: not sharded)."""
        return self._place.shard_of(user_id)

    @property
    def layout(self) -> Layout:
        """The shards as this client knows them: the count placed on, every other tag."""
        return self._place.layout

    def _flush_due(self) -> bool:
        """Whether this client has counts to flush and flushed none in the last second
        (checked before each call, so no call's answer waits for a flush)."""
        now = time.monotonic()
        if now < self._flush_at:
            return False
        return self.ops.tally.pending() or any(
            part.ops.tally.pending() for part in self._place.parts
        )

    def _metrics_flow(self) -> Flow[None]:
        """Flush the counts of each partition (``fairque.core.tally``). A flush that
        fails (the server full or away) is kept and sent again with its number later;
        it never fails the call it follows."""
        self._flush_at = time.monotonic() + FLUSH_EVERY
        # (the client's own partition too: a resize may have left it out of the parts)
        for ops in {id(p.ops): p.ops for p in (self, *self._place.parts)}.values():
            call = ops.flush_metrics()
            if call is not None:
                try:
                    yield call
                except (FairqueError, redis.RedisError, OSError):
                    continue

    def _flushed(self, flow: Flow[T]) -> Flow[T]:
        """``flow`` after this client's counts are flushed (a read sees its own counts)."""
        yield from self._metrics_flow()
        out: T = yield from flow
        return out

    def _adopt_layout(self, layout: Layout) -> None:
        """Serve the shards of ``layout`` from now on (a resize made here or elsewhere)."""
        if not self._place.adopt(layout):
            self._place = Shards(self, layout)

    def _upkeep_due(self) -> bool:
        """Whether ``_upkeep_flow`` has anything to do (checked before each push)."""
        now = time.monotonic()
        return now >= self._list_at or now >= self._layout_at

    def _upkeep_flow(self) -> Flow[None]:
        """What a client does now and then beside its calls: name the queue in the
        registry (``LIST_EVERY``), and read the queue's shard layout (``LAYOUT_EVERY``),
        so a resize made elsewhere reaches this client."""
        yield from self._registry_flow(self._listing_due())
        now = time.monotonic()
        if now < self._layout_at:
            return
        self._layout_at = now + LAYOUT_EVERY
        self._adopt_layout((yield self.ops.create_shards(())))

    def _purge_all_flow(self, batch: int) -> Flow[int]:
        """``purge``: the other shards, then the client's own (which unlists the queue)."""
        total: int = yield from self._place.purge_rest(batch)
        return total + (yield from self._purge_flow(batch))
