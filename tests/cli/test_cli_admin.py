"""``fairque result``, ``users``, ``limits``, ``fairness``, ``tenants`` and ``status --watch``.
Real CLI, real servers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from helpers.servers import ServerInfo
from helpers.support import PATIENCE, eviction_policy, run_here, unique_queue
from typer.testing import CliRunner

from fairque import FairQueue, Task
from fairque.cli.commands import app

# the command line's own behaviour: the engine's tests cover the standalone Redis kind
pytestmark = pytest.mark.server_kinds("valkey", "cluster")


@pytest.fixture
def cli_queue(server: ServerInfo) -> Iterator[tuple[list[str], FairQueue]]:
    name = unique_queue("cli-adm")
    q = FairQueue.from_url(server.url, name)
    yield ["--url", server.url, "--queue", name], q
    q.close()


def test_result(cli_queue: tuple[list[str], FairQueue]) -> None:
    base, q = cli_queue
    q.enqueue("job", None, user_id="u", task_id="ok")
    q.enqueue("job", None, user_id="u", task_id="bad")
    q.enqueue("job", None, user_id="u", task_id="open")
    for task_id, done in (("ok", True), ("bad", False)):
        task = q.pop(worker_id="w")
        assert task is not None
        assert task.task_id == task_id
        if done:
            assert q.complete(task, result={"sum": 3, "tag": "[x]"})
        else:
            q.fail(task, "boom [disk full]", retry=False)

    shown = run_here(*base, "result", "ok")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == {"sum": 3, "tag": "[x]"}
    failed = run_here(*base, "result", "bad")
    assert failed.returncode == 1
    assert failed.stderr.strip() == "error: task bad failed: boom [disk full]"
    missing = run_here(*base, "result", "nope")
    assert missing.returncode == 1
    assert "no task 'nope' in queue" in missing.stderr
    started = time.monotonic()
    waiting = run_here(*base, "result", "open", "--wait", "0.5")
    assert waiting.returncode == 1
    assert "has not ended within 0.5 s" in waiting.stderr
    assert time.monotonic() - started >= 0.5
    now = run_here(*base, "result", "open")
    assert "--wait SECONDS" in now.stderr

    q.cancel("open")
    canceled = run_here(*base, "result", "open")
    assert canceled.returncode == 1
    assert "task open was canceled" in canceled.stderr


def test_result_and_task_show_the_kept_traceback(
    cli_queue: tuple[list[str], FairQueue],
) -> None:
    base, q = cli_queue
    q.enqueue("job", None, user_id="u", task_id="tb")
    task = q.pop(worker_id="w")
    assert task is not None
    kept = "Traceback (most recent call last):\n  File \"h.py\", line 3, in job\nKeyError: '[k]'"
    q.fail(task, "KeyError: '[k]'", retry=False, traceback=kept)
    runner = CliRunner()
    failed = runner.invoke(app, ["result", "tb", *base])
    assert failed.exit_code == 1
    assert failed.stderr == f"{kept}\nerror: task tb failed: KeyError: '[k]'\n"
    shown = runner.invoke(app, ["task", "tb", "--json", *base])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["traceback"] == kept


def test_users_and_limits(cli_queue: tuple[list[str], FairQueue]) -> None:
    base, q = cli_queue
    for i in range(3):
        q.enqueue("job", None, user_id="[big]", task_id=f"b{i}")
    q.enqueue("job", None, user_id="small", task_id="s0")
    listed = run_here(*base, "users", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["user_id"], r["ready"], r["in_flight"]) for r in rows] == [
        ("[big]", 3, 0),
        ("small", 1, 0),
    ]
    table = run_here(*base, "users")
    assert "[big]" in table.stdout

    capped = run_here(*base, "limits", "[big]", "--weight", "2", "--max-in-flight", "1")
    assert capped.returncode == 0, capped.stderr
    assert capped.stdout.strip() == "[big]: weight 2, at most 1 in flight"
    rows = json.loads(run_here(*base, "users", "--json").stdout)
    assert [(r["user_id"], r["weight"], r["max_in_flight"]) for r in rows] == [
        ("[big]", 2, 1),
        ("small", 1, None),
    ]
    table = run_here(*base, "users")
    assert "weight" in table.stdout
    assert "cap" in table.stdout
    leased = [t.user_id for t in q.pop_batch(10, worker_id="w")]
    assert sorted(leased) == ["[big]", "small"]  # the cap holds [big] to one lease
    quota = run_here(*base, "limits", "[big]", "--max-queued", "1")
    assert quota.stdout.strip() == "[big]: at most 1 queued"
    load = q.user_loads(["[big]"])[0]  # only the limit given changed
    assert (load.weight, load.cap, load.max_queued) == (2, 1, 1)
    uncapped = run_here(*base, "limits", "[big]", "--weight", "1", "--max-in-flight", "0")
    assert uncapped.stdout.strip() == "[big]: weight 1, no in-flight cap"
    assert len(q.pop_batch(10, worker_id="w")) == 2
    q.enqueue("job", None, user_id="[big]")  # its backlog is at its quota of 1
    refused = run_here(*base, "enqueue", "job", "--user", "[big]")
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr.count("\n") == 1
    assert "QuotaExceeded" in refused.stderr
    assert "'[big]'" in refused.stderr
    default = run_here(*base, "limits", "[big]", "--max-queued", "0")
    assert default.stdout.strip() == "[big]: the queue's default backlog quota"
    most = run_here(*base, "limits", "[big]", "--max-bytes", "4096")
    assert most.stdout.strip() == "[big]: at most 4,096 bytes waiting"
    assert q.user_loads(["[big]"])[0].max_bytes == 4096
    assert run_here(*base, "limits", "[big]", "--max-bytes", "-1").returncode == 2
    unbound = run_here(*base, "limits", "[big]", "--max-bytes", "0")
    assert unbound.stdout.strip() == "[big]: the queue's default byte quota"
    assert q.user_loads(["[big]"])[0].max_bytes is None
    for user in ("g1", "g2", "solo"):
        q.push_many([Task(user_id=user, name="job") for _ in range(20)])
    for user in ("g1", "g2"):
        grouped = run_here(*base, "limits", user, "--group", "team")
        assert grouped.stdout.strip() == f"{user}: in group team", grouped.stderr
    heavier = run_here(*base, "group-limits", "team", "--weight", "2")
    assert heavier.stdout.strip() == "group team: weight 2", heavier.stderr
    shares = Counter(t.user_id for t in q.pop_batch(31, worker_id="w"))
    assert abs(shares["g1"] + shares["g2"] - 2 * shares["solo"]) <= 2, shares
    assert run_here(*base, "group-limits", "team", "--weight", "0").returncode == 2
    capped = run_here(*base, "group-limits", "team", "--max-in-flight", "2")
    assert capped.stdout.strip() == "group team: at most 2 in flight", capped.stderr
    queued = sum(load.queued for load in q.user_loads(["g1", "g2"]))
    quota = run_here(*base, "group-limits", "team", "--max-queued", str(queued))
    assert quota.stdout.strip() == f"group team: at most {queued} queued", quota.stderr
    shown = run_here(*base, "group-limits", "team")
    assert shown.stdout.strip() == (
        f"group team: weight 2, at most 2 in flight, {queued} queued of at most {queued}"
    ), shown.stderr
    full = run_here(*base, "enqueue", "job", "--user", "g2")
    assert full.returncode == 1
    assert "group 'team'" in full.stderr, full.stderr
    assert run_here(*base, "group-limits", "team", "--max-queued", "-1").returncode == 2
    unbound = run_here(*base, "group-limits", "team", "--max-queued", "0")
    assert unbound.stdout.strip() == "group team: no backlog quota"
    assert run_here(*base, "limits", "g1", "--group", "bad\nid").returncode != 0
    left = run_here(*base, "limits", "g1", "--group", "")
    assert left.stdout.strip() == "g1: in no group"
    shared = run_here(*base, "limits", "solo", "--floor", "0.2", "--ceiling", "0.5")
    assert shared.stdout.strip() == (
        "solo: at least 20% of the worker time, at most 50% while others wait"
    ), shared.stderr
    assert run_here(*base, "limits", "solo", "--floor", "1").returncode != 0
    bad = run_here(*base, "limits", "x", "--weight", "0")
    assert bad.returncode == 2
    nothing = run_here(*base, "limits", "x")
    assert nothing.returncode == 2
    assert "--max-queued" in nothing.stderr


def _exit_output(proc: subprocess.Popen[str]) -> str:
    """The stderr of ``proc`` once it exits; one that does not is made to dump where its
    threads are (faulthandler, on SIGABRT) and the test fails with that."""
    try:
        return proc.communicate(timeout=PATIENCE)[1]
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate(timeout=PATIENCE)
        raise AssertionError(f"no exit after SIGINT; where it was:\n{err}") from None


def test_status_watch_refreshes_until_interrupted(cli_queue: tuple[list[str], FairQueue]) -> None:
    base, q = cli_queue
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRQUE_")}
    proc = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-m", "fairque", *base, "status", "--watch",
         "--json", "--interval", "0.2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())
    q.enqueue("job", None, user_id="u")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        doc = json.loads(proc.stdout.readline())
        if doc["stats"]["counts"]["QUEUED"] == 1:
            break
    proc.send_signal(signal.SIGINT)
    err = _exit_output(proc)
    assert proc.returncode == 0, err
    assert first["stats"]["counts"]["QUEUED"] == 0
    assert doc["stats"]["counts"]["QUEUED"] == 1

    # a terminal as rich sees one, so the view is drawn at once and redrawn in place
    tty = {**env, "TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "COLUMNS": "120"}
    live = subprocess.Popen(
        [sys.executable, "-m", "fairque", *base, "status", "--watch", "--interval", "0.2"],
        env=tty, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert live.stdout is not None
    seen = b""
    deadline = time.monotonic() + 30
    while seen.count(b"QUEUED") < 2 and time.monotonic() < deadline:
        chunk = os.read(live.stdout.fileno(), 65536)
        if not chunk:
            break
        seen += chunk
    live.send_signal(signal.SIGINT)
    _, live_err = live.communicate(timeout=30)
    assert live.returncode == 0, live_err
    assert seen.count(b"QUEUED") >= 2, seen  # drawn, then drawn again
    assert b"Traceback" not in live_err


def test_show_and_set_the_mode(cli_queue: tuple[list[str], FairQueue]) -> None:
    base, q = cli_queue
    shown = run_here(*base, "fairness")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"{q.queue}: fair by worker time, a tenant at most 60 s ahead"
    changed = run_here(*base, "fairness", "count")
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.strip() == f"{q.queue}: fair by turns (count) (was worker time)"
    assert q.fairness() == "count"
    again = run_here(*base, "fairness", "count")
    assert again.stdout.strip() == f"{q.queue}: fair by turns (count)"
    bad = run_here(*base, "fairness", "fast")
    assert bad.returncode == 2
    assert "'fast' is not one of 'time', 'count'" in bad.stderr
    assert q.fairness() == "count"
    lead = run_here(*base, "fairness", "--max-lead", "120")
    assert lead.returncode == 0, lead.stderr
    assert q.max_lead() == 120.0
    assert q.fairness() == "count"  # the mode stays
    refused = run_here(*base, "fairness", "time", "--max-lead", "0")
    assert refused.returncode != 0
    assert "max_lead_seconds" in refused.stderr
    assert q.fairness() == "count"


def test_tenants_table_and_json(cli_queue: tuple[list[str], FairQueue]) -> None:
    base, q = cli_queue
    empty = run_here(*base, "tenants", "--json")
    assert json.loads(empty.stdout)["tenants"] == [
        {"user_id": "", "weight": 1, "started": 0, "finished": 0, "failed": 0,
         "busy_seconds": 0.0, "share": 0.0, "backlog": 0, "fair_share": None}
    ]  # fmt: skip
    q.set_user_limits("a", weight=3)
    q.push_many([Task(user_id=u, name="n") for u in ("a", "b", "b")])
    for _ in range(3):
        task = q.pop("w")
        assert task is not None
        assert q.complete(task)
    q.flush_metrics()  # what this client counted, for the command's reads
    listed = run_here(*base, "tenants", "--json")
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert doc["fairness"] == "time"
    rows = {r["user_id"]: r for r in doc["tenants"]}
    assert rows["a"]["started"] == 1
    assert rows["b"]["finished"] == 2
    # both got all they asked for: each is at its fair share, whatever the weights
    for user in ("a", "b"):
        assert rows[user]["fair_share"] == pytest.approx(rows[user]["share"])
    assert sum(r["share"] for r in doc["tenants"]) == pytest.approx(1.0)
    # both waiting: the time is shared by weight (3 to 1)
    q.push_many([Task(user_id=u, name="n") for u in ("a", "b")])
    rows = {r["user_id"]: r for r in json.loads(run_here(*base, "tenants", "--json").stdout)[
        "tenants"]}  # fmt: skip
    assert rows["a"]["backlog"] == rows["b"]["backlog"] == 1
    assert rows["a"]["fair_share"] == pytest.approx(0.75)
    assert rows["b"]["fair_share"] == pytest.approx(0.25)
    table = run_here(*base, "tenants", "--limit", "1")
    assert table.returncode == 0, table.stderr
    assert "(the rest)" in table.stdout
    assert "fair by worker time" in table.stdout
    assert run_here(*base, "tenants", "--limit", "0").returncode == 2


def test_show_and_resize_the_shards(cli_queue: tuple[list[str], FairQueue]) -> None:
    base, q = cli_queue
    q.enqueue("job", user_id="ann")  # a queue that holds tasks grows by a resize
    shown = run_here(*base, "queue", "shards")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"{q.queue}: 1 shard"
    grown = run_here(*base, "queue", "resize", "4")
    assert grown.returncode == 0, grown.stderr
    assert grown.stdout.strip() == f"{q.queue}: 4 shards (was 1)"
    shrunk = run_here(*base, "queue", "resize", "3")
    assert (
        shrunk.stdout.strip() == f"{q.queue}: 3 shards, 1 retired (drained by the workers) (was 4)"
    )
    doc = json.loads(run_here(*base, "queue", "shards", "--json").stdout)
    assert doc == {"queue": q.queue, "shards": 3, "retired": 1}
    bad = run_here(*base, "queue", "resize", "0")
    assert bad.returncode == 2
    assert "Invalid value for 'count': Input should be greater than or equal to 1" in bad.stderr
    assert FairQueue.from_url(base[1], q.queue).shards == 3
    # constraints over 4 shards (the retired one keeps its share): a global limit of 3
    # cannot be split, one of 4 can; a resize that would leave it too small is refused
    tiny = run_here(*base, "constraint", "add", "api", "--concurrency", "3")
    assert tiny.returncode == 2
    assert "cannot be split over 4 shards" in tiny.stderr
    added = run_here(*base, "constraint", "add", "api", "--concurrency", "4")
    assert added.returncode == 0, added.stderr
    listed = run_here(*base, "constraint", "list")
    assert "api" in listed.stdout, listed.stderr
    refused = run_here(*base, "queue", "resize", "5")
    assert refused.returncode == 2
    assert "cannot be split over 5 shards" in refused.stderr
    after = json.loads(run_here(*base, "queue", "shards", "--json").stdout)
    assert after == {"queue": q.queue, "shards": 3, "retired": 1}  # nothing changed


def test_status_names_a_server_that_would_lose_tasks(
    cli_queue: tuple[list[str], FairQueue], server: ServerInfo
) -> None:
    base, q = cli_queue
    q.enqueue("job", None, user_id="u")
    plain = run_here(*base, "status")
    assert "maxmemory-policy noeviction" in plain.stdout
    assert "warning" not in plain.stdout
    with eviction_policy(server, "volatile-lru"):
        shown = run_here(*base, "status")
        assert shown.returncode == 0, shown.stderr
        assert "warning:" in shown.stdout
        assert "volatile-lru" in shown.stdout
        doc = json.loads(run_here(*base, "status", "--json").stdout)
        assert doc["server"]["evicting"] is True
        assert "noeviction" in doc["server"]["warnings"][0]
