"""``fairque worker``: start-up checks, the start banner, log formats, processes."""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import datetime, timezone
from typing import Any

import typer

from fairque.cli.base import (
    EXIT_USAGE,
    LOG_FORMAT,
    Common,
    configure_logging,
    fail,
    guarded,
    import_handlers,
    server_url,
    stderr,
)
from fairque.cli.render import served_users
from fairque.client.base import is_cluster_url
from fairque.common import urls
from fairque.config import Settings, WorkerConfig

log = logging.getLogger("fairque.worker")

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the traceback if any.

    Every string passes through ``redact_text``, so no password reaches the log.
    """

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": urls.redact_text(record.getMessage()),
        }
        if record.exc_info:
            doc["traceback"] = urls.redact_text(self.formatException(record.exc_info))
        return json.dumps(doc, ensure_ascii=False)


def set_up_logging(level: str | None, fmt: str | None, verbose: bool) -> None:
    """Apply ``--log-level`` / ``--log-format`` (``--verbose`` means DEBUG)."""
    name = "DEBUG" if verbose and level is None else (level or "INFO").upper()
    if name not in LOG_LEVELS:
        fail(f"--log-level must be one of {', '.join(LOG_LEVELS)}, got {level!r}", EXIT_USAGE)
    if (fmt or "text") not in LOG_FORMATS:
        fail(f"--log-format must be text or json, got {fmt!r}", EXIT_USAGE)
    formatter = JsonFormatter() if fmt == "json" else urls.RedactingFormatter(LOG_FORMAT)
    configure_logging(getattr(logging, name), formatter)


def banner(cfg: Settings, url: str, names: list[str]) -> str:
    """The start-up line: worker, queue, server, concurrency, task names, users."""
    w = cfg.worker
    burst = "; burst: exits once no task is ready or running" if w.burst else ""
    serves = served_users(w.assigned_users, w.steal_targets)
    served = cfg.worker_queues
    queues = f"queue {served[0]!r}"
    if len(served) > 1:
        queues = f"queues {', '.join(repr(n) for n in served)} (round robin across them)"
    return (
        f"worker {w.id} on {queues} at {urls.redact_url(url)}: "
        f"{w.max_concurrent_tasks} task(s) at a time; handles {len(names)} task name(s): "
        f"{', '.join(sorted(names))}; serves {serves}{burst}"
    )


def handler_names(modules: list[str]) -> list[str]:
    """Import the handler modules; the task names registered (exit 2 on a bad import)."""
    import_handlers(modules)
    from fairque.worker import default_registry

    return list(default_registry)


def import_worker(modules: list[str]) -> None:
    """Import the handler modules and every module the worker runs, on this thread.

    ``fairque worker --scheduler`` calls it before the scheduler's thread starts, so
    that no module is first imported while two threads run: the worker once failed
    at start with "'NoneType' object has no attribute '__dict__'" (Python 3.11's
    dataclasses not finding the module being imported) while importing its modules
    as the scheduler's thread fired.
    """
    handler_names(modules)  # fairque.worker, and with it every module the loop uses
    import fairque.worker.supervisor  # noqa: F401  (run_worker's lazy import)


def require_handlers(names: list[str], modules: list[str]) -> None:
    """Exit 2 when no handler is registered: every task leased would be refused."""
    if not names:
        where = f" (imported: {', '.join(modules)})" if modules else ""
        fail(
            "no task handlers are registered" + where + ": pass --import MODULE (or "
            "worker.imports in --config) naming the module(s) whose functions carry "
            "@fairque.task",
            EXIT_USAGE,
        )


def wait_for_server(url: str, config: WorkerConfig, *, asking: bool) -> bool:
    """Whether ``url`` is a cluster, asked once the server answers.

    Waits up to ``wait_for_server_seconds`` as the worker would (capped backoff, one
    line when waiting starts), so the set-up is judged against a live server.

    Raises:
        redis.ConnectionError: no answer in time.
    """
    from fairque.worker.link import Link, wait_for_probe

    link = Link(f"worker {config.id}", log)
    wait = config.wait_for_server_seconds
    first = f"cannot reach the server; waiting up to {wait:g}s"
    if asking:
        first = f"waiting for the server to ask whether it is a cluster (up to {wait:g}s)"
    return wait_for_probe(lambda: is_cluster_url(url), link, wait, first)


def run_worker(common: Common, cfg: Settings, processes: int, log_args: list[str]) -> None:
    """Check the set-up, print the banner, then serve (or supervise ``processes``)."""
    with server_url(cfg, embedded_ok=False) as url:
        names = handler_names(cfg.worker.imports)
        if processes > 1:
            require_handlers(names, cfg.worker.imports)
            from fairque.worker.supervisor import run_processes, worker_command

            base = [arg for name in cfg.worker_queues for arg in ("--queue", name)]
            if common.config is not None:
                base += ["--config", str(common.config)]
            extra = ["--concurrency", str(cfg.worker.max_concurrent_tasks)]
            extra += ["--wait-for-server", f"{cfg.worker.wait_for_server_seconds:g}"]
            for module in cfg.worker.imports:
                extra += ["--import", module]
            extra += log_args
            commands = [
                [*worker_command(base, f"{cfg.worker.id}-{i + 1}"), *extra]
                for i in range(processes)
            ]
            # the URL may hold a password: environment, never the command line (``ps``)
            env = {"FAIRQUE_URL": url}
            if cfg.worker.burst:
                env["FAIRQUE_WORKER__BURST"] = "true"
            raise typer.Exit(run_processes(commands, env=env))
        from fairque.client.aio import AsyncFairQueue, open_async
        from fairque.worker import Worker
        from fairque.worker.supervisor import supervisor_pid

        with guarded(url):
            probed = wait_for_server(url, cfg.worker, asking=cfg.redis.cluster is None)
            cluster = probed if cfg.redis.cluster is None else cfg.redis.cluster
            require_handlers(names, cfg.worker.imports)
            log.info("%s", banner(cfg, url, names))
            options = cfg.queue.options()
            first, *others = cfg.worker_queues
            queue = AsyncFairQueue.from_url(url, first, cluster=cluster, **options)
            # one client (one connection pool) for every queue served, each with its shards
            queues = [
                queue,
                *(open_async(AsyncFairQueue, url, queue.client, name, None, options)
                  for name in others),
            ]  # fmt: skip
            runner = Worker(queues, config=cfg.worker)
            runner.parent_pid = supervisor_pid()
            runner.run()
        if runner.threads_busy:
            # their tasks are back in the queue; the interpreter would wait for the threads
            stderr.print(f"abandoning {runner.threads_busy} handler thread(s) still running")
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
