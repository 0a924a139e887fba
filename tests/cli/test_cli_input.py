"""``fairque enqueue``: a file is checked whole and pushed all or nothing; bad input
gets the same answer in the single and the file form. Real CLI, real servers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.servers import ServerInfo, SyncClient
from helpers.support import queue_snapshot, run_here, unique_queue

from fairque import FairQueue, TaskState
from fairque.cli.render import MAX_FILE_BYTES, MAX_FILE_TASKS, MAX_PROBLEMS_SHOWN

# the command line's own behaviour: the engine's tests cover the standalone Redis kind
pytestmark = pytest.mark.server_kinds("valkey", "cluster")


@pytest.fixture
def cli_queue(server: ServerInfo) -> tuple[list[str], FairQueue]:
    queue = unique_queue("cli-in")
    return ["--url", server.url, "--queue", queue], FairQueue.from_url(server.url, queue)


def write_lines(path: Path, lines: list[object]) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def test_one_oversized_payload_after_1500_good_lines_pushes_nothing(
    cli_queue: tuple[list[str], FairQueue], redis_client: SyncClient, tmp_path: Path
) -> None:
    base, q = cli_queue
    lines: list[object] = [
        {"name": "job", "user_id": f"u{i % 7}", "payload": i} for i in range(1500)
    ]
    lines.append({"name": "job", "user_id": "u0", "payload": "x" * 2_000_000})
    path = write_lines(tmp_path / "tasks.jsonl", lines)
    before = queue_snapshot(redis_client, q.queue)
    result = run_here(*base, "enqueue", "--file", str(path))
    assert result.returncode == 2, result.stderr
    assert f"error: {path}:1501: payload: " in result.stderr
    assert "1048576" in result.stderr
    assert "nothing was enqueued" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert queue_snapshot(redis_client, q.queue) == before
    q.close()


def test_every_problem_is_reported_with_its_line_and_field(
    cli_queue: tuple[list[str], FairQueue], redis_client: SyncClient, tmp_path: Path
) -> None:
    base, q = cli_queue
    ok = {"name": "job", "user_id": "u"}
    path = write_lines(
        tmp_path / "bad.jsonl",
        [
            {**ok, "task_id": "t1"},
            {**ok, "task_id": "t1"},  # 2: same id as line 1
            {**ok, "priority": "3"},  # 3: a number as a string is not taken
            {**ok, "max_retries": True},  # 4: true is not an integer
            '{"name": "job", "user_id": "u", "payload": NaN}',  # 5
            '{"name": "job", "user_id": "u", "payload": 1e999}',  # 6: would be Infinity
            '{"name": "job", "user_id": "u", "user_id": "v"}',  # 7: repeated key
            {**ok, "priority": 9},  # 8
            {**ok, "[bold]colour[/]": 1},  # 9: unknown field, rich markup shown as is
            "[1, 2]",  # 10
            '{"name": "job"',  # 11
            "",  # blank lines are skipped
            {"user_id": "u"},  # 13: name missing
            {**ok, "delay": -1},  # 14
            {**ok, "payload": {"s": "\ud800"}},  # 15: a lone surrogate cannot be stored
            {**ok},  # 16: fine
        ],
    )
    with path.open("ab") as f:
        f.write(b'{"name": "\xff", "user_id": "u"}\n')  # 17: not UTF-8
    before = queue_snapshot(redis_client, q.queue)
    result = run_here(*base, "enqueue", "--file", str(path))
    assert result.returncode == 2, result.stderr
    expected = [
        ("2", "task_id", "'t1' is also on line 1"),
        ("3", "priority", 'got "3"'),
        ("4", "max_retries", "got true"),
        ("5", "line", "NaN"),
        ("6", "line", "1e999"),
        ("7", "line", "'user_id' appears twice"),
        ("8", "priority", "got 9"),
        ("9", "[bold]colour[/]", "unknown field"),
        ("10", "line", "must be a JSON object"),
        ("11", "line", "not valid JSON"),
        ("13", "name", "required"),
        ("14", "delay", "negative"),
        ("15", "payload", "surrogate"),
        ("17", "line", "not valid UTF-8"),
    ]
    errors = error_lines(result.stderr)
    assert len(errors) == len(expected) + 1, result.stderr
    for line, (number, field, words) in zip(errors, expected, strict=False):
        prefix = f"error: {path}:{number}: {field}: "
        assert line.startswith(prefix), (line, prefix)
        assert words in line, (line, words)
    assert errors[-1] == f"error: {path}: {len(expected)} problem(s); nothing was enqueued"
    assert queue_snapshot(redis_client, q.queue) == before
    q.close()


def test_only_the_first_problems_are_shown_and_the_rest_counted(
    cli_queue: tuple[list[str], FairQueue], tmp_path: Path
) -> None:
    base, q = cli_queue
    path = write_lines(tmp_path / "bad.jsonl", [{"name": "job"} for _ in range(50)])
    result = run_here(*base, "enqueue", "--file", str(path))
    assert result.returncode == 2
    errors = error_lines(result.stderr)
    assert len(errors) == MAX_PROBLEMS_SHOWN + 1
    assert errors[0] == f"error: {path}:1: user_id: is required"
    assert errors[-1] == f"error: {path}: 50 problem(s) (30 not shown); nothing was enqueued"
    assert q.stats().total == 0
    q.close()


def test_a_file_is_one_atomic_push_and_json_prints_the_ids(
    cli_queue: tuple[list[str], FairQueue], redis_client: SyncClient, tmp_path: Path
) -> None:
    base, q = cli_queue
    lines: list[object] = [
        {"name": "extract", "user_id": "etl", "task_id": "extract-1"},
        {"name": "load", "user_id": "etl", "task_id": "load-1", "depends_on": ["extract-1"]},
        {"name": "later", "user_id": "z", "delay": 60, "priority": 6},
        {"name": "plain", "user_id": "z", "payload": {"n": 1}},
    ]
    path = write_lines(tmp_path / "dag.jsonl", lines)
    result = run_here(*base, "enqueue", "--file", str(path), "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["enqueued"] == 4
    ids = doc["task_ids"]
    assert ids[:2] == ["extract-1", "load-1"]
    states = [q.get(i).state for i in ids]  # type: ignore[union-attr]
    assert states == [TaskState.QUEUED, TaskState.DEFERRED, TaskState.SCHEDULED, TaskState.QUEUED]
    assert q.get(ids[3]).payload == {"n": 1}  # type: ignore[union-attr]

    # a line whose upstream is unknown is refused by the server: the whole file is
    before = queue_snapshot(redis_client, q.queue)
    orphan = write_lines(
        tmp_path / "orphan.jsonl",
        [{"name": "a", "user_id": "u", "task_id": f"new-{i}"} for i in range(300)]
        + [{"name": "b", "user_id": "u", "depends_on": ["nowhere"]}],
    )
    refused = run_here(*base, "enqueue", "--file", str(orphan))
    assert refused.returncode == 2
    assert f"error: {orphan}: DependencyNotFound: " in refused.stderr
    assert "nothing was enqueued" in refused.stderr
    assert queue_snapshot(redis_client, q.queue) == before

    cycle = write_lines(
        tmp_path / "cycle.jsonl",
        [
            {"name": "a", "user_id": "u", "task_id": "x", "depends_on": ["y"]},
            {"name": "a", "user_id": "u", "task_id": "y", "depends_on": ["x"]},
        ],
    )
    cyclic = run_here(*base, "enqueue", "--file", str(cycle))
    assert cyclic.returncode == 2
    assert f"error: {cycle}: depends_on: dependency cycle" in cyclic.stderr
    assert queue_snapshot(redis_client, q.queue) == before
    q.close()


def test_standard_input_and_a_rerun_with_ids_adds_nothing(
    cli_queue: tuple[list[str], FairQueue], tmp_path: Path
) -> None:
    base, q = cli_queue
    text = "\ufeff" + "".join(  # a byte-order mark is accepted
        json.dumps({"name": "job", "user_id": "u", "task_id": f"id-{i}"}) + "\r\n" for i in range(3)
    )
    first = run_here(*base, "enqueue", "--file", "-", stdin=text)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "enqueued 3 task(s) from -"
    again = run_here(*base, "enqueue", "--file", "-", "--json", stdin=text)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["task_ids"] == ["id-0", "id-1", "id-2"]
    assert q.stats().counts[TaskState.QUEUED] == 3
    q.close()


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_a_file_over_the_atomic_limit_is_refused(
    cli_queue: tuple[list[str], FairQueue], tmp_path: Path
) -> None:
    base, q = cli_queue
    line = json.dumps({"name": "job", "user_id": "u"}) + "\n"
    path = tmp_path / "huge.jsonl"
    path.write_text(line * (MAX_FILE_TASKS + 1))
    result = run_here(*base, "enqueue", "--file", str(path))
    assert result.returncode == 2
    assert f"{MAX_FILE_TASKS + 1:,} tasks" in result.stderr
    assert "split" in result.stderr
    assert q.stats().total == 0
    path.write_text(line * MAX_FILE_TASKS)
    result = run_here(*base, "enqueue", "--file", str(path))
    assert result.returncode == 0, result.stderr
    assert q.stats().counts[TaskState.QUEUED] == MAX_FILE_TASKS

    heavy = json.dumps({"name": "job", "user_id": "u", "payload": "x" * 1_000_000}) + "\n"
    count = MAX_FILE_BYTES // 1_000_000 + 3
    path.write_text(heavy * count)
    result = run_here(*base, "enqueue", "--file", str(path))
    assert result.returncode == 2
    assert f"bytes of tasks; one atomic push takes at most {MAX_FILE_BYTES:,}" in result.stderr
    assert q.stats().counts[TaskState.QUEUED] == MAX_FILE_TASKS
    q.close()


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
@pytest.mark.parametrize(
    ("args", "line", "tail"),
    [
        (["--priority", "9"], {"priority": 9}, "priority: must be an integer 1..5"),
        (["--delay", "-1"], {"delay": -1}, "delay: must not be negative"),
        (["--max-retries", "-1"], {"max_retries": -1}, "max_retries: "),
        (["--cost", "0"], {"cost": 0}, "cost: "),
        (["--task-id", ""], {"task_id": ""}, "task_id: must not be empty"),
        (["x" * 2000], {"payload": "x" * 2000}, "payload: is 2002 bytes; the limit is 1000"),
    ],
)
def test_single_and_file_forms_give_the_same_answer(
    cli_queue: tuple[list[str], FairQueue],
    tmp_path: Path,
    args: list[str],
    line: dict[str, object],
    tail: str,
) -> None:
    base, q = cli_queue
    if args and not args[0].startswith("--"):  # a payload: give it as a JSON string
        args = [json.dumps(args[0])]
    env = {"FAIRQUE_QUEUE__MAX_PAYLOAD_BYTES": "1000"}
    single = run_here(*base, "enqueue", "job", *args, "--user", "u", env=env)
    path = write_lines(tmp_path / "one.jsonl", [{"name": "job", "user_id": "u", **line}])
    batch = run_here(*base, "enqueue", "--file", str(path), env=env)
    assert single.returncode == batch.returncode == 2
    first = error_lines(single.stderr)
    assert len(first) == 1
    assert first[0].startswith("error: " + tail), single.stderr
    assert error_lines(batch.stderr)[0] == first[0].replace("error: ", f"error: {path}:1: ")
    assert q.stats().total == 0
    q.close()


def test_file_and_single_task_options_do_not_mix(
    cli_queue: tuple[list[str], FairQueue], tmp_path: Path
) -> None:
    base, q = cli_queue
    path = write_lines(tmp_path / "ok.jsonl", [{"name": "job", "user_id": "u"}])
    mixed = run_here(*base, "enqueue", "--file", str(path), "--user", "u")
    assert mixed.returncode == 2
    assert "not both" in mixed.stderr
    missing = run_here(*base, "enqueue", "--file", str(tmp_path / "missing.jsonl"))
    assert missing.returncode == 2
    assert "cannot read" in missing.stderr
    nan = run_here(*base, "enqueue", "job", '{"a": NaN}', "--user", "u")
    assert nan.returncode == 2
    assert error_lines(nan.stderr) == ["error: payload: NaN is not allowed"]
    inf = run_here(*base, "enqueue", "job", "--user", "u", "--delay", "inf")
    assert inf.returncode == 2
    assert "delay: must be a number of seconds" in inf.stderr
    made = run_here(*base, "enqueue", "job", "[1]", "--user", "u", "--json")
    assert made.returncode == 0, made.stderr
    (task_id,) = json.loads(made.stdout)["task_ids"]
    assert q.get(task_id).payload == [1]  # type: ignore[union-attr]
    assert q.stats().total == 1
    dear = run_here(*base, "enqueue", "job", "--user", "u", "--cost", "4", "--json")
    assert dear.returncode == 0, dear.stderr
    (task_id,) = json.loads(dear.stdout)["task_ids"]
    assert q.get(task_id).cost == 4  # type: ignore[union-attr]
    q.close()


def test_a_file_takes_the_http_task_shape_and_the_older_names(
    cli_queue: tuple[list[str], FairQueue], tmp_path: Path
) -> None:
    """The file's fields are the HTTP API's (one outward task shape); the older
    command-line names are still read, and a problem names the field as written."""
    base, q = cli_queue
    lines: list[object] = [
        {"name": "a", "user_id": "u", "task_id": "new", "priority": "critical",
         "timeout_seconds": 5, "result_ttl_seconds": 60, "delay_seconds": 30},
        {"name": "b", "user_id": "u", "task_id": "at", "execute_after": "2030-01-01T00:00:00Z",
         "depends_on": ["new"], "on_dependency_failure": "wait", "max_retries": 2.0},
        {"name": "c", "user_id": "u", "task_id": "old", "priority": 6, "timeout": 5,
         "result_ttl": 60, "delay": 30},
    ]  # fmt: skip
    path = write_lines(tmp_path / "shape.jsonl", lines)
    result = run_here(*base, "enqueue", "--file", str(path))
    assert result.returncode == 0, result.stderr
    new, at, old = (q.get(i) for i in ("new", "at", "old"))
    assert new is not None
    assert old is not None
    assert at is not None
    for task in (new, old):
        assert (task.priority.name, task.timeout, task.result_ttl) == ("CRITICAL", 5, 60)
        assert task.state is TaskState.SCHEDULED
    assert at.execute_after is not None
    assert at.execute_after.year == 2030
    assert (at.on_dependency_failure, at.max_retries) == ("wait", 2)
    bad = write_lines(
        tmp_path / "bad.jsonl",
        [{"name": "a", "user_id": "u", "timeout": -1},
         {"name": "a", "user_id": "u", "timeout_seconds": -1},
         {"name": "a", "user_id": "u", "execute_after": "soon"},
         {"name": "a", "user_id": "u", "priority": "urgent"}],
    )  # fmt: skip
    refused = run_here(*base, "enqueue", "--file", str(bad))
    assert refused.returncode == 2
    lines_out = error_lines(refused.stderr)
    assert lines_out[:4] == [
        f"error: {bad}:1: timeout: Input should be greater than 0",
        f"error: {bad}:2: timeout_seconds: Input should be greater than 0",
        f"error: {bad}:3: execute_after: not an ISO 8601 time: 'soon'",
        f'error: {bad}:4: priority: must be an integer 1..5, or "critical", got "urgent"',
    ]
    q.close()
