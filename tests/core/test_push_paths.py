"""push.lua writes a single new plain task on a short path of its own (push_one.lua: the
task, its indexes and an intake entry); once the intake is placed it must leave the
keyspace exactly as the general path (the one batches take) does.

A delay of 0 sends the same task down the general path (it is due at once, so it is
written as a plain QUEUED task there too). The two queues' keys are compared by content,
times and request ids left out.
"""

from __future__ import annotations

import re
from typing import Any, cast

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue

from fairque import Priority, Task
from fairque.core.keys import QueueKeys


def contents(client: SyncClient, queue: str) -> dict[str, Any]:
    """Every key of ``queue`` by its name without the queue, with its content; server
    times (12 digits or more) and request ids masked."""
    prefix = QueueKeys(queue).prefix
    out: dict[str, Any] = {}
    for raw in client.scan_iter(match=prefix.replace("{", "\\{").replace("}", "\\}") + "*"):
        key = raw.decode() if isinstance(raw, bytes) else raw
        kind = client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        value: Any
        if kind == "hash":
            value = {k: ("R" if k == b"pushed" else v) for k, v in client.hgetall(key).items()}
        elif kind == "zset":
            value = client.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        elif kind == "set":
            value = sorted(client.smembers(key))
        else:
            value = client.get(key)
        out[key.removeprefix(prefix)] = re.sub(r"\d{12,}(\.\d+)?", "T", repr(value))
    return out


@pytest.mark.one_shard("reads or ages one shard's keys")
@pytest.mark.parametrize("capped", [False, True])
def test_a_single_plain_push_writes_what_the_general_path_writes(
    make_queue: MakeQueue, redis_client: SyncClient, capped: bool
) -> None:
    short, general = make_queue(), make_queue()
    tasks = [
        Task(user_id="u", name="a", payload={"n": 1}, task_id="t1"),
        Task(user_id="u", name="a", payload={"n": 2}, task_id="t2", priority=Priority.CRITICAL),
        Task(user_id="v", name="b", payload=None, task_id="t3", priority=1, max_retries=0),
        Task(user_id="w", name="b", task_id="t4", keep_result=False, result_ttl=5),
    ]
    for q in (short, general):
        if capped:  # a user held out of the ring by its in-flight cap does not join it
            redis_client.sadd(QueueKeys(q.queue).capped, "w")
    for task in tasks:
        one = short.push(task)
        batch = general.push_many([task], delays=[0])
        assert batch.created == [True]
        other = batch[0]
        assert one.created_at is not None
        assert other.created_at is not None
        assert (one.task_id, one.state) == (other.task_id, other.state)
    intake = QueueKeys(short.queue).intake
    entries = [cast(bytes, e).split(b"\n")[1:] for e in redis_client.lrange(intake, 0, -1)]
    assert entries == [
        [b"3", b"u", b"a", b"t1"], [b"6", b"u", b"a", b"t2"], [b"1", b"v", b"b", b"t3"],
        [b"3", b"w", b"b", b"t4"],
    ]  # fmt: skip
    assert short.place() == 4
    assert short.place() == 0
    assert contents(redis_client, short.queue) == contents(redis_client, general.queue)
