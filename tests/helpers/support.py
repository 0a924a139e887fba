"""Helpers shared by the behavioural suite (no Redis mocks: everything is real)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import redis
from redis.crc import key_slot
from typer.testing import CliRunner

from fairque import AsyncFairQueue, FairQueue
from fairque.core.keys import QueueKeys
from fairque.core.records import Call
from helpers.servers import ServerInfo, SyncClient

#: the ``make_queue`` fixture: a fresh queue of the test's server kind, with options
MakeQueue = Callable[..., FairQueue]

#: how long a test waits for what must happen before it calls the wait a hang: a guard,
#: never a check (a test's timing checks take their margins from what the test measures)
PATIENCE = 60.0


class CheckedThread(threading.Thread):
    """A thread whose failure (an assertion in it) ``join`` raises in the test: a plain
    thread's exception only reaches pytest as a warning."""

    error: BaseException | None = None

    def run(self) -> None:
        try:
            super().run()
        except BaseException as exc:  # reported by join
            self.error = exc

    def join(self, timeout: float | None = None) -> None:
        super().join(timeout)
        if self.error is not None:
            raise self.error


def wait_until(check: Callable[[], object], what: str, poll: float = 0.01) -> None:
    """Poll ``check`` until it is true; fail with ``what`` after ``PATIENCE`` seconds."""
    began = time.monotonic()
    while not check():
        assert time.monotonic() - began < PATIENCE, f"{what}: not after {PATIENCE:g} s"
        time.sleep(poll)


def unique_queue(prefix: str = "t") -> str:
    """A queue name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class LoopThread:
    """An event loop running in a daemon thread, for driving async clients from sync tests."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        self.loop.close()


class BlockingAsyncQueue:
    """Presents an ``AsyncFairQueue`` with the blocking interface of ``FairQueue``.

    Every coroutine method is run to completion on a private event loop, so one
    behavioural suite exercises both clients against the same servers.
    """

    def __init__(self, runner: LoopThread, url: str, queue: str, **options: Any) -> None:
        self._runner = runner

        async def build() -> AsyncFairQueue:
            return AsyncFairQueue.from_url(url, queue, **options)

        self._queue: AsyncFairQueue = runner.run(build())

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._queue, name)
        if not asyncio.iscoroutinefunction(attr):
            return attr

        @functools.wraps(attr)
        def call(*args: Any, **kwargs: Any) -> Any:
            return self._runner.run(attr(*args, **kwargs))

        return call


def queue_snapshot(
    client: redis.Redis | redis.RedisCluster, queue: str
) -> dict[str, tuple[bytes, int]]:
    """Every key of ``queue`` (of every shard) as (``DUMP`` bytes, absolute expiry in ms
    or -1).

    Two equal snapshots prove the queue's keyspace is byte-for-byte unchanged,
    expiry times included (``PEXPIRETIME`` is absolute, so time passing changes nothing).
    """
    keys = queue_keys(client, queue)
    pipe = client.pipeline(transaction=False)  # one round trip (a node's), not two a key
    for key in keys:
        pipe.dump(key)
        pipe.pexpiretime(key)
    replies = pipe.execute()
    out: dict[str, tuple[bytes, int]] = {}
    for key, dumped, expiry in zip(keys, replies[::2], replies[1::2], strict=True):
        if dumped is None:  # expired between SCAN and DUMP
            continue
        name = key.decode() if isinstance(key, bytes) else key
        out[name] = (bytes(dumped), int(expiry))
    return out


def queue_keys(client: redis.Redis | redis.RedisCluster, queue: str) -> list[Any]:
    """The keys of ``queue``: shard 0's (``fq:{queue}:...``) and every other shard's
    (``fq:{queue{i.salt}:...``)."""
    head = QueueKeys(queue).prefix[: -len("}:")].replace("{", "\\{")
    keys: list[Any] = []
    for pattern in (head + "\\}:*", head + "\\{*"):
        keys.extend(client.scan_iter(match=pattern, count=1000))
    return keys


def server_ms(client: redis.Redis | redis.RedisCluster) -> int:
    """The server's clock in milliseconds."""
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


def keys_of_task(client: redis.Redis | redis.RedisCluster, queue: str, task_id: str) -> QueueKeys:
    """The keys of the shard of ``queue`` that holds ``task_id`` (shard 0's when none
    does): on a plain queue, the queue's own."""
    keys = QueueKeys(queue)
    if client.exists(keys.task(task_id)):
        return keys
    head = keys.prefix[: -len("}:")].replace("{", "\\{")
    for found in client.scan_iter(match=f"{head}\\{{*:task:{task_id}", count=1000):
        name = found.decode() if isinstance(found, bytes) else found
        return QueueKeys(queue, name[len("fq:{") : name.index("}:")])
    return keys


def make_due(client: redis.Redis | redis.RedisCluster, queue: str, task_id: str) -> None:
    """Make a SCHEDULED task due now (tests move time instead of sleeping); the queue's
    'due' hint goes too, as time passing it would."""
    keys = keys_of_task(client, queue, task_id)
    client.zadd(keys.delayed, {task_id: 0})
    client.hdel(keys.meta, "due")


def expire_lease(client: redis.Redis | redis.RedisCluster, queue: str, task_id: str) -> None:
    """Move a lease deadline into the past, as if the worker had died long ago (and the
    queue's 'due' hint with it)."""
    keys = keys_of_task(client, queue, task_id)
    client.hdel(keys.meta, "due")
    client.zadd(keys.leases, {task_id: 0})
    client.hset(keys.task(task_id), "deadline", 0)
    user: Any = client.hget(keys.task(task_id), "user")
    if user is not None:
        client.zadd(keys.held(user.decode()), {task_id: 0}, xx=True)


def run_here(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``fairque *args`` in this process, through the installed command's entry point
    (``fairque.cli.main``: the same app, options, error lines and exit codes), without
    the second or so an interpreter start and the imports cost.

    As in a fresh process: no ``FAIRQUE_*`` variable but those in ``env``, no secret
    remembered for redaction from an earlier command, and the logging set-up put back
    afterwards. Tests where the process boundary itself matters (signals, the worker's
    handler registry, module shadowing on ``PYTHONPATH``) use ``test_cli.run_cli``.
    """
    from fairque.cli import main
    from fairque.common import urls

    clean: dict[str, str | None] = {k: None for k in os.environ if k.startswith("FAIRQUE_")}
    clean.update(env or {})
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    secrets = set(urls._SECRETS)
    urls._SECRETS.clear()
    argv = sys.argv
    code: int = 0
    with CliRunner().isolation(input=stdin, env=clean) as (out, err, _):
        sys.argv = ["fairque", *args]
        try:
            main()
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:  # sys.exit("message"): the interpreter prints it and exits with 1
                sys.stderr.write(f"{exc.code}\n")
                code = 1
        finally:
            sys.argv = argv
            urls._SECRETS.clear()
            urls._SECRETS.update(secrets)
            root.handlers[:] = handlers
            root.setLevel(level)
        sys.stdout.flush()
        sys.stderr.flush()
        stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
    return subprocess.CompletedProcess(["fairque", *args], code, stdout, stderr)


class Schedulers:
    """Two racing schedulers of a queue; ``crash_leader`` stops the leader as a crash
    would (its locks are left to expire) and starts a fresh scheduler in its place."""

    def __init__(self, fresh: Any) -> None:
        self.fresh = fresh
        self.runners = [fresh(), fresh()]
        self.tasks = [asyncio.ensure_future(r.run()) for r in self.runners]
        self.crashes = 0

    async def crash_leader(self) -> None:
        for i, runner in enumerate(self.runners):
            if runner.leading:
                runner.leading = False
                self.tasks[i].cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self.tasks[i]
                self.runners[i] = self.fresh()
                self.tasks[i] = asyncio.ensure_future(self.runners[i].run())
                self.crashes += 1
                return

    async def stop(self) -> None:
        for runner in self.runners:
            runner.stop()
        await asyncio.gather(*self.tasks, return_exceptions=True)


#: bytes of room left above the memory in use when ``memory_limit`` sets the limit
HEADROOM = 1_500_000


def server_nodes(server: ServerInfo) -> list[redis.Redis]:
    """A client of each node of ``server`` (one for a standalone server)."""
    if not server.cluster:
        return [redis.Redis.from_url(server.url)]
    cluster = redis.RedisCluster.from_url(server.url)
    try:
        return [redis.Redis(host=n.host, port=n.port) for n in cluster.get_primaries()]  # type: ignore[no-untyped-call]
    finally:
        cluster.close()


class MemoryLimit:
    """The ``maxmemory`` of every node of a server, set by ``memory_limit``."""

    def __init__(self, nodes: list[redis.Redis], limits: list[int]) -> None:
        self.nodes = nodes
        self.limits = limits

    def full(self) -> None:
        """Make every node full now (``maxmemory 1``): a push is refused whatever the
        size of its command or what other keys expire meanwhile."""
        for node in self.nodes:
            node.config_set("maxmemory", "1")

    def reset(self) -> None:
        """Give every node back the limit ``memory_limit`` set."""
        for node, limit in zip(self.nodes, self.limits, strict=True):
            node.config_set("maxmemory", str(limit))


@contextlib.contextmanager
def memory_limit(server: ServerInfo, headroom: int = HEADROOM) -> Iterator[MemoryLimit]:
    """Set every node's ``maxmemory`` to what it uses now plus ``headroom`` (noeviction),
    and lift the limit again afterwards."""
    nodes = server_nodes(server)
    limit = MemoryLimit(nodes, [])
    try:
        for node in nodes:
            used = int(node.info("memory")["used_memory"])
            node.config_set("maxmemory-policy", "noeviction")
            limit.limits.append(used + headroom)
        limit.reset()
        yield limit
    finally:
        for node in nodes:
            node.config_set("maxmemory", "0")
            node.close()


@contextlib.contextmanager
def eviction_policy(server: ServerInfo, policy: str) -> Iterator[None]:
    """Give every node of ``server`` ``maxmemory-policy policy`` for a while."""
    nodes = server_nodes(server)
    try:
        for node in nodes:
            node.config_set("maxmemory-policy", policy)
        yield
    finally:
        for node in nodes:
            node.config_set("maxmemory-policy", "noeviction")
            node.close()


#: every cluster node's share of the 16,384 slots (three masters)
SLOTS_PER_NODE = 5462


def apart(n: int) -> list[str]:
    """``n`` fresh queue names whose hash tags fall on different cluster nodes."""
    names: list[str] = []
    nodes: set[int] = set()
    while len(names) < n:
        name = unique_queue("mq")
        node = key_slot(f"fq:{{{name}}}:x".encode()) // SLOTS_PER_NODE
        if node not in nodes:
            nodes.add(node)
            names.append(name)
    return names


def resend(q: FairQueue, client: SyncClient, call: Call[Any]) -> tuple[Any, Any]:
    """Run ``call``, then run it again; the keyspace must not change the second time.
    (What the client counted is flushed between the two, so its flush, which a client
    sends before its next call, is not taken for the resend's doing.)"""
    first = q._run(call)
    q.flush_metrics()
    before = queue_snapshot(client, q.queue)
    second = q._run(call)
    assert queue_snapshot(client, q.queue) == before, "the resend changed the keyspace"
    return first, second


def queue_contents(client: SyncClient, queue: str) -> dict[str, tuple[str, Any, int]]:
    """Every key of ``queue`` as (type, content, absolute expiry in ms or -1): a
    string's value, a hash's fields, a sorted set's scores, a list's or a set's
    members, so two snapshots can be compared value by value."""
    out: dict[str, tuple[str, Any, int]] = {}
    for key in queue_keys(client, queue):
        kind = client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        content: Any
        if kind == "string":
            content = client.get(key)
        elif kind == "hash":
            content = client.hgetall(key)
        elif kind == "zset":
            scored: Any = client.zrange(key, 0, -1, withscores=True)
            content = dict(scored)
        elif kind == "list":
            content = client.lrange(key, 0, -1)
        elif kind == "set":
            content = client.smembers(key)
        else:  # gone between SCAN and TYPE
            continue
        name = key.decode() if isinstance(key, bytes) else key
        out[name] = (kind, content, int(client.pexpiretime(key)))
    return out


_NUMBER = re.compile(rb"(-?\d+(?:\.\d+)?)")


def _moved_on(before: Any, after: Any, most: float) -> bool:
    """Whether ``after`` is ``before`` with its numbers (a value, or the numbers inside
    a text: a JSON record, '<charged> <weight> ...') each the same or moved on by 0 to
    ``most``, and everything else unchanged."""
    if before == after:
        return True
    if isinstance(before, float | int) or isinstance(after, float | int):
        return 0 <= float(after) - float(before) <= most
    if not isinstance(before, bytes) or not isinstance(after, bytes):
        return False
    was, now = _NUMBER.split(before), _NUMBER.split(after)
    if len(was) != len(now):
        return False
    for i, (a, b) in enumerate(zip(was, now, strict=True)):
        if i % 2 == 0 and a != b:  # the text between the numbers
            return False
        if i % 2 == 1 and not 0 <= float(b) - float(a) <= most:
            return False
    return True


def resend_refreshing(q: FairQueue, client: SyncClient, call: Call[Any]) -> tuple[Any, Any]:
    """``resend`` for a call that refreshes times (a heartbeat, a lock's renewal): the
    resend must leave the same keys, types, fields and members, and may move a number
    (an expiry, a deadline, a last-seen time, a charge) on only by the time between the
    two sends (counted in us, the finest unit kept), never back."""
    started = time.monotonic()
    first = q._run(call)
    q.flush_metrics()  # (as in resend)
    before = queue_contents(client, q.queue)
    second = q._run(call)
    after = queue_contents(client, q.queue)
    # what the time between the sends can move a number by, in the finest unit the
    # scripts keep (us: a charge, a start tag), and the server clock's rounding
    most = (time.monotonic() - started) * 1_000_000 + 2_000
    assert after.keys() == before.keys(), "the resend added or removed keys"
    for key, (kind, content, expiry) in before.items():
        kind2, content2, expiry2 = after[key]
        assert kind2 == kind, key
        assert expiry == expiry2 or (expiry >= 0 and _moved_on(expiry, expiry2, most)), key
        if isinstance(content, dict):
            assert content.keys() == content2.keys(), key
            for field, value in content.items():
                assert _moved_on(value, content2[field], most), (key, field)
        elif isinstance(content, list | set):
            assert content == content2, key
        else:
            assert _moved_on(content, content2, most), key
    return first, second


#: the tests' folder: worker processes import handler modules from it (``helpers.*``)
TESTS = Path(__file__).resolve().parents[1]


def worker_env(server: ServerInfo, **extra: str) -> dict[str, str]:
    """The environment of a ``fairque`` process on ``server`` that imports the tests'
    helper modules (no ``FAIRQUE_`` variable of this process leaks in)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRQUE_")}
    env.update(
        FAIRQUE_URL=server.url,
        FAIRQUE_REDIS__CLUSTER="true" if server.cluster else "false",
        PYTHONPATH=os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]),
        **extra,
    )
    return env
