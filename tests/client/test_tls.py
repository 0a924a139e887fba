"""fairque over TLS, against a real server (what ``docs/howto/tls.md`` says is tested).

A throw-away certificate authority signs a server certificate (for ``localhost`` and
``127.0.0.1``) and a client certificate; a private server listens on a TLS port only
(``--port 0``). Everything connects the documented way: a ``rediss://`` URL whose
query carries redis-py's certificate options. One server accepts any client
(``--tls-auth-clients no``), a second one demands a client certificate
(``--tls-auth-clients yes``). A CA that did not sign the server's certificate is
refused with one clear line.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from helpers.certs import Certs, make_certs
from helpers.servers import unavailable
from helpers.support import run_here, unique_queue
from redis.backoff import NoBackoff
from redis.retry import Retry

from fairque import AsyncFairQueue, FairQueue, TaskState, task
from fairque.cli.embedded import find_valkey_server, free_port

START_TIMEOUT = 10.0
#: what the Valkey wheel's server says when it was built without TLS
NO_TLS = ("Failed finding TLS support", "not compiled with TLS")


@task(name="tls-echo")
def tls_echo(payload: Any) -> Any:
    """The worker round trip's handler (``--import test_tls`` finds it registered)."""
    return {"echo": payload}


@dataclass(frozen=True)
class TlsServer:
    """A running TLS-only server and the documented URL to reach it."""

    binary: Path
    port: int
    url: str
    certs: Certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A CA, a server and a client certificate it signed, and an unrelated CA."""
    return make_certs(tmp_path_factory.mktemp("tls"))


def _candidates() -> list[Path]:
    """The bundled Valkey first, then a ``redis-server`` on PATH."""
    found = []
    with contextlib.suppress(FileNotFoundError):
        found.append(find_valkey_server())
    on_path = shutil.which("redis-server")
    if on_path is not None:
        found.append(Path(on_path))
    return found


def _ready(port: int, certs: Certs, process: subprocess.Popen[bytes]) -> bool:
    """Wait until the server answers PING over TLS; False when it exited."""
    probe = redis.Redis(
        port=port,
        ssl=True,
        ssl_ca_certs=str(certs.ca),
        ssl_certfile=str(certs.client_cert),
        ssl_keyfile=str(certs.client_key),
        socket_timeout=1.0,
        retry=Retry(NoBackoff(), 0),  # this loop is the retry
    )
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while process.poll() is None:
            try:
                return bool(probe.ping())
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        return False
    finally:
        probe.close()


def _start(certs: Certs, workdir: Path, auth_clients: str) -> Iterator[TlsServer]:
    """Start a TLS-only server with the first binary built with TLS; yield it, stop it."""
    tried = []
    for binary in _candidates():
        port = free_port()
        log = workdir / f"{binary.name}-{auth_clients}-{port}.log"
        command = [
            str(binary), "--port", "0", "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(workdir), "--tls-port", str(port),
            "--tls-cert-file", str(certs.server_cert), "--tls-key-file", str(certs.server_key),
            "--tls-ca-cert-file", str(certs.ca), "--tls-auth-clients", auth_clients,
        ]  # fmt: skip
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=workdir)
        try:
            if _ready(port, certs, process):
                query = f"ssl_ca_certs={certs.ca}&ssl_cert_reqs=required"
                if auth_clients == "yes":
                    query += f"&ssl_certfile={certs.client_cert}&ssl_keyfile={certs.client_key}"
                url = f"rediss://localhost:{port}/0?{query}"
                yield TlsServer(binary=binary, port=port, url=url, certs=certs)
                return
            text = log.read_text(errors="replace")
            if not any(marker in text for marker in NO_TLS):
                pytest.fail(f"{binary} with TLS did not start:\n{text[-2000:]}")
            last = text.strip().splitlines()[-1:] or ["no log"]
            tried.append(f"{binary} ({last[0]})")
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    unavailable(f"no server built with TLS: tried {', '.join(tried) or 'none found'}")


@pytest.fixture(scope="module")
def tls_server(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsServer]:
    """TLS only, any client accepted (``--tls-auth-clients no``)."""
    yield from _start(certs, tmp_path_factory.mktemp("tls-server"), "no")


@pytest.fixture(scope="module")
def mtls_server(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsServer]:
    """TLS only, a client certificate signed by the CA required (``--tls-auth-clients yes``)."""
    yield from _start(certs, tmp_path_factory.mktemp("mtls-server"), "yes")


@pytest.fixture(params=["no", "yes"], ids=["server-auth", "client-cert"])
def any_server(request: pytest.FixtureRequest) -> TlsServer:
    name = "tls_server" if request.param == "no" else "mtls_server"
    server: TlsServer = request.getfixturevalue(name)
    return server


def test_the_url_reaches_the_server_over_tls_only(tls_server: TlsServer) -> None:
    plain = redis.Redis(port=tls_server.port, socket_timeout=0.5, retry=Retry(NoBackoff(), 0))
    with pytest.raises(redis.ConnectionError):
        plain.ping()  # the port speaks TLS only: a plain client gets nowhere
    plain.close()
    q = FairQueue.from_url(tls_server.url, queue=unique_queue("tls"))
    try:
        client = q.client
        assert isinstance(client, redis.Redis)  # detected as a standalone server
        assert client.ping()
        conn = client.connection_pool.get_connection()
        try:
            sock = conn._sock
            assert isinstance(sock, ssl.SSLSocket)
            assert sock.version() in ("TLSv1.2", "TLSv1.3")
        finally:
            client.connection_pool.release(conn)
    finally:
        q.close()


def test_sync_client_push_pop_complete(any_server: TlsServer) -> None:
    q = FairQueue.from_url(any_server.url, queue=unique_queue("tls"))
    try:
        pushed = q.enqueue("tls-echo", {"n": 1}, user_id="ann")
        leased = q.pop(worker_id="hand")
        assert leased is not None
        assert leased.task_id == pushed.task_id
        assert q.complete(leased, result={"ok": True}) is True
        assert pushed.task_id is not None
        assert q.result(pushed.task_id, timeout=1) == {"ok": True}
        assert q.stats().counts[TaskState.FINISHED] == 1
        q.purge()
    finally:
        q.close()


async def test_async_client_push_pop(any_server: TlsServer) -> None:
    q = AsyncFairQueue.from_url(any_server.url, queue=unique_queue("tls"))
    try:
        pushed = await q.enqueue("tls-echo", {"n": 2}, user_id="bob")
        leased = await q.pop(worker_id="hand")
        assert leased is not None
        assert leased.task_id == pushed.task_id
        assert await q.complete(leased, result=3) is True
        await q.purge()
    finally:
        await q.close()


def test_worker_and_status_commands(any_server: TlsServer) -> None:
    name = unique_queue("tls")
    q = FairQueue.from_url(any_server.url, queue=name)
    try:
        pushed = [q.enqueue("tls-echo", i, user_id=f"u{i % 2}") for i in range(4)]
        base = ["--url", any_server.url, "--queue", name]
        ran = run_here(*base, "worker", "--import", "test_tls", "--burst")
        assert ran.returncode == 0, ran.stderr
        for t in pushed:
            assert t.task_id is not None
            assert q.result(t.task_id, timeout=2) == {"echo": t.payload}
        status = run_here(*base, "status", "--json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["stats"]["counts"]["FINISHED"] == 4
        # the same URL from the environment
        by_env = run_here("status", "--queue", name, env={"FAIRQUE_URL": any_server.url})
        assert by_env.returncode == 0, by_env.stderr
        q.purge()
    finally:
        q.close()


def test_the_pages_yaml_and_environment_forms(tls_server: TlsServer, tmp_path: Path) -> None:
    """The page's two examples as written (host fields, ``ssl: true``; a URL with a user
    and password and no query): the CA is trusted through OpenSSL's ``SSL_CERT_FILE``."""
    admin = FairQueue.from_url(tls_server.url, queue=unique_queue("tls")).client
    admin.acl_setuser("fairque-worker", enabled=True, passwords=["+s3cret"],
                      keys=["*"], commands=["+@all"])  # fmt: skip
    name = unique_queue("tls")
    config = tmp_path / "fairque.yaml"
    config.write_text(
        "redis:\n  host: localhost\n"
        f"  port: {tls_server.port}\n"
        '  username: fairque-worker\n  password: "s3cret"\n  ssl: true\n'
        f"queue:\n  name: {name}\n"
    )
    trust = {"SSL_CERT_FILE": str(tls_server.certs.ca)}
    try:
        by_file = run_here("--config", str(config), "status", "--json", env=trust)
        assert by_file.returncode == 0, by_file.stderr
        url = f"rediss://fairque-worker:s3cret@localhost:{tls_server.port}/0"
        by_env = run_here("status", "--queue", name, env={**trust, "FAIRQUE_URL": url})
        assert by_env.returncode == 0, by_env.stderr
        assert "s3cret" not in by_env.stdout + by_env.stderr
        # a private CA in the YAML file: the whole URL, query options included, as redis.url
        with_url = tmp_path / "with-url.yaml"
        with_url.write_text(f'redis:\n  url: "{tls_server.url}"\nqueue:\n  name: {name}\n')
        by_url = run_here("--config", str(with_url), "status")
        assert by_url.returncode == 0, by_url.stderr
        distrust = {"SSL_CERT_FILE": str(tls_server.certs.other_ca)}
        untrusted = run_here("--config", str(config), "status", env=distrust)
        assert untrusted.returncode == 1
        assert "certificate verify failed" in untrusted.stderr
    finally:
        admin.acl_deluser("fairque-worker")
        admin.close()


def test_a_wrong_ca_is_refused_with_one_clear_line(tls_server: TlsServer) -> None:
    wrong = tls_server.url.replace(str(tls_server.certs.ca), str(tls_server.certs.other_ca))
    with pytest.raises(redis.ConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        FairQueue.from_url(wrong, queue="tls-wrong-ca").stats()
    shown = run_here("--url", wrong, "--queue", "tls-wrong-ca", "status")
    assert shown.returncode == 1
    assert "Traceback" not in shown.stderr
    lines = shown.stderr.strip().splitlines()
    assert len(lines) == 1, shown.stderr
    assert "cannot connect to rediss://localhost" in lines[0]
    assert "certificate verify failed" in lines[0]


def test_the_client_certificate_is_required_when_the_server_asks(mtls_server: TlsServer) -> None:
    without = mtls_server.url.split("&ssl_certfile=")[0]
    with pytest.raises(redis.ConnectionError):
        FairQueue.from_url(without, queue="tls-no-cert").stats()
    shown = run_here("--url", without, "--queue", "tls-no-cert", "status")
    assert shown.returncode == 1
    assert "Traceback" not in shown.stderr
    assert "cannot connect to rediss://localhost" in shown.stderr
    assert "requires a client certificate" in shown.stderr
    assert "give ssl_certfile and ssl_keyfile in the URL" in shown.stderr
