"""Schedules on the command line: ``fairque schedule add|list|show|remove|pause|resume``
and ``fairque scheduler``, the process that fires them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any

import typer
from rich.table import Table

from fairque.cli.base import (
    EXIT_USAGE,
    fail,
    guarded,
    open_queue,
    server_url,
    settings,
    shared,
    stderr,
    stdout,
)
from fairque.cli.render import parse_json
from fairque.config import Settings
from fairque.errors import ConfigError, ScheduleExists, ValidationError
from fairque.schedules.model import Schedule

schedule_app = typer.Typer(
    name="schedule",
    help="Add, list, show, pause, resume and remove the queue's schedules "
    "(fired by 'fairque scheduler' or 'fairque worker --scheduler').",
    no_args_is_help=True,
)

Policy = Annotated[
    str,
    typer.Option(
        "--misfire",
        metavar="POLICY",
        help="Slots found late: run_once (fire the latest), skip (fire it only within "
        "--grace), catch_up (fire each, at most --catch-up-limit).",
    ),
]


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _timing(s: Schedule) -> str:
    if s.cron is not None:
        return f"cron '{s.cron}' ({s.timezone})"
    return f"every {s.interval_seconds:g} s"


def add(
    ctx: typer.Context,
    schedule_id: Annotated[str, typer.Argument(metavar="ID", help="Schedule id.")],
    name: Annotated[str, typer.Option("--name", help="Task name (its handler).")],
    user: Annotated[str, typer.Option("--user", help="User (tenant) the tasks belong to.")],
    cron: Annotated[
        str | None, typer.Option(help="Cron expression, e.g. '0 3 * * *' (croniter syntax).")
    ] = None,
    every: Annotated[
        float | None,
        typer.Option(min=0.1, metavar="SECONDS", help="Fixed interval instead of --cron."),
    ] = None,
    tz: Annotated[
        str, typer.Option("--tz", help="Time zone a cron expression is read in.")
    ] = "UTC",
    payload: Annotated[str | None, typer.Option(help="Task payload as JSON.")] = None,
    priority: Annotated[
        int, typer.Option(help="1..5, or 6 for the critical lane.", show_default=True)
    ] = 3,
    max_retries: Annotated[int | None, typer.Option("--max-retries")] = None,
    timeout: Annotated[
        float | None, typer.Option(metavar="SECONDS", help="Handler timeout.")
    ] = None,
    cost: Annotated[
        int,
        typer.Option(help="Slots and rate tokens each task takes (1..1000)."),
    ] = 1,
    start_at: Annotated[
        datetime | None,
        typer.Option("--start-at", help="No slot before this (UTC unless it names a zone)."),
    ] = None,
    misfire: Policy = "run_once",
    grace: Annotated[
        float, typer.Option("--grace", min=0, metavar="SECONDS", help="See --misfire.")
    ] = 60.0,
    catch_up_limit: Annotated[
        int, typer.Option("--catch-up-limit", min=1, max=10_000, help="See --misfire.")
    ] = 100,
    paused: Annotated[bool, typer.Option("--paused", help="Add it paused.")] = False,
    replace: Annotated[
        bool, typer.Option("--replace", help="Replace a schedule with this id if one exists.")
    ] = False,
) -> None:
    """Add a schedule: a task enqueued at each slot of a cron expression or interval.

    Each slot's task has the id ID@<slot time in UTC>, so a slot is enqueued once
    however many schedulers run. Adding the same definition again changes nothing;
    a different one under an existing id is refused unless --replace is given.
    Cron expressions follow the wall clock of --tz: a local time skipped by a
    daylight-saving change fires just after it, a repeated one fires once.
    """
    fields: dict[str, Any] = {
        "schedule_id": schedule_id, "name": name, "user_id": user, "cron": cron,
        "interval_seconds": every, "timezone": tz, "priority": priority,
        "max_retries": max_retries, "timeout": timeout, "cost": cost, "start_at": start_at,
        "misfire": misfire, "misfire_grace_seconds": grace,
        "catch_up_limit": catch_up_limit, "enabled": not paused,
    }  # fmt: skip
    if payload is not None:
        try:
            fields["payload"] = parse_json(payload)
        except ValueError as exc:
            fail(f"--payload is not valid JSON: {exc}", EXIT_USAGE)
    try:
        schedule = Schedule(**fields)
    except ValidationError as exc:
        fail(str(exc), EXIT_USAGE)
    with open_queue(ctx) as q:
        try:
            stored = q.add_schedule(schedule)
        except ScheduleExists as exc:
            if not replace:
                fail(f"{exc} (--replace replaces it)")
            stored = q.update_schedule(schedule)
    stdout.print(f"{stored.schedule_id}: {_timing(stored)}; next {_when(stored.next_fire_at)}")


def list_(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """The queue's schedules: the soonest next slot first, paused ones last."""
    with open_queue(ctx) as q:
        rows = q.schedules()
        queue = q.queue
    if as_json:
        stdout.out(json.dumps([s.model_dump(mode="json") for s in rows]), highlight=False)
        return
    table = Table(title=f"schedules of {queue!r} ({len(rows)})", title_justify="left")
    for column in ("id", "timing", "task", "user", "misfire", "state", "next", "last"):
        table.add_column(column, overflow="fold")
    table.add_column("fired", justify="right")
    table.add_column("skipped", justify="right")
    for s in rows:
        state = "enabled" if s.enabled else "paused"
        table.add_row(
            s.schedule_id, _timing(s), s.name, s.user_id, s.misfire, state,
            _when(s.next_fire_at), _when(s.last_fire_at), str(s.fired), str(s.skipped),
        )  # fmt: skip
    stdout.print(table)


def show(
    ctx: typer.Context,
    schedule_id: Annotated[str, typer.Argument(metavar="ID", help="Schedule id.")],
) -> None:
    """One schedule as JSON (exit code 1 when there is none)."""
    with open_queue(ctx) as q:
        found = q.get_schedule(schedule_id)
        if found is None:
            fail(f"no schedule {schedule_id!r} in queue {q.queue!r}")
    stdout.out(found.model_dump_json(), highlight=False)


def remove(
    ctx: typer.Context,
    schedule_id: Annotated[str, typer.Argument(metavar="ID", help="Schedule id.")],
) -> None:
    """Remove a schedule (tasks it already enqueued stay). Exit code 1 when there is none."""
    with open_queue(ctx) as q:
        if not q.remove_schedule(schedule_id):
            fail(f"no schedule {schedule_id!r} in queue {q.queue!r}")
    stdout.print(f"{schedule_id}: removed")


def pause(
    ctx: typer.Context,
    schedule_id: Annotated[str, typer.Argument(metavar="ID", help="Schedule id.")],
) -> None:
    """Stop a schedule from firing until it is resumed (exit code 1: no such schedule)."""
    with open_queue(ctx) as q:
        q.pause_schedule(schedule_id)
    stdout.print(f"{schedule_id}: paused")


def resume(
    ctx: typer.Context,
    schedule_id: Annotated[str, typer.Argument(metavar="ID", help="Schedule id.")],
) -> None:
    """Let a paused schedule fire again; the slots that passed while paused do not fire."""
    with open_queue(ctx) as q:
        s = q.resume_schedule(schedule_id)
    stdout.print(f"{schedule_id}: enabled; next {_when(s.next_fire_at)}")


def scheduler(
    ctx: typer.Context,
    lock_ttl: Annotated[
        float | None,
        typer.Option(
            "--lock-ttl",
            min=0.1,
            max=3600,
            metavar="SECONDS",
            help="Leader lock TTL: a dead leader is replaced within it.",
            show_default="scheduler.lock_ttl_seconds, 10",
        ),
    ] = None,
) -> None:
    """Fire the queue's schedules until SIGTERM/SIGINT.

    Run as many as you like: one leads (it holds a lock it renews every third of
    --lock-ttl), the others stand by and take over within one TTL of a leader's
    death, or at once when it stops. Each slot is enqueued once, by whichever
    scheduler leads then.
    """
    from fairque.client.aio import AsyncFairQueue
    from fairque.schedules.leader import Scheduler

    cfg = settings(ctx)
    ttl = cfg.scheduler.lock_ttl_seconds if lock_ttl is None else lock_ttl
    with server_url(cfg, embedded_ok=False) as url, guarded(url):
        try:
            q = AsyncFairQueue.from_url(
                url, cfg.queue.name, cluster=cfg.redis.cluster, **cfg.queue.options()
            )
        except ConfigError as exc:
            fail(str(exc), EXIT_USAGE)
        runner = Scheduler(q, lock_ttl=ttl)
        stderr.print(
            f"fairque scheduler {runner.token} for queue {cfg.queue.name!r}: lock TTL {ttl:g} s"
        )
        asyncio.run(_run(runner))


async def _run(runner: Any) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, runner.stop)
    try:
        await runner.run()
    finally:
        await runner.queue.close()


def register(app: typer.Typer) -> None:
    """Add ``schedule ...`` and ``scheduler`` to ``app``."""
    for command, name in (
        (add, "add"), (list_, "list"), (show, "show"), (remove, "remove"), (pause, "pause"),
        (resume, "resume"),
    ):  # fmt: skip
        schedule_app.command(name)(shared(command))
    app.add_typer(schedule_app)
    app.command()(shared(scheduler))


@contextlib.contextmanager
def embedded_scheduler(cfg: Settings, queues: list[str]) -> Iterator[None]:
    """Fire the schedules of ``queues`` (else the worker's queues) on a thread while
    the block runs (``fairque worker --scheduler``)."""
    from fairque.schedules.leader import SchedulerThread

    if not cfg.redis.configured:
        fail("--scheduler needs a server: pass --url, set FAIRQUE_URL or redis.url", EXIT_USAGE)
    url = cfg.redis.to_url()
    with guarded(url):
        thread = SchedulerThread(
            url, queues or cfg.worker_queues, cluster=cfg.redis.cluster,
            lock_ttl=cfg.scheduler.lock_ttl_seconds, **cfg.queue.options(),
        )  # fmt: skip
    with thread:
        yield
