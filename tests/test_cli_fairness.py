"""``fairque fairness`` and ``fairque tenants`` against a real server."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from servers import ServerInfo
from support import run_here, unique_queue

from fairque import FairQueue, Task

pytestmark = pytest.mark.server_kinds("valkey", "cluster")


@pytest.fixture
def cli_queue(server: ServerInfo) -> Iterator[tuple[list[str], FairQueue]]:
    name = unique_queue("cli-fair")
    q = FairQueue.from_url(server.url, name)
    yield ["--url", server.url, "--queue", name], q
    q.purge()
    q.close()


def test_show_and_set_the_mode(cli_queue: tuple[list[str], FairQueue]) -> None:
    base, q = cli_queue
    shown = run_here(*base, "fairness")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"{q.queue}: fair by worker time"
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


def test_tenants_table_and_json(cli_queue: tuple[list[str], FairQueue]) -> None:
    base, q = cli_queue
    empty = run_here(*base, "tenants", "--json")
    assert json.loads(empty.stdout)["tenants"] == [
        {"user_id": "", "weight": 1, "started": 0, "finished": 0, "failed": 0,
         "busy_seconds": 0.0, "share": 0.0, "fair_share": 0.0}
    ]  # fmt: skip
    q.set_user_limits("a", weight=3)
    q.push_many([Task(user_id=u, name="n") for u in ("a", "b", "b")])
    for _ in range(3):
        task = q.pop("w")
        assert task is not None
        assert q.complete(task)
    listed = run_here(*base, "tenants", "--json")
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert doc["fairness"] == "time"
    rows = {r["user_id"]: r for r in doc["tenants"]}
    assert rows["a"]["started"] == 1
    assert rows["b"]["finished"] == 2
    assert rows["a"]["fair_share"] == pytest.approx(0.75)
    assert sum(r["share"] for r in doc["tenants"]) == pytest.approx(1.0)
    table = run_here(*base, "tenants", "--limit", "1")
    assert table.returncode == 0, table.stderr
    assert "(the rest)" in table.stdout
    assert "fair by worker time" in table.stdout
    assert run_here(*base, "tenants", "--limit", "0").returncode == 2
