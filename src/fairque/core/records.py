"""The records passed between ``Operations`` and the clients that execute its calls.

A ``Call`` is one round trip, built once by ``fairque.core.ops`` and sent by either client.
A ``LeaseRequest`` is what every lease (``pop``, ``pop_batch``, ``complete_and_pop``,
``wait_and_pop``) asks for; the clients spell its fields out as keyword arguments and
hand the record down from there.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from fairque.models import Task

if TYPE_CHECKING:
    from fairque.core.scripts import Script

T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One round trip: a script (or a plain command when ``script`` is None).

    For a plain command ``args[0]`` is the command name and the keys follow it.
    ``parse`` turns the server's reply into the operation's answer.
    """

    script: Script | None
    keys: tuple[str, ...]
    args: tuple[Any, ...]
    parse: Callable[[Any], T]


class LeaseRequest(NamedTuple):
    """What one lease asks for.

    ``count`` tasks for ``worker_id``, each held ``lease_seconds`` (None: the queue's
    default), served from ``assigned_users`` first and ``steal_targets`` when those are
    idle (both None: the whole ring). ``request_id`` names the request: a resend with
    the same id returns the tasks the first send leased (None: a new id per call).
    ``names``: the task names the worker handles (None: any name); a task with another
    name is set aside until a worker that handles it leases. ``max_held``: the most
    leases the worker may hold at once, counted by the server from its unexpired
    leases (None: no bound; an HTTP pull worker's ``max_tasks``).
    """

    # a NamedTuple (cheap to build on the hot path) whose ``count`` hides tuple.count
    count: int  # type: ignore[assignment]
    worker_id: str = ""
    lease_seconds: float | None = None
    assigned_users: Sequence[str] | None = None
    steal_targets: Sequence[str] | None = None
    request_id: str | None = None
    names: Sequence[str] | None = None
    max_held: int | None = None


@dataclass(frozen=True)
class ShardState:
    """One shard as a worker of a sharded queue weighs it (``shard_state.lua``)."""

    ready: bool  #: the ring, the intake or a due scheduled task holds work
    timed: bool  #: fair by worker time (else by count)
    position: int  #: the ring head's start tag (time mode), or the floor
    users: int  #: ring size plus intake length (an upper bound of users to serve)
    floor: int = 0  #: the start tag of the last user served (time mode)


def shard_state_of(reply: Any) -> ShardState:
    """A ``ShardState`` from its script reply."""
    ready, mode, position, users, floor = reply
    timed = mode in (b"time", "time")
    return ShardState(bool(int(ready)), timed, int(position), int(users), int(floor))


class Leased(list[Task]):
    """The tasks one lease request returned.

    ``undecodable`` holds ``(task_id, lease_token, error)`` for leased tasks whose stored
    data could not be decoded; the clients fail those on their own. ``state``: the
    shard's state after the lease, when the request asked for it (sharded queues).
    """

    def __init__(self) -> None:
        super().__init__()
        self.undecodable: list[tuple[str, str, str]] = []
        self.state: ShardState | None = None


class Pushed(list[Task]):
    """The tasks one push returned, in the order given.

    ``created[i]`` says whether this push created task i (True) or found its id
    already there (False: the stored task is returned, nothing was written). A resend
    of the push that created a task, after a lost reply, still answers True: the
    task keeps the id of the request that created it. One exception: a task that
    ended, expired and left only its one-minute tombstone reads as not created.
    """

    def __init__(self, tasks: list[Task], created: list[bool]) -> None:
        super().__init__(tasks)
        self.created = created


class EncodedResult(bytes):
    """A result already serialized with the queue's serializer (sent as it is)."""


def request_id() -> str:
    """A new id for one request: the same id on a resend lets a script recognise it."""
    return os.urandom(8).hex()
