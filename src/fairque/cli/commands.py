"""The ``fairque`` command: run workers, enqueue, inspect, operate, demo."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Annotated, Any, NoReturn

import typer
from typer.exceptions import TyperException

from fairque.cli import admin
from fairque.cli import render as out
from fairque.cli import tasks as task_commands
from fairque.cli.base import (
    EXIT_FAILURE,
    EXIT_USAGE,
    Common,
    ConfigOption,
    QueueOption,
    UrlOption,
    VerboseOption,
    VersionOption,
    configure_logging,
    fail,
    guarded,
    interruptible,
    log,
    no_task,
    open_queue,
    open_queues,
    say_error,
    server_url,
    settings,
    shared,
    stderr,
    stdout,
)
from fairque.client.base import PushCheck
from fairque.client.queue import FairQueue
from fairque.common import urls
from fairque.core.options import QueueOptions
from fairque.errors import ConfigError, FairqueError, ValidationError
from fairque.models import QueueStats, WorkerInfo

# the helpers other command modules (fairque.cli.service) take from here
__all__ = [
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "app",
    "fail",
    "guarded",
    "main",
    "open_queue",
    "say_error",
    "server_url",
    "settings",
    "shared",
    "stderr",
    "stdout",
]

app = typer.Typer(
    name="fairque",
    help="Fair, multi-tenant task queue on Redis, Valkey and Redis Cluster.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    epilog="Exit codes: 0 success; 1 the command failed (server unreachable or refusing, "
    "unknown task, a state that does not allow it); 2 bad usage, input or configuration "
    "(nothing changed).",
)


@app.callback()
def options(
    ctx: typer.Context,
    url: UrlOption = None,
    queue: QueueOption = None,
    config: ConfigOption = None,
    verbose: VerboseOption = False,
    version: VersionOption = False,
) -> None:
    """Shared options; precedence is CLI > environment > YAML > defaults."""
    urls.remember_secrets(url)
    configure_logging(logging.DEBUG if verbose else logging.INFO)
    common = Common(url=url, queue=None, config=config, verbose=verbose)
    common.set_queues(queue)
    ctx.obj = common


@app.command()
@shared
def worker(
    ctx: typer.Context,
    processes: Annotated[int, typer.Option(min=1, max=256, help="Worker processes.")] = 1,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Tasks run at once per process.")
    ] = None,
    worker_id: Annotated[str | None, typer.Option("--id", help="Worker id.")] = None,
    imports: Annotated[
        list[str] | None, typer.Option("--import", "-i", help="Module registering handlers.")
    ] = None,
    wait_for_server: Annotated[
        float | None,
        typer.Option(
            "--wait-for-server",
            min=0,
            metavar="SECONDS",
            help="Wait this long for an unreachable server at start (default 30).",
        ),
    ] = None,
    log_level: Annotated[
        str | None,
        typer.Option("--log-level", metavar="LEVEL", help="DEBUG, INFO (default), WARNING, ERROR."),
    ] = None,
    log_format: Annotated[
        str | None,
        typer.Option("--log-format", metavar="FORMAT", help="text (default) or json lines."),
    ] = None,
    burst: Annotated[
        bool,
        typer.Option("--burst", help="Exit (code 0) once no task is ready, running or unreported."),
    ] = False,
    scheduler: Annotated[
        bool,
        typer.Option(
            "--scheduler",
            help="Also fire the queues' schedules, as 'fairque scheduler' does (one leader "
            "among all schedulers).",
        ),
    ] = False,
) -> None:
    """Run worker processes until SIGTERM/SIGINT (a second signal stops at once).

    Serves one queue, or several: repeat --queue (or set worker.queues in --config,
    FAIRQUE_WORKER__QUEUES='["a", "b"]'); it is fair across the queues as well as
    within each, and every queue takes the queue: section's options.

    Needs a server (--url, FAIRQUE_URL or redis: in --config) and at least one
    handler (--import MODULE, or worker.imports). At start it logs the task names
    it handles and the users it serves. With --processes, one Ctrl-C (or SIGTERM
    to the supervisor) drains every child gracefully; the server URL reaches the
    children through their environment.
    """
    from fairque.cli.run import run_worker, set_up_logging

    common: Common = ctx.obj
    set_up_logging(log_level, log_format, common.verbose)
    overrides: dict[str, Any] = {
        "max_concurrent_tasks": concurrency,
        "id": worker_id,
        "wait_for_server_seconds": wait_for_server,
        "burst": burst or None,  # None: the file's or the environment's value stands
    }
    if imports:
        overrides["imports"] = imports
    cfg = settings(ctx, several_queues=True, **overrides)
    level = "DEBUG" if common.verbose and log_level is None else log_level
    logs = [] if level is None else ["--log-level", level]
    logs += [] if log_format is None else ["--log-format", log_format]
    if cfg.constraints:
        from fairque.cli.constraint import apply_configured

        apply_configured(ctx, cfg)
    if scheduler:
        from fairque.cli.run import import_worker
        from fairque.cli.schedule import embedded_scheduler

        import_worker(cfg.worker.imports)  # before a second thread runs
        with embedded_scheduler(cfg, common.queues):
            run_worker(common, cfg, processes, logs)
        return
    run_worker(common, cfg, processes, logs)


@app.command()
@shared
def enqueue(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="Task name.")] = None,
    payload: Annotated[str | None, typer.Argument(help="Payload as JSON.")] = None,
    user: Annotated[str | None, typer.Option("--user", help="User (tenant) id.")] = None,
    priority: Annotated[
        int | None, typer.Option(help="1..5, or 6 for the critical lane.", show_default="3")
    ] = None,
    delay: Annotated[float | None, typer.Option(help="Seconds before it may run.")] = None,
    task_id: Annotated[str | None, typer.Option("--task-id", help="Caller-chosen id.")] = None,
    max_retries: Annotated[int | None, typer.Option("--max-retries")] = None,
    cost: Annotated[
        int | None,
        typer.Option(help="Slots and rate tokens it takes (1..1000).", show_default="1"),
    ] = None,
    dedup_key: Annotated[
        str | None, typer.Option("--dedup-key", help="Merge into its waiting task of this key.")
    ] = None,
    dedup_mode: Annotated[str | None, typer.Option(help="keep, replace or debounce.")] = None,
    debounce: Annotated[float | None, typer.Option(help="Debounce window (seconds).")] = None,
    debounce_max: Annotated[
        float | None, typer.Option("--debounce-max", help="Longest debounced wait (seconds).")
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", "-f", help="JSON lines, one task per line ('-': standard input)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help='Print {"enqueued": n, "task_ids": [...]}.')
    ] = False,
) -> None:
    """Enqueue one task, or every task of a JSON-lines file: all or nothing.

    Each line of a file is one JSON object in the HTTP API's task shape (blank lines
    are skipped): name and user_id (required), payload, priority (1..5 or
    "critical"), delay_seconds or execute_after (ISO 8601), task_id, depends_on,
    on_dependency_failure, max_retries, timeout_seconds, keep_result,
    result_ttl_seconds, cost, dedup_key, dedup_mode, debounce_seconds,
    debounce_max_seconds. Numbers are never read from strings. Example:
    {"name": "send_email", "user_id": "alice", "payload": {"to": "a@example.com"}}

    The whole file is checked before anything is sent (every problem is reported as
    file:line: field: problem, exit code 2) and then pushed in one atomic batch:
    every task or none. A file of more than 10,000 tasks or 64 MiB is refused.
    """
    dedup = {"dedup_key": dedup_key, "dedup_mode": dedup_mode, "debounce_seconds": debounce,
             "debounce_max_seconds": debounce_max}  # fmt: skip
    single = (payload, user, priority, delay, task_id, max_retries, cost, *dedup.values())
    if file is not None and (name is not None or any(v is not None for v in single)):
        fail("give a task (name and options) or --file, not both", EXIT_USAGE)
    if file is None and (name is None or user is None):
        fail("a task name and --user are required (or --file)", EXIT_USAGE)
    cfg = settings(ctx)
    try:
        check = PushCheck(cfg.queue.name, QueueOptions.build(**cfg.queue.options()))
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    source = None if file is None else str(file)
    if delay is not None and math.isfinite(delay) and delay.is_integer():
        delay = int(delay)  # shown as written (-1, not -1.0), as the file form shows it
    if file is None:
        item = {
            "name": name, "user_id": user, "priority": priority, "delay": delay,
            "task_id": task_id, "max_retries": max_retries, "cost": cost, **dedup,
        }  # fmt: skip
        batch = out.TaskBatch()
        try:
            item["payload"] = None if payload is None else out.parse_json(payload)
        except ValueError as exc:
            batch.problems.append(out.Problem("payload", str(exc)))
        checked = out.check_item({k: v for k, v in item.items() if v is not None}, check)
        if isinstance(checked, list):
            batch.problems.extend(checked)
        elif not batch.problems:
            batch.add(*checked[:2], 1, checked[2])
    else:
        try:
            batch = out.read_task_file(file, check)
        except OSError as exc:
            fail(f"cannot read {file}: {exc.strerror or exc}", EXIT_USAGE)
    if batch.problems:
        refuse(batch.problems, source)
    with open_queue(ctx, cfg) as q:
        try:
            pushed = q.push_many(batch.tasks, delays=batch.delays)
        except FairqueError as exc:
            if urls.explain(exc, cfg.redis.to_url()) is not None:
                raise  # the server's answer to the URL: told as every command tells it
            where = f"{source}: " if source is not None else ""
            code = EXIT_USAGE if isinstance(exc, ValidationError) else EXIT_FAILURE
            fail(f"{where}{type(exc).__name__}: {exc}; nothing was enqueued", code)
    ids = [t.task_id for t in pushed]
    if as_json:
        stdout.print_json(json.dumps({"enqueued": len(ids), "task_ids": ids}))
    elif file is None:
        stdout.print(ids[0], highlight=False)
    else:
        stdout.print(f"enqueued {len(ids)} task(s) from {file}", highlight=False)


def refuse(problems: list[out.Problem], source: str | None) -> NoReturn:
    """Report every problem of a task or file (the first few) and exit with code 2."""
    for problem in problems[: out.MAX_PROBLEMS_SHOWN]:
        say_error(problem.render(source))
    if source is not None:
        hidden = len(problems) - out.MAX_PROBLEMS_SHOWN
        more = f" ({hidden} not shown)" if hidden > 0 else ""
        say_error(f"{source}: {len(problems)} problem(s){more}; nothing was enqueued")
    raise typer.Exit(EXIT_USAGE)


@app.command()
@shared
def status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    users: Annotated[int, typer.Option(min=1, help="Busiest users to show.")] = 10,
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="Refresh in place until Ctrl-C.")
    ] = False,
    interval: Annotated[
        float, typer.Option(min=0.1, max=3600, metavar="SECONDS", help="Refresh period.")
    ] = 2.0,
) -> None:
    """Counts per state, the busiest users and the live workers.

    With several --queue (or worker.queues in --config), each queue in turn, and
    the workers' table says which of those queues each worker serves; --json then
    prints {"queues": [one document per queue]}. With --watch the view refreshes
    in place every --interval seconds until Ctrl-C (exit code 0); with --json too,
    one JSON document per line each time.
    """
    cfg = settings(ctx, several_queues=True)
    with open_queues(ctx, cfg) as queues:
        if not watch:
            show_status(queues, as_json, users)
            return
        from rich.console import Group
        from rich.live import Live

        with contextlib.suppress(KeyboardInterrupt), interruptible() as stop:
            while as_json and not stop.requested:
                show_status(queues, as_json, users, one_line=True)
                time.sleep(interval)
            if as_json:
                return
            with Live(console=stdout, auto_refresh=False) as live:
                while not stop.requested:
                    views = [
                        out.status_view(stdout, stats, workers, users, serves)
                        for stats, workers, serves in snapshot(queues)
                    ]
                    live.update(Group(*views), refresh=True)
                    time.sleep(interval)


Snapshot = tuple[QueueStats, list[WorkerInfo], "dict[str, list[str]] | None"]


def snapshot(queues: list[FairQueue]) -> list[Snapshot]:
    """Each queue's stats and workers; with several queues, which of them each
    worker (by id) is registered in."""
    read = [(q.stats(user_limit=1000), q.workers()) for q in queues]
    if len(queues) == 1:
        # one queue shown: its workers that serve others too say which
        stats, workers = read[0]
        more = {w.worker_id: w.queues for w in workers if len(w.queues) > 1}
        return [(stats, workers, more or None)]
    serves: dict[str, list[str]] = {}
    for q, (_, workers) in zip(queues, read, strict=True):
        for w in workers:
            serves.setdefault(w.worker_id, []).append(q.queue)
    return [(stats, workers, serves) for stats, workers in read]


def show_status(
    queues: list[FairQueue], as_json: bool, users: int, *, one_line: bool = False
) -> None:
    """Print the queues' status once (``--json``: a document, on one line if asked)."""
    taken = snapshot(queues)
    report = queues[0].memory_report()
    if as_json:
        docs = [
            {
                "stats": stats.model_dump(mode="json"),
                "workers": [w.model_dump(mode="json") for w in workers],
            }
            for stats, workers, _ in taken
        ]
        doc: dict[str, Any] = docs[0] if len(docs) == 1 else {"queues": docs}
        if report is not None:
            doc["server"] = out.memory_doc(report)
        if one_line:
            stdout.out(json.dumps(doc), highlight=False)
        else:
            stdout.print_json(json.dumps(doc))
        return
    for stats, workers, serves in taken:
        out.print_status(stdout, stats, workers, users, serves)
    if report is not None:
        out.print_memory(stdout, report)
    empty = [stats.queue for stats, workers, _ in taken if stats.total == 0 and not workers]
    if empty:
        known = queues[0].queues()
        unknown = [name for name in empty if name not in known]
        if unknown and known:
            shown = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
            stderr.print(
                f"no queue named {', '.join(map(repr, unknown))} on the server; it holds "
                f"{shown} (pass --queue NAME; `fairque queues` lists them)",
                highlight=False,
            )


@app.command("task")
@shared
def show_task(
    ctx: typer.Context,
    task_id: Annotated[str, typer.Argument(help="Task id.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Show one task."""
    with open_queue(ctx) as q:
        task = q.get(task_id)
    if task is None:
        no_task(task_id, q.queue)
    if as_json:
        stdout.print_json(task.model_dump_json())
        return
    out.print_task(stdout, task)


@app.command()
@shared
def purge(
    ctx: typer.Context,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Delete every task and all state of the queue."""
    with open_queue(ctx) as q:
        if not yes and not typer.confirm(f"Delete every task of queue {q.queue!r}?"):
            fail("aborted")
        deleted = q.purge()
    stdout.print(f"purged {deleted} task(s) from {q.queue!r}")


@app.command()
@shared
def demo(
    ctx: typer.Context,
    flood: Annotated[int, typer.Option(min=1, help="Tasks of the noisy tenant.")] = 2000,
    tenants: Annotated[int, typer.Option(min=1, max=50, help="Small tenants.")] = 8,
    tasks_per_tenant: Annotated[int, typer.Option("--tasks-per-tenant", min=1)] = 10,
    work_ms: Annotated[float, typer.Option("--work-ms", min=0, help="Work per task.")] = 20.0,
    concurrency: Annotated[int, typer.Option(min=1)] = 4,
    quick: Annotated[bool, typer.Option(help="A short run (a few seconds).")] = False,
    ui: Annotated[bool, typer.Option(help="Serve the dashboard (/ui) on 127.0.0.1.")] = False,
    ui_port: Annotated[int, typer.Option(min=0, max=65535, help="Its port (0: any).")] = 8000,
    ui_linger: Annotated[
        float | None,
        typer.Option(min=0, help="Keep it up this long after.", show_default="until Ctrl-C"),
    ] = None,
) -> None:
    """Show fairness: a noisy tenant floods the queue; small tenants are still served fast."""
    from fairque.cli.demo import DemoPlan, run_demo

    if quick:
        flood, tenants, tasks_per_tenant, work_ms = min(flood, 400), min(tenants, 4), 5, 10.0
    cfg = settings(ctx)
    plan = DemoPlan(flood, tenants, tasks_per_tenant, work_ms / 1000, concurrency)
    with server_url(cfg, embedded_ok=True) as url, guarded(url):
        run_demo(url, plan, stdout, ui_port if ui else None, ui_linger)


admin.register(app)
task_commands.register(app)


def _as_interrupt(signum: int, frame: FrameType | None) -> None:
    """``SIGTERM`` where no command handles it: what ``SIGINT`` does now (``asyncio.run``
    cancels its task), else a ``KeyboardInterrupt``."""
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not signal.default_int_handler:
        handler(signal.SIGINT, frame)
        return
    raise KeyboardInterrupt


def main() -> None:
    """Entry point of the ``fairque`` script: every failure ends in one ``error:`` line.

    ``SIGTERM`` is taken as ``SIGINT`` is (``_as_interrupt``, where no command handles
    it itself), so every command's cleanup runs: an embedded server is stopped,
    worker processes are waited for. Python's default would end the process at once.
    """
    previous = signal.signal(signal.SIGTERM, _as_interrupt)
    try:
        code = app(standalone_mode=False)
    except typer.Abort:  # interrupted (Ctrl-C, SIGTERM) where no command handles it
        sys.exit(130)
    except TyperException as exc:  # a bad option or argument: one line too, exit 2
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        exit_code = int(getattr(exc, "exit_code", EXIT_USAGE))
        if exit_code == EXIT_USAGE:
            ctx = getattr(exc, "ctx", None)
            message += f" (see {ctx.command_path if ctx is not None else 'fairque'} --help)"
        say_error(message)
        sys.exit(exit_code)
    except Exception as exc:  # a failure no command foresaw: still no traceback
        log.debug("unexpected failure", exc_info=True)
        say_error(f"unexpected {type(exc).__name__}: {exc} (--verbose shows the traceback)")
        sys.exit(EXIT_FAILURE)
    finally:
        signal.signal(signal.SIGTERM, previous)
    sys.exit(code if isinstance(code, int) else 0)
