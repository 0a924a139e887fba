"""fairque as a restricted ACL user.

The rule is read from the TLS and ACLs page (``docs/howto/tls.md``), so the page and
this test cannot drift apart: a user limited to one queue's keys and the commands the
page lists runs producers, a worker and the read paths against a real server, and the
server's ``ACL LOG`` records no refusal. A static check proves the page lists every
command fairque sends, from its clients or from inside its Lua scripts.
"""

from __future__ import annotations

import re
import shlex
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis
from helpers.servers import ServerInfo, SyncClient, connect

from fairque import (
    AsyncFairQueue,
    FairQueue,
    Registry,
    ServerError,
    TaskState,
    Worker,
    WorkerConfig,
)

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "howto" / "tls.md"
SRC = ROOT / "src" / "fairque"
#: modules that send plain commands (not scripts): ``("CMD", ...)`` tuples
PLAIN_SENDERS = ("core/ops/plain.py", "core/ops/inspection.py", "schedules/codec.py")
PASSWORD = "s3cret"


def documented_rule() -> tuple[list[str], list[str]]:
    """The page's ``ACL SETUSER`` words after the user name, and its cluster additions."""
    text = PAGE.read_text()
    block = re.search(r"```text\n(ACL SETUSER .*?)```", text, re.S)
    assert block is not None, "docs/howto/tls.md has no ACL SETUSER block"
    words = shlex.split(block[1].replace("\\\n", " "))
    extra = re.search(r"For a cluster client add `([^`]+)`", text)
    assert extra is not None, "docs/howto/tls.md names no cluster additions"
    return words[3:], extra[1].split()


def sent_commands() -> set[str]:
    """Every command fairque sends: the scripts' inner calls, the plain commands, and
    those the clients send directly (``EVALSHA``/``EVAL``, ``TIME``, ``INFO``)."""
    found = {"evalsha", "eval", "time", "info"}
    for path in (SRC / "core" / "lua").rglob("*.lua"):
        found |= {c.lower() for c in re.findall(r"redis\.p?call\(\s*['\"](\w+)", path.read_text())}
    for rel in PLAIN_SENDERS:
        found |= {c.lower() for c in re.findall(r'\("([A-Z]+)",', (SRC / rel).read_text())}
    return found


def test_the_documented_rule_names_every_command_fairque_sends() -> None:
    rule, _ = documented_rule()
    allowed = {w[1:].lower() for w in rule if w.startswith("+") and not w.startswith("+@")}
    assert len(sent_commands()) > 40  # the scan found the scripts
    assert sent_commands() - allowed == set()
    assert "-@all" in rule
    assert "resetkeys" in rule
    assert "resetchannels" in rule
    patterns = [w for w in rule if w.startswith("~")]
    assert patterns == ["~fq:{emails}:*", "~fq:queues"]


def _on_every_node(admin: SyncClient, *args: Any) -> Any:
    if isinstance(admin, redis.RedisCluster):
        nodes = redis.RedisCluster.ALL_NODES
        return admin.execute_command(*args, target_nodes=nodes)  # type: ignore[no-untyped-call]
    return {"node": admin.execute_command(*args)}  # type: ignore[no-untyped-call]


def _refusals(admin: SyncClient, user: str) -> list[str]:
    found = []
    for entries in _on_every_node(admin, "ACL", "LOG").values():
        for entry in entries:
            fields = {k.decode() if isinstance(k, bytes) else k: v for k, v in entry.items()}
            if fields.get("username") not in (user, user.encode()):
                continue
            if fields.get("object") in ("client|setinfo", b"client|setinfo"):
                continue  # redis-py asks, and ignores a refusal (see the page)
            found.append(f"{fields.get('reason')!r} {fields.get('object')!r}")
    return found


@pytest.fixture
def restricted(server: ServerInfo) -> Any:
    """A user limited by the page's rule to one fresh queue; yields (url, queue, admin)."""
    queue = f"acl-{uuid.uuid4().hex[:8]}"
    user = f"fairque-{queue}"
    rule, cluster_extra = documented_rule()
    words = [w.replace("{emails}", "{" + queue + "}") for w in rule if not w.startswith(">")]
    words += [f">{PASSWORD}"] + (cluster_extra if server.cluster else [])
    admin = connect(server)
    _on_every_node(admin, "ACL", "SETUSER", user, "reset", *words)
    url = server.url.replace("redis://", f"redis://{user}:{PASSWORD}@", 1)
    try:
        yield url, queue, admin, user
    finally:
        _on_every_node(admin, "ACL", "DELUSER", user)
        FairQueue(admin, queue).purge()
        admin.close()


def test_a_restricted_user_runs_producers_a_worker_and_the_reads(restricted: Any) -> None:
    url, queue, admin, user = restricted
    q = FairQueue.from_url(url, queue=queue)
    try:
        # producer and a hand-driven consumer: push, lease, complete, fail, retry
        first = q.enqueue("job", {"n": 0}, user_id="ann").task_id
        assert first is not None
        assert q.enqueue("job", {"n": 0}, user_id="ann", task_id=first).task_id == first
        task = q.pop(worker_id="hand")
        assert task is not None
        assert task.task_id == first
        assert q.extend(task, seconds=30)
        assert q.complete(task, result={"ok": True}) is True
        assert q.result(first, timeout=1) == {"ok": True}
        doomed = q.enqueue("job", {"n": 1}, user_id="bob", max_retries=0)
        leased = q.pop(worker_id="hand")
        assert leased is not None
        assert leased.task_id == doomed.task_id
        assert q.fail(leased, RuntimeError("boom"), retry=False) == TaskState.FAILED
        assert doomed.task_id is not None
        assert q.retry(doomed.task_id) == TaskState.QUEUED
        assert q.cancel(doomed.task_id) is True
        q.set_user_limits("ann", weight=2, max_in_flight=5)
        q.xcom_push("shared", {"rows": 3}, ttl=60)
        assert q.xcom_pull("shared") == {"rows": 3}
        q.define_constraint(id="slow", name="job", concurrency=2)
        q.add_schedule(schedule_id="tick", name="job", user_id="ops", interval_seconds=60)

        # a worker round trip: plain and dependent tasks, then burst exit
        registry = Registry()

        @registry.task(name="job")
        def job(payload: Any) -> Any:
            return payload

        pushed = [q.enqueue("job", {"n": i}, user_id=f"u{i % 3}") for i in range(2, 8)]
        upstream = pushed[0].task_id
        assert upstream is not None
        after = q.enqueue("job", {"n": 9}, user_id="u0", depends_on=[upstream])
        worker_queue = AsyncFairQueue.from_url(url, queue=queue)
        Worker(worker_queue, registry, config=WorkerConfig(burst=True)).run()
        for t in [*pushed, after]:
            assert t.task_id is not None
            assert q.result(t.task_id, timeout=5) == t.payload
        # a delayed task is promoted by the lease path
        later = q.enqueue("job", {"n": 10}, user_id="u1", delay=0.1)
        time.sleep(0.2)
        due = q.pop(worker_id="hand")
        assert due is not None
        assert due.task_id == later.task_id
        assert q.requeue(due) == TaskState.QUEUED

        # the read paths of status, the dashboard and /metrics
        stats = q.stats()
        assert stats.counts[TaskState.FINISHED] >= 8
        assert q.list_tasks(state=TaskState.FINISHED, limit=5).tasks
        assert q.list_tasks(user_id="u0").tasks
        assert q.metrics() is not None
        assert [c.constraint.id for c in q.constraints()] == ["slow"]
        assert [s.schedule_id for s in q.schedules()] == ["tick"]
        q.maintain()
        assert q.workers() == []
        assert _refusals(admin, user) == []

        # the rule holds: another queue's keys are refused
        other = FairQueue(q.client, "elsewhere")
        with pytest.raises(ServerError, match=r"(?i)no permissions"):
            other.enqueue("job", None, user_id="ann")
        with pytest.raises(redis.exceptions.NoPermissionError):
            q.client.execute_command("FLUSHALL")  # type: ignore[no-untyped-call]
    finally:
        q.close()


def test_a_rule_without_the_registry_key_still_pushes(server: ServerInfo) -> None:
    """A rule written before the registry existed: pushes and workers run; the queue
    stays out of the registry, and the client stops asking after the first refusal."""
    queue = f"acl-{uuid.uuid4().hex[:8]}"
    user = f"fairque-{queue}"
    rule, cluster_extra = documented_rule()
    words = [
        w.replace("{emails}", "{" + queue + "}")
        for w in rule
        if not w.startswith(">") and w != "~fq:queues"
    ]
    admin = connect(server)
    _on_every_node(admin, "ACL", "SETUSER", user, "reset", *words, f">{PASSWORD}",
                   *(cluster_extra if server.cluster else []))  # fmt: skip
    url = server.url.replace("redis://", f"redis://{user}:{PASSWORD}@", 1)
    q = FairQueue.from_url(url, queue=queue)
    try:
        for i in range(3):
            assert q.enqueue("job", i, user_id="ann").task_id is not None
        assert q.stats().counts[TaskState.QUEUED] == 3
        refused = [r for r in _refusals(admin, user) if "fq:queues" in r or "sadd" in r]
        assert len(refused) == 1  # once, not once per push
        assert queue not in FairQueue(admin, "any").queues()
    finally:
        q.close()
        _on_every_node(admin, "ACL", "DELUSER", user)
        FairQueue(admin, queue).purge()
        admin.close()
