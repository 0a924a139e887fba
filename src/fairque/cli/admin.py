"""Commands about results, users and queues: ``result``, ``users``, ``limits``,
``queues``."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from fairque.cli.base import EXIT_USAGE, fail, open_queue, shared, stderr, stdout
from fairque.errors import ResultTimeout, TaskCanceled, TaskFailed
from fairque.models import GroupLoad, TaskState


def result(
    ctx: typer.Context,
    task_id: Annotated[str, typer.Argument(help="Task id.")],
    wait: Annotated[
        float,
        typer.Option(
            "--wait", min=0, max=86_400, metavar="SECONDS", help="Wait this long for it to end."
        ),
    ] = 0.0,
) -> None:
    """Print a task's result as JSON (null: none returned, not kept or expired).

    Exit code 1 when the task does not exist, FAILED or was CANCELED (the error is
    shown, after the handler's traceback when one was kept), or had not ended
    within --wait seconds.
    """
    with open_queue(ctx) as q:
        if q.get(task_id) is None:
            fail(f"no task {task_id!r} in queue {q.queue!r}")
        try:
            value: Any = q.result(task_id, timeout=wait)
        except (TaskFailed, TaskCanceled) as exc:  # "task ID failed: <its error>"
            ended = q.get(task_id) if isinstance(exc, TaskFailed) else None
            if ended is not None and ended.traceback:
                stderr.out(ended.traceback, highlight=False)  # the handler's, as it raised
            fail(str(exc))
        except ResultTimeout:
            waited = f"within {wait:g} s" if wait else "yet (--wait SECONDS waits for it)"
            fail(f"task {task_id!r} has not ended {waited}")
    stdout.out(json.dumps(value), highlight=False)


def users(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(min=1, max=100_000, help="Users to show at most.")] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Users with ready or running work: ready, in flight, weight and cap; busiest first."""
    with open_queue(ctx) as q:
        stats = q.stats(user_limit=limit)
    rows = sorted(stats.users, key=lambda u: (-(u.ready + u.in_flight), u.user_id))
    if as_json:
        stdout.out(json.dumps([u.model_dump(mode="json") for u in rows]), highlight=False)
        return
    table = Table(title=f"users of {stats.queue!r} ({len(rows)})", title_justify="left")
    table.add_column("user", overflow="fold")
    table.add_column("ready", justify="right")
    table.add_column("in flight", justify="right")
    table.add_column("weight", justify="right")
    table.add_column("cap", justify="right")
    for u in rows:
        cap = "-" if u.max_in_flight is None else str(u.max_in_flight)
        table.add_row(u.user_id, str(u.ready), str(u.in_flight), str(u.weight), cap)
    stdout.print(table)


#: the options ``limits`` and ``group-limits`` share
Floor = Annotated[
    float | None,
    typer.Option(help="Least part of the worker time held while it has work; 0: none."),
]
Ceiling = Annotated[
    float | None, typer.Option(help="Most part of the worker time while others wait; 1: none.")
]
MaxInFlight = Annotated[
    int | None, typer.Option("--max-in-flight", min=0, help="Most slots leased at once; 0: no cap.")
]


def _said(
    weight: int | None,
    max_in_flight: int | None,
    floor: float | None,
    ceiling: float | None,
    between: list[str] | None = None,
) -> str:
    """The limits given, in words (``between``: more, after the cap)."""
    said = []
    if weight is not None:
        said.append(f"weight {weight}")
    if max_in_flight is not None:
        said.append(f"at most {max_in_flight} in flight" if max_in_flight else "no in-flight cap")
    said.extend(between or [])
    if floor is not None:
        said.append(f"at least {floor:.0%} of the worker time" if floor else "no floor")
    if ceiling is not None:
        said.append(f"at most {ceiling:.0%} while others wait" if ceiling < 1 else "no ceiling")
    return ", ".join(said)


def _group_said(load: GroupLoad) -> str:
    """A group's limits and backlog, in words."""
    said = [f"weight {load.weight}"]
    said.append(f"at most {load.max_in_flight} in flight" if load.max_in_flight else "no cap")
    if load.floor:
        said.append(f"at least {load.floor:.0%} of the worker time")
    if load.ceiling:
        said.append(f"at most {load.ceiling:.0%} while others wait")
    quota = f" of at most {load.max_queued}" if load.max_queued else ""
    said.append(f"{load.queued} queued{quota}")
    return ", ".join(said)


def limits(
    ctx: typer.Context,
    user: Annotated[str, typer.Argument(help="User (tenant) id.")],
    weight: Annotated[
        int | None,
        typer.Option(min=1, help="Share against weight 1: of worker time, or turns (count mode)."),
    ] = None,
    max_in_flight: MaxInFlight = None,
    max_queued: Annotated[
        int | None,
        typer.Option(
            "--max-queued",
            min=0,
            help="Backlog quota: most tasks queued, scheduled or deferred; 0: the queue's default.",
        ),
    ] = None,
    group: Annotated[
        str | None,
        typer.Option(help="The group (organisation) it belongs to; '' takes it out of one."),
    ] = None,
    floor: Floor = None,
    ceiling: Ceiling = None,
    max_bytes: Annotated[
        int | None,
        typer.Option(
            "--max-bytes",
            min=0,
            help="Byte quota: most bytes its tasks hold (payloads, kept results); 0: the"
            " queue's default.",
        ),
    ] = None,
) -> None:
    """Set a user's weight, in-flight cap, backlog quota, group, share of worker time and
    byte quota (only those given change)."""
    given = (weight, max_in_flight, max_queued, group, floor, ceiling, max_bytes)
    if all(v is None for v in given):
        fail("give --weight, --max-in-flight, --max-queued, --group, --floor, --ceiling or"
             " --max-bytes", EXIT_USAGE)  # fmt: skip
    with open_queue(ctx) as q:
        q.set_user_limits(
            user, weight=weight, max_in_flight=max_in_flight, max_queued=max_queued, group=group,
            floor=floor, ceiling=ceiling, max_bytes=max_bytes,
        )  # fmt: skip
    between = []
    if max_queued is not None:
        between.append(
            f"at most {max_queued} queued" if max_queued else "the queue's default backlog quota"
        )
    if max_bytes is not None:
        between.append(
            f"at most {max_bytes:,} bytes waiting"
            if max_bytes
            else "the queue's default byte quota"
        )
    if group is not None:
        between.append(f"in group {group}" if group else "in no group")
    stdout.print(f"{user}: {_said(weight, max_in_flight, floor, ceiling, between)}")


def group_limits(
    ctx: typer.Context,
    group: Annotated[str, typer.Argument(help="Group id.")],
    weight: Annotated[
        int | None,
        typer.Option(min=1, max=1000, help="Its tenants' share together, against a group of 1."),
    ] = None,
    floor: Floor = None,
    ceiling: Ceiling = None,
    max_in_flight: MaxInFlight = None,
    max_queued: Annotated[
        int | None,
        typer.Option(
            "--max-queued",
            min=0,
            help="Backlog quota: most of its tenants' tasks queued, scheduled or deferred"
            " together; 0: none.",
        ),
    ] = None,
) -> None:
    """Set a group's weight, share of worker time, in-flight cap and backlog quota (only
    those given change); with none given, show them and the group's backlog."""
    if all(v is None for v in (weight, floor, ceiling, max_in_flight, max_queued)):
        with open_queue(ctx) as q:
            (load,) = q.group_loads([group])
        stdout.print(f"group {group}: {_group_said(load)}")
        return
    with open_queue(ctx) as q:
        q.set_group_limits(
            group, weight=weight, floor=floor, ceiling=ceiling, max_in_flight=max_in_flight,
            max_queued=max_queued,
        )  # fmt: skip
    between = []
    if max_queued is not None:
        between.append(f"at most {max_queued} queued" if max_queued else "no backlog quota")
    stdout.print(f"group {group}: {_said(weight, max_in_flight, floor, ceiling, between)}")


def queues(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """The queues on the server, with their tasks per state.

    A queue is listed from its first push, or its first worker, until it is purged.
    """
    from fairque import FairQueue

    with open_queue(ctx) as q:
        rows = [(name, FairQueue.open(q.client, name).stats(user_limit=0)) for name in q.queues()]
    if as_json:
        docs = [
            {"queue": name, "counts": {s.value: n for s, n in stats.counts.items()}}
            for name, stats in rows
        ]
        stdout.out(json.dumps(docs), highlight=False)
        return
    table = Table(title=f"queues ({len(rows)})", title_justify="left")
    table.add_column("queue", no_wrap=True)
    for state in TaskState:
        table.add_column(state.value.lower(), justify="right")
    for name, stats in rows:
        table.add_row(name, *(str(stats.counts.get(state, 0)) for state in TaskState))
    stdout.print(table)
    if not rows:
        stderr.print("no queue yet: a queue is listed from its first push or its first worker")


def register(app: typer.Typer) -> None:
    """Add ``result``, ``users``, ``limits``, ``group-limits`` and ``queues`` to ``app``."""
    for command in (result, users, limits, queues):
        app.command()(shared(command))
    app.command("group-limits")(shared(group_limits))
