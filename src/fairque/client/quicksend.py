"""A lean way to send one script call on a plain ``redis.Redis`` (or asyncio) client.

A bypass, measured and tested against the library it steps around
(``tests/client/test_quicksend.py``): one script call sent on a connection of a plain
redis-py client's own pool, without redis-py's command layers (redis-py 5.0 to 7.x:
``Connection.send_packed_command``/``read_response``, the pool's ``get_connection`` and
``release``; hiredis's ``pack_command``).

redis-py wraps every command in layers a push does not need on its common path: a retry
wrapper, observability hooks, events and a per-command dispatch. On a busy machine they
cost more client time than fairque's whole push. ``QuickSender`` takes a connection from
the client's own pool, writes the packed command and reads the reply, and leaves
everything else to the client: when anything goes wrong on the connection it answers
``FAILED`` and the caller sends the call again the ordinary way, whose retries apply.
Only calls that are safe to send twice may use it: a push (the script recognises a resend
by its request id) and the lease family (a lease answers a resend from its replay record,
a completion is fenced by its lease token).

It is used only where it changes nothing but the speed: a ``redis.Redis`` (or a
``redis.asyncio.Redis``) whose ``execute_command`` is redis-py's own (so instrumentation
that wraps it keeps seeing every command), with no single shared connection, on a plain
or blocking pool without client-side caching, encoding text as strict UTF-8.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Sequence
from typing import Any

import redis
import redis.asyncio as aredis
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
_ASYNC_POOLS = (aredis.ConnectionPool, aredis.BlockingConnectionPool)
_FAILURES = (RedisConnectionError, RedisTimeoutError, OSError)
#: what ``send`` answers when the connection failed
FAILED: Any = object()


def _eligible(client: Any, kind: type[Any], pools: tuple[type[Any], ...], conn: type[Any]) -> Any:
    """``client``'s pool when the lean sender may use it (see the module's notes), else None."""
    if type(client) is not kind or getattr(client, "connection", None) is not None:
        return None
    if type(kind.__dict__.get("execute_command")) is not types.FunctionType:
        return None  # wrapped by instrumentation: keep every command visible to it
    pool: Any = getattr(client, "connection_pool", None)
    if type(pool) not in pools or getattr(pool, "cache", None) is not None:
        return None
    if not issubclass(pool.connection_class, conn):
        return None
    kwargs = pool.connection_kwargs
    if (
        kwargs.get("encoding", "utf-8") != "utf-8"
        or kwargs.get("encoding_errors", "strict") != "strict"
    ):
        return None  # hiredis packs text as strict UTF-8, as redis-py does by default
    return pool


def _get_args(pool: Any) -> tuple[str, ...]:
    """What ``pool.get_connection`` needs: redis-py < 5.3 requires a command name (newer
    ones warn when given one)."""
    name = inspect.signature(pool.get_connection).parameters.get("command_name")
    return ("EVALSHA",) if name is not None and name.default is inspect.Parameter.empty else ()


class QuickSender:
    """Sends commands on connections of a ``redis.Redis``'s pool (see the module's notes)."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._get_args = _get_args(pool)

    @classmethod
    def for_client(cls, client: Any) -> QuickSender | None:
        """A sender for ``client``, or None when it must keep the ordinary path."""
        pool = _eligible(client, redis.Redis, _POOLS, redis.Connection)
        return None if pool is None else cls(pool)

    def send(self, args: Sequence[Any]) -> Any:
        """Send one command and return its raw reply; ``FAILED`` when the connection
        failed (nothing is known about whether the server ran it).

        Raises:
            ResponseError: the server answered with an error (NoScriptError included).
        """
        pool = self._pool
        try:
            conn = pool.get_connection(*self._get_args)
        except _FAILURES:
            return FAILED  # the ordinary path connects with the client's retries
        try:
            if _pack is not None:
                conn.send_packed_command((_pack(tuple(args)),))
            else:
                conn.send_command(*args)
            return conn.read_response()
        except ResponseError:
            raise  # an answer: the connection is in order
        except _FAILURES:
            conn.disconnect()
            return FAILED
        except BaseException:
            # e.g. an interrupt between the write and the read: the reply would be left
            # unread on this connection
            conn.disconnect()
            raise
        finally:
            pool.release(conn)


class AsyncQuickSender:
    """``QuickSender`` for a ``redis.asyncio.Redis``."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._get_args = _get_args(pool)

    @classmethod
    def for_client(cls, client: Any) -> AsyncQuickSender | None:
        """A sender for ``client``, or None when it must keep the ordinary path."""
        pool = _eligible(client, aredis.Redis, _ASYNC_POOLS, aredis.Connection)
        return None if pool is None else cls(pool)

    async def send(self, args: Sequence[Any]) -> Any:
        """See ``QuickSender.send``."""
        pool = self._pool
        try:
            conn = await pool.get_connection(*self._get_args)
        except _FAILURES:
            return FAILED
        try:
            if _pack is not None:
                await conn.send_packed_command((_pack(tuple(args)),))
            else:
                await conn.send_command(*args)
            return await conn.read_response()
        except ResponseError:
            raise
        except _FAILURES:
            await conn.disconnect()
            return FAILED
        except BaseException:
            # a cancellation between the write and the read leaves the reply unread
            await conn.disconnect(nowait=True)
            raise
        finally:
            await pool.release(conn)
