"""Every script that writes has a resend test; a new script cannot come without one.

A resend test runs a call, then the very same call again (what redis-py does when a
reply is lost) and holds the second run to the first's answer and to the keyspace it
left (``helpers.support.resend``). This module keeps the one table of where each
script's resend test is: a case here (``CASES``: the calls no other test replays by
the keyspace; ``REFRESHING``: calls whose resend refreshes a time, which may move on
by the time between the sends and nothing else), or the test elsewhere that does
(``ELSEWHERE``). A script that writes
nothing (``READERS``, each with what it reads) needs none, and the server says so:
none of the commands it calls carries the ``write`` flag in ``COMMAND INFO``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from helpers.servers import SyncClient
from helpers.support import expire_lease, resend, resend_refreshing, unique_queue

from fairque import FairQueue, Task, WorkerInfo
from fairque.core.records import Call
from fairque.core.scripts import LUA_DIR, load_all

TESTS = Path(__file__).resolve().parents[1]

#: scripts that write nothing, and what each reads
READERS = {
    "constraints": "the constraint definitions and their buckets' use",
    "due_schedules": "the schedules due now (the leader then fires each)",
    "list_tasks": "a page of a state's registry or of a tenant's lanes",
    "next_wakeup": "the earliest due time of the delayed, lease and constraint sets",
    "schedules": "a page of the schedules",
    "shard_state": "a shard's readiness and ring position",
    "tenants": "the per-tenant service counts",
    "workers": "the worker registry",
}

#: scripts whose resend test is elsewhere: script -> "file::test"
ELSEWHERE = {
    "add_schedule": "schedules/test_schedules_replay.py::test_resent_schedule_changes",
    "bulk_delete": "client/test_dead_letters.py::test_resent_batches_act_once_and_answer_the_same",
    "bulk_retry": "client/test_dead_letters.py::test_resent_batches_act_once_and_answer_the_same",
    "cancel": "core/test_replay.py::test_resent_cancel_and_retry",
    "complete": "core/test_replay.py::test_resent_complete_succeeds_again_and_finishes_once",
    "complete_and_pop": "core/test_replay.py::test_resent_complete_and_pop",
    "create_shards": "shards/test_shards.py::test_creating_the_shards_is_safe_to_resend",
    "define_constraint": "constraints/test_constraints_replay.py::test_resent_define",
    "extend": "core/test_replay.py::test_resent_extend_and_limits",
    "fail": "core/test_replay.py::test_resent_fail_answers_the_same",
    "fire_schedule": "schedules/test_schedules_replay.py::test_resent_fire_enqueues_once",
    "pause_schedule": "schedules/test_schedules_replay.py::test_resent_schedule_changes",
    "pop": "core/test_replay.py::test_resent_pop_returns_the_same_leases",
    "push": "core/test_replay.py::test_resent_batch_with_dependencies",
    "push_one": "core/test_replay.py::test_resent_push_writes_the_task_once",
    "remove_constraint": "constraints/test_constraints_replay.py::test_resent_remove",
    "remove_schedule": "schedules/test_schedules_replay.py::test_resent_schedule_changes",
    "requeue": "core/test_replay.py::test_resent_requeue_answers_the_same",
    "resize": "shards/test_shards.py::test_a_resize_is_checked_and_safe_to_resend",
    "resume_schedule": "schedules/test_schedules_replay.py::test_resent_schedule_changes",
    "retry": "core/test_replay.py::test_resent_cancel_and_retry",
    "set_fairness": "core/test_replay.py::test_resent_fairness_switch_answers_the_same",
    "set_group_limits": "client/test_groups.py::test_a_resent_grouping_changes_nothing",
    "set_user_limits": "core/test_replay.py::test_resent_extend_and_limits",
    "update_schedule": "schedules/test_schedules_replay.py::test_resent_schedule_changes",
}


def _leased(q: FairQueue, user: str = "u") -> Task:
    q.enqueue("n", {"x": 1}, user_id=user)
    task = q.pop("w")
    assert task is not None
    return task


def _worker(worker_id: str) -> WorkerInfo:
    return WorkerInfo(
        worker_id=worker_id, queue="q", host="h", pid=1, concurrency=2,
        started_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
    )  # fmt: skip


def _unregister(q: FairQueue, client: SyncClient) -> Call[Any]:
    q._run(q.ops.register_worker(_worker("w1"), 60))
    return q.ops.unregister_worker("w1")


def _flush(q: FairQueue, client: SyncClient) -> Call[Any]:
    assert q.complete(_leased(q))  # counted by this client, not flushed yet
    call = q.ops.flush_metrics()
    assert call is not None
    return call


def _place(q: FairQueue, client: SyncClient) -> Call[Any]:
    for user in ("a", "b"):
        q.enqueue("n", user_id=user)
    return q.ops.place()


def _reclaim(q: FairQueue, client: SyncClient) -> Call[Any]:
    expire_lease(client, q.queue, _leased(q).task_id or "")
    return q.ops.reclaim(100)


def _maintain(q: FairQueue, client: SyncClient) -> Call[Any]:
    task = _leased(q)
    assert q.complete(task, {"ok": 1})
    return q.ops.maintain(100)


def _purge(q: FairQueue, client: SyncClient) -> Call[Any]:
    q.push_many([Task(user_id=f"u{i % 3}", name="n") for i in range(10)])
    _leased(q)
    return q.ops.purge(100)


def _cleanup(q: FairQueue, client: SyncClient) -> Call[Any]:
    up = q.enqueue("up", user_id="u")
    q.enqueue("down", user_id="u", depends_on=[up.task_id or ""])
    return q.ops.cleanup_dependencies(0, 100)


def _stats(q: FairQueue, client: SyncClient) -> Call[Any]:
    for user in ("a", "b"):
        q.enqueue("n", user_id=user)  # (the intake: a stats call places it)
    return q.ops.stats(10)


def _result(q: FairQueue, client: SyncClient) -> Call[Any]:
    task = _leased(q)
    assert q.complete(task, {"ok": 1})
    return q.ops.result(task.task_id or "", True, 0, "r1")


def _lift_floor(q: FairQueue, client: SyncClient) -> Call[Any]:
    q.push_many([Task(user_id=u, name="n") for u in ("a", "b", "c")])
    return q.ops.lift_floor(50_000)


def _renew(q: FairQueue, client: SyncClient) -> Call[Any]:
    q._run(q.ops.acquire_scheduler_lock("tok", 30))
    return q.ops.renew_scheduler_lock("tok", 30)


def _release(q: FairQueue, client: SyncClient) -> Call[Any]:
    q._run(q.ops.acquire_scheduler_lock("tok", 30))
    return q.ops.release_scheduler_lock("tok")


#: readies a queue and gives the call to resend
Builder = Callable[[FairQueue, SyncClient], Call[Any]]

#: script -> (the case's name, a function that readies the queue and gives the call)
CASES: dict[str, list[tuple[str, Builder]]] = {
    "cleanup_dependencies": [("orphan pass", _cleanup)],
    "lift_floor": [("lift", _lift_floor)],
    "maintain": [("trim", _maintain)],
    "place": [("place", _place)],
    "purge": [("purge", _purge)],
    "reclaim": [("reclaim", _reclaim)],
    "release_scheduler_lock": [("release", _release)],
    "result": [("consume", _result)],
    "stats": [("place and count", _stats)],
    "unregister_worker": [("unregister", _unregister)],
    "flush_metrics": [("flush", _flush)],
}
#: answers that count the work a call did (the resend finds it done: 0, False), or
#: carry the server's clock; their resends are held to the keyspace alone
_COUNTS = {
    "cleanup_dependencies": "tasks examined and canceled by this pass",
    "maintain": "entries this call removed",
    "place": "tasks this call placed",
    "purge": "tasks this call deleted",
    "reclaim": "leases this call reclaimed",
    "stats": "counts as of the server's clock, with its time",
    "unregister_worker": "whether this call removed the registration",
    "flush_metrics": "whether this call added the counts",
}

#: writing scripts whose resend refreshes a time (a heartbeat's or a lock's expiry, a
#: lease deadline): held to the same keys, fields and members, with only numbers moved
#: on by at most the time between the sends (``resend_refreshing``)
REFRESHING: dict[str, Builder] = {
    "acquire_scheduler_lock": lambda q, _: q.ops.acquire_scheduler_lock("tok", 30),
    "extend_many": lambda q, _: q.ops.extend_many([_leased(q, "a"), _leased(q, "b")], 30),
    "register_worker": lambda q, _: q.ops.register_worker(_worker("w1"), 60),
    "renew_scheduler_lock": _renew,
}


def _scripts() -> set[str]:
    return {path.stem for path in LUA_DIR.glob("*.lua")}


def test_every_script_is_replayed_or_reads_only() -> None:
    """The table names every script exactly once."""
    named = [*READERS, *ELSEWHERE, *CASES, *REFRESHING]
    assert sorted(named) == sorted(set(named)), "a script is in two tables"
    missing = sorted(_scripts() - set(named))
    assert not missing, f"scripts with no resend test (add a case to CASES): {missing}"
    assert not set(named) - _scripts(), "the table names a script that does not exist"


@pytest.mark.parametrize("script", sorted(ELSEWHERE))
def test_a_resend_test_named_elsewhere_exists_and_resends(script: str) -> None:
    where, name = ELSEWHERE[script].split("::")
    tree = ast.parse((TESTS / where).read_text())
    found = [
        node for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
    ]  # fmt: skip
    assert found, f"{ELSEWHERE[script]} does not exist"
    assert "resend(" in ast.unparse(found[0]), f"{ELSEWHERE[script]} resends nothing"


@pytest.mark.server_kinds("valkey")
def test_a_reader_calls_no_writing_command(redis_client: SyncClient) -> None:
    """Each script in ``READERS`` (its includes inlined) calls only commands the server
    does not flag as writes."""
    scripts = load_all()
    for script in READERS:
        commands = set(re.findall(r"redis\.p?call\('([A-Za-z]+)'", scripts[script].source))
        assert commands, script
        for command in sorted(commands):
            reply: Any = redis_client.execute_command("COMMAND", "INFO", command)  # type: ignore[no-untyped-call]
            assert "write" not in reply[command.lower()]["flags"], f"{script} calls {command}"


@pytest.mark.parametrize(
    ("script", "build"),
    [(s, b) for s, cases in sorted(CASES.items()) for _, b in cases],
    ids=[f"{s}-{n}" for s, cases in sorted(CASES.items()) for n, _ in cases],
)
def test_a_resend_answers_the_same_and_changes_nothing(
    server: Any,
    redis_client: SyncClient,
    script: str,
    build: Callable[[FairQueue, SyncClient], Call[Any]],
) -> None:
    q = FairQueue.from_url(server.url, unique_queue("resend"))
    try:
        call = build(q, redis_client)
        assert call.script is not None
        assert call.script.name == script
        first, second = resend(q, redis_client, call)
        if script in _COUNTS:
            assert type(second) is type(first)
        else:
            assert second == first
    finally:
        q.purge()
        q.close()


@pytest.mark.parametrize("script", sorted(REFRESHING))
def test_a_resend_that_refreshes_a_time_only_moves_it_on(
    server: Any, redis_client: SyncClient, script: str
) -> None:
    q = FairQueue.from_url(server.url, unique_queue("resend"))
    try:
        call = REFRESHING[script](q, redis_client)
        assert call.script is not None
        assert call.script.name == script
        first, second = resend_refreshing(q, redis_client, call)
        assert second == first
    finally:
        q.purge()
        q.close()
