"""``fairque demo``: a noisy tenant floods the queue while small tenants stay served."""

from __future__ import annotations

import asyncio
import logging
import signal
import statistics
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from fairque.client.aio import AsyncFairQueue
from fairque.config import WorkerConfig
from fairque.errors import ConfigError
from fairque.models import Task, TaskState
from fairque.worker import Context, Hooks, Outcome, Registry, Worker

NOISY = "noisy-tenant"


@dataclass(frozen=True)
class DemoPlan:
    """What the demo does: flood size, small tenants, work per task, concurrency."""

    flood: int
    tenants: int
    tasks_per_tenant: int
    work_seconds: float
    concurrency: int


@dataclass
class TenantLog:
    """Submission and completion times of one tenant's tasks (monotonic seconds)."""

    submitted: dict[str, float] = field(default_factory=dict)
    done: dict[str, float] = field(default_factory=dict)
    backlog_at_submit: int = 0

    def waits(self) -> list[float]:
        return sorted(self.done[t] - self.submitted[t] for t in self.done if t in self.submitted)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


class Demo:
    """Runs one demo against ``url`` and renders it on ``console``."""

    def __init__(
        self,
        url: str,
        plan: DemoPlan,
        console: Console,
        ui_port: int | None = None,
        ui_linger: float | None = None,
    ) -> None:
        self.url = url
        self.plan = plan
        self.console = console
        #: serve the dashboard on this loopback port while the demo runs (0: any free port)
        self.ui_port = ui_port
        #: keep the dashboard up this long after the demo (None: until Ctrl-C)
        self.ui_linger = ui_linger
        self.ui_address: str | None = None
        self.logs: dict[str, TenantLog] = {}
        self.owner: dict[str, str] = {}
        self.started = time.monotonic()
        #: a SIGTERM or SIGINT ended the demo early (its queue is dropped all the same)
        self.interrupted = False

    def _record_done(self, task_id: str) -> None:
        tenant = self.owner.get(task_id)
        if tenant is not None:
            self.logs[tenant].done[task_id] = time.monotonic()

    async def _submit(self, q: AsyncFairQueue, tenant: str, count: int) -> None:
        tasks = [Task(user_id=tenant, name="demo.work", payload=i) for i in range(count)]
        log = self.logs.setdefault(tenant, TenantLog())
        noisy = self.logs.get(NOISY)
        if noisy is not None:
            log.backlog_at_submit = len(noisy.submitted) - len(noisy.done)
        now = time.monotonic()
        for task in await q.push_many(tasks):
            task_id = task.task_id or ""
            self.owner[task_id] = tenant
            log.submitted[task_id] = now

    def _table(self) -> Group:
        table = Table(title="tenants", title_justify="left")
        for column in ("tenant", "submitted", "done", "waiting", "p50 wait", "max wait"):
            table.add_column(column, justify="right" if column != "tenant" else "left")
        for tenant, log in self.logs.items():
            waits = log.waits()
            table.add_row(
                tenant, str(len(log.submitted)), str(len(log.done)),
                str(len(log.submitted) - len(log.done)),
                _ms(_pct(waits, 0.5)) if waits else "-", _ms(waits[-1]) if waits else "-",
            )  # fmt: skip
        noisy = self.logs.get(NOISY, TenantLog())
        drained = f"flood drained: {len(noisy.done):,} of {len(noisy.submitted):,}"
        if not self.console.is_terminal:  # a file gets the count alone
            return Group(table, drained)
        bar = ProgressBar(total=max(len(noisy.submitted), 1), completed=len(noisy.done))
        return Group(table, drained, bar)

    def _finished(self) -> bool:
        return len(self.logs) == self.plan.tenants + 1 and all(
            len(log.done) == len(log.submitted) for log in self.logs.values()
        )

    async def run(self) -> dict[str, TenantLog]:
        """Run the demo; the worker's per-task log lines stay quiet meanwhile (the
        logger's level is put back afterwards, so a host process's logging is unchanged).

        In the main thread, SIGTERM and SIGINT end it through the loop (``interrupted``),
        whatever the process inherited: with ``SIGINT`` ignored, as a shell's background
        job has it, a ``KeyboardInterrupt`` would otherwise land in whichever task runs
        and skip the worker's drain and the queue's removal."""
        worker_log = logging.getLogger("fairque.worker")
        level = worker_log.level
        worker_log.setLevel(logging.WARNING)
        loop, main = asyncio.get_running_loop(), asyncio.current_task()
        stops: list[signal.Signals] = []
        if main is not None and threading.current_thread() is threading.main_thread():
            stops = [signal.SIGTERM, signal.SIGINT]  # (the main thread's alone)
            for sig in stops:
                loop.add_signal_handler(sig, self._interrupt, main)
        try:
            return await self._run()
        except asyncio.CancelledError:
            if not self.interrupted:
                raise
            return self.logs
        finally:
            for sig in stops:
                loop.remove_signal_handler(sig)
            worker_log.setLevel(level)

    def _interrupt(self, main: asyncio.Task[Any]) -> None:
        """A stop signal: the demo ends where it is (its cleanup still runs; a second
        signal cuts that short too)."""
        self.interrupted = True
        main.cancel()

    async def _run(self) -> dict[str, TenantLog]:
        plan = self.plan
        q = AsyncFairQueue.from_url(self.url, f"demo-{uuid.uuid4().hex[:8]}")
        registry = Registry()

        @registry.task(name="demo.work")
        async def work(ctx: object) -> None:
            await asyncio.sleep(plan.work_seconds)

        demo = self

        class Recorder(Hooks):
            def after_task(self, ctx: Context, outcome: Outcome) -> None:
                if outcome.state == TaskState.FINISHED:
                    demo._record_done(ctx.task_id)

        dashboard = self._start_dashboard(q.queue) if self.ui_port is not None else None
        config = WorkerConfig(id="demo-worker", max_concurrent_tasks=plan.concurrency)
        worker = Worker(q, registry, config, hooks=[Recorder()])
        await self._submit(q, NOISY, plan.flood)
        runner = asyncio.create_task(worker.run_async())
        self.console.print(
            Text.assemble(
                (NOISY, "bold"),
                f" queued {plan.flood} tasks; {plan.tenants} small tenants will "
                f"submit {plan.tasks_per_tenant} each while it drains "
                f"({plan.concurrency} tasks at a time, {_ms(plan.work_seconds)} of work each).",
            )
        )
        try:
            with Live(self._table(), console=self.console, refresh_per_second=8) as live:
                drain = plan.flood * plan.work_seconds / plan.concurrency
                spacing = max(0.4 * drain / plan.tenants, 0.02)
                for i in range(plan.tenants):
                    await asyncio.sleep(spacing)
                    await self._submit(q, f"tenant-{i + 1:02d}", plan.tasks_per_tenant)
                    live.update(self._table())
                while not self._finished():
                    await asyncio.sleep(0.125)
                    live.update(self._table())
            if not self.console.is_terminal:  # Live leaves its last line open in a file
                self.console.line()
            self._summary(time.monotonic() - self.started)
            if dashboard is not None:
                await self._linger()
        finally:
            worker.request_stop()
            await runner
            if dashboard is not None:
                dashboard.stop()
            await q.purge()
            await q.close()
        return self.logs

    def _start_dashboard(self, queue: str) -> Any:
        """``fairque serve``'s app for the demo's queue, on loopback, in a thread."""
        from fairque.service.app import Service, create_app
        from fairque.service.settings import ServerSettings

        service = Service(self.url, [queue], ServerSettings())
        server = _Dashboard(create_app(service), self.ui_port or 0)
        address = f"http://127.0.0.1:{server.port}/ui/q/{queue}/tenants"
        self.console.print(f"dashboard: {address}", soft_wrap=True, highlight=False)
        self.ui_address = address
        return server

    async def _linger(self) -> None:
        if self.ui_linger is None:
            self.console.print(f"the dashboard stays up at {self.ui_address}; Ctrl-C to stop")
            while True:
                await asyncio.sleep(3600)
        await asyncio.sleep(self.ui_linger)

    def _summary(self, elapsed: float) -> None:
        done = sum(len(log.done) for log in self.logs.values())
        rate = done / elapsed if elapsed > 0 else 0.0
        table = Table(
            title="summary: waiting time per tenant (submit to finish)", title_justify="left"
        )
        for column in ("tenant", "tasks", "p50", "p95", "max", "FIFO estimate"):
            table.add_column(column, justify="left" if column == "tenant" else "right")
        small_max = []
        for tenant, log in self.logs.items():
            waits = log.waits()
            fifo = "-" if tenant == NOISY else _ms(log.backlog_at_submit / rate if rate else 0)
            if tenant != NOISY and waits:
                small_max.append(waits[-1])
            table.add_row(
                tenant, str(len(log.done)), _ms(_pct(waits, 0.5)), _ms(_pct(waits, 0.95)),
                _ms(waits[-1] if waits else 0), fifo,
            )  # fmt: skip
        self.console.print(table)
        mean_small = statistics.mean(small_max) if small_max else 0.0
        self.console.print(
            f"{done} tasks in {elapsed:.1f} s ({rate:,.0f}/s). Small tenants waited at most "
            f"{_ms(max(small_max, default=0))} (mean of maxima {_ms(mean_small)}); in one FIFO "
            "queue they would have waited behind the flood (FIFO estimate column)."
        )


class _Dashboard:
    """uvicorn on a background thread (its signal handlers stay out of the demo's way)."""

    def __init__(self, app: Any, port: int) -> None:
        import threading

        import uvicorn

        config = uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
            lifespan="on",
        )  # fmt: skip
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise ConfigError(f"the dashboard could not listen on 127.0.0.1:{port}")
            time.sleep(0.01)
        self.port: int = self.server.servers[0].sockets[0].getsockname()[1]

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def run_demo(
    url: str,
    plan: DemoPlan,
    console: Console,
    ui_port: int | None = None,
    ui_linger: float | None = None,
) -> dict[str, TenantLog]:
    """Run the demo to completion; returns each tenant's submission/completion log.

    With ``ui_port`` the dashboard serves the demo's queue on ``127.0.0.1`` while it
    runs, and for ``ui_linger`` seconds after it (None: until Ctrl-C).
    """
    demo = Demo(url, plan, console, ui_port, ui_linger)
    logs = asyncio.run(demo.run())
    if demo.interrupted:  # the CLI's exit for an interruption (130), as Ctrl-C's
        raise KeyboardInterrupt
    return logs
