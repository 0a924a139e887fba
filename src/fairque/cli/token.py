"""``fairque token create``: a new bearer token for ``fairque serve``, shown once, and the
``server.tokens`` entry that holds only its digest."""

from __future__ import annotations

import hashlib
import secrets
import sys
from datetime import datetime
from typing import Annotated, Any

import typer
import yaml

#: what every generated token starts with (so a leaked one is recognised by scanners)
PREFIX = "fq_"

token_app = typer.Typer(
    name="token", help="Bearer tokens of the HTTP service.", no_args_is_help=True
)


def create(
    name: Annotated[str, typer.Argument(help="The entry's name (audit lines and rate limits).")],
    role: Annotated[
        str, typer.Option("--role", help="producer, worker, viewer or admin.")
    ] = "producer",
    queues: Annotated[
        list[str] | None,
        typer.Option("--queue", help="A queue it may use (name or pattern; repeat)."),
    ] = None,
    tenants: Annotated[
        list[str] | None,
        typer.Option("--tenant", help="A tenant it acts for (name or pattern; repeat)."),
    ] = None,
    expires: Annotated[
        str | None,
        typer.Option("--expires", help="When it stops working: ISO 8601 with its zone."),
    ] = None,
) -> None:
    """Make a token: prints the token (once; the server keeps only its digest) on
    stdout's first line, then the server.tokens entry to add to the settings file."""
    from pydantic import ValidationError

    from fairque.cli.base import EXIT_USAGE, fail
    from fairque.service.settings import TokenSettings

    token = PREFIX + secrets.token_urlsafe(32)
    fields: dict[str, Any] = {
        "name": name, "role": role, "sha256": hashlib.sha256(token.encode()).hexdigest(),
        "queues": queues or None, "tenants": tenants or None, "expires_at": expires,
    }  # fmt: skip
    try:
        entry = TokenSettings.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'token'}: "
            + e["msg"].removeprefix("Value error, ")
            for e in exc.errors()
        )
        fail(f"token not made: {problems}", EXIT_USAGE)
    shown = entry.model_dump(mode="json", exclude_none=True, exclude={"token"})
    if isinstance(entry.expires_at, datetime):
        shown["expires_at"] = entry.expires_at.isoformat()
    typer.echo(token)
    typer.echo(yaml.safe_dump([shown], default_flow_style=None, sort_keys=False).rstrip())
    print(
        "fairque token: the first line is the token, shown this once; add the entry under "
        "server.tokens and restart serve",
        file=sys.stderr,
    )


def register(app: typer.Typer) -> None:
    """Add ``token create`` to ``app``."""
    token_app.command("create")(create)
    app.add_typer(token_app)
