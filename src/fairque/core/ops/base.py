"""What every builder of calls shares: the queue's keys, options, codec and scripts.

``Operations`` (``fairque.core.ops``) is this base plus one mixin per concern; each
mixin builds the calls of its scripts with ``_call``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from fairque.core.checks import check_task_id
from fairque.core.codec import Serializer, get_serializer
from fairque.core.keys import QueueKeys, validate_queue_name
from fairque.core.options import QueueOptions
from fairque.core.records import Call, EncodedResult
from fairque.core.scripts import load_all
from fairque.core.tally import Tally
from fairque.core.taskhash import TaskCodec

T = TypeVar("T")


class OperationsBase:
    """The state every builder reads; ``_call`` makes a call of one script."""

    def __init__(self, queue: str, options: QueueOptions, tag: str | None = None) -> None:
        self.queue = validate_queue_name(queue)
        self.options = options
        #: the partition's keys: the queue's own, or one shard's (``tag``)
        self.keys = QueueKeys(self.queue, tag)
        self.serializer: Serializer = get_serializer(options.serializer)
        self.codec = TaskCodec(self.serializer, options)
        self.scripts = load_all()
        self._none = EncodedResult(self.serializer.dumps(None))
        self._horizon_us = round(options.aging_horizon_seconds * 1_000_000)
        self._base_ms = round(options.retry_base_seconds * 1000)
        self._failed_ttl_ms = round(options.failed_ttl_seconds * 1000)
        self._script_keys = {
            name: tuple(getattr(self.keys, key) for key in script.key_names)
            for name, script in self.scripts.items()
        }
        #: the default backlog quota per user a push holds tenants to (0: none)
        self._max_queued = options.max_queued_per_user or 0
        #: the default byte quota per user (payloads of its tasks not ended; 0: none)
        self._max_bytes = options.max_bytes_per_user or 0
        #: what this process counted of its calls here, until its next flush
        self.tally = Tally()
        # push_one's argument before the request id
        self._one_head = (options.on_duplicate,)

    def _call(self, name: str, args: Sequence[Any], parse: Callable[[Any], T]) -> Call[T]:
        """A call of script ``name``: its KEYS are the ones its binding names, in order."""
        return Call(self.scripts[name], self._script_keys[name], tuple(args), parse)

    _check_id = staticmethod(check_task_id)
