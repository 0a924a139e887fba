"""A lean way to send one script call on a plain ``redis.Redis`` client.

redis-py wraps every command in layers a push does not need on its common path: a retry
wrapper, observability hooks, events and a per-command dispatch. On a busy machine they
cost more client time than fairque's whole push. ``QuickSender`` takes a connection from
the client's own pool, writes the packed command and reads the reply, and leaves
everything else to the client: when anything goes wrong on the connection it answers
``FAILED`` and the caller sends the call again the ordinary way, whose retries apply.
Only calls that are safe to send twice may use it (a push: the script recognises a resend
by its request id).

It is used only where it changes nothing but the speed: a ``redis.Redis`` whose
``execute_command`` is redis-py's own (so instrumentation that wraps it keeps seeing
every command), with no single shared connection, on a plain or blocking pool without
client-side caching.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Sequence
from typing import Any

import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

_pack: Callable[[tuple[Any, ...]], bytes] | None
try:
    from hiredis import pack_command as _pack_command

    _pack = _pack_command
except ImportError:  # pragma: no cover - without hiredis the connection packs
    _pack = None

_POOLS = (redis.ConnectionPool, redis.BlockingConnectionPool)
_CONNECTIONS = (redis.Connection,)
#: what ``send`` answers when the connection failed
FAILED: Any = object()


class QuickSender:
    """Sends commands on connections of ``client``'s pool (see the module's notes)."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        # redis-py < 5.3 requires a command name (newer ones warn when given one)
        params = inspect.signature(pool.get_connection).parameters
        name = params.get("command_name")
        self._get_args: tuple[str, ...] = (
            ("EVALSHA",) if name is not None and name.default is inspect.Parameter.empty else ()
        )

    @classmethod
    def for_client(cls, client: Any) -> QuickSender | None:
        """A sender for ``client``, or None when it must keep the ordinary path."""
        if type(client) is not redis.Redis or getattr(client, "connection", None) is not None:
            return None
        if type(redis.Redis.__dict__.get("execute_command")) is not types.FunctionType:
            return None  # wrapped by instrumentation: keep every command visible to it
        pool: Any = getattr(client, "connection_pool", None)
        if type(pool) not in _POOLS or getattr(pool, "cache", None) is not None:
            return None
        if not issubclass(pool.connection_class, _CONNECTIONS):
            return None
        kwargs = pool.connection_kwargs
        if (
            kwargs.get("encoding", "utf-8") != "utf-8"
            or kwargs.get("encoding_errors", "strict") != "strict"
        ):
            return None  # hiredis packs text as strict UTF-8, as redis-py does by default
        return cls(pool)

    def send(self, args: Sequence[Any]) -> Any:
        """Send one command and return its raw reply; ``FAILED`` when the connection
        failed (nothing is known about whether the server ran it).

        Raises:
            ResponseError: the server answered with an error (NoScriptError included).
        """
        pool = self._pool
        try:
            conn = pool.get_connection(*self._get_args)
        except (RedisConnectionError, RedisTimeoutError, OSError):
            return FAILED  # the ordinary path connects with the client's retries
        try:
            if _pack is not None:
                conn.send_packed_command((_pack(tuple(args)),))
            else:
                conn.send_command(*args)
            return conn.read_response()
        except ResponseError:
            raise  # an answer: the connection is in order
        except (RedisConnectionError, RedisTimeoutError, OSError):
            conn.disconnect()
            return FAILED
        except BaseException:
            # e.g. an interrupt between the write and the read: the reply would be left
            # unread on this connection
            conn.disconnect()
            raise
        finally:
            pool.release(conn)
