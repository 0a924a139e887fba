"""The package as users get it: a built wheel and sdist, installed into a fresh virtualenv.

``uv build`` makes the sdist and, from it, the wheel (so the sdist is proven complete);
the wheel is installed with its dependencies into a new virtualenv, and ``fairque
--help`` and the demo run from there against the suite's server. This catches a
dependency imported but not declared, a data file (Lua script, template) left out of
the package, and a version that disagrees with the package's metadata.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import uuid
import zipfile
from pathlib import Path

import pytest
from helpers.servers import ServerInfo

import fairque

pytestmark = [pytest.mark.slow, pytest.mark.server_kinds("valkey")]

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "fairque"


def _data_files() -> list[str]:
    """Package files other than Python modules, relative to ``src/``."""
    wanted = [PACKAGE / "py.typed"]
    wanted += sorted((PACKAGE / "core" / "lua").rglob("*.lua"))
    ui = PACKAGE / "service" / "ui"
    wanted += sorted(p for p in (ui / "templates").rglob("*") if p.is_file())
    wanted += sorted(p for p in (ui / "static").rglob("*") if p.is_file())
    return [p.relative_to(ROOT / "src").as_posix() for p in wanted]


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        if os.environ.get("CI"):
            pytest.fail("uv is not on PATH")
        pytest.skip("uv is not on PATH")
    return uv


def _run(*args: str | Path, timeout: float = 120, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run(_uv(), "build", "--quiet", "--out-dir", out, ROOT, timeout=180)
    return out


def test_wheel_and_sdist_carry_the_data_files(dist: Path) -> None:
    version = fairque.__version__
    wheel = dist / f"fairque-{version}-py3-none-any.whl"
    sdist = dist / f"fairque-{version}.tar.gz"
    assert wheel.is_file(), sorted(p.name for p in dist.iterdir())
    assert sdist.is_file()
    files = _data_files()
    assert any(f.endswith(".lua") for f in files)
    assert any("/templates/" in f for f in files)
    assert any("/static/" in f for f in files)
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = zf.read(f"fairque-{version}.dist-info/METADATA").decode()
    assert [f for f in files if f not in names] == []
    assert f"Version: {version}\n" in metadata
    assert "Requires-Dist: click" in metadata
    with tarfile.open(sdist) as tf:
        members = {m.name.split("/", 1)[1] for m in tf.getmembers() if "/" in m.name}
    assert [f for f in files if f"src/{f}" not in members] == []
    assert "CHANGELOG.md" in members
    assert not any(m.startswith(".hypothesis") for m in members)


def test_installed_wheel_runs_the_cli_and_the_demo(
    dist: Path, tmp_path: Path, server: ServerInfo
) -> None:
    uv = _uv()
    venv = tmp_path / "venv"
    _run(uv, "venv", "--quiet", "--python", sys.executable, venv)
    python = venv / "bin" / "python"
    wheel = dist / f"fairque-{fairque.__version__}-py3-none-any.whl"
    install: list[str | Path] = [uv, "pip", "install", "--quiet", "--python", python, wheel]
    # from uv's cache when it holds every dependency; else from the index
    offline = subprocess.run([*install, "--offline"], capture_output=True, timeout=120)
    if offline.returncode != 0:
        _run(*install, timeout=300)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAIRQUE_", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    fairque_bin = venv / "bin" / "fairque"

    version = _run(python, "-c", "import fairque; print(fairque.__version__)", env=env)
    assert version.strip() == fairque.__version__
    where = _run(python, "-c", "import fairque; print(fairque.__file__)", env=env)
    assert Path(where.strip()).is_relative_to(venv), "the test imported the checkout"

    out = _run(fairque_bin, "--help", env=env)
    for command in ("worker", "enqueue", "status", "demo", "serve"):
        assert command in out

    queue = f"pkg-{uuid.uuid4().hex[:8]}"
    out = _run(
        fairque_bin, "demo", "--quick", "--url", server.url, "--queue", queue, env=env, timeout=120
    )
    assert "noisy" in out.lower()
