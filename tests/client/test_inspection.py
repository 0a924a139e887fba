"""The bounded reads the dashboard, ``/metrics`` and the CLI use, on every server kind
and both clients: nothing an upper floor shows is read around the client."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, queue_snapshot

import fairque
from fairque import Priority, TaskState
from fairque.core.keys import QueueKeys
from fairque.models import BucketUse, StartedTask, UserLoad


@pytest.mark.one_shard("turns between tenants are exact within a shard, on average across shards")
def test_recent_starts_show_who_waited_and_ran(make_queue: MakeQueue) -> None:
    q = make_queue()
    assert q.recent_starts() == []
    before = q.server_time_ms()
    done = q.enqueue("job", user_id="ann")
    failed = q.enqueue("job", user_id="bob", max_retries=0)
    running = q.enqueue("job", user_id="cid")
    for expected in (done, failed, running):
        task = q.pop(worker_id="w")
        assert task is not None
        assert task.task_id == expected.task_id
        if expected is done:
            assert q.complete(task, result=1)
        elif expected is failed:
            q.fail(task, "boom", retry=False)
    starts = q.recent_starts()
    by_id: dict[str | None, StartedTask] = {s.task_id: s for s in starts}
    assert set(by_id) == {done.task_id, failed.task_id, running.task_id}
    assert (by_id[done.task_id].state, by_id[done.task_id].user_id) == ("FINISHED", "ann")
    assert by_id[failed.task_id].state == "FAILED"
    assert by_id[running.task_id].ended is None
    assert by_id[running.task_id].run_seconds is None
    for start in starts:
        assert isinstance(start, StartedTask)
        assert start.name == "job"
        assert before - 5 <= start.waiting_since <= start.started <= q.server_time_ms() + 5
        assert start.wait_seconds == (start.started - start.waiting_since) / 1000
    assert [s.started for s in starts] == sorted((s.started for s in starts), reverse=True)
    with pytest.raises(fairque.ValidationError):
        q.recent_starts(sample=0)


def test_loads_backlogs_weights_and_the_ring(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.set_user_limits("ann", weight=3, max_in_flight=1)
    first = q.enqueue("job", user_id="ann")
    q.enqueue("job", user_id="ann", priority=Priority.CRITICAL)
    q.enqueue("job", user_id="bob")
    q.enqueue("job", user_id="bob")
    leased = q.pop(worker_id="w", assigned_users=["ann"])  # ann's critical task
    assert first.created_at is not None
    assert leased is not None
    assert leased.priority is Priority.CRITICAL
    ann, bob, nobody = q.user_loads(["ann", "bob", "nobody", "ann"])
    assert ann == UserLoad(
        user_id="ann", critical=0, normal=1, in_flight=1, weight=3, cap=1, ring_rank=None,
        capped=True, oldest_ms=round(first.created_at.timestamp() * 1000), queued=1,
    )  # fmt: skip
    assert (bob.ready, bob.in_flight, bob.weight, bob.cap, bob.ring_rank) == (2, 0, 1, None, 0)
    assert bob.oldest_ms is not None
    assert nobody == UserLoad(user_id="nobody")
    assert q.user_loads([]) == []
    assert q.backlogs(["ann", "bob", "nobody"]) == {"ann": (0, 1), "bob": (0, 2), "nobody": (0, 0)}
    assert q.user_weights(["bob", "ann"]) == [1, 3]
    assert q.capped_users() == ["ann"]
    assert q.ring_users() == (["bob"], 1)
    assert q.ring_users(limit=0) == ([], 1)
    assert q.ring_users(offset=1) == ([], 1)
    assert first.created_at is not None
    assert q.oldest_queued_ms() == round(first.created_at.timestamp() * 1000)


@pytest.mark.one_shard("a global limit below the shard count is not split (docs/howto/shards.md)")
def test_where_a_task_waits_and_what_it_is_linked_to(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.define_constraint(id="one", name="limited", concurrency=1)
    up = q.enqueue("job", user_id="ann")
    down = q.enqueue("job", user_id="ann", depends_on=[str(up.task_id)])
    ahead = q.enqueue("job", user_id="bob", priority=Priority.CRITICAL)
    later = q.enqueue("job", user_id="bob")
    holder = q.enqueue("limited", user_id="cid")
    parked = q.enqueue("limited", user_id="cid")
    assert q.task_links(str(up.task_id)) == ([str(down.task_id)], [])
    assert q.task_links(str(down.task_id)) == ([], [str(up.task_id)])
    place = q.wait_place(q.get(str(later.task_id)))  # type: ignore[arg-type]
    assert (place.lane, place.ahead, place.buckets) == ("normal", 1, [])
    assert place.ring_size == 3
    assert place.ring_rank is not None
    crit = q.wait_place(q.get(str(ahead.task_id)))  # type: ignore[arg-type]
    assert (crit.lane, crit.ahead) == ("critical", 0)
    leased = q.pop_batch(10, worker_id="w", assigned_users=["cid"])
    assert [t.task_id for t in leased] == [holder.task_id]
    stuck = q.get(str(parked.task_id))
    assert stuck is not None
    assert stuck.state is TaskState.QUEUED
    (bucket,) = q.wait_place(stuck).buckets
    assert isinstance(bucket, BucketUse)
    assert (bucket.in_use, bucket.parked) == (1, True)
    assert bucket.frees_in is not None
    assert bucket.frees_in > 0


def test_reads_change_nothing(make_queue: MakeQueue, redis_client: object) -> None:
    q = make_queue()
    q.enqueue("job", user_id="ann")
    task = q.pop(worker_id="w")
    assert task is not None
    q.enqueue("job", user_id="bob")  # waits in the intake until something places it
    assert redis_client.zcard(QueueKeys(q.queue).ring) == 0  # type: ignore[attr-defined]
    assert q.ring_users() == (["bob"], 1)  # a reader of the ring places it first
    before = queue_snapshot(redis_client, q.queue)  # type: ignore[arg-type]
    q.recent_starts()
    q.user_loads(["ann", "bob"])
    q.backlogs(["ann"])
    q.user_weights(["ann"])
    q.ring_users()
    q.capped_users()
    q.oldest_queued_ms()
    q.task_links(str(task.task_id))
    assert q.server_memory() is None or q.server_memory()
    assert abs(q.server_time_ms() - time.time() * 1000) < 60_000
    assert queue_snapshot(redis_client, q.queue) == before  # type: ignore[arg-type]


UPPER_FLOORS = ("service", "cli", "worker")
#: what only the engine and the clients may touch: their calls and the connection
ENGINE_ONLY = {"ops", "execute_command", "pipeline", "evalsha", "eval", "_run", "_drive"}
#: the engine's key table, script loader and call records
ENGINE_NAMES = {"QueueKeys", "Operations", "Call", "Script", "load_all"}


def test_the_upper_floors_name_no_key_and_send_no_command() -> None:
    """The service, the CLI and the worker read and write through client methods."""
    package = Path(fairque.__file__).parent
    found = []
    for floor in UPPER_FLOORS:
        for path in sorted((package / floor).rglob("*.py")):
            where = path.relative_to(package)
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr in ENGINE_ONLY
                    and not (isinstance(node.value, ast.Name) and node.value.id == "self")
                ):
                    found.append(f"{where}:{node.lineno} .{node.attr}")
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fairque"):
                    names = {a.name for a in node.names} & ENGINE_NAMES
                    found += [f"{where}:{node.lineno} imports {n}" for n in sorted(names)]
    assert found == []


@pytest.mark.one_shard("ages one shard's tenant hash")
@pytest.mark.parametrize("fairness", ["time", "count"])
def test_last_lease_moves_at_most_once_a_second(
    make_queue: MakeQueue, redis_client: SyncClient, fairness: str
) -> None:
    """A user's last lease is kept to within a second: a lease within a second of the
    last recorded one leaves it, one later moves it (its 'active' score is written once
    a second, not per lease)."""
    q = make_queue()
    q.set_fairness(fairness)  # type: ignore[arg-type]
    for _ in range(3):
        q.enqueue("n", user_id="u")
    first = q.pop("w")
    assert first is not None
    before = q.tenants().tenants[0].last_lease
    assert before is not None
    assert q.pop("w") is not None
    assert q.tenants().tenants[0].last_lease == before  # within the second
    client = redis_client
    client.hset(QueueKeys(q.queue).tenant("u"), "seen", 0)  # the last move long ago
    assert q.pop("w") is not None
    after = q.tenants().tenants[0].last_lease
    assert after is not None
    assert after >= before
    assert int(client.hget(QueueKeys(q.queue).tenant("u"), "seen") or 0) > 0
