"""Terminal rendering and file input for the CLI (tables, progress, JSON lines)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from fairque.errors import FairqueError
from fairque.models import QueueStats, Task, TaskState, WorkerInfo
from fairque.queue import FairQueue

_TASK_KEYS = {
    "name", "user_id", "payload", "priority", "task_id", "max_retries", "timeout",
    "keep_result", "result_ttl", "delay",
}  # fmt: skip
PUSH_CHUNK = 500


def read_task_file(
    path: Path, fail: Callable[[str, int], NoReturn]
) -> list[tuple[Task, float | None]]:
    """Parse and validate every line of a JSON-lines file before anything is pushed.

    Each line is an object with ``name`` and ``user_id`` and optionally ``payload``,
    ``priority``, ``task_id``, ``max_retries``, ``timeout``, ``keep_result``,
    ``result_ttl`` and ``delay`` (seconds). Blank lines are skipped.
    """
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        fail(f"cannot read {path}: {exc}", 2)
    tasks: list[tuple[Task, float | None]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            fail(f"{path}:{number}: not valid JSON: {exc}", 2)
        if not isinstance(item, dict):
            fail(f"{path}:{number}: each line must be a JSON object", 2)
        unknown = set(item) - _TASK_KEYS
        if unknown:
            fail(f"{path}:{number}: unknown field(s) {sorted(unknown)}", 2)
        delay = item.pop("delay", None)
        if delay is not None and (not isinstance(delay, (int, float)) or delay < 0):
            fail(f"{path}:{number}: delay must be a non-negative number of seconds", 2)
        try:
            task = Task(**item)
        except FairqueError as exc:
            fail(f"{path}:{number}: {exc}", 2)
        tasks.append((task, delay))
    if not tasks:
        fail(f"{path}: no tasks", 2)
    return tasks


def push_with_progress(
    q: FairQueue, tasks: Sequence[tuple[Task, float | None]], console: Console
) -> int:
    """Push in atomic chunks with a progress bar; returns the number pushed."""
    pushed = 0
    with Progress(console=console, transient=True) as progress:
        bar = progress.add_task("enqueue", total=len(tasks))
        for start in range(0, len(tasks), PUSH_CHUNK):
            chunk = tasks[start : start + PUSH_CHUNK]
            q.push_many([t for t, _ in chunk], delays=[d for _, d in chunk])
            pushed += len(chunk)
            progress.update(bar, advance=len(chunk))
    return pushed


def _age(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds:.1f}s ago"


def print_status(console: Console, stats: QueueStats, workers: list[WorkerInfo], top: int) -> None:
    """Per-state counts, the busiest users and the workers as tables."""
    states = Table(title=f"queue {stats.queue!r}", title_justify="left")
    for state in TaskState:
        states.add_column(state.value, justify="right")
    states.add_row(*(str(stats.counts.get(s, 0)) for s in TaskState))
    console.print(states)
    counters = ", ".join(f"{k}={v}" for k, v in sorted(stats.counters.items())) or "none yet"
    console.print(f"counters: {counters}")
    console.print(f"users with ready work: {stats.active_users} (capped: {stats.capped_users})")
    busiest = sorted(stats.users, key=lambda u: (-(u.ready + u.in_flight), u.user_id))[:top]
    if busiest:
        users = Table(title="busiest users", title_justify="left")
        users.add_column("user")
        users.add_column("ready", justify="right")
        users.add_column("in flight", justify="right")
        for u in busiest:
            users.add_row(u.user_id, str(u.ready), str(u.in_flight))
        console.print(users)
    table = Table(title=f"workers ({len(workers)})", title_justify="left")
    for column in ("id", "host", "pid", "in flight", "processed", "failed", "heartbeat"):
        table.add_column(column)
    for w in workers:
        stuck = f" ({w.threads_stuck} threads stuck)" if w.threads_stuck else ""
        table.add_row(
            w.worker_id, w.host, str(w.pid), f"{w.in_flight}/{w.concurrency}{stuck}",
            str(w.processed), str(w.failed), _age(w.last_seen_seconds),
        )  # fmt: skip
    console.print(table)


def print_task(console: Console, task: Task) -> None:
    """One task as a two-column table."""
    table = Table(show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    data: dict[str, Any] = task.model_dump(mode="json")
    for key, value in data.items():
        if value is None or value == []:
            continue
        shown = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
        table.add_row(key, shown)
    console.print(table)
