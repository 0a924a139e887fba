"""The fault proxy itself: it forwards, cuts (reset or close) and stalls for real."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator

import pytest
import redis
from helpers.support import CheckedThread, wait_until
from redis.backoff import NoBackoff
from redis.retry import Retry

from fairque.cli.embedded import EmbeddedServer
from faults.proxy import FaultProxy

pytestmark = pytest.mark.faults


@pytest.fixture
def proxied() -> Iterator[tuple[FaultProxy, redis.Redis]]:
    """A proxy in front of a private server, and a direct client to that server."""
    server = EmbeddedServer()
    server.start()
    proxy = FaultProxy(server.port)
    direct = redis.Redis(port=server.port)
    try:
        yield proxy, direct
    finally:
        direct.close()
        proxy.close()
        server.stop()


def no_retry(port: int, timeout: float = 2.0) -> redis.Redis:
    """A client that never resends: each fault reaches the caller."""
    return redis.Redis(port=port, socket_timeout=timeout, retry=Retry(NoBackoff(), 0))


def test_forwards_both_ways(proxied: tuple[FaultProxy, redis.Redis]) -> None:
    proxy, direct = proxied
    client = no_retry(proxy.port)
    big = b"x" * 3_000_000  # more than one read and one socket buffer
    assert client.set("k", big)
    assert client.get("k") == big
    assert direct.get("k") == big
    assert proxy.open_connections == 1
    client.close()


@pytest.mark.parametrize("mode", ["rst", "close"])
def test_cut_ends_every_open_connection(proxied: tuple[FaultProxy, redis.Redis], mode: str) -> None:
    proxy, _ = proxied
    idle = [no_retry(proxy.port) for _ in range(2)]
    for c in idle:
        assert c.ping()
    busy = no_retry(proxy.port, timeout=5)
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            busy.blpop(["nothing"], timeout=3)
        except redis.RedisError as exc:
            errors.append(exc)

    waiter = CheckedThread(target=wait)
    waiter.start()
    until(lambda: proxy.open_connections == 3)
    time.sleep(0.1)  # the BLPOP is on its way
    assert proxy.cut(mode) == 3
    waiter.join(timeout=5)
    assert len(errors) == 1
    assert isinstance(errors[0], redis.ConnectionError)  # the command in flight failed
    assert proxy.stats.connections_cut == 3
    for c in idle:  # the pool notices the dead idle connection and opens a new one
        assert c.ping()
    assert proxy.stats.accepted == 5
    for c in [*idle, busy]:
        c.close()


def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_cut_by_reset_is_a_reset() -> None:
    with socket.create_server(("127.0.0.1", 0)) as upstream:
        proxy = FaultProxy(upstream.getsockname()[1])
        try:
            client = socket.create_connection(("127.0.0.1", proxy.port), timeout=2)
            peer, _ = upstream.accept()
            client.sendall(b"ping")
            assert peer.recv(4) == b"ping"
            proxy.cut("rst")
            with pytest.raises(ConnectionResetError):
                client.recv(1)
            client.close()
            peer.close()
        finally:
            proxy.close()


def test_stall_times_out_clients_and_delivers_late(proxied: tuple[FaultProxy, redis.Redis]) -> None:
    proxy, direct = proxied
    client = no_retry(proxy.port, timeout=0.3)
    assert client.ping()
    stall = 2.0
    assert proxy.stall(stall) == 1
    stalled = time.monotonic()
    with pytest.raises(redis.TimeoutError):
        client.incr("late")
    assert time.monotonic() - stalled < stall  # the timeout, not the stall, ended it
    held = direct.get("late")
    assert held is None or time.monotonic() - stalled >= stall  # held in the proxy...
    fresh = no_retry(proxy.port)
    assert fresh.ping()  # ...while a new connection is served
    # ...then run by the server after the client gave up
    wait_until(lambda: direct.get("late") is not None, "the held command", poll=0.05)
    assert time.monotonic() - stalled >= stall * 0.99  # not before the stall ended
    assert direct.get("late") == b"1"
    client.close()
    fresh.close()


def test_chaos_cuts_and_stalls_on_a_schedule(proxied: tuple[FaultProxy, redis.Redis]) -> None:
    proxy, _ = proxied
    client = redis.Redis(port=proxy.port, socket_timeout=0.2)  # redis-py resends by default
    proxy.chaos((0.1, 0.15), stall_seconds=0.3, stall_every=3, seed=1)

    def pinged_through_faults() -> bool:  # about 0.5 s on an idle machine
        with contextlib.suppress(redis.RedisError):
            client.ping()
        return proxy.stats.cuts >= 3 and proxy.stats.stalls >= 1

    wait_until(pinged_through_faults, "three cuts and a stall")
    proxy.stop_chaos()
    assert client.ping()
    proxy.chaos((1, 2))
    with pytest.raises(RuntimeError, match="already running"):
        proxy.chaos((1, 2))
    client.close()
