"""The ``fairque`` command: run workers, enqueue, inspect, operate, demo."""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import math
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn

import redis
import typer
from redis.exceptions import RedisClusterException
from rich.console import Console
from rich.markup import escape

from fairque import urls
from fairque.cli import render as out
from fairque.config import Settings, load_settings
from fairque.errors import ConfigError, FairqueError, ValidationError
from fairque.ops import Operations
from fairque.options import QueueOptions
from fairque.queue import FairQueue, is_cluster_url

app = typer.Typer(
    name="fairque",
    help="Fair, multi-tenant task queue on Redis, Valkey and Redis Cluster.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
stdout = Console(soft_wrap=True)
stderr = Console(stderr=True, soft_wrap=True)

EXIT_FAILURE = 1
EXIT_USAGE = 2
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
log = logging.getLogger("fairque.cli")


@dataclass
class Common:
    """The options every command shares."""

    url: str | None
    queue: str | None
    config: Path | None


def say_error(message: str) -> None:
    """Print ``error: message`` on stderr, credentials hidden, as plain text."""
    stderr.print(f"[bold red]error:[/] {escape(urls.redact_text(message))}", highlight=False)


def fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    """Print ``error: message`` on stderr (credentials hidden) and exit with ``code``."""
    say_error(message)
    raise typer.Exit(code)


@app.callback()
def options(
    ctx: typer.Context,
    url: Annotated[
        str | None, typer.Option("--url", "-u", envvar="FAIRQUE_URL", help="Redis URL.")
    ] = None,
    queue: Annotated[
        str | None, typer.Option("--queue", "-q", envvar="FAIRQUE_QUEUE", help="Queue name.")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", envvar="FAIRQUE_CONFIG", help="YAML settings file."),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Shared options; precedence is CLI > environment > YAML > defaults."""
    urls.remember_secrets(url)
    handler = logging.StreamHandler()
    handler.setFormatter(urls.RedactingFormatter(LOG_FORMAT))
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler])
    ctx.obj = Common(url=url, queue=queue, config=config)


def settings(ctx: typer.Context, **worker: Any) -> Settings:
    """Load settings for a command, turning configuration errors into exit code 2."""
    common: Common = ctx.obj
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
            urls.check_url(url)
        except ConfigError as exc:
            fail(str(exc), EXIT_USAGE)
        yield url
        return
    if not embedded_ok:
        fail("no Redis configured: pass --url, set FAIRQUE_URL or redis.url in --config", 2)
    from fairque.cli.embedded import EmbeddedServer

    try:
        server = EmbeddedServer()
        server.start()
    except (FileNotFoundError, RuntimeError) as exc:
        fail(f"no Redis configured and the embedded server could not start: {exc}")
    stderr.print(
        f"[yellow]No Redis configured: started an embedded Valkey at {server.url}[/] "
        "(private to this process, data is discarded on exit)",
        highlight=False,
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
def guarded(url: str) -> Iterator[None]:
    """Turn server, connection and queue errors into one line and an exit code."""
    try:
        yield
    except (redis.RedisError, RedisClusterException, FairqueError) as exc:
        fail(*describe_failure(exc, url))


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
        return f"cannot connect to {shown}: {exc}", EXIT_FAILURE
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


@app.command()
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
) -> None:
    """Run worker processes until SIGTERM/SIGINT (a second signal stops at once).

    With --processes, one Ctrl-C (or SIGTERM to the supervisor) drains every child
    gracefully; the server URL reaches the children through their environment.
    """
    overrides: dict[str, Any] = {
        "max_concurrent_tasks": concurrency,
        "id": worker_id,
        "wait_for_server_seconds": wait_for_server,
    }
    if imports:
        overrides["imports"] = imports
    cfg = settings(ctx, **overrides)
    with server_url(cfg, embedded_ok=True) as url:
        if processes > 1:
            from fairque.worker.supervisor import run_processes, worker_command

            common: Common = ctx.obj
            base = ["--queue", cfg.queue.name]
            if common.config is not None:
                base += ["--config", str(common.config)]
            extra = ["--concurrency", str(cfg.worker.max_concurrent_tasks)]
            extra += ["--wait-for-server", f"{cfg.worker.wait_for_server_seconds:g}"]
            for module in cfg.worker.imports:
                extra += ["--import", module]
            commands = [
                [*worker_command(base, f"{cfg.worker.id}-{i + 1}"), *extra]
                for i in range(processes)
            ]
            # the URL may hold a password: environment, never the command line (``ps``)
            raise typer.Exit(run_processes(commands, env={"FAIRQUE_URL": url}))
        import_handlers(cfg.worker.imports)
        from fairque.aio import AsyncFairQueue
        from fairque.worker import Worker
        from fairque.worker.link import Link, wait_for_probe
        from fairque.worker.supervisor import supervisor_pid

        with guarded(url):
            cluster = cfg.redis.cluster
            if cluster is None:  # asking the server: wait for it as the worker would
                link = Link(f"worker {cfg.worker.id}", logging.getLogger("fairque.worker"))
                cluster = wait_for_probe(
                    lambda: is_cluster_url(url), link, cfg.worker.wait_for_server_seconds
                )
            queue = AsyncFairQueue.from_url(
                url, cfg.queue.name, cluster=cluster, **cfg.queue.options()
            )
            runner = Worker(queue, config=cfg.worker)
            runner.parent_pid = supervisor_pid()
            runner.run()
        if runner.threads_busy:
            # their tasks are back in the queue; the interpreter would wait for the threads
            stderr.print(f"abandoning {runner.threads_busy} handler thread(s) still running")
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)


@app.command()
def enqueue(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="Task name.")] = None,
    payload: Annotated[str | None, typer.Argument(help="Payload as JSON.")] = None,
    user: Annotated[str | None, typer.Option("--user", help="User (tenant) id.")] = None,
    priority: Annotated[
        int | None, typer.Option(help="1..5, or 6 for the critical lane [default: 3].")
    ] = None,
    delay: Annotated[float | None, typer.Option(help="Seconds before it may run.")] = None,
    task_id: Annotated[str | None, typer.Option("--task-id", help="Caller-chosen id.")] = None,
    max_retries: Annotated[int | None, typer.Option("--max-retries")] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", "-f", help="JSON lines, one task per line ('-': standard input)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help='Print {"enqueued": n, "task_ids": [...]}.')
    ] = False,
) -> None:
    """Enqueue one task, or every task of a JSON-lines file: all or nothing.

    Each line of a file is an object with the fields name, user_id and optionally
    payload, priority, task_id, max_retries, timeout, keep_result, result_ttl,
    delay, depends_on, on_dependency_failure. The whole file is checked before
    anything is sent (every problem is reported as file:line: field: problem, exit
    code 2) and then pushed in one atomic batch: every task or none. A file of more
    than 10,000 tasks or 64 MiB is refused; split it.
    """
    single = (payload, user, priority, delay, task_id, max_retries)
    if file is not None and (name is not None or any(v is not None for v in single)):
        fail("give a task (name and options) or --file, not both", EXIT_USAGE)
    if file is None and (name is None or user is None):
        fail("a task name and --user are required (or --file)", EXIT_USAGE)
    cfg = settings(ctx)
    try:
        ops = Operations(cfg.queue.name, QueueOptions.build(**cfg.queue.options()))
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    source = None if file is None else str(file)
    if delay is not None and math.isfinite(delay) and delay.is_integer():
        delay = int(delay)  # shown as written (-1, not -1.0), as the file form shows it
    if file is None:
        item = {
            "name": name, "user_id": user, "priority": priority, "delay": delay,
            "task_id": task_id, "max_retries": max_retries,
        }  # fmt: skip
        batch = out.TaskBatch()
        try:
            item["payload"] = None if payload is None else out.parse_json(payload)
        except ValueError as exc:
            batch.problems.append(out.Problem("payload", str(exc)))
        checked = out.check_item({k: v for k, v in item.items() if v is not None}, ops)
        if isinstance(checked, list):
            batch.problems.extend(checked)
        elif not batch.problems:
            batch.add(*checked[:2], 1, checked[2])
    else:
        try:
            batch = out.read_task_file(file, ops)
        except OSError as exc:
            fail(f"cannot read {file}: {exc.strerror or exc}", EXIT_USAGE)
    if batch.problems:
        refuse(batch.problems, source)
    with open_queue(ctx, cfg) as q:
        try:
            pushed = q.push_many(batch.tasks, delays=batch.delays)
        except FairqueError as exc:
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
def status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    users: Annotated[int, typer.Option(min=1, help="Busiest users to show.")] = 10,
) -> None:
    """Counts per state, the busiest users and the live workers."""
    with open_queue(ctx) as q:
        stats = q.stats(user_limit=1000)
        workers = q.workers()
    if as_json:
        doc = {
            "stats": stats.model_dump(mode="json"),
            "workers": [w.model_dump(mode="json") for w in workers],
        }
        stdout.print_json(json.dumps(doc))
        return
    out.print_status(stdout, stats, workers, users)


@app.command("task")
def show_task(
    ctx: typer.Context,
    task_id: Annotated[str, typer.Argument(help="Task id.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Show one task."""
    with open_queue(ctx) as q:
        task = q.get(task_id)
    if task is None:
        fail(f"no task {task_id!r} in queue {q.queue!r}")
    if as_json:
        stdout.print_json(task.model_dump_json())
        return
    out.print_task(stdout, task)


@app.command()
def cancel(ctx: typer.Context, task_id: Annotated[str, typer.Argument()]) -> None:
    """Cancel a task that has not ended."""
    with open_queue(ctx) as q:
        if not q.cancel(task_id):
            fail(f"task {task_id} had already ended")
    stdout.print(f"canceled {task_id}")


@app.command()
def retry(ctx: typer.Context, task_id: Annotated[str, typer.Argument()]) -> None:
    """Re-queue a FAILED or CANCELED task with a fresh retry budget."""
    with open_queue(ctx) as q:
        q.retry(task_id)
    stdout.print(f"re-queued {task_id}")


@app.command()
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
def demo(
    ctx: typer.Context,
    flood: Annotated[int, typer.Option(min=1, help="Tasks of the noisy tenant.")] = 2000,
    tenants: Annotated[int, typer.Option(min=1, max=50, help="Small tenants.")] = 8,
    tasks_per_tenant: Annotated[int, typer.Option("--tasks-per-tenant", min=1)] = 10,
    work_ms: Annotated[float, typer.Option("--work-ms", min=0, help="Work per task.")] = 20.0,
    concurrency: Annotated[int, typer.Option(min=1)] = 4,
    quick: Annotated[bool, typer.Option(help="A short run (a few seconds).")] = False,
) -> None:
    """Show fairness: a noisy tenant floods the queue; small tenants are still served fast."""
    from fairque.cli.demo import DemoPlan, run_demo

    if quick:
        flood, tenants, tasks_per_tenant, work_ms = min(flood, 400), min(tenants, 4), 5, 10.0
    cfg = settings(ctx)
    plan = DemoPlan(flood, tenants, tasks_per_tenant, work_ms / 1000, concurrency)
    with server_url(cfg, embedded_ok=True) as url, guarded(url):
        run_demo(url, plan, stdout)


def main() -> None:
    """Entry point of the ``fairque`` script: every failure ends in one ``error:`` line."""
    try:
        app()
    except Exception as exc:  # a failure no command foresaw: still no traceback
        log.debug("unexpected failure", exc_info=True)
        say_error(f"unexpected {type(exc).__name__}: {exc} (--verbose shows the traceback)")
        sys.exit(EXIT_FAILURE)
