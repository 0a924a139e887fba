"""The part of a client that routes through a placement: it holds the placement, swaps
it when the queue's layout changes, and does the upkeep a client does beside its calls
(naming the queue in the registry, reading the layout)."""

from __future__ import annotations

import time
from typing import Any

from fairque.client.base import LAYOUT_EVERY, Flow, QueueBase
from fairque.client.shards.one import OnePlace
from fairque.client.shards.placement import Placement
from fairque.client.shards.spread import Shards
from fairque.core.ops.shards import Layout


class Placed(QueueBase):
    """A client that routes through a ``Placement``: the part every client shares."""

    client: Any

    def __init__(self, client: Any, queue: str, **options: Any) -> None:
        super().__init__(client, queue, **options)
        self.client = client
        self._place: Placement = OnePlace(self)
        #: when this client reads the queue's shard layout again (a resize elsewhere)
        self._layout_at = time.monotonic() + LAYOUT_EVERY

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
