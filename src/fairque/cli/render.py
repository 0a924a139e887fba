"""Terminal rendering and task input for the CLI (tables, JSON lines).

Task input: the ``enqueue`` command's single task and every line of an
``enqueue --file`` JSON-lines file go through the same checks (``check_item``),
so one mistake gets the same message in either form. A file is checked whole
before anything is sent: every problem is collected as ``file:line: field:
problem``, and only a file without problems is pushed, in one atomic
``push_many``.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table

from fairque.client.base import PushCheck
from fairque.common.taskspec import check_fields, normalized, outward, task_of
from fairque.core.checks import MAX_BATCH
from fairque.errors import DependencyCycleError, FairqueError, ValidationError
from fairque.memory import MemoryReport
from fairque.models import QueueStats, Task, TaskState, WorkerInfo

#: Most tasks one ``enqueue --file`` pushes. The file is pushed in one script, so
#: all-or-nothing holds; the server runs nothing else meanwhile (about 20 us per
#: task: 10,000 tasks hold it for about 0.2 s), so larger files are refused.
MAX_FILE_TASKS = MAX_BATCH  # one atomic push_many
#: Most bytes of task data (payloads, ids, names) one ``enqueue --file`` pushes.
MAX_FILE_BYTES = 64 * 1024 * 1024
#: Problems printed for a bad file; the rest are counted.
MAX_PROBLEMS_SHOWN = 20


@dataclass(frozen=True)
class Problem:
    """One reason a task is refused: where (line of a file), which field, what."""

    field: str
    message: str
    line: int | None = None

    def render(self, source: str | None = None) -> str:
        """``source:line: field: message`` (the parts that are known)."""
        where = ""
        if source is not None:
            where = f"{source}:{self.line}: " if self.line is not None else f"{source}: "
        return f"{where}{self.field}: {self.message}"


@dataclass
class TaskBatch:
    """Tasks read and checked, ready for one ``push_many``; or the problems found."""

    tasks: list[Task] = field(default_factory=list)
    delays: list[float | None] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    size: int = 0

    def add(self, task: Task, delay: float | None, line: int, size: int) -> None:
        """Append one checked task."""
        self.tasks.append(task)
        self.delays.append(delay)
        self.lines.append(line)
        self.size += size


class _BadJson(ValueError):
    """A JSON value the task model would change silently (NaN, duplicate keys)."""


def _no_constant(name: str) -> Any:
    raise _BadJson(f"{name} is not allowed")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _BadJson(f"{text} is out of range")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _BadJson(f"key {key!r} appears twice in one object")
        out[key] = value
    return out


def parse_json(text: str) -> Any:
    """Parse JSON strictly: no NaN or Infinity, no number out of range, no repeated key.

    Raises:
        ValueError: ``text`` is not such JSON (the message says why).
    """
    try:
        return json.loads(
            text,
            parse_constant=_no_constant,
            parse_float=_finite_float,
            object_pairs_hook=_unique_keys,
        )
    except _BadJson:
        raise
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    except (ValueError, RecursionError) as exc:  # huge integers, deep nesting
        raise ValueError(f"not usable JSON: {exc}") from None


def _problems(
    exc: FairqueError, default: str, line: int | None, written: Mapping[str, str] | None = None
) -> list[Problem]:
    """``exc``'s problems, one per field, each named as the file wrote it (``default``
    for one that names no field)."""
    if not isinstance(exc, ValidationError):
        return [Problem(default, str(exc), line)]
    names = written or {}
    out = []
    for engine_name, message in exc.problems:
        name = outward(engine_name) if engine_name else default
        head, dot, rest = name.partition(".")
        out.append(Problem(names.get(head, head) + dot + rest, message, line))
    return out


def check_item(
    item: Mapping[str, Any], check: PushCheck, line: int | None = None
) -> tuple[Task, float | None, int] | list[Problem]:
    """Check one task given as JSON fields; returns (task, delay, size) or the problems.

    The fields are the outward task's (``fairque.common.taskspec``, the HTTP API's body);
    the checks are the ones a push makes, run without the server: JSON kinds (a number
    is never taken from a string, ``true`` is not an integer), the task model's rules,
    then the queue's encoding (serializer, ``max_payload_bytes``, delay). ``size`` is
    the bytes the task adds to a push.
    """
    fields, written = normalized(item)
    kinds = check_fields(fields)
    if kinds:
        return [Problem(written.get(f, f), m, line) for f, m in kinds]
    try:
        task, delay = task_of(fields)
        size = check.size(task, delay)
    except FairqueError as exc:
        return _problems(exc, "task", line, written)
    except UnicodeEncodeError:
        return [Problem("task", "holds text that is not valid Unicode (a lone surrogate)", line)]
    return task, delay, size


def read_task_file(path: Path, check: PushCheck) -> TaskBatch:
    """Read and check every line of a JSON-lines file (``-``: standard input).

    Each line is an object with ``name`` and ``user_id`` and optionally
    ``payload``, ``priority``, ``task_id``, ``max_retries``, ``timeout``,
    ``keep_result``, ``result_ttl``, ``delay`` (seconds), ``depends_on`` (task ids,
    in the file or already in the queue), ``on_dependency_failure`` and ``cost``. Blank lines
    are skipped. The batch holds every task, or every problem found: bad JSON or
    UTF-8, a bad field, a task id used twice, more than ``MAX_FILE_TASKS`` tasks or
    ``MAX_FILE_BYTES`` bytes, a dependency cycle.

    Raises:
        OSError: the file cannot be read.
    """
    with contextlib.ExitStack() as stack:
        source = sys.stdin.buffer if str(path) == "-" else stack.enter_context(path.open("rb"))
        return _read_lines(source, check)


def _read_lines(source: Iterable[bytes], check: PushCheck) -> TaskBatch:
    """``read_task_file`` on an open file; at most ``MAX_FILE_BYTES`` of tasks are held."""
    batch = TaskBatch()
    first_line: dict[str, int] = {}
    count = total = 0
    for number, raw in enumerate(source, 1):
        if number == 1:
            raw = raw.removeprefix(b"\xef\xbb\xbf")  # a byte-order mark
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            batch.problems.append(Problem("line", f"not valid UTF-8 ({exc.reason})", number))
            continue
        if not text.strip():
            continue
        count += 1
        if count > MAX_FILE_TASKS:
            continue  # refused below for its size; only counted from here on
        try:
            item = parse_json(text)
        except ValueError as exc:
            batch.problems.append(Problem("line", str(exc), number))
            continue
        if not isinstance(item, dict):
            batch.problems.append(Problem("line", "must be a JSON object", number))
            continue
        checked = check_item(item, check, number)
        if isinstance(checked, list):
            batch.problems.extend(checked)
            continue
        task, delay, size = checked
        if task.task_id is not None:
            seen = first_line.setdefault(task.task_id, number)
            if seen != number:
                batch.problems.append(
                    Problem("task_id", f"{task.task_id!r} is also on line {seen}", number)
                )
                continue
        total += size
        if not batch.problems and total <= MAX_FILE_BYTES:
            batch.add(task, delay, number, size)
    if count == 0 and not batch.problems:
        batch.problems.append(Problem("file", "no tasks"))
    if count > MAX_FILE_TASKS:
        batch.problems.append(
            Problem("file", f"{count:,} tasks; one atomic push takes at most "
                    f"{MAX_FILE_TASKS:,}: split the file (split -l {MAX_FILE_TASKS})")
        )  # fmt: skip
    elif total > MAX_FILE_BYTES:
        batch.problems.append(
            Problem("file", f"{total:,} bytes of tasks; one atomic push takes at most "
                    f"{MAX_FILE_BYTES:,}: split the file")
        )  # fmt: skip
    if not batch.problems:
        try:
            check.batch(batch.tasks, batch.delays)
        except DependencyCycleError as exc:
            batch.problems.append(Problem("depends_on", str(exc)))
        except FairqueError as exc:  # a batch limit of the queue
            batch.problems.extend(_problems(exc, "file", None))
    return batch


def _age(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds:.1f}s ago"


def print_status(
    console: Console,
    stats: QueueStats,
    workers: list[WorkerInfo],
    top: int,
    serves: Mapping[str, list[str]] | None = None,
) -> None:
    """Per-state counts, the busiest users and the workers as tables."""
    console.print(status_view(console, stats, workers, top, serves))


def status_view(
    console: Console,
    stats: QueueStats,
    workers: list[WorkerInfo],
    top: int,
    serves: Mapping[str, list[str]] | None = None,
) -> Group:
    """What ``print_status`` prints, as one renderable (``status --watch`` refreshes it).

    ``serves`` (when several queues are shown) maps worker ids to the queues shown
    that each one serves: a column of the workers' table.
    """
    parts: list[RenderableType] = []
    states = Table(title=f"queue {stats.queue!r}", title_justify="left")
    for state in TaskState:
        states.add_column(state.value, justify="right")
    states.add_row(*(str(stats.counts.get(s, 0)) for s in TaskState))
    parts.append(states)
    counters = ", ".join(f"{k}={v}" for k, v in sorted(stats.counters.items())) or "none yet"
    parts.append(f"counters: {counters}")
    parts.append(f"users with ready work: {stats.active_users} (capped: {stats.capped_users})")
    busiest = sorted(stats.users, key=lambda u: (-(u.ready + u.in_flight), u.user_id))[:top]
    if busiest:
        users = Table(title="busiest users", title_justify="left")
        users.add_column("user")
        users.add_column("ready", justify="right")
        users.add_column("in flight", justify="right")
        for u in busiest:
            users.add_row(u.user_id, str(u.ready), str(u.in_flight))
        parts.append(users)
    table = Table(title=f"workers ({len(workers)})", title_justify="left")
    # ids are shown whole (two processes of one host differ only at the end)
    widest = max((len(w.worker_id) for w in workers), default=2)
    table.add_column("id", min_width=min(widest, max(console.width - 45, 10)), overflow="fold")
    table.add_column("host", overflow="fold")
    table.add_column("pid")
    table.add_column("in flight")
    table.add_column("finished", justify="right")  # tasks
    table.add_column("failed attempts", justify="right")  # retried ones too
    table.add_column("heartbeat")
    if serves is not None:
        table.add_column("queues", overflow="fold")
    # which users a worker serves, shown when some worker is limited to some users
    pinned = any(w.assigned_users or w.steal_targets for w in workers)
    if pinned:
        table.add_column("serves", overflow="fold")
    for w in workers:
        stuck = f" ({w.threads_stuck} threads stuck)" if w.threads_stuck else ""
        row = [
            w.worker_id, w.host, str(w.pid) if w.kind == "process" else "HTTP",
            f"{w.in_flight}/{w.concurrency}{stuck}",
            str(w.processed), str(w.failed), _age(w.last_seen_seconds),
        ]  # fmt: skip
        if serves is not None:
            row.append(", ".join(serves.get(w.worker_id, [stats.queue])))
        if pinned:
            row.append(served_users(w.assigned_users, w.steal_targets))
        table.add_row(*row)
    parts.append(table)
    if workers:
        parts.append(
            "finished: tasks this worker completed in this queue; failed attempts: attempts "
            "that raised or timed out (a task retried three times counts three), unlike the "
            "queue's FAILED count of tasks"
        )
    return Group(*parts)


def served_users(assigned: list[str], steal: list[str]) -> str:
    """Which users' tasks a worker leases, and which it never does."""
    if not assigned and not steal:
        return "every user (the global ring)"
    if "*" in steal:
        first = f"{', '.join(assigned)} first, then " if assigned else ""
        return f"{first}every user"
    named = [*assigned, *(u for u in steal if u not in assigned)]
    return f"only {', '.join(named)}; never any other user"


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


def memory_doc(report: MemoryReport) -> dict[str, Any]:
    """The server's memory as ``status --json`` gives it."""
    return {
        "share": report.share,
        "evicting": report.evicting,
        "warnings": report.warnings(),
        "nodes": [
            {"node": n.node, "used_bytes": n.used_bytes, "max_bytes": n.max_bytes,
             "policy": n.policy}
            for n in report.nodes
        ],
    }  # fmt: skip


def print_memory(console: Console, report: MemoryReport) -> None:
    """The server's memory on one line, then a warning for a policy that loses tasks."""
    console.print(report.summary(), highlight=False)
    for warning in report.warnings():
        console.print(f"[bold yellow]warning:[/] {escape(warning)}", highlight=False)
