"""Private Redis, Valkey and Redis Cluster servers for the test suite."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest
import redis

from fairque.cli.embedded import EmbeddedServer, find_valkey_cli, find_valkey_server, free_port

SERVER_KINDS: tuple[str, ...] = ("valkey", "redis", "cluster")
"""Every server kind the ``server`` fixture can provide, in test order."""

SyncClient = redis.Redis | redis.RedisCluster
"""A synchronous redis-py client for a standalone server or a cluster."""

CLUSTER_TIMEOUT = 30.0
_CLUSTER_BUS_OFFSET = 10000


@dataclass(frozen=True)
class ServerInfo:
    """What a test needs to know about a running server.

    Attributes:
        kind: One of ``SERVER_KINDS``.
        url: ``redis://`` URL of the server (of its first node for a cluster).
        cluster: Whether the server is a Redis Cluster.
    """

    kind: str
    url: str
    cluster: bool


class ServerUnavailableError(Exception):
    """A server kind cannot be started here because a binary is missing."""


@dataclass
class Cluster:
    """A running Redis Cluster made of ``EmbeddedServer`` masters.

    Attributes:
        nodes: The master nodes, in creation order.
    """

    nodes: list[EmbeddedServer] = field(default_factory=list)

    @property
    def url(self) -> str:
        """URL of the first node; cluster clients discover the others from it."""
        return self.nodes[0].url

    def stop(self) -> None:
        """Stop every node; calling it again is harmless."""
        for node in self.nodes:
            node.stop()


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_cluster_port() -> int:
    """Return a free port whose cluster bus port (port + 10000) is free as well."""
    while True:
        port = free_port()
        bus = port + _CLUSTER_BUS_OFFSET
        if bus <= 65535 and _port_is_free(bus):
            return port


def _cluster_info(port: int) -> dict[str, str]:
    """Return ``CLUSTER INFO`` of one node as a dict of strings."""
    client = redis.Redis(port=port, socket_timeout=2.0, decode_responses=True)
    try:
        raw = client.cluster("INFO")
    finally:
        client.close()
    if isinstance(raw, dict):
        return {str(key): str(value) for key, value in raw.items()}
    lines = str(raw).splitlines()
    return dict(line.split(":", 1) for line in lines if ":" in line)


def _wait_cluster_ok(nodes: list[EmbeddedServer], timeout: float) -> None:
    """Wait until every node reports ``cluster_state:ok`` and knows all masters.

    Raises:
        RuntimeError: The cluster did not converge within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    states: dict[int, str] = {}
    while True:
        for node in nodes:
            try:
                info = _cluster_info(node.port)
            except redis.RedisError as exc:
                states[node.port] = f"error: {exc}"
                continue
            state = info.get("cluster_state", "?")
            known = info.get("cluster_known_nodes", "?")
            states[node.port] = f"cluster_state:{state} cluster_known_nodes:{known}"
        if all(s == f"cluster_state:ok cluster_known_nodes:{len(nodes)}" for s in states.values()):
            return
        if time.monotonic() >= deadline:
            detail = "; ".join(f"127.0.0.1:{port} {state}" for port, state in states.items())
            raise RuntimeError(
                f"cluster did not reach cluster_state:ok within {timeout:g} s: {detail}"
            )
        time.sleep(0.1)


def start_cluster(binary: Path, cli: Path, workdir: Path, masters: int = 3) -> Cluster:
    """Start a Redis Cluster of ``masters`` nodes without replicas.

    Each node runs in its own sub-directory of ``workdir``. The cluster is
    created with ``valkey-cli --cluster create`` and is ready when every node
    reports ``cluster_state:ok``.

    Args:
        binary: ``valkey-server`` or ``redis-server`` executable.
        cli: ``valkey-cli`` or ``redis-cli`` executable.
        workdir: Parent directory for the node directories and logs.
        masters: Number of master nodes (at least 3 for ``--cluster create``).

    Returns:
        The running cluster; call ``stop()`` when done.

    Raises:
        RuntimeError: A node failed to start, cluster creation failed or the
            cluster did not become healthy within 30 seconds.
    """
    cluster = Cluster()
    try:
        for _ in range(masters):
            port = free_cluster_port()
            node = EmbeddedServer(
                binary,
                port=port,
                workdir=workdir / f"node-{port}",
                extra_args=[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    f"nodes-{port}.conf",
                    "--cluster-node-timeout",
                    "5000",
                ],
            )
            cluster.nodes.append(node)
            node.start()
        addresses = [f"127.0.0.1:{node.port}" for node in cluster.nodes]
        command = [str(cli), "--cluster", "create", *addresses]
        command += ["--cluster-replicas", "0", "--cluster-yes"]
        result = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CLUSTER_TIMEOUT,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{' '.join(command)} failed with code {result.returncode}:\n"
                f"{result.stdout}{result.stderr}"
            )
        _wait_cluster_ok(cluster.nodes, CLUSTER_TIMEOUT)
    except BaseException:
        cluster.stop()
        raise
    return cluster


class ServerPool:
    """Starts each server kind on first use and stops them all on ``close()``.

    Args:
        workdir: Parent directory for the servers' working directories and logs.
    """

    def __init__(self, workdir: Path) -> None:
        self._workdir = workdir
        self._servers: dict[str, ServerInfo] = {}
        self._errors: dict[str, BaseException] = {}
        self._standalone: list[EmbeddedServer] = []
        self._clusters: list[Cluster] = []

    def get(self, kind: str) -> ServerInfo:
        """Return the running server of ``kind``, starting it if needed.

        Args:
            kind: One of ``SERVER_KINDS``.

        Returns:
            Connection details of the running server.

        Raises:
            ServerUnavailableError: A binary needed for ``kind`` is missing.
            RuntimeError: The server failed to start (also on later calls).
        """
        if kind in self._servers:
            return self._servers[kind]
        if kind in self._errors:
            raise self._errors[kind]
        try:
            info = self._start(kind)
        except (ServerUnavailableError, RuntimeError) as exc:
            self._errors[kind] = exc
            raise
        self._servers[kind] = info
        return info

    def describe(self, kind: str) -> str:
        """Process state and log tail of a kind's servers (for failure messages)."""
        lines = [f"pool closed={not self._servers}"]
        for server in self._standalone:
            log = (
                server.log_path.read_text()[-600:]
                if server.log_path and server.log_path.exists()
                else ""
            )
            lines.append(f"{server.url} running={server.running} log: {log}")
        return "\n".join(lines)

    def close(self) -> None:
        """Stop every server started by this pool."""
        for server in self._standalone:
            server.stop()
        for cluster in self._clusters:
            cluster.stop()
        self._standalone.clear()
        self._clusters.clear()
        self._servers.clear()

    def _start(self, kind: str) -> ServerInfo:
        if kind == "valkey":
            return self._start_standalone(kind, _bundled(find_valkey_server))
        if kind == "redis":
            found = shutil.which("redis-server")
            if found is None:
                raise ServerUnavailableError("redis-server not found on PATH")
            return self._start_standalone(kind, Path(found))
        if kind == "cluster":
            cli = _bundled(find_valkey_cli)
            cluster = start_cluster(_bundled(find_valkey_server), cli, self._workdir / kind)
            self._clusters.append(cluster)
            return ServerInfo(kind=kind, url=cluster.url, cluster=True)
        raise ValueError(f"unknown server kind {kind!r}; expected one of {SERVER_KINDS}")

    def _start_standalone(self, kind: str, binary: Path) -> ServerInfo:
        server = EmbeddedServer(binary, workdir=self._workdir / kind)
        self._standalone.append(server)
        server.start()
        return ServerInfo(kind=kind, url=server.url, cluster=False)


def _bundled(finder: Callable[[], Path]) -> Path:
    """Call a binary finder, turning a missing binary into ``ServerUnavailableError``."""
    try:
        return finder()
    except FileNotFoundError as exc:
        raise ServerUnavailableError(str(exc)) from exc


def selected_server_kinds(value: str | None) -> tuple[str, ...]:
    """Parse ``FAIRQUE_TEST_SERVERS`` (a comma list of kinds; empty means all).

    Args:
        value: The variable's value, or None when it is unset.

    Returns:
        The selected kinds, in ``SERVER_KINDS`` order.

    Raises:
        ValueError: The list names an unknown kind.
    """
    names = {name.strip().lower() for name in (value or "").split(",") if name.strip()}
    unknown = names.difference(SERVER_KINDS)
    if unknown:
        raise ValueError(
            f"FAIRQUE_TEST_SERVERS names unknown server kinds {sorted(unknown)}; "
            f"expected a comma list of {', '.join(SERVER_KINDS)}"
        )
    return tuple(kind for kind in SERVER_KINDS if not names or kind in names)


def unavailable(reason: str) -> NoReturn:
    """Skip the current test, or fail it when the ``CI`` variable is set.

    Args:
        reason: Why the test cannot run here.
    """
    if os.environ.get("CI"):
        try:
            pytest.fail(f"{reason} (CI is set, so this is a failure)", pytrace=False)
        except pytest.fail.Exception as exc:
            raise exc from None
    pytest.skip(reason)


def connect(info: ServerInfo) -> SyncClient:
    """Open a synchronous redis-py client for ``info``.

    Args:
        info: The server to connect to.

    Returns:
        A ``RedisCluster`` for a cluster, a ``Redis`` client otherwise.
    """
    if info.cluster:
        return redis.RedisCluster.from_url(info.url)
    return redis.Redis.from_url(info.url)
