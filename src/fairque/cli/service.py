"""The service commands: ``fairque serve`` and ``fairque dispatch``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from fairque.cli.base import shared


def serve(
    ctx: typer.Context,
    queues: Annotated[
        list[str] | None,
        typer.Argument(
            help="Queues to serve: names, or patterns with *, ? and [...].",
            show_default="server.queues, else every queue on the server",
        ),
    ] = None,
    host: Annotated[
        str | None, typer.Option(help="Address to listen on.", show_default="127.0.0.1")
    ] = None,
    port: Annotated[
        int | None, typer.Option(min=1, max=65535, help="Port.", show_default="8000")
    ] = None,
    access_log: Annotated[
        bool | None,
        typer.Option("--access-log/--no-access-log", help="One log line per request."),
    ] = None,
) -> None:
    """Serve the HTTP API (JSON and MessagePack; the spec at /openapi.json).

    Without server.tokens the server listens on loopback addresses only; with
    tokens, requests need 'Authorization: Bearer <token>'. With no Redis
    configured it starts an embedded Valkey and says so.
    """
    from fairque.cli.commands import EXIT_USAGE, fail, server_url, settings
    from fairque.errors import ConfigError

    with server_extra("serve"):
        import uvicorn

        from fairque.service.app import Service, create_app
        from fairque.service.auth import bind_problem

    cfg = settings(ctx)
    server = cfg.server
    host = host or server.host
    port = port or server.port
    names = list(queues or server.queues)
    problem = bind_problem(host, server.tokens)
    if problem is not None:
        fail(problem, EXIT_USAGE)
    with server_url(cfg, embedded_ok=True) as url:
        try:
            service = Service(url, names, server, cfg.queue.options())
        except ConfigError as exc:
            fail(str(exc), EXIT_USAGE)
        busy = _cannot_listen(host, port)
        if busy is not None:
            fail(f"cannot listen on {host}:{port}: {busy} (--port, server.port)")
        unreadable = _tls_problem(server.tls_cert_file, server.tls_key_file)
        if unreadable is not None:
            fail(unreadable, EXIT_USAGE)
        scheme = "https" if server.tls_cert_file is not None else "http"
        typer.echo(
            f"fairque serve: {service.selection} on {scheme}://{host}:{port} "
            f"({'bearer tokens required' if server.tokens else 'no tokens: loopback only'})",
            err=True,
        )
        base = f"{scheme}://{host}:{port}"
        typer.echo(
            f"fairque serve: dashboard {base}/ui, metrics {base}/metrics, spec {base}/openapi.json",
            err=True,
        )
        logs = server.access_log if access_log is None else access_log
        config = uvicorn.Config(
            create_app(service), host=host, port=port, log_level="info" if logs else "warning",
            access_log=logs, lifespan="on", server_header=False,
            ssl_certfile=server.tls_cert_file, ssl_keyfile=server.tls_key_file,
        )  # fmt: skip
        # uvicorn stops gracefully on SIGTERM/SIGINT, then raises the signal again (a
        # KeyboardInterrupt, see ``main``): the stop was asked for, so it is a success
        with contextlib.suppress(KeyboardInterrupt):
            uvicorn.Server(config).run()


def _tls_problem(cert: Path | None, key: Path | None) -> str | None:
    """Why the certificate and key cannot serve HTTPS (one line), or None."""
    if cert is None or key is None:
        return None
    import ssl

    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        return (
            f"cannot serve HTTPS with {cert} and {key}: {exc} (server.tls_cert_file, tls_key_file)"
        )
    return None


def _cannot_listen(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on (taken, no such address), or None: tried
    before anything is printed, so a busy port is one error line and exit 1."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return str(exc)
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            sock.bind(address)
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def dispatch(ctx: typer.Context) -> None:
    """Lease tasks fairly and POST each to the HTTP worker the dispatch: section names.

    Each job goes as MessagePack {task_id, name, argument, user_id, priority,
    attempt, timeout_seconds}; the endpoint's reply (a result message) is the
    outcome. 5xx answers, connection errors and timeouts are retried; 4xx are not.
    """
    import asyncio

    from fairque.cli.commands import EXIT_USAGE, fail, server_url, settings

    with server_extra("dispatch"):
        from fairque.service.dispatch import run_dispatch

    cfg = settings(ctx)
    if not cfg.dispatch.endpoints:
        fail("no endpoints: add dispatch.endpoints to --config (queue, url, ...)", EXIT_USAGE)
    with server_url(cfg, embedded_ok=False) as url:
        asyncio.run(run_dispatch(url, cfg.dispatch, cfg.queue.options(), worker=cfg.worker))


@contextlib.contextmanager
def server_extra(command: str) -> Iterator[None]:
    """Exit 2 with what to install when the ``server`` extra's packages are missing."""
    try:
        yield
    except ImportError as exc:
        from fairque.cli.commands import EXIT_USAGE, fail
        from fairque.extras import install_hint

        fail(
            f"fairque {command} needs the server extra ({exc.name or exc}): "
            f"{install_hint('server')}",
            EXIT_USAGE,
        )


def register(app: typer.Typer) -> None:
    """Add the service commands to ``app``."""
    app.command()(shared(serve))
    app.command()(shared(dispatch))
