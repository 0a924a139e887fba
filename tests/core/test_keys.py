"""Every key a queue creates carries its hash tag, lands in one slot and is known to keys.py."""

from __future__ import annotations

import contextlib
import re

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, expire_lease, make_due
from redis.crc import key_slot

from fairque import FairQueue, Priority, ResultTimeout, Task
from fairque.core.keys import QueueKeys


def known_key_pattern(keys: QueueKeys) -> re.Pattern[str]:
    """The keys.py vocabulary of one queue as a regex."""
    fixed = [
        keys.ring, keys.delayed, keys.leases, keys.queued, keys.deferred, keys.finished,
        keys.failed, keys.canceled, keys.meta, keys.stats, keys.weights,
        keys.caps, keys.turns, keys.capped, keys.wake, keys.workers, keys.workers_seen,
        keys.ends, keys.active, keys.backlog, keys.quotas,
    ]  # fmt: skip
    derived = [
        keys.task("X"), keys.critical("X"), keys.normal("X"), keys.deps_waiting("X"),
        keys.deps_blocked("X"), keys.watch("X"), keys.done("X"), keys.xcom("X"),
        keys.held("X"), keys.fetch("X"), keys.gone("X"), keys.user_index("X"),
        keys.name_index("X"), keys.tenant("X"), keys.flushed("X"),
    ]  # fmt: skip
    alternatives = [re.escape(k) for k in fixed] + [
        re.escape(k).replace("X", ".+") for k in derived
    ]
    return re.compile("^(?:" + "|".join(alternatives) + ")$")


def exercise_everything(q: FairQueue, client: SyncClient) -> None:
    """Every kind of key a queue makes: leases extended, completed, failed, given back,
    run out and reclaimed (a lease is run out by moving its deadline into the past,
    not by a short lease a busy machine may miss), canceled, delayed, critical."""
    q.set_user_limits("heavy", weight=2, max_in_flight=3)
    q.push_many(Task(user_id="heavy", name="x", priority=p) for p in (1, 3, 5, 6))
    delayed = q.enqueue("d", user_id="light", delay=30)
    q.enqueue("c", user_id="light", priority=Priority.CRITICAL)
    make_due(client, q.queue, delayed.task_id or "")
    tasks = q.pop_batch(3, worker_id="w")
    assert len(tasks) == 3
    q.extend(tasks[0], 10)
    assert q.complete(tasks[0], {"r": 1})
    q.fail(tasks[1], "x", delay=0)
    q.requeue(tasks[2], delay=0.01)
    rest = q.pop_batch(10)
    assert rest
    for task in rest[1:]:
        expire_lease(client, q.queue, task.task_id or "")
    assert q.reclaim() == len(rest) - 1
    q.cancel(rest[0].task_id or "")
    up = q.enqueue("up", user_id="light")
    down = q.enqueue("down", user_id="heavy", depends_on=[up.task_id or ""])
    q.enqueue(
        "down2", user_id="heavy", depends_on=[down.task_id or ""], on_dependency_failure="wait"
    )
    q.xcom_push("shared", {"v": 1})
    with contextlib.suppress(ResultTimeout):
        q.result(down.task_id or "", timeout=0.01)
    q.stats()


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_all_queue_keys_share_one_slot_and_are_known(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    exercise_everything(q, redis_client)
    keys = QueueKeys(q.queue)
    pattern = known_key_pattern(keys)
    created = [k.decode() for k in redis_client.scan_iter(match=f"fq:\\{{{q.queue}\\}}:*")]
    assert len(created) > 10
    slots = {key_slot(k.encode()) for k in created}
    assert slots == {key_slot(keys.prefix.encode())}
    unknown = [k for k in created if not pattern.match(k)]
    assert unknown == []


def test_user_and_task_ids_with_braces_stay_in_the_queue_slot(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.enqueue("n", user_id="{evil}", task_id="{also}:evil")
    q.enqueue("n", user_id="}{", priority=Priority.CRITICAL)
    t = q.pop("w")
    assert t is not None
    assert q.complete(t)
    slot = key_slot(QueueKeys(q.queue).prefix.encode())
    for k in redis_client.scan_iter(match=f"fq:\\{{{q.queue}\\}}:*"):
        assert key_slot(k) == slot
