"""``fairque tasks`` (listing by state, user and name, with a cursor), bulk ``retry`` and
``cancel`` with a count and a confirmation. In-process CLI, real servers."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from helpers.servers import ServerInfo
from helpers.support import unique_queue
from typer.testing import CliRunner, Result

from fairque import FairQueue, Task, TaskState
from fairque.cli import tasks as task_commands
from fairque.cli.commands import app

pytestmark = pytest.mark.server_kinds("valkey", "cluster")


@pytest.fixture
def q(server: ServerInfo) -> Iterator[FairQueue]:
    queue = FairQueue.from_url(server.url, unique_queue("cli-tasks"))
    yield queue
    queue.close()


@pytest.fixture(autouse=True)
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages of 7 tasks, so that every walk below spans several pages."""
    monkeypatch.setattr(task_commands, "PAGE", 7)


def cli(q: FairQueue, server: ServerInfo, *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(app, [*args, "--url", server.url, "--queue", q.queue], input=stdin)


def failed(q: FairQueue, users: dict[str, int], name: str = "job") -> list[str]:
    """Push and fail for good ``n`` tasks of each user; their ids."""
    made = [
        Task(user_id=user, name=name, max_retries=0) for user, n in users.items() for _ in range(n)
    ]
    pushed = q.push_many(made)
    total = len(pushed)
    for task in q.pop_batch(total, worker_id="t"):
        assert q.fail(task, "boom", retry=False) is TaskState.FAILED
    return [t.task_id or "" for t in pushed]


def listed(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    tasks: list[dict[str, Any]] = doc["tasks"]
    return tasks


def test_tasks_lists_by_state_user_and_name(q: FairQueue, server: ServerInfo) -> None:
    alice = failed(q, {"alice": 12})
    bob = failed(q, {"bob": 5}, name="other")
    queued = q.enqueue("job", user_id="alice")

    every = listed(cli(q, server, "tasks", "--state", "failed", "--json"))
    assert sorted(t["task_id"] for t in every) == sorted(alice + bob)
    assert {t["state"] for t in every} == {"FAILED"}
    by_user = listed(cli(q, server, "tasks", "--state", "FAILED", "--user", "bob", "--json"))
    assert sorted(t["task_id"] for t in by_user) == sorted(bob)
    by_name = listed(cli(q, server, "tasks", "--name", "job", "--user", "alice", "--json"))
    assert sorted(t["task_id"] for t in by_name) == sorted([*alice, queued.task_id or ""])

    # a limit ends with a cursor; following it lists the rest, none twice
    first = cli(q, server, "tasks", "--state", "FAILED", "--limit", "10", "--json")
    page = listed(first)
    assert len(page) == 10
    cursor = json.loads(first.stdout)["next_cursor"]
    assert cursor
    rest = listed(cli(q, server, "tasks", "--state", "FAILED", "--cursor", cursor, "--json"))
    assert sorted(t["task_id"] for t in page + rest) == sorted(alice + bob)
    whole_json = cli(q, server, "tasks", "-s", "FAILED", "--json")
    assert json.loads(whole_json.stdout)["next_cursor"] is None

    table = cli(q, server, "tasks", "--state", "FAILED", "--user", "bob", "--limit", "3")
    assert table.exit_code == 0, table.output
    assert "tasks of" in table.stdout
    assert "boom" in table.stdout
    assert "more: --cursor " in table.stdout
    whole = cli(q, server, "tasks", "--state", "FAILED", "--user", "bob")
    assert "more:" not in whole.stdout


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_a_listing_keeps_one_line_per_task_at_80_columns(
    q: FairQueue, server: ServerInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    made = [q.enqueue("send_email", user_id="bob", delay=60 * i).task_id or "" for i in (0, 1)]
    assert all(len(task_id) == 32 for task_id in made)  # generated ids
    table = cli(q, server, "tasks", "--user", "bob")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert "tasks of" in lines[0]
    assert "with user bob" in lines[0]
    assert max(len(line) for line in lines) <= 80
    for task_id in made:  # whole, on one line, with its state, name and time of day
        row = next(line for line in lines if task_id in line)
        assert "send_e" in row  # a long name may fold onto a second line
        assert re.search(r"(QUEUED|SCHEDULED) .*\b\d\d:\d\d:\d\d\b", row), row
    assert "error" not in lines[2]  # no task failed: no column of blanks


def test_tasks_refuses_bad_input(q: FairQueue, server: ServerInfo) -> None:
    nothing = cli(q, server, "tasks")
    assert nothing.exit_code == 2
    assert "give --state, --user and/or --name" in nothing.stderr
    bad = cli(q, server, "tasks", "--state", "DONE")
    assert bad.exit_code == 2
    assert "--state must be one of SCHEDULED, DEFERRED, QUEUED" in bad.stderr
    cursor = cli(q, server, "tasks", "--state", "FAILED", "--cursor", "junk")
    assert cursor.exit_code == 2
    assert "cursor" in cursor.stderr


def test_bulk_retry_counts_asks_and_retries(q: FairQueue, server: ServerInfo) -> None:
    alice = failed(q, {"alice": 16})
    bob = failed(q, {"bob": 3})

    declined = cli(q, server, "retry", "--state", "FAILED", "--user", "alice", stdin="n\n")
    assert declined.exit_code == 1
    assert "Retry 16 FAILED task(s) of user 'alice' in queue" in declined.stdout
    assert "aborted; nothing was changed" in declined.stderr
    closed = cli(q, server, "retry", "--state", "FAILED", "--user", "alice", stdin="")
    assert closed.exit_code == 1  # no answer (standard input closed) is no
    assert all(t.state is TaskState.FAILED for t in map(q.get, alice) if t is not None)

    agreed = cli(q, server, "retry", "--state", "FAILED", "--user", "alice", stdin="y\n")
    assert agreed.exit_code == 0, agreed.output
    assert "re-queued 16 FAILED task(s) of user 'alice'" in agreed.stdout
    for task_id in alice:
        task = q.get(task_id)
        assert task is not None
        assert task.state is TaskState.QUEUED
    assert {t.state for t in map(q.get, bob) if t is not None} == {TaskState.FAILED}

    rest = cli(q, server, "retry", "--state", "failed", "--name", "job", "--yes")
    assert rest.exit_code == 0, rest.output
    assert "re-queued 3 FAILED task(s) named 'job'" in rest.stdout
    none_left = cli(q, server, "retry", "--state", "FAILED", "--user", "alice")
    assert none_left.exit_code == 0
    assert "no FAILED task(s) of user 'alice' in queue" in none_left.stdout


def test_dead_letters_by_error_and_age_dry_run_and_delete(q: FairQueue, server: ServerInfo) -> None:
    failed(q, {"alice": 5, "bob": 4})
    dry = cli(q, server, "retry", "--state", "FAILED", "--error", "boom", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "9 FAILED task(s) with error 'boom' in queue" in dry.stdout
    aged = cli(q, server, "retry", "--state", "FAILED", "--older-than", "3600", "--yes")
    assert "no FAILED task(s) ended over 3600 s ago" in aged.stdout
    assert q.stats().counts[TaskState.FAILED] == 9  # neither changed anything
    asked = cli(q, server, "delete", "--state", "FAILED", "--user", "bob", stdin="n\n")
    assert asked.exit_code == 1
    assert "Delete 4 FAILED task(s) of user 'bob' in queue" in asked.stdout
    gone = cli(q, server, "delete", "--state", "FAILED", "--user", "bob", "--yes")
    assert gone.exit_code == 0, gone.output
    assert "deleted 4 FAILED task(s) of user 'bob'" in gone.stdout
    assert q.stats().counts[TaskState.FAILED] == 5
    for bad in (["delete"], ["delete", "--state", "QUEUED"],
                ["retry", "--state", "FAILED", "--older-than", "-1"],
                ["retry", "some-id", "--dry-run"], ["retry", "--state", "FINISHED"]):  # fmt: skip
        refused = cli(q, server, *bad)
        assert refused.exit_code == 2, (bad, refused.output)
    assert q.stats().counts[TaskState.FAILED] == 5
    leased = q.pop(worker_id="w")
    assert leased is None  # (every task here failed for good)
    finished = q.enqueue("job", user_id="carol")
    task = q.pop(worker_id="w")
    assert task is not None
    assert q.complete(task)
    cleared = cli(q, server, "delete", "--state", "FINISHED", "--yes")
    assert cleared.exit_code == 0, cleared.output
    assert "deleted 1 FINISHED task(s)" in cleared.stdout
    assert q.get(finished.task_id or "") is None


def test_bulk_cancel(q: FairQueue, server: ServerInfo) -> None:
    mine = [q.enqueue("job", user_id="alice").task_id or "" for _ in range(9)]
    theirs = q.enqueue("job", user_id="bob")
    done = cli(q, server, "cancel", "--state", "QUEUED", "--user", "alice", "-y")
    assert done.exit_code == 0, done.output
    assert "canceled 9 QUEUED task(s) of user 'alice'" in done.stdout
    assert {t.state for t in map(q.get, mine) if t is not None} == {TaskState.CANCELED}
    other = q.get(theirs.task_id or "")
    assert other is not None
    assert other.state is TaskState.QUEUED
    # canceled tasks can be retried in bulk
    back = cli(q, server, "retry", "--state", "CANCELED", "--yes")
    assert back.exit_code == 0, back.output
    assert "re-queued 9 CANCELED task(s)" in back.stdout


def test_one_task_or_a_filter(q: FairQueue, server: ServerInfo) -> None:
    both = cli(q, server, "retry", "some-id", "--state", "FAILED")
    assert both.exit_code == 2
    assert "not both" in both.stderr
    neither = cli(q, server, "cancel")
    assert neither.exit_code == 2
    assert "give a task id, or --state to cancel every task that matches" in neither.stderr
    wrong = cli(q, server, "retry", "--state", "QUEUED")
    assert wrong.exit_code == 2
    assert "--state must be one of FAILED, CANCELED" in wrong.stderr
    ended = cli(q, server, "cancel", "--state", "FINISHED", "--yes")
    assert ended.exit_code == 2
    assert "--state must be one of SCHEDULED, DEFERRED, QUEUED, STARTED" in ended.stderr
    unknown = cli(q, server, "retry", "nope")
    assert unknown.exit_code == 1
    assert f"no task 'nope' in queue '{q.queue}'" in unknown.stderr
    t = q.enqueue("job", user_id="u")
    one = cli(q, server, "cancel", t.task_id or "")
    assert one.exit_code == 0
    again = cli(q, server, "cancel", t.task_id or "")
    assert again.exit_code == 1
    assert "had already ended" in again.stderr
    assert cli(q, server, "retry", t.task_id or "").exit_code == 0


def test_a_bulk_retry_skips_what_changed_meanwhile(
    q: FairQueue, server: ServerInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = failed(q, {"alice": 4})

    def answer(question: str) -> bool:
        # while the operator reads the question, another operator retries one task
        assert question.startswith("Retry 4 FAILED task(s)")
        q.retry(ids[0])
        return True

    monkeypatch.setattr(typer, "confirm", answer)
    done = cli(q, server, "retry", "--state", "FAILED")
    assert done.exit_code == 0, done.output
    assert "re-queued 3 FAILED task(s)" in done.stdout
    assert "(1 skipped: they changed state or expired meanwhile)" in done.stdout

    queued = [q.enqueue("job", user_id="bob").task_id or "" for _ in range(3)]

    def cancel_one(question: str) -> bool:
        q.cancel(queued[1])
        return True

    monkeypatch.setattr(typer, "confirm", cancel_one)
    canceled = cli(q, server, "cancel", "--state", "QUEUED", "--user", "bob")
    assert canceled.exit_code == 0, canceled.output
    assert "canceled 2 QUEUED task(s) of user 'bob'" in canceled.stdout
    assert "(1 skipped" in canceled.stdout
    unknown = cli(q, server, "cancel", "nope")
    assert unknown.exit_code == 1
    assert f"no task 'nope' in queue '{q.queue}'" in unknown.stderr


def test_enqueue_with_a_dedup_key_merges(q: FairQueue, server: ServerInfo) -> None:
    """``--dedup-key`` and its mode: a second push answers the waiting task's id with the
    new payload (replace); a debounce without a window is refused (exit 2, nothing
    written)."""
    opts = ("--user", "u", "--dedup-key", "k", "--dedup-mode", "replace", "--json")
    first = cli(q, server, "enqueue", "job", '{"v": 1}', *opts)
    again = cli(q, server, "enqueue", "job", '{"v": 2}', *opts)
    assert first.exit_code == again.exit_code == 0, again.output
    [task_id] = json.loads(first.stdout)["task_ids"]
    assert json.loads(again.stdout)["task_ids"] == [task_id]
    stored = q.get(task_id)
    assert stored is not None
    assert stored.payload == {"v": 2}
    refused = cli(q, server, "enqueue", "job", "--user", "u", "--dedup-key", "d",
                  "--dedup-mode", "debounce")  # fmt: skip
    assert refused.exit_code == 2
    assert "debounce_seconds" in refused.output
    assert q.stats().counters.get("pushed") == 1
