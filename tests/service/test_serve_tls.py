"""``fairque serve`` terminating TLS itself: HTTPS only, with the certificate a client
checks against its CA, and the dashboard's session cookie marked ``Secure``."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from helpers.certs import make_certs
from helpers.servers import ServerInfo
from helpers.support import PATIENCE, run_here, unique_queue

from fairque.cli.embedded import free_port

TOKEN = "admin-secret-token-0123456789"


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_serve_answers_over_https_only(server: ServerInfo, tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    port = free_port()
    queue = unique_queue("tls")
    config = tmp_path / "fairque.yaml"
    config.write_text(yaml.safe_dump({"server": {
        "port": port, "queues": [queue],
        "tokens": [{"name": "ops", "role": "admin", "token": TOKEN}],
        "tls_cert_file": str(certs.server_cert), "tls_key_file": str(certs.server_key),
    }}))  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRQUE_")}
    command = [sys.executable, "-m", "fairque", "--config", str(config), "--url", server.url]
    process = subprocess.Popen(
        [*command, "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    base = f"https://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        trusted = ssl.create_default_context(cafile=str(certs.ca))
        with httpx.Client(base_url=base, verify=trusted, timeout=30) as https:
            deadline = time.monotonic() + PATIENCE
            while True:
                try:
                    ready = https.get("/healthz")
                    break
                except httpx.TransportError:
                    assert process.poll() is None, process.communicate()
                    assert time.monotonic() < deadline, "serve never answered"
                    time.sleep(0.1)
            assert ready.status_code == 200
            assert https.get("/v1/queues", headers=auth).json() == {"queues": [{"name": queue}]}

            # the session cookie says Secure over HTTPS
            https.get("/ui/login")
            csrf = https.cookies["fq_csrf"]
            login = https.post("/ui/login", data={"csrf": csrf, "token": TOKEN, "next": "/ui"})
            assert login.status_code == 303
            assert "secure" in login.headers["set-cookie"].lower()

        # plain HTTP is not answered; a client that does not trust the CA is refused
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
        other = ssl.create_default_context(cafile=str(certs.other_ca))
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(f"{base}/healthz", verify=other, timeout=5)
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=PATIENCE)
    assert f"on https://127.0.0.1:{port}" in err


def test_serve_refuses_a_certificate_it_cannot_load(server: ServerInfo, tmp_path: Path) -> None:
    config = tmp_path / "fairque.yaml"
    missing = tmp_path / "missing.pem"
    config.write_text(yaml.safe_dump({"server": {
        "port": free_port(), "tls_cert_file": str(missing), "tls_key_file": str(missing),
    }}))  # fmt: skip
    result = run_here("--config", str(config), "--url", server.url, "serve")
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"error: cannot serve HTTPS with {missing}")
    assert "server.tls_cert_file" in line

    half = tmp_path / "half.yaml"
    half.write_text(yaml.safe_dump({"server": {"tls_cert_file": str(missing)}}))
    result = run_here("--config", str(half), "--url", server.url, "serve")
    assert result.returncode == 2
    assert "give both tls_cert_file and tls_key_file" in result.stderr
