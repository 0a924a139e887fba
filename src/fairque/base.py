"""What the sync and async clients share: operations, options, limits, error mapping."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

from redis.exceptions import ResponseError

from fairque.checks import check_wait
from fairque.errors import ServerError
from fairque.ops import Call, Operations, blocking_limit, translate_error
from fairque.options import QueueOptions


class QueueBase:
    """State common to ``FairQueue`` and ``AsyncFairQueue``; they only add I/O."""

    def __init__(self, client: Any, queue: str, **options: Any) -> None:
        self.ops = Operations(queue, QueueOptions.build(**options))
        self._block_limit = blocking_limit(client)

    @property
    def queue(self) -> str:
        """The queue name."""
        return self.ops.queue

    @property
    def options(self) -> QueueOptions:
        """The validated queue options."""
        return self.ops.options

    def _bounded(self, seconds: float) -> float:
        """``seconds``, cut to what one blocking call may last on this client."""
        seconds = check_wait(seconds)
        limit = self._block_limit
        return seconds if limit is None or seconds <= limit else limit

    def _wait_and_pop_calls(
        self,
        timeout: float,
        count: int,
        worker_id: str,
        lease_seconds: float | None,
        assigned_users: Sequence[str] | None,
        steal_targets: Sequence[str] | None,
        request_id: str | None = None,
    ) -> list[Call[Any]]:
        """``wait_and_pop``'s pipeline: the blocking wait, then the lease behind it."""
        return [
            self.ops.wait_for_work(self._bounded(timeout)),
            self.ops.pop(
                count, worker_id, lease_seconds, assigned_users, steal_targets, request_id
            ),
        ]

    @staticmethod
    def _reraise(exc: ResponseError) -> NoReturn:
        """Raise the fairque exception a script's error reply stands for, else ``exc``."""
        err = translate_error(exc)
        if err is exc:
            raise ServerError(str(exc)) from exc
        raise err from None

    @staticmethod
    def _command(call: Call[Any]) -> tuple[Any, ...]:
        """The command ``call`` sends when it is part of a pipeline (scripts by SHA)."""
        if call.script is None:
            return (call.args[0], *call.keys, *call.args[1:])
        return ("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)
