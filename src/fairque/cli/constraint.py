"""Constraints on the command line: ``fairque constraint add|list|show|remove|apply``."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from fairque.cli.base import EXIT_USAGE, fail, open_queue, open_queues, settings, shared, stdout
from fairque.cli.render import parse_json
from fairque.config import Settings
from fairque.constraints.model import Constraint, ConstraintInfo
from fairque.errors import ConstraintNotFound, ValidationError

constraint_app = typer.Typer(
    name="constraint",
    help="Add, list, show and remove the queue's rate and concurrency constraints, or "
    "apply the constraints: section of --config.",
    no_args_is_help=True,
)


def _limits(c: Constraint) -> str:
    parts = []
    if c.rate is not None:
        parts.append(f"{c.rate} per {c.per:g} s" + (f" (burst {c.burst})" if c.burst > 1 else ""))
    if c.concurrency is not None:
        parts.append(f"{c.concurrency} at once")
    return ", ".join(parts) + (" per user" if c.per_user else "")


def _matcher(c: Constraint) -> str:
    parts = [f"name {c.name}"]
    if c.payload:
        parts.append("payload " + json.dumps(c.payload, separators=(",", ":")))
    if c.users:
        parts.append("users " + ",".join(c.users))
    return "; ".join(parts)


def add(
    ctx: typer.Context,
    constraint_id: Annotated[str, typer.Argument(metavar="ID", help="Constraint id.")],
    name: Annotated[str, typer.Option("--name", help="Glob over task names, e.g. 'mail.*'.")] = "*",
    payload: Annotated[
        str | None,
        typer.Option(
            help='Payload fields to match as JSON: {"field": value} or {"field": [v1, v2]}.'
        ),
    ] = None,
    users: Annotated[
        list[str] | None, typer.Option("--user", help="Only this user's tasks (repeatable).")
    ] = None,
    rate: Annotated[
        int | None, typer.Option(min=1, help="At most RATE task starts per --per seconds.")
    ] = None,
    per: Annotated[float, typer.Option(metavar="SECONDS", help="The rate's period.")] = 1.0,
    burst: Annotated[int, typer.Option(min=1, help="Starts allowed at once after a lull.")] = 1,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="At most this many matched tasks running.")
    ] = None,
    per_user: Annotated[
        bool, typer.Option("--per-user", help="Each user gets its own limits.")
    ] = False,
) -> None:
    """Add a constraint, or replace the one with this id.

    Tasks pushed from now on that match it (name glob, payload fields, users) start
    at most --rate per --per seconds and/or --concurrency at once; a task over the
    limit waits without holding up other tasks, and runs when the limit frees.
    """
    fields: dict[str, Any] = {
        "id": constraint_id, "name": name, "users": tuple(users or ()), "rate": rate,
        "per": per, "burst": burst, "concurrency": concurrency, "per_user": per_user,
    }  # fmt: skip
    if payload is not None:
        try:
            fields["payload"] = parse_json(payload)
        except ValueError as exc:
            fail(f"--payload is not valid JSON: {exc}", EXIT_USAGE)
    try:
        constraint = Constraint(**fields)
    except ValidationError as exc:
        fail(str(exc), EXIT_USAGE)
    with open_queue(ctx) as q:
        q.define_constraint(constraint)
    stdout.print(f"{constraint.id}: {_limits(constraint)}; {_matcher(constraint)}")


def list_(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """The queue's constraints with their use: tasks running and tasks waiting (parked)."""
    with open_queue(ctx) as q:
        rows = q.constraints()
        queue = q.queue
    if as_json:
        stdout.out(json.dumps([i.to_dict() for i in rows]), highlight=False)
        return
    table = Table(title=f"constraints of {queue!r} ({len(rows)})", title_justify="left")
    for column in ("id", "matches", "limits"):
        table.add_column(column, overflow="fold")
    table.add_column("running", justify="right")
    table.add_column("waiting", justify="right")
    for i in rows:
        c = i.constraint
        table.add_row(c.id, _matcher(c), _limits(c), str(i.running), str(i.parked))
    stdout.print(table)


def show(
    ctx: typer.Context,
    constraint_id: Annotated[str, typer.Argument(metavar="ID", help="Constraint id.")],
) -> None:
    """One constraint and its use per bucket, as JSON (exit code 1 when there is none)."""
    with open_queue(ctx) as q:
        try:
            info: ConstraintInfo = q.constraint(constraint_id)
        except ConstraintNotFound:
            fail(f"no constraint {constraint_id!r} in queue {q.queue!r}")
    stdout.out(json.dumps(info.to_dict()), highlight=False)


def remove(
    ctx: typer.Context,
    constraint_id: Annotated[str, typer.Argument(metavar="ID", help="Constraint id.")],
) -> None:
    """Remove a constraint: its waiting tasks become ready at once (exit code 1: none)."""
    with open_queue(ctx) as q:
        if not q.remove_constraint(constraint_id):
            fail(f"no constraint {constraint_id!r} in queue {q.queue!r}")
    stdout.print(f"{constraint_id}: removed")


def apply(
    ctx: typer.Context,
    prune: Annotated[
        bool, typer.Option("--prune", help="Also remove constraints the section does not list.")
    ] = False,
) -> None:
    """Define the constraints of the constraints: section of --config (as 'fairque
    worker' does at start)."""
    cfg = settings(ctx)
    with open_queue(ctx, cfg) as q:
        held = q.apply_constraints(cfg.constraint_definitions(), prune=prune)
    stdout.print(f"{len(held.constraints)} constraint(s) on queue {cfg.queue.name!r}")


def apply_configured(ctx: typer.Context, cfg: Settings) -> None:
    """Define ``cfg``'s constraints on every queue a worker with ``cfg`` serves (its
    start); constraints the section does not list are left alone."""
    wanted = cfg.constraint_definitions()
    if wanted:
        with open_queues(ctx, cfg) as queues:
            for q in queues:
                q.apply_constraints(wanted)


def register(app: typer.Typer) -> None:
    """Add ``constraint ...`` to ``app``."""
    for command, name in (
        (add, "add"), (list_, "list"), (show, "show"), (remove, "remove"), (apply, "apply"),
    ):  # fmt: skip
        constraint_app.command(name)(shared(command))
    app.add_typer(constraint_app)
