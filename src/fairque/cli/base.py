"""What every command shares: options, settings, the server, errors and exit codes.

Exit codes: 0 success (serve, worker, scheduler, dispatch and demo stopped by
SIGTERM/SIGINT too); 130 interrupted before a command handles signals; 1 the command
failed (server unreachable or refusing, unknown task, a transition the task's state
does not allow, a confirmation declined); 2 bad usage, input or configuration
(nothing was changed).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import logging
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar, cast

import redis
import typer
from redis.exceptions import RedisClusterException
from rich.console import Console
from rich.text import Text

from fairque.client.queue import FairQueue
from fairque.common import urls
from fairque.config import Settings, load_settings
from fairque.errors import ConfigError, FairqueError, ValidationError

# no markup: task ids, user ids and messages are shown as they are ("[x]" stays "[x]");
# styled output is built from rich Text
stdout = Console(soft_wrap=True, markup=False)
stderr = Console(stderr=True, soft_wrap=True, markup=False)

EXIT_FAILURE = 1
EXIT_USAGE = 2
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
log = logging.getLogger("fairque.cli")


SHARED_PANEL = "Shared options (before or after the command)"
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url", "-u", envvar="FAIRQUE_URL", help="Redis URL.", rich_help_panel=SHARED_PANEL
    ),
]
QueueOption = Annotated[
    list[str] | None,
    typer.Option(
        "--queue",
        "-q",
        envvar="FAIRQUE_QUEUE",
        metavar="NAME",
        help="Queue name (worker, status: repeat it for several queues).",
        rich_help_panel=SHARED_PANEL,
    ),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        envvar="FAIRQUE_CONFIG",
        help="YAML settings file.",
        rich_help_panel=SHARED_PANEL,
    ),
]
VerboseOption = Annotated[
    bool, typer.Option("--verbose", "-v", help="Debug logging.", rich_help_panel=SHARED_PANEL)
]


def _print_version(value: bool) -> None:
    if value:
        from fairque import __version__

        typer.echo(f"fairque {__version__}")
        raise typer.Exit()


VersionOption = Annotated[
    bool,
    typer.Option(
        "--version", help="Print the version and exit.", is_eager=True,
        callback=_print_version,
    ),
]  # fmt: skip
#: the shared options: name -> (annotation, default)
SHARED: dict[str, tuple[Any, Any]] = {
    "url": (UrlOption, None),
    "queue": (QueueOption, None),
    "config": (ConfigOption, None),
    "verbose": (VerboseOption, False),
}
F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Common:
    """The options every command shares.

    ``queues`` holds every ``--queue`` given (only ``worker`` takes several);
    ``queue`` is the last of them.
    """

    url: str | None
    queue: str | None
    config: Path | None
    verbose: bool = False
    queues: list[str] = field(default_factory=list)

    def set_queues(self, names: list[str] | None) -> None:
        """Take the ``--queue`` options given (None or empty: none given)."""
        self.queues = list(names or [])
        self.queue = self.queues[-1] if self.queues else None


def say_error(message: str) -> None:
    """Print ``error: message`` on stderr, credentials hidden, as plain text."""
    stderr.print(Text.assemble(("error:", "bold red"), " ", urls.redact_text(message)))


def fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    """Print ``error: message`` on stderr (credentials hidden) and exit with ``code``."""
    say_error(message)
    raise typer.Exit(code)


def configure_logging(level: int, formatter: logging.Formatter | None = None) -> None:
    """Log to stderr at ``level``, every line redacted (``RedactingFormatter`` by default)."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter or urls.RedactingFormatter(LOG_FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)


def shared(func: F) -> F:
    """Let a command take the shared options after its name too (``fairque status --url``).

    Given after the command, an option wins over the same option given before it;
    an option read from its environment variable never overrides one given before.
    """
    signature = inspect.signature(func, eval_str=True)
    params = list(signature.parameters.values())
    for name, (annotation, default) in SHARED.items():
        params.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                              annotation=annotation)
        )  # fmt: skip

    @functools.wraps(func)
    def command(*args: Any, **kwargs: Any) -> Any:
        ctx: typer.Context = kwargs["ctx"]
        common: Common = ctx.obj
        for name in SHARED:
            value = kwargs.pop(name)
            source = ctx.get_parameter_source(name)
            if source is not None and source.name == "COMMANDLINE":
                if name == "queue":
                    common.set_queues(value)
                else:
                    setattr(common, name, value)
        if common.verbose:
            logging.getLogger().setLevel(logging.DEBUG)
        urls.remember_secrets(common.url)
        return func(*args, **kwargs)

    command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    return cast(F, command)


def settings(ctx: typer.Context, *, several_queues: bool = False, **worker: Any) -> Settings:
    """Load settings for a command, turning configuration errors into exit code 2.

    Args:
        ctx: the command's context.
        several_queues: the command takes every ``--queue`` given (``worker``,
            ``status``); other commands refuse more than one (exit code 2).
        worker: overrides of the ``worker:`` section.
    """
    common: Common = ctx.obj
    if len(common.queues) > 1 and not several_queues:
        named = ", ".join(common.queues)
        fail(
            f"--queue was given {len(common.queues)} times ({named}); this command works "
            "on one queue (only 'worker' and 'status' take several)",
            EXIT_USAGE,
        )
    if several_queues and common.queues:
        worker = {**worker, "queues": common.queues}
    try:
        cfg = load_settings(
            common.config, redis={"url": common.url}, queue={"name": common.queue}, worker=worker
        )
        if cfg.redis.configured:
            urls.remember_secrets(cfg.redis.to_url())
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    return cfg


@contextlib.contextmanager
def server_url(cfg: Settings, *, embedded_ok: bool) -> Iterator[str]:
    """The configured server's URL, or a private embedded Valkey when allowed."""
    if cfg.redis.configured:
        url = cfg.redis.to_url()
        try:
            url = urls.check_url(url)
        except ConfigError as exc:
            fail(str(exc), EXIT_USAGE)
        yield url
        return
    if not embedded_ok:
        fail("no Redis configured: pass --url, set FAIRQUE_URL or redis.url in --config", 2)
    from fairque.cli.embedded import EmbeddedServer

    try:
        server = EmbeddedServer(die_with_parent=True)
        server.start()
    except (FileNotFoundError, RuntimeError) as exc:
        fail(f"no Redis configured and the embedded server could not start: {exc}")
    stderr.print(
        Text.assemble(
            (f"No Redis configured: started an embedded Valkey at {server.url}", "yellow"),
            " (private to this process, data is discarded on exit)",
        )
    )
    try:
        yield server.url
    finally:
        server.stop()


@contextlib.contextmanager
def open_queue(ctx: typer.Context, cfg: Settings | None = None) -> Iterator[FairQueue]:
    """A connected FairQueue for the configured server and queue."""
    if cfg is None:
        cfg = settings(ctx)
    with server_url(cfg, embedded_ok=False) as url, guarded(url):
        q = FairQueue.from_url(
            url, cfg.queue.name, cluster=cfg.redis.cluster, **cfg.queue.options()
        )
        try:
            yield q
        finally:
            q.close()


@contextlib.contextmanager
def open_queues(ctx: typer.Context, cfg: Settings) -> Iterator[list[FairQueue]]:
    """Connected FairQueues for every queue a worker with ``cfg`` serves (one client)."""
    with server_url(cfg, embedded_ok=False) as url, guarded(url):
        options = cfg.queue.options()
        first, *others = cfg.worker_queues
        q = FairQueue.from_url(url, first, cluster=cfg.redis.cluster, **options)
        try:
            yield [q, *(FairQueue.open(q.client, name, **options) for name in others)]
        finally:
            q.close()


class Interrupt:
    """A Ctrl-C (or a SIGTERM, taken as one) asked for while a command refreshes."""

    requested = False


@contextlib.contextmanager
def interruptible() -> Iterator[Interrupt]:
    """Mark Ctrl-C before raising ``KeyboardInterrupt``: a loop that checks the mark
    ends even where a C extension swallowed the exception (as one did, now and then, in
    ``status --watch`` on a loaded machine: the watch went on after the signal)."""
    mark = Interrupt()

    def handler(signum: int, frame: object) -> None:
        mark.requested = True
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield mark
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def guarded(url: str) -> Iterator[None]:
    """Turn server, connection and queue errors into one line and an exit code."""
    try:
        yield
    except (redis.RedisError, RedisClusterException, FairqueError) as exc:
        fail(*describe_failure(exc, url))


#: how a TLS server that wants a client certificate ends a handshake without one, as
#: OpenSSL reports it (with TLS 1.3 the alert often comes after the client wrote)
_NO_CLIENT_CERTIFICATE = (
    "CERTIFICATE_REQUIRED",
    "EOF occurred in violation of protocol",
    "Connection reset by peer",
    "Connection closed by server",
)


def _certificate_hint(exc: Exception, url: str) -> str:
    """Why a TLS connection without a client certificate may have ended, or ''."""
    if not url.startswith("rediss://") or "ssl_certfile=" in url:
        return ""
    if not any(sign in str(exc) for sign in _NO_CLIENT_CERTIFICATE):
        return ""
    return (
        " (a server that requires a client certificate ends the connection so: give "
        "ssl_certfile and ssl_keyfile in the URL)"
    )


def describe_failure(exc: Exception, url: str) -> tuple[str, int]:
    """The one-line message and exit code for a failure talking to ``url``.

    Exit code 2 for bad input or configuration (including a URL naming a database
    the server does not have), 1 for everything else. The URL is shown redacted.
    """
    shown = urls.redact_url(url)
    known = exc if isinstance(exc, ConfigError) else urls.explain(exc, url)
    if known is not None:
        return str(known), EXIT_USAGE
    if isinstance(exc, redis.TimeoutError):
        return f"no answer from {shown} in time: {exc}", EXIT_FAILURE
    if isinstance(exc, redis.ConnectionError):
        return f"cannot connect to {shown}: {exc}{_certificate_hint(exc, url)}", EXIT_FAILURE
    if isinstance(exc, ValidationError):
        return f"{type(exc).__name__}: {exc}", EXIT_USAGE
    if isinstance(exc, FairqueError):
        return f"{type(exc).__name__}: {exc}", EXIT_FAILURE
    return f"server {shown} answered: {type(exc).__name__}: {exc}", EXIT_FAILURE


def import_handlers(modules: list[str]) -> None:
    """Import the modules that register handlers (``worker.imports`` / ``--import``)."""
    sys.path.insert(0, str(Path.cwd()))
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            fail(f"cannot import handler module {name!r}: {exc}", EXIT_USAGE)


def no_task(task_id: str, queue: str) -> NoReturn:
    """Exit 1: the queue has no task ``task_id`` (never pushed, or expired)."""
    fail(f"no task {task_id!r} in queue {queue!r}")
