"""Commands about how a queue shares its workers: ``fairness`` (show or set the mode)
and ``tenants`` (what each user was served, against its fair share)."""

from __future__ import annotations

import json
from enum import Enum
from typing import Annotated

import typer
from rich.table import Table

from fairque.cli.base import open_queue, shared, stdout
from fairque.models import TenantReport, TenantService


class Mode(str, Enum):
    """The modes ``FairQueue.set_fairness`` takes."""

    TIME = "time"
    COUNT = "count"


def fairness(
    ctx: typer.Context,
    mode: Annotated[
        Mode | None,
        typer.Argument(help="time: share worker time; count: share turns. Left out: show it."),
    ] = None,
    max_lead: Annotated[
        float | None,
        typer.Option(
            "--max-lead",
            help="Seconds of worker time (over its weight) a tenant may be ahead of the"
            " least served one, in time mode (default 60).",
        ),
    ] = None,
) -> None:
    """Show or set what the queue is fair by: worker time (the default) or turns.

    The mode is kept on the server: every producer and worker follows a change at once.
    """
    with open_queue(ctx) as q:
        if mode is None and max_lead is None:
            stdout.print(f"{q.queue}: fair by {_said(q.fairness(), q.max_lead())}")
            return
        now = mode.value if mode is not None else q.fairness()
        before = q.set_fairness(now, max_lead_seconds=max_lead)
        lead = q.max_lead()
    was = "" if before == now else f" (was {_said(before)})"
    stdout.print(f"{q.queue}: fair by {_said(now, lead)}{was}")


def _said(mode: str, lead: float | None = None) -> str:
    if mode != "time":
        return "turns (count)"
    return "worker time" if lead is None else f"worker time, a tenant at most {lead:g} s ahead"


def tenants(
    ctx: typer.Context,
    limit: Annotated[
        int, typer.Option(min=1, max=1000, help="Users to name (the most recently leased).")
    ] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """What each user was served, by worker time, next to its fair share.

    Leases, outcomes, worker time and its share of the queue's, for the most recently
    leased users (the rest summed), since each user's first lease; the fair share is
    demand-aware (max-min): a user with nothing waiting got all it asked for, and the
    users still waiting share the rest by weight.
    """
    with open_queue(ctx) as q:
        report = q.tenants(limit)
    fair = dict(zip((t.user_id for t in report.tenants), report.fair_shares(), strict=True))
    if as_json:
        rows = [_row_json(report, t, fair.get(t.user_id)) for t in [*report.tenants, report.others]]
        doc = {"queue": report.queue, "fairness": report.fairness,
               "busy_seconds": report.busy_seconds, "tenants": rows}  # fmt: skip
        stdout.out(json.dumps(doc), highlight=False)
        return
    table = Table(
        title=f"{report.queue!r}: fair by {_said(report.fairness)}, "
        f"{report.busy_seconds:.3f} worker-seconds",
        title_justify="left",
    )
    for name in ("user", "weight", "leases", "done", "failed", "worker s", "share", "fair"):
        table.add_column(name, overflow="fold" if name == "user" else "ellipsis",
                         justify="left" if name == "user" else "right")  # fmt: skip
    for t in [*report.tenants, report.others]:
        if not t.user_id and not t.started:
            continue  # nobody else
        due = fair.get(t.user_id) if t.user_id else None
        table.add_row(t.user_id or "(the rest)", str(t.weight) if t.user_id else "-",
                      str(t.started), str(t.finished), str(t.failed), f"{t.busy_seconds:.3f}",
                      f"{report.share(t):.1%}", "-" if due is None else f"{due:.1%}")  # fmt: skip
    stdout.print(table)


def _row_json(report: TenantReport, t: TenantService, fair: float | None) -> dict[str, object]:
    return {
        "user_id": t.user_id,
        "weight": t.weight,
        "started": t.started,
        "finished": t.finished,
        "failed": t.failed,
        "busy_seconds": t.busy_seconds,
        "share": report.share(t),
        "backlog": t.backlog,
        "fair_share": fair,
    }


def register(app: typer.Typer) -> None:
    """Add ``fairness`` and ``tenants`` to ``app``."""
    for command in (fairness, tenants):
        app.command()(shared(command))
