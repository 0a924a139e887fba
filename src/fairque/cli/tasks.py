"""Commands on many tasks: ``tasks`` (list), ``retry`` / ``cancel`` of one task or of
every task a filter matches, and ``delete`` of every dead letter a filter matches.

Listing walks the engine's ``list_tasks`` pages (newest first, at most ``PAGE``
tasks a call), following the cursor until the limit is reached, so a long listing
never holds the server for long. A bulk ``cancel`` first collects the ids that
match (one walk that changes nothing), asks for a confirmation with their count,
then acts on each id: a task that changed state or expired in between is skipped
and counted. A bulk ``retry`` or ``delete`` counts with the engine's dry run
(``bulk_retry``, ``bulk_delete``), asks, then moves the matches in batches: a task
that changed state in between is skipped and counted, and a task that fails again
meanwhile is not retried twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import date, datetime, timezone
from typing import Annotated, Any, NoReturn

import typer
from rich.table import Table

from fairque.cli.base import EXIT_USAGE, fail, no_task, open_queue, shared, stdout
from fairque.client.queue import FairQueue
from fairque.errors import TaskNotFound, ValidationError
from fairque.models import Task, TaskState

#: Tasks per ``list_tasks`` call (the engine's largest page).
PAGE = 500
#: Most tasks one ``fairque tasks`` prints.
MAX_LISTED = 100_000
#: The states a bulk command may select.
RETRYABLE = (TaskState.FAILED, TaskState.CANCELED)
DELETABLE = (*RETRYABLE, TaskState.FINISHED)
CANCELABLE = (TaskState.SCHEDULED, TaskState.DEFERRED, TaskState.QUEUED, TaskState.STARTED)


def _state_option(states: tuple[TaskState, ...]) -> Any:
    *first, last = [s.value for s in states]
    return typer.Option("--state", "-s", metavar="STATE", help=f"{', '.join(first)} or {last}.")


StateOption = Annotated[str | None, _state_option(tuple(TaskState))]
RetryStateOption = Annotated[str | None, _state_option(RETRYABLE)]
DeleteStateOption = Annotated[str | None, _state_option(DELETABLE)]
CancelStateOption = Annotated[str | None, _state_option(CANCELABLE)]
UserOption = Annotated[str | None, typer.Option("--user", metavar="USER", help="Only this user.")]
NameOption = Annotated[
    str | None, typer.Option("--name", metavar="NAME", help="Only this task name.")
]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for a confirmation.")]
ErrorOption = Annotated[
    str | None, typer.Option("--error", metavar="TEXT", help="Only tasks whose error holds it.")
]
OlderOption = Annotated[
    float | None,
    typer.Option("--older-than", metavar="SECONDS", help="Only tasks that ended this long ago."),
]
NewerOption = Annotated[
    float | None,
    typer.Option("--newer-than", metavar="SECONDS", help="Only tasks that ended within this."),
]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Count the matches; change nothing.")]


def parse_state(value: str | None, allowed: tuple[TaskState, ...] = tuple(TaskState)) -> TaskState:
    """``--state`` as a ``TaskState`` (any case); exit 2 naming the choices otherwise."""
    choices = ", ".join(s.value for s in allowed)
    try:
        state = TaskState((value or "").upper())
    except ValueError:
        state = None
    if state is None or state not in allowed:
        fail(f"--state must be one of {choices}, got {value!r}", EXIT_USAGE)
    return state


def walk(
    q: FairQueue,
    state: TaskState | None,
    user: str | None,
    name: str | None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Iterator[tuple[list[Task], str | None]]:
    """The pages of a listing, each with the cursor that follows it, until ``limit``
    tasks (None: all) or the end."""
    left = limit
    while left is None or left > 0:
        page = q.list_tasks(state, user, name, PAGE if left is None else min(PAGE, left), cursor)
        cursor = page.next_cursor
        if left is not None:
            left -= len(page.tasks)
        yield page.tasks, cursor
        if cursor is None:
            return


def _when(value: datetime | None, today: date | None = None) -> str:
    """A time in UTC, short: the time of day when it is ``today`` (UTC), else the date
    and the minute (a listing at 80 columns keeps one line per task)."""
    if value is None:
        return ""
    value = value.astimezone(timezone.utc)
    if value.date() == (today or datetime.now(timezone.utc).date()):
        return value.strftime("%H:%M:%S")
    return value.strftime("%Y-%m-%d %H:%M")


def _short(text: str | None, width: int = 60) -> str:
    line = " ".join((text or "").split())
    return line if len(line) <= width else line[: width - 1] + "…"


def tasks(
    ctx: typer.Context,
    state: StateOption = None,
    user: UserOption = None,
    name: NameOption = None,
    limit: Annotated[int, typer.Option(min=1, max=MAX_LISTED, help="Tasks to show at most.")] = 50,
    cursor: Annotated[
        str | None,
        typer.Option(metavar="CURSOR", help="Continue a listing (its 'next page' cursor)."),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help='Print {"tasks": [...], "next_cursor": ...}.'),
    ] = False,
) -> None:
    """List tasks, newest first, by state, user and/or name (at least one).

    A listing longer than --limit ends with the cursor of the next page (--cursor
    continues it). Tasks move between states while a listing runs; each is shown
    where it was when its page was read. With a user or a name, the engine examines
    a bounded number of entries per page, so a listing may need its cursor even when
    it shows fewer than --limit tasks.

    Exit codes: 0 listed (also when none match); 1 a server failure; 2 a bad state,
    cursor or filter.
    """
    chosen = None if state is None else parse_state(state)
    if chosen is None and user is None and name is None:
        fail("give --state, --user and/or --name", EXIT_USAGE)
    with open_queue(ctx) as q:
        found: list[Task] = []
        following: str | None = None
        for page, after in walk(q, chosen, user, name, limit, cursor):
            found.extend(page)
            following = after
    if as_json:
        doc = {
            "tasks": [t.model_dump(mode="json") for t in found],
            "next_cursor": following,
        }
        stdout.out(json.dumps(doc), highlight=False)
        return
    # one line per task at 80 columns where it can be: what was filtered on is in the
    # title instead of a column, an error column only when a task has one, ids whole
    kept = {"state": chosen is None, "user": user is None, "name": name is None}
    given = [f"{k} {v}" for k, v in (("state", chosen and chosen.value), ("user", user),
                                     ("name", name)) if v]  # fmt: skip
    where = f" with {', '.join(given)}" if given else ""
    table = Table(
        title=f"tasks of {q.queue!r}{where} ({len(found)}; times in UTC)", title_justify="left"
    )
    errors = any(t.error for t in found)
    whole = all(len(t.task_id or "") <= 36 for t in found)
    table.add_column("task id", overflow="fold", no_wrap=whole)
    for column in ("state", "user", "name"):
        if kept[column]:
            table.add_column(column, overflow="fold", no_wrap=column == "state")
    for column in ("pri", "try", "created"):
        table.add_column(column, no_wrap=True)
    if errors:
        table.add_column("error", overflow="fold")
    today = datetime.now(timezone.utc).date()
    for t in found:
        shown = {"state": t.state.value if t.state else "", "user": t.user_id, "name": t.name}
        row = [t.task_id or "", *(v for k, v in shown.items() if kept[k]),
               str(t.priority.value), str(t.retry_count), _when(t.created_at, today),
               *([_short(t.error)] if errors else [])]  # fmt: skip
        table.add_row(*row)
    stdout.print(table)
    if following is not None:
        stdout.print(f"more: --cursor {following}", highlight=False)


def _decline() -> NoReturn:
    fail("aborted; nothing was changed")


def _confirm(question: str) -> None:
    """Ask ``question``; anything but yes (no answer too: end of input) aborts."""
    try:
        agreed = typer.confirm(question)
    except typer.Abort:
        _decline()
    if not agreed:
        _decline()


def _bulk(
    ctx: typer.Context,
    state: TaskState,
    user: str | None,
    name: str | None,
    yes: bool,
    act: Callable[[FairQueue, str], bool],
) -> None:
    """Collect what matches, confirm its count, then ``act`` on each task."""
    matches = " ".join(
        part
        for part in (
            f"{state.value} task(s)",
            f"of user {user!r}" if user is not None else "",
            f"named {name!r}" if name is not None else "",
        )
        if part
    )
    with open_queue(ctx) as q:
        # the ids first (a walk that changes nothing, so its cursors stay valid), then
        # the changes
        ids = [t.task_id or "" for page, _ in walk(q, state, user, name) for t in page]
        if not ids:
            stdout.print(f"no {matches} in queue {q.queue!r}", highlight=False)
            return
        if not yes:
            _confirm(f"Cancel {len(ids)} {matches} in queue {q.queue!r}?")
        done = sum(1 for task_id in ids if act(q, task_id))
        skipped = len(ids) - done
    note = f" ({skipped} skipped: they changed state or expired meanwhile)" if skipped else ""
    stdout.print(f"canceled {done} {matches} in queue {q.queue!r}{note}", highlight=False)


def _dead_letters(
    ctx: typer.Context,
    retry: bool,
    state: TaskState,
    chosen: dict[str, Any],
    yes: bool,
    dry_run: bool,
) -> None:
    """Count what ``chosen`` matches (the engine's dry run), confirm it, then retry or
    delete the matches (``bulk_retry``, ``bulk_delete``)."""
    words = {
        "user_id": "of user {!r}",
        "name": "named {!r}",
        "error": "with error {!r}",
        "older_than": "ended over {:g} s ago",
        "newer_than": "ended within {:g} s",
    }
    given = {k: v for k, v in chosen.items() if v is not None}  # fmt: skip
    matches = " ".join([f"{state.value} task(s)", *(words[k].format(v) for k, v in given.items())])
    verb = "retry" if retry else "delete"
    with open_queue(ctx) as q:
        action = q.bulk_retry if retry else q.bulk_delete
        try:
            count = action(state=state, dry_run=True, **given)
        except ValidationError as exc:
            fail(str(exc), EXIT_USAGE)
        if not count or dry_run:
            found = f"{count} {matches}" if count else f"no {matches}"
            stdout.print(f"{found} in queue {q.queue!r}", highlight=False)
            return
        if not yes:
            _confirm(f"{verb.capitalize()} {count} {matches} in queue {q.queue!r}?")
        done = action(state=state, **given)
    skipped = count - done
    note = f" ({skipped} skipped: they changed state or expired meanwhile)" if skipped else ""
    moved = "re-queued" if retry else "deleted"
    stdout.print(f"{moved} {done} {matches} in queue {q.queue!r}{note}", highlight=False)


def _cancel_one(q: FairQueue, task_id: str) -> bool:
    try:
        return q.cancel(task_id)
    except TaskNotFound:
        return False


def _one_or_filter(
    task_id: str | None,
    state: str | None,
    user: str | None,
    name: str | None,
    command: str,
    more: tuple[Any, ...] = (),
    dry_run: bool = False,
) -> None:
    if task_id is not None and (
        (state, user, name) != (None, None, None) or any(v is not None for v in more) or dry_run
    ):
        fail("give a task id or --state (with --user, --name), not both", EXIT_USAGE)
    if task_id is None and state is None:
        fail(f"give a task id, or --state to {command} every task that matches", EXIT_USAGE)


def retry(
    ctx: typer.Context,
    task_id: Annotated[str | None, typer.Argument(help="Task id (or a filter).")] = None,
    state: RetryStateOption = None,
    user: UserOption = None,
    name: NameOption = None,
    error: ErrorOption = None,
    older_than: OlderOption = None,
    newer_than: NewerOption = None,
    dry_run: DryRunOption = False,
    yes: YesOption = False,
) -> None:
    """Re-queue a FAILED or CANCELED task, or every task a filter matches.

    TASK_ID re-queues one task with a fresh retry budget; --state FAILED|CANCELED
    [--user U] [--name N] [--error TEXT] [--older-than S] [--newer-than S] re-queues
    every task that matches: they are counted and confirmed first (--yes does not ask;
    --dry-run only counts), then re-queued in batches, and the tasks that changed state
    meanwhile are counted as skipped.

    Exit codes: 0 done (also when nothing matches); 1 an unknown task, a task in
    another state, a declined confirmation, a server failure; 2 bad usage.
    """
    filters = (error, older_than, newer_than)
    _one_or_filter(task_id, state, user, name, "retry", filters, dry_run)
    if task_id is None:
        chosen = {"user_id": user, "name": name, "error": error, "older_than": older_than,
                  "newer_than": newer_than}  # fmt: skip
        _dead_letters(ctx, True, parse_state(state, RETRYABLE), chosen, yes, dry_run)
        return
    with open_queue(ctx) as q:
        try:
            q.retry(task_id)
        except TaskNotFound:
            no_task(task_id, q.queue)
    stdout.print(f"re-queued {task_id}", highlight=False)


def delete(
    ctx: typer.Context,
    state: DeleteStateOption = None,
    user: UserOption = None,
    name: NameOption = None,
    error: ErrorOption = None,
    older_than: OlderOption = None,
    newer_than: NewerOption = None,
    dry_run: DryRunOption = False,
    yes: YesOption = False,
) -> None:
    """Delete now every FAILED, CANCELED or FINISHED task a filter matches.

    --state FAILED|CANCELED|FINISHED [--user U] [--name N] [--error TEXT] [--older-than S]
    [--newer-than S]: the matches are counted and confirmed first (--yes does not ask;
    --dry-run only counts), then deleted in batches, as their expiry would later.

    Exit codes: 0 done (also when nothing matches); 1 a declined confirmation, a
    server failure; 2 bad usage.
    """
    if state is None:
        fail("give --state FAILED, CANCELED or FINISHED (with --user, --name, ...)", EXIT_USAGE)
    chosen = {"user_id": user, "name": name, "error": error, "older_than": older_than,
              "newer_than": newer_than}  # fmt: skip
    _dead_letters(ctx, False, parse_state(state, DELETABLE), chosen, yes, dry_run)


def cancel(
    ctx: typer.Context,
    task_id: Annotated[str | None, typer.Argument(help="Task id (or a filter).")] = None,
    state: CancelStateOption = None,
    user: UserOption = None,
    name: NameOption = None,
    yes: YesOption = False,
) -> None:
    """Cancel a task that has not ended, or every task a filter matches.

    TASK_ID cancels one task; --state SCHEDULED|DEFERRED|QUEUED|STARTED [--user U]
    [--name N] cancels every task that matches: the ids are collected, counted and
    confirmed first (--yes does not ask), each is canceled once, and the tasks that
    ended meanwhile are counted as skipped.

    Exit codes: 0 done (also when nothing matches); 1 an unknown task, a task that
    had already ended, a declined confirmation, a server failure; 2 bad usage.
    """
    _one_or_filter(task_id, state, user, name, "cancel")
    if task_id is None:
        _bulk(ctx, parse_state(state, CANCELABLE), user, name, yes, _cancel_one)
        return
    with open_queue(ctx) as q:
        try:
            canceled = q.cancel(task_id)
        except TaskNotFound:
            no_task(task_id, q.queue)
        if not canceled:
            fail(f"task {task_id!r} had already ended")
    stdout.print(f"canceled {task_id}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``tasks``, ``retry``, ``cancel`` and ``delete`` to ``app``."""
    for command in (tasks, retry, cancel, delete):
        app.command()(shared(command))
