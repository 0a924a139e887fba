"""A throw-away PKI for the TLS tests, made with the ``openssl`` command."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from helpers.servers import unavailable


@dataclass(frozen=True)
class Certs:
    """PEM files of one throw-away PKI."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # signed nothing here: trusting it alone must fail


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"openssl {' '.join(args)} failed:\n{done.stderr}"


def _ca(name: str, cwd: Path) -> None:
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
        "-subj", f"/CN=fairque test {name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=cwd,
    )  # fmt: skip


def _leaf(name: str, usage: str, alt_names: str, cwd: Path) -> None:
    _openssl(
        "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}",
        cwd=cwd,
    )  # fmt: skip
    ext = cwd / f"{name}.ext"
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        f"extendedKeyUsage={usage}\n"
        f"subjectAltName={alt_names}\n"
    )
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", ext.name,
        cwd=cwd,
    )  # fmt: skip


def make_certs(cwd: Path) -> Certs:
    """A CA, a server and a client certificate it signed, and an unrelated CA, in ``cwd``."""
    if shutil.which("openssl") is None:
        unavailable("the openssl command is needed to make the test certificates")
    _ca("ca", cwd)
    _ca("other-ca", cwd)
    _leaf("server", "serverAuth", "DNS:localhost,IP:127.0.0.1", cwd)
    _leaf("client", "clientAuth", "DNS:fairque-client", cwd)
    return Certs(
        ca=cwd / "ca.pem",
        server_cert=cwd / "server.pem",
        server_key=cwd / "server.key",
        client_cert=cwd / "client.pem",
        client_key=cwd / "client.key",
        other_ca=cwd / "other-ca.pem",
    )
