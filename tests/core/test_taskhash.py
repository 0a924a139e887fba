"""The task-hash field table: one vocabulary for Task attributes, hash fields and push.lua."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from helpers.servers import SyncClient
from helpers.support import keys_of_task, unique_queue

import fairque.core.taskhash
import fairque.errors
from fairque import FairQueue, Priority, Task, TaskState
from fairque.core.codec import get_serializer
from fairque.core.dependencies import dependency_order
from fairque.core.options import QueueOptions
from fairque.core.scripts import LUA_DIR
from fairque.core.taskhash import FIELDS, REQUIRED, PushRecord, TaskCodec
from fairque.errors import DependencyCycleError

CODEC = TaskCodec(get_serializer("json"), QueueOptions.build())


def test_the_table_names_every_task_field_once() -> None:
    attrs = [f.attr for f in FIELDS if f.attr is not None]
    assert sorted(attrs) == sorted(Task.model_fields)
    hashes = [f.hash for f in FIELDS]
    assert len(set(hashes)) == len(hashes)
    for f in FIELDS:  # a field Python reads has a decoder (the payload's is the serializer)
        assert (f.decode is not None) == (f.attr not in (None, "payload")), f


def test_push_slots_are_the_push_record_and_push_lua_header() -> None:
    slots = {f.push for f in FIELDS if f.push is not None}
    assert slots | {"delay_ms"} == set(PushRecord._fields)
    header = (LUA_DIR / "push.lua").read_text().split("]]", 1)[0]
    listed = header.split("values per task:", 1)[1].split("ARGV[", 1)[0]
    names = [
        re.sub(r"\s*\(.*", "", part).strip() for part in re.sub(r"\([^)]*\)", "", listed).split(",")
    ]
    assert names == list(PushRecord._fields)


def test_every_hash_field_is_a_name_the_scripts_use() -> None:
    lua = "".join(p.read_text() for p in LUA_DIR.rglob("*.lua"))
    for f in FIELDS:
        assert f"'{f.hash}'" in lua, f.hash


def _hash(client: SyncClient, q: FairQueue, task_id: str | None) -> dict[bytes, bytes]:
    key = keys_of_task(client, q.queue, task_id or "").task(task_id or "")
    stored: dict[bytes, bytes] = client.hgetall(key)  # type: ignore[assignment]
    return stored


def test_stored_hashes_hold_only_fields_of_the_table(server: Any, redis_client: SyncClient) -> None:
    """Walk tasks through every state; every field any script wrote is in the table."""
    known = {f.hash.encode() for f in FIELDS}
    seen: set[bytes] = set()
    with FairQueue.from_url(server.url, unique_queue(), on_duplicate="error") as q:
        up = q.enqueue("up", {"n": 1}, user_id="u", timeout=5, result_ttl=60)
        down = q.enqueue("down", user_id="u", depends_on=[up.task_id or ""])
        later = q.enqueue("later", user_id="v", delay=3600)
        seen |= _hash(redis_client, q, down.task_id).keys()
        seen |= _hash(redis_client, q, later.task_id).keys()
        task = q.pop("w", assigned_users=["u"])
        assert task is not None
        assert q.extend(task, 30)
        seen |= _hash(redis_client, q, up.task_id).keys()
        assert q.fail(task, "boom", retry=False) == TaskState.FAILED
        seen |= _hash(redis_client, q, up.task_id).keys()
        assert q.retry(up.task_id or "") == TaskState.QUEUED
        task = q.pop("w", assigned_users=["u"])
        assert task is not None
        assert q.complete(task, {"ok": True})
        seen |= _hash(redis_client, q, up.task_id).keys()
        assert q.cancel(later.task_id or "")
        seen |= _hash(redis_client, q, later.task_id).keys()
        again = q.enqueue("again", user_id="x")
        task = q.pop("w", assigned_users=["x"])
        assert task is not None
        assert q.fail(task, "once") == TaskState.SCHEDULED
        seen |= _hash(redis_client, q, again.task_id).keys()
        q.purge()
    assert seen - known == set()
    assert {b"prio", b"retries", b"run_at", b"lease", b"deadline", b"result", b"op"} <= seen


STOCKLESS = {b"prio", b"retries", b"max_retries", b"keep_result", b"result_ttl"}


def test_the_scripts_stock_values_are_the_decoders() -> None:
    """``task_stock.lua`` and ``taskhash.STOCK`` name the same values, and a missing
    field decodes as its stock value."""
    source = (LUA_DIR / "includes" / "task_stock.lua").read_text()
    found = re.search(r"^  local p, r, k, t = (.*)$", source, re.M)
    assert found is not None
    stock = fairque.core.taskhash.STOCK
    assert [v.strip(" '") for v in found.group(1).split(",")] == [
        str(int(stock["priority"])), str(stock["max_retries"]),
        "1" if stock["keep_result"] else "0", str(stock["result_ttl"] * 1000),
    ]  # fmt: skip
    task = CODEC.task_from_hash([b"id", b"x", b"user", b"u", b"name", b"n"])
    assert (
        task.priority,
        task.max_retries,
        task.keep_result,
        task.result_ttl,
        task.retry_count,
    ) == (stock["priority"], stock["max_retries"], stock["keep_result"], stock["result_ttl"], 0)


@pytest.mark.parametrize("path", ["enqueue", "push_many"])
def test_a_stock_task_stores_none_of_the_four_fields(
    make_queue: Any, redis_client: SyncClient, path: str
) -> None:
    """A task with the stock priority, retry budget and result settings stores none of
    them (a fired schedule's: tests/schedules); one that differs in any stores all four."""
    q = make_queue()
    if path == "enqueue":
        stock = q.enqueue("job", {"n": 1}, user_id="u")
        other = q.enqueue("job", {"n": 2}, user_id="u", max_retries=4)
    else:
        stock, other = q.push_many([
            Task(user_id="u", name="job", payload={"n": 1}),
            Task(user_id="u", name="job", payload={"n": 2}, result_ttl=60),
        ])  # fmt: skip
    assert stock is not None
    assert other is not None
    assert not (_hash(redis_client, q, stock.task_id).keys() & STOCKLESS)
    assert _hash(redis_client, q, other.task_id).keys() & STOCKLESS == STOCKLESS - {b"retries"}
    got = q.get(stock.task_id or "")
    assert got is not None
    assert (got.priority, got.max_retries, got.keep_result, got.result_ttl) == (
        Priority.NORMAL,
        3,
        True,
        86_400,
    )


def test_a_stock_task_keeps_its_result_a_day_and_retries_three_times(
    make_queue: Any, redis_client: SyncClient
) -> None:
    """The scripts read a missing field as its stock value: the result's TTL, the retry
    budget, and a retried task that completes sheds its last failure."""
    q = make_queue(retry_base_seconds=0)
    done = q.enqueue("job", user_id="u")
    task = q.pop("w")
    assert task is not None
    assert q.complete(task, "ok")
    ttl_ms = redis_client.pttl(
        keys_of_task(redis_client, q.queue, done.task_id or "").task(done.task_id or "")
    )
    assert 86_000_000 < ttl_ms <= 86_400_000
    flaky = q.enqueue("flaky", user_id="u")
    outcomes = []
    for _ in range(4):
        task = None
        while task is None:
            task = q.pop("w")
        outcomes.append(q.fail(task, "boom"))
    assert outcomes == [TaskState.SCHEDULED] * 3 + [TaskState.FAILED]
    assert q.retry(flaky.task_id or "") == TaskState.QUEUED
    assert b"retries" not in _hash(redis_client, q, flaky.task_id)
    task = q.pop("w")
    assert task is not None
    assert task.retry_count == 0
    assert q.complete(task, None)
    assert b"error" not in _hash(redis_client, q, flaky.task_id)


def test_a_pushed_task_reads_back_field_for_field(make_queue: Any) -> None:
    q = make_queue()
    due = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(hours=1)
    task = Task(
        user_id="ü", name="job", payload={"a": [1, 2.5, None]}, priority=Priority.HIGH,
        task_id="t-1", max_retries=7, execute_after=due, timeout=2.5, keep_result=False,
        result_ttl=90,
    )  # fmt: skip
    pushed = q.push(task)
    stored = q.get("t-1")
    assert stored is not None
    assert stored == pushed.model_copy(update={"created_at": stored.created_at})
    assert stored.execute_after == due
    assert stored.state == TaskState.SCHEDULED


def test_decoding_is_the_same_for_bytes_and_text_replies() -> None:
    flat = [b"id", b"x", b"user", b"u", b"name", b"n", b"prio", b"6", b"payload", b"[1]"]
    text = {k.decode(): v.decode() for k, v in zip(flat[::2], flat[1::2], strict=True)}
    task = CODEC.task_from_hash(flat)
    assert task == CODEC.task_from_hash(text)
    assert task.priority is Priority.CRITICAL
    assert (task.retry_count, task.keep_result, task.depends_on, task.state) == (0, True, (), None)


@pytest.mark.parametrize(
    "flat",
    [
        [b"id", b"x", b"user", b"u", b"name", b"n", b"prio", b"3", b"retries", b"2",
         b"max_retries", b"3", b"created", b"1700000000123", b"run_at", b"", b"timeout",
         b"2500", b"result_ttl", b"86400000", b"state", b"STARTED", b"lease", b"7",
         b"deadline", b"1700000030123", b"started", b"1700000000125", b"pushed", b"r"],
        [b"id", b"x", b"user", b"u", b"name", b"n", b"prio", b"3", b"retries", b"zz",
         b"retries", b"1"],
        [b"id", b"x", b"user", b"u", b"name", b"n", b"prio", b"9"],
        [b"id", b"x", b"user", b"u", b"name", b"n", b"prio"],
        [b"user", b"u", b"name", b"n", b"prio", b"3", b"retries", b"zz"],
    ],
)  # fmt: skip
def test_the_one_pass_decoding_matches_the_field_by_field_one(flat: list[bytes]) -> None:
    def decoded(read: Any) -> Any:
        try:
            task = read(flat)
        except Exception as exc:
            return type(exc), str(exc)
        return list(task.__dict__.items()), task.model_fields_set

    codec = TaskCodec(get_serializer("json"), QueueOptions.build())
    expected = decoded(codec._from_fields)
    for _ in range(2):  # the second time, converted values come from the memo
        assert decoded(codec.task_from_hash) == expected


@pytest.mark.parametrize("field", [f.hash for f in FIELDS if f.missing is REQUIRED])
def test_a_hash_without_a_required_field_is_undecodable(field: str) -> None:
    flat = [b"id", b"x", b"user", b"u", b"name", b"n", b"prio", b"3", b"lease", b"9"]
    i = flat.index(field.encode())
    broken = flat[:i] + flat[i + 2 :]
    with pytest.raises(KeyError):
        CODEC.task_from_hash(broken)
    leased = CODEC.leased([flat, broken])
    assert [t.task_id for t in leased] == ["x"]
    assert len(leased.undecodable) == 1
    assert leased.undecodable[0][2].startswith("undecodable task: KeyError")


def test_encode_fills_the_queue_defaults_and_the_record() -> None:
    codec = TaskCodec(get_serializer("json"), QueueOptions.build(max_retries=5))
    values = dict(Task(user_id="u", name="n", depends_on=["a", "b"]).__dict__)
    record = codec.encode(values, delay=1.5)
    assert values["task_id"] == record.id
    assert len(record.id) == 32
    assert (values["max_retries"], record.max_retries) == (5, 5)
    assert (record.delay_ms, record.run_at_ms, record.timeout_ms) == (1500, -1, -1)
    assert (record.deps, record.on_dep_fail, record.prio) == ('["a","b"]', "cancel", 3)


def test_dependency_order_puts_upstreams_first_and_names_cycles() -> None:
    assert dependency_order([("c", ["b"]), ("b", ["a"]), ("a", []), ("x", ["y"])]) == [
        2,
        1,
        0,
        3,
    ]
    with pytest.raises(DependencyCycleError, match="task a depends on itself"):
        dependency_order([("a", ["a"])])
    with pytest.raises(DependencyCycleError, match="a -> b -> a"):
        dependency_order([("a", ["b"]), ("b", ["a"])])


def test_the_documented_table_is_the_field_table() -> None:
    doc = fairque.core.taskhash.__doc__ or ""
    rows = doc.split("=\n", 2)[2].split("\n=")[0].splitlines()
    documented = [
        tuple(None if cell == "-" else cell for cell in row.split()[:3])
        for row in rows
        if row and not row.startswith(" ")
    ]
    assert documented == [(f.attr, f.hash, f.push) for f in FIELDS]


def test_a_stored_task_is_what_pydantic_would_construct() -> None:
    """``stored_task`` steps around pydantic's validation (``fairque.core.bypasses``): the
    instance it makes holds what ``model_construct`` would, and behaves as a model."""
    from fairque.core.bypasses import stored_task

    source = Task(user_id="u", name="n", payload={"a": 1}, priority=Priority.HIGH, task_id="t")
    values = dict(source.__dict__)
    values.update(state=TaskState.QUEUED, created_at=datetime.now(timezone.utc))
    made = stored_task(dict(values))
    constructed = Task.model_construct(**values)
    assert made == constructed
    assert made.__pydantic_fields_set__ == constructed.__pydantic_fields_set__
    assert made.__pydantic_extra__ == constructed.__pydantic_extra__
    assert made.__pydantic_private__ == constructed.__pydantic_private__
    assert made.model_dump() == constructed.model_dump()
    made.retry_count = 2  # assignments are validated as on any task
    with pytest.raises(fairque.errors.ValidationError):
        made.retry_count = -1


@pytest.mark.parametrize(
    ("payload", "priority", "max_retries", "keep_result", "constrained"),
    [
        ({"to": "a"}, Priority.NORMAL, None, True, False),
        ([1, 2, 3], Priority.CRITICAL, 0, False, False),
        (None, Priority.VERY_LOW, 7, True, True),
        ("text", Priority.VERY_HIGH, None, False, True),
    ],
)
def test_the_plain_encoder_matches_the_general_one(
    payload: Any, priority: Priority, max_retries: int | None, keep_result: bool,
    constrained: bool,
) -> None:  # fmt: skip
    """``encode_plain`` (``enqueue``'s common call, no Task built) gives the field values
    and push record ``encode`` gives for the same task: the one proof this twin needs."""
    from fairque.constraints.model import Constraint, ConstraintSet

    codec = TaskCodec(get_serializer("json"), QueueOptions.build(max_retries=4))
    if constrained:
        codec.constraints = ConstraintSet(1, (Constraint(id="c", name="n", rate=5),))
    values, record = codec.encode_plain(
        "n", payload, "u", int(priority), "tid", max_retries, keep_result
    )
    task = Task(user_id="u", name="n", payload=payload, priority=priority, task_id="tid",
                max_retries=max_retries, keep_result=keep_result)  # fmt: skip
    general = dict(task.__dict__)
    expected = codec.encode(general)
    assert record == tuple(expected)
    assert values == general
