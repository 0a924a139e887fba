"""A queue's shards on the command line: ``fairque queue shards`` shows them,
``fairque queue resize N`` places tenants on N shards from now on."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from fairque.cli.base import open_queue, shared, stdout
from fairque.client.queue import FairQueue
from fairque.core.shards import MAX_SHARDS

queue_app = typer.Typer(
    name="queue",
    help="Show the queue's shards, or resize it while producers and workers run.",
    no_args_is_help=True,
)


def _described(q: FairQueue) -> dict[str, object]:
    layout = q.layout
    return {
        "queue": q.queue,
        "shards": layout.count,
        "retired": len(layout.tags) + 1 - layout.count,
    }


def _line(doc: dict[str, object]) -> str:
    retired = f", {doc['retired']} retired (drained by the workers)" if doc["retired"] else ""
    count = doc["shards"]
    return f"{doc['queue']}: {count} shard{'s' if count != 1 else ''}{retired}"


def shards(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """How many shards the queue places its tenants on, and how many it retired."""
    with open_queue(ctx) as q:
        doc = _described(q)
    if as_json:
        stdout.out(json.dumps(doc), highlight=False)
    else:
        stdout.print(_line(doc))


def resize(
    ctx: typer.Context,
    count: Annotated[
        int, typer.Argument(min=1, max=MAX_SHARDS, help="Shards to place tenants on from now on.")
    ],
) -> None:
    """Place the queue's tenants on COUNT shards from now on.

    Nothing moves: tasks stay where they were pushed and workers drain shards past the
    new count. Every client and worker follows within a few seconds.
    """
    with open_queue(ctx) as q:
        before = q.resize(count)
        doc = _described(q)
    was = "" if before == count else f" (was {before})"
    stdout.print(_line(doc) + was)


def register(app: typer.Typer) -> None:
    """Add ``queue shards`` and ``queue resize`` to ``app``."""
    queue_app.command("shards")(shared(shards))
    queue_app.command("resize")(shared(resize))
    app.add_typer(queue_app)
