"""Every schedule script is safe to resend: a second run answers as the first and
leaves the keyspace as the first left it (the lock scripts move the lock's expiry
again, as a second renewal would, and answer the same)."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, queue_snapshot

from fairque import FairQueue
from fairque.core.records import Call
from fairque.core.records import Call as RawCall
from fairque.schedules.codec import StoredSchedule
from fairque.schedules.model import Schedule

TOKEN = "replay-token"


def snapshot(client: SyncClient, queue: str) -> dict[str, Any]:
    """Every key of ``queue`` by content and absolute expiry.

    ``queue_snapshot`` compares DUMP bytes; a schedule's hash is large enough to be a
    hash table, whose DUMP order a read may change (incremental rehashing on Redis
    7.0), so hashes are compared field by field here.
    """
    out: dict[str, Any] = {}
    for key, (dumped, expiry) in queue_snapshot(client, queue).items():
        if client.type(key) in (b"hash", "hash"):
            out[key] = (client.hgetall(key), expiry)
        else:
            out[key] = (dumped, expiry)
    return out


def resend(q: FairQueue, client: SyncClient, call: Call[Any]) -> tuple[Any, Any]:
    first = q._run(call)
    before = snapshot(client, q.queue)
    second = q._run(call)
    assert snapshot(client, q.queue) == before, "the resend changed the keyspace"
    return first, second


def every(seconds: float = 60.0, **fields: Any) -> Schedule:
    return Schedule(
        schedule_id="tick", name="tick", user_id="ops", interval_seconds=seconds, **fields
    )


def stored(q: FairQueue) -> StoredSchedule:
    key = q.ops.keys.schedule("tick")
    return q.ops.schedule_codec.stored(q._run(RawCall(None, (key,), ("HGETALL",), lambda r: r)))


def test_resent_schedule_changes(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    first, second = resend(q, redis_client, q.ops.add_schedule(every()))
    assert first == second
    first, second = resend(q, redis_client, q.ops.update_schedule(every(30)))
    assert first == second
    assert second.interval_seconds == 30
    first, second = resend(q, redis_client, q.ops.pause_schedule("tick"))
    assert first == second
    assert not second.enabled
    first, second = resend(q, redis_client, q.ops.resume_schedule("tick"))
    assert first == second
    assert second.enabled
    assert resend(q, redis_client, q.ops.schedules(10)) == ([second], [second])
    assert resend(q, redis_client, q.ops.remove_schedule("tick")) == (True, True)
    assert resend(q, redis_client, q.ops.remove_schedule("tick")) == (False, False)
    # a schedule added again after its removal is a new one
    assert q.add_schedule(every()).revision == 1


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_resent_fire_enqueues_once(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    q.add_schedule(every(60, misfire="catch_up"))
    assert q.acquire_scheduler_lock(TOKEN, 30)[0]
    entry = stored(q)
    first, second = resend(q, redis_client, q.ops.fire_schedule(entry, entry.cursor_ms, TOKEN))
    assert first == second
    entry = stored(q)
    call = q.ops.fire_schedule(entry, entry.cursor_ms + 185_000, TOKEN)
    first, second = resend(q, redis_client, call)
    assert first == second
    assert first.created == 3
    assert len(q.pop_batch(10, "w")) == 3
    # a resend that arrives after the lock moved on still answers as the first run
    assert q.release_scheduler_lock(TOKEN)
    assert q._run(call) == first
    read = resend(q, redis_client, q.ops.due_schedules(10))
    assert read[0].due == read[1].due == []


def test_resent_lock_calls_answer_the_same(make_queue: MakeQueue) -> None:
    q = make_queue()
    calls: list[Call[Any]] = [
        q.ops.acquire_scheduler_lock(TOKEN, 30),
        q.ops.renew_scheduler_lock(TOKEN, 30),
        q.ops.release_scheduler_lock(TOKEN),
    ]
    for call in calls:
        assert q._run(call) == q._run(call)
    assert q.scheduler_holder() is None
    assert q.acquire_scheduler_lock("other", 30)[0]
    refused = q.ops.acquire_scheduler_lock(TOKEN, 30)
    assert q._run(refused)[0] is False
    assert q._run(refused)[0] is False
    assert q._run(q.ops.renew_scheduler_lock(TOKEN, 30)) is False
    assert q.scheduler_holder() == "other"
