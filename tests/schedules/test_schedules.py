"""Schedules: definitions, storage, idempotent changes, firing and misfire policies.

Firing is driven with a chosen clock: ``fire_schedule`` plans the slots due at the
``now_ms`` it is given, so the tests place "now" where they need it instead of
waiting for slots to come.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, keys_of_task, queue_snapshot

from fairque import FairQueue, Priority, TaskState, ValidationError
from fairque.core.records import Call
from fairque.errors import NotLeader, ScheduleExists, ScheduleNotFound
from fairque.schedules.codec import StoredSchedule
from fairque.schedules.model import Schedule, plan, slot_task_id

TOKEN = "test-token"


def every(seconds: float = 60.0, **fields: Any) -> Schedule:
    values: dict[str, Any] = {
        "schedule_id": "tick", "name": "tick", "user_id": "ops", "payload": {"n": 1},
        "interval_seconds": seconds,
    }  # fmt: skip
    values.update(fields)
    return Schedule(**values)


def stored(q: FairQueue, schedule_id: str = "tick") -> StoredSchedule:
    """The schedule with its cursor, as the leader reads it (due or not), from the shard
    that holds it."""
    part, _ = q._drive(q._place.find_schedule(schedule_id))
    key = part.ops.keys.schedule(schedule_id)
    flat = q._run(Call(None, (key,), ("HGETALL",), lambda r: r))
    return part.ops.schedule_codec.stored(flat)


def lead(q: FairQueue) -> None:
    acquired, _ = q.acquire_scheduler_lock(TOKEN, 30)
    assert acquired


def fire_at(q: FairQueue, entry: StoredSchedule, at_ms: int) -> Any:
    return q.fire_schedule(entry, at_ms, TOKEN)


def test_add_list_get_pause_resume_remove(make_queue: MakeQueue) -> None:
    q = make_queue()
    added = q.add_schedule(every(30, priority=Priority.HIGH))
    assert added.schedule_id == "tick"
    assert added.enabled
    assert added.revision == 1
    assert added.fired == 0
    assert added.created_at is not None
    assert added.next_fire_at is not None
    assert added.next_fire_at - added.created_at == timedelta(seconds=30)
    assert added.payload == {"n": 1}
    assert added.priority == Priority.HIGH
    assert [s.schedule_id for s in q.schedules()] == ["tick"]
    assert q.get_schedule("tick") == added
    assert q.get_schedule("nope") is None
    paused = q.pause_schedule("tick")
    assert not paused.enabled
    assert paused.next_fire_at is None
    assert q.pause_schedule("tick") == paused  # pausing again changes nothing
    resumed = q.resume_schedule("tick")
    assert resumed.enabled
    assert resumed.next_fire_at is not None
    assert q.resume_schedule("tick") == resumed
    assert q.remove_schedule("tick") is True
    assert q.remove_schedule("tick") is False
    assert q.schedules() == []
    assert q.get_schedule("tick") is None
    with pytest.raises(ScheduleNotFound):
        q.pause_schedule("tick")
    with pytest.raises(ScheduleNotFound):
        q.resume_schedule("tick")
    with pytest.raises(ScheduleNotFound):
        q.update_schedule(every(10))


def test_add_is_idempotent_and_update_replaces(make_queue: MakeQueue) -> None:
    q = make_queue()
    first = q.add_schedule(every(30))
    assert q.add_schedule(every(30)) == first
    q.pause_schedule("tick")
    assert not q.add_schedule(every(30)).enabled  # a re-run leaves the pause alone
    with pytest.raises(ScheduleExists):
        q.add_schedule(every(45))
    with pytest.raises(ScheduleExists):
        q.add_schedule(every(30, payload={"n": 2}))
    updated = q.update_schedule(every(45, payload={"n": 2}))
    assert updated.interval_seconds == 45
    assert updated.payload == {"n": 2}
    assert updated.enabled
    assert updated.revision > first.revision
    assert q.update_schedule(every(45, payload={"n": 2})) == updated
    # fields as keywords work too
    assert q.add_schedule(schedule_id="k", name="n", user_id="u", cron="0 3 * * *").cron
    with pytest.raises(TypeError):
        q.add_schedule(every(), name="x")


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"interval_seconds": None}, "exactly one of cron and interval_seconds"),
        ({"cron": "0 3 * * *"}, "exactly one of cron and interval_seconds"),
        ({"interval_seconds": None, "cron": "61 * * * *"}, "not a valid cron expression"),
        ({"interval_seconds": 0.01}, "interval_seconds"),
        ({"timezone": "Mars/Olympus"}, "unknown time zone"),
        ({"user_id": ""}, "user_id"),
        ({"priority": 9}, "priority"),
        ({"schedule_id": "a b\n"}, "schedule_id"),
        ({"misfire": "later"}, "misfire"),
        ({"catch_up_limit": 0}, "catch_up_limit"),
        ({"max_retries": True}, "max_retries"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_bad_definitions_are_refused(fields: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        every(**fields)


def test_bad_input_changes_nothing(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue(max_payload_bytes=100)
    q.add_schedule(every(30))
    before = queue_snapshot(redis_client, q.queue)
    with pytest.raises(ValidationError, match="limit"):
        q.add_schedule(every(30, schedule_id="big", payload="x" * 200))
    with pytest.raises(ValidationError):
        q.remove_schedule("")
    with pytest.raises(ValidationError):
        q.add_schedule("tick")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        q.acquire_scheduler_lock("", 10)
    with pytest.raises(ValidationError):
        q.acquire_scheduler_lock("t", 0)
    with pytest.raises(ValidationError):
        q.schedules(0)
    assert queue_snapshot(redis_client, q.queue) == before


def test_fire_enqueues_each_slot_once(make_queue: MakeQueue) -> None:
    q = make_queue()
    added = q.add_schedule(every(60, priority=Priority.CRITICAL, max_retries=0, timeout=5))
    assert added.created_at is not None
    lead(q)
    assert [e.schedule.schedule_id for e in q.due_schedules().due] == ["tick"]
    entry = stored(q)  # never planned: due at once, to be planned
    base = round(added.created_at.timestamp() * 1000)
    planned = fire_at(q, entry, base + 1000)
    assert planned.task_ids == []
    assert planned.created == 0
    assert planned.next_fire_at == added.created_at + timedelta(seconds=60)
    assert q.due_schedules().due == []
    assert q.due_schedules().next_ms == base + 60_000
    out = fire_at(q, entry, base + 61_000)
    assert out.task_ids == [slot_task_id("tick", base + 60_000)]
    assert out.created == 1
    task = q.get(out.task_ids[0])
    assert task is not None
    assert task.state == TaskState.QUEUED
    assert (task.name, task.user_id, task.payload) == ("tick", "ops", {"n": 1})
    assert (task.priority, task.max_retries, task.timeout) == (Priority.CRITICAL, 0, 5.0)
    listed = q.list_tasks(user_id="ops")
    assert [t.task_id for t in listed.tasks] == out.task_ids
    assert [t.task_id for t in q.list_tasks(name="tick").tasks] == out.task_ids
    # a reading made before this firing is stale: the same slot never fires twice
    assert fire_at(q, entry, base + 61_000).stale
    popped = q.pop("w")
    assert popped is not None
    assert popped.task_id == out.task_ids[0]
    after = q.get_schedule("tick")
    assert after is not None
    assert after.fired == 1
    assert after.last_fire_at == added.created_at + timedelta(seconds=60)
    assert q.stats().counters["schedule_fired"] == 1
    assert q.metrics().schedule_fired == 1


def test_a_stock_firing_stores_no_stock_fields(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    """A schedule with the stock priority, retries and result settings fires tasks that
    store none of them (``taskhash.STOCK``), and they read back as the stock values."""
    q = make_queue()
    added = q.add_schedule(every(60))
    assert added.created_at is not None
    lead(q)
    entry = stored(q)
    base = round(added.created_at.timestamp() * 1000)
    fire_at(q, entry, base + 1000)
    out = fire_at(q, entry, base + 61_000)
    assert out.created == 1
    tid = out.task_ids[0]
    fields = set(redis_client.hkeys(keys_of_task(redis_client, q.queue, tid).task(tid)))
    assert not fields & {b"prio", b"retries", b"max_retries", b"keep_result", b"result_ttl"}
    task = q.get(out.task_ids[0])
    assert task is not None
    assert (task.priority, task.max_retries, task.keep_result, task.result_ttl) == (
        Priority.NORMAL,
        3,
        True,
        86_400,
    )


def test_a_schedule_fires_tasks_of_its_cost(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    """A schedule's cost rides with each task it fires (a cost-3 task holds 3 of its
    user's slots); a cost of 1 is left out of the stored definition, so a schedule
    stored before costs existed reads as unchanged."""
    q = make_queue()
    assert "cost" not in every(60).definition()
    assert '"cost":3' in every(60, cost=3).definition()
    added = q.add_schedule(every(60, cost=3))
    assert added.cost == 3
    q.add_schedule(every(60, cost=3))  # the same definition again: no change
    with pytest.raises(ScheduleExists):
        q.add_schedule(every(60))  # another cost is another definition
    assert added.created_at is not None
    lead(q)
    entry = stored(q)
    assert entry.schedule.cost == 3
    base = round(added.created_at.timestamp() * 1000)
    fire_at(q, entry, base + 1000)
    out = fire_at(q, stored(q), base + 61_000)
    task = q.get(out.task_ids[0])
    assert task is not None
    assert task.cost == 3
    q.set_user_limits("ops", max_in_flight=4)
    q.enqueue("other", {}, user_id="ops", cost=2)
    leased = q.pop_batch(5, "w")
    assert [t.cost for t in leased] == [3]  # the cost-2 task does not fit beside it
    with pytest.raises(ValidationError, match="cost"):
        every(60, cost=0)
    with pytest.raises(ValidationError, match="cost"):
        every(60, cost=1001)


@pytest.mark.one_shard("a global limit below the shard count is not split (docs/howto/shards.md)")
def test_fired_tasks_count_in_the_queues_constraints(make_queue: MakeQueue) -> None:
    q = make_queue()
    added = q.add_schedule(every(60, misfire="catch_up"))
    assert added.created_at is not None
    lead(q)
    entry = stored(q)
    base = round(added.created_at.timestamp() * 1000)
    fire_at(q, entry, base + 1000)  # planned from the anchor
    # defined by another client: the leader learns of it from the script's refusal
    make_queue(q.queue).define_constraint(id="one", name="tick", concurrency=1)
    out = fire_at(q, stored(q), base + 121_000)  # two slots due: catch up, both fire
    assert out.created == 2
    first = q.pop("w")
    assert first is not None
    assert q.pop("w") is None  # the other slot's task waits for the constraint's slot
    info = q.constraint("one")
    assert (info.running, info.parked) == (1, 1)
    assert q.complete(first)
    second = q.pop("w")
    assert second is not None
    assert {first.task_id, second.task_id} == set(out.task_ids)


def _planned(q: FairQueue, schedule: Schedule) -> tuple[StoredSchedule, int]:
    """Add ``schedule`` and plan it; returns its stored state and its anchor (ms)."""
    q.add_schedule(schedule)
    entry = stored(q, schedule.schedule_id)
    assert not fire_at(q, entry, entry.anchor_ms).stale
    return stored(q, schedule.schedule_id), entry.anchor_ms


@pytest.mark.parametrize(
    ("policy", "late_s", "fired", "skipped"),
    [
        ("run_once", 600, [10], 9),  # ten slots due: the latest fires
        ("skip", 600, [10], 9),  # the latest is on time (within the grace): it fires
        ("skip", 659, [], 10),  # the latest is 59 s late, over a 30 s grace: none fires
        ("catch_up", 600, [7, 8, 9, 10], 6),  # the four latest (the bound), oldest first
        ("catch_up", 180, [1, 2, 3], 0),
    ],
)
def test_misfire_policies(
    make_queue: MakeQueue, policy: str, late_s: int, fired: list[int], skipped: int
) -> None:
    q = make_queue()
    lead(q)
    schedule = every(60, misfire=policy, misfire_grace_seconds=30, catch_up_limit=4)
    entry, anchor = _planned(q, schedule)
    out = fire_at(q, entry, anchor + late_s * 1000)
    assert out.task_ids == [slot_task_id("tick", anchor + n * 60_000) for n in fired]
    assert out.created == len(fired)
    assert out.skipped == skipped
    after = q.get_schedule("tick")
    assert after is not None
    assert (after.fired, after.skipped) == (len(fired), skipped)
    due = (late_s // 60 + 1) * 60
    assert after.next_fire_at == datetime.fromtimestamp((anchor + due * 1000) / 1000, timezone.utc)
    assert q.stats().counters.get("schedule_skipped", 0) == skipped
    assert (q.metrics().schedule_fired, q.metrics().schedule_skipped) == (len(fired), skipped)
    # the queue holds exactly the fired tasks, in slot order
    popped = [t.task_id for t in q.pop_batch(20, "w")]
    assert popped == out.task_ids


def test_a_slot_already_enqueued_is_not_written_again(make_queue: MakeQueue) -> None:
    """A slot's task id names it: the task of a slot that exists is left alone."""
    q = make_queue()
    lead(q)
    entry, anchor = _planned(q, every(60))
    task_id = slot_task_id("tick", anchor + 60_000)
    q.enqueue("other", user_id="someone", task_id=task_id)
    out = fire_at(q, entry, anchor + 61_000)
    assert out.task_ids == [task_id]
    assert out.created == 0
    task = q.get(task_id)
    assert task is not None
    assert task.name == "other"


def test_only_the_lock_holder_fires(make_queue: MakeQueue) -> None:
    q = make_queue()
    entry, anchor = _planned_without_lead(q)
    with pytest.raises(NotLeader):
        fire_at(q, entry, anchor + 61_000)
    assert q.acquire_scheduler_lock("other", 30) == (True, 30.0)
    with pytest.raises(NotLeader):
        fire_at(q, entry, anchor + 61_000)
    acquired, remaining = q.acquire_scheduler_lock(TOKEN, 30)
    assert not acquired
    assert 29 < remaining <= 30
    assert q.scheduler_holder() == "other"
    assert not q.renew_scheduler_lock(TOKEN, 30)
    assert not q.release_scheduler_lock("third")
    assert q.release_scheduler_lock("other")
    assert q.scheduler_holder() is None
    lead(q)
    assert fire_at(q, entry, anchor + 61_000).created == 1


def _planned_without_lead(q: FairQueue) -> tuple[StoredSchedule, int]:
    lead(q)
    entry, anchor = _planned(q, every(60))
    assert q.release_scheduler_lock(TOKEN)
    return entry, anchor


def test_paused_removed_and_changed_schedules_do_not_fire(make_queue: MakeQueue) -> None:
    q = make_queue()
    lead(q)
    entry, anchor = _planned(q, every(60))
    q.pause_schedule("tick")
    assert fire_at(q, entry, anchor + 61_000).stale
    assert q.due_schedules().due == []
    assert q.due_schedules().next_ms is None
    resumed = q.resume_schedule("tick")  # plans from now: the missed slot does not fire
    assert resumed.next_fire_at is not None
    entry = stored(q)
    assert entry.cursor_ms >= anchor
    changed = q.update_schedule(every(60, payload={"n": 2}))
    assert fire_at(q, entry, anchor + 61_000).stale
    assert changed.payload == {"n": 2}
    entry = stored(q)
    q.remove_schedule("tick")
    assert fire_at(q, entry, anchor + 61_000).stale
    assert q.stats().counts[TaskState.QUEUED] == 0


def test_a_new_timing_plans_from_now(make_queue: MakeQueue) -> None:
    q = make_queue()
    lead(q)
    first, anchor = _planned(q, every(60))
    updated = q.update_schedule(every(3600))
    entry = stored(q)
    assert entry.anchor_ms >= anchor
    assert entry.cursor_ms == entry.anchor_ms
    assert updated.next_fire_at == datetime.fromtimestamp(
        (entry.anchor_ms + 3_600_000) / 1000, timezone.utc
    )
    assert first.revision < entry.revision


def test_a_cron_schedule_fires_on_its_wall_clock(make_queue: MakeQueue) -> None:
    q = make_queue()
    lead(q)
    start = datetime(2030, 1, 1, tzinfo=timezone.utc)
    schedule = Schedule(
        schedule_id="daily", name="report", user_id="ops", cron="30 9 * * *",
        timezone="Asia/Tokyo", start_at=start, misfire="catch_up",
    )  # fmt: skip
    added = q.add_schedule(schedule)
    # 09:30 in Tokyo is 00:30 UTC
    assert added.next_fire_at == datetime(2030, 1, 1, 0, 30, tzinfo=timezone.utc)
    entry = stored(q, "daily")
    at = round(datetime(2030, 1, 3, 1, tzinfo=timezone.utc).timestamp() * 1000)
    out = fire_at(q, entry, at)
    assert out.task_ids == ["daily@2030-01-01T00:30:00Z", "daily@2030-01-02T00:30:00Z",
                            "daily@2030-01-03T00:30:00Z"]  # fmt: skip
    assert out.next_fire_at == datetime(2030, 1, 4, 0, 30, tzinfo=timezone.utc)


def _utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> int:
    when = datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)
    return round(when.timestamp() * 1000)


def _slots(schedule: Schedule, after: int, n: int) -> list[str]:
    return [
        datetime.fromtimestamp(s / 1000, timezone.utc).strftime("%m-%d %H:%M")
        for s in schedule.slots_after(after, 0, None, n)
    ]


def test_dst_a_missing_local_time_fires_past_the_change() -> None:
    """Europe/Berlin, 2026-03-29: clocks go from 02:00 CET to 03:00 CEST."""
    nightly = every(cron="30 2 * * *", timezone="Europe/Berlin", interval_seconds=None)
    # the day before: 02:30 CET = 01:30 UTC; the day itself: 02:30 does not exist and
    # fires at 03:30 CEST (01:30 UTC); the day after: 02:30 CEST = 00:30 UTC
    assert _slots(nightly, _utc(2026, 3, 27, 12), 3) == ["03-28 01:30", "03-29 01:30",
                                                         "03-30 00:30"]  # fmt: skip
    # 02:30 (moved to 03:30) and 03:30 are one instant that day: it fires once
    both = every(cron="30 2,3 * * *", timezone="Europe/Berlin", interval_seconds=None)
    assert _slots(both, _utc(2026, 3, 29, 0), 3) == ["03-29 01:30", "03-30 00:30", "03-30 01:30"]


def test_dst_a_repeated_local_time_fires_once() -> None:
    """Europe/Berlin, 2026-10-25: clocks go from 03:00 CEST back to 02:00 CET."""
    nightly = every(cron="30 2 * * *", timezone="Europe/Berlin", interval_seconds=None)
    # 02:30 happens twice that day: it fires at the first, 02:30 CEST (00:30 UTC)
    assert _slots(nightly, _utc(2026, 10, 24, 12), 2) == ["10-25 00:30", "10-26 01:30"]
    half_hourly = every(cron="*/30 * * * *", timezone="Europe/Berlin", interval_seconds=None)
    # every half hour of the wall clock: the repeated hour (01:00-02:00 UTC) is silent
    assert _slots(half_hourly, _utc(2026, 10, 24, 23, 45), 5) == [
        "10-25 00:00", "10-25 00:30", "10-25 02:00", "10-25 02:30", "10-25 03:00",
    ]  # fmt: skip
    # a scheduler that reads the second pass (02:10 CET) goes on from there
    assert _slots(half_hourly, _utc(2026, 10, 25, 1, 10), 2) == ["10-25 02:00", "10-25 02:30"]
    # an interval ignores the wall clock: every 30 minutes of real time
    interval = every(1800)
    assert _slots(interval, _utc(2026, 10, 25, 0, 59), 3) == ["10-25 01:00", "10-25 01:30",
                                                              "10-25 02:00"]  # fmt: skip


def test_slot_task_ids() -> None:
    assert slot_task_id("s", _utc(2030, 1, 2, 3, 4, 5)) == "s@2030-01-02T03:04:05Z"
    assert slot_task_id("s", _utc(2030, 1, 2) + 250) == "s@2030-01-02T00:00:00.250Z"
    assert every(start_at=datetime(2030, 1, 1)).start_at == datetime(
        2030, 1, 1, tzinfo=timezone.utc
    )
    never = every(cron="0 0 30 2 *", interval_seconds=None)  # 30 February
    assert never.next_slot(_utc(2030, 1, 1), 0) is None


@pytest.mark.parametrize("policy", ["run_once", "catch_up", "skip"])
def test_a_long_outage_is_skipped_in_bounded_passes(policy: str) -> None:
    """25,000 slots due: two passes skip 10,000 each, the third applies the policy."""
    schedule = every(1, misfire=policy, catch_up_limit=3)
    now, cursor, skipped, fired = 25_000_000 + 500, 0, 0, []
    for _ in range(3):
        p = plan(schedule, cursor, 0, now)
        skipped += p.skipped
        fired += p.fire
        cursor = p.cursor
        assert p.next_ms == cursor + 1000
    expected = {"run_once": [25_000_000], "catch_up": [24_998_000, 24_999_000, 25_000_000],
                "skip": [25_000_000]}[policy]  # fmt: skip
    assert fired == expected
    assert skipped == 25_000 - len(expected)
    assert cursor == 25_000_000
    assert plan(schedule, cursor, 0, now).fire == []


def test_dst_through_the_server(make_queue: MakeQueue) -> None:
    """Europe/Berlin, 2030-03-31 (clocks forward) and 2030-10-27 (clocks back), fired."""
    q = make_queue()
    lead(q)
    q.add_schedule(
        every(cron="30 2 * * *", interval_seconds=None, timezone="Europe/Berlin",
              start_at=datetime(2030, 3, 30), misfire="catch_up"),
    )  # fmt: skip
    out = fire_at(q, stored(q), _utc(2030, 4, 1, 3))
    assert out.task_ids == [
        "tick@2030-03-30T01:30:00Z",  # 02:30 CET
        "tick@2030-03-31T01:30:00Z",  # no 02:30: 03:30 CEST
        "tick@2030-04-01T00:30:00Z",  # 02:30 CEST
    ]
    q.update_schedule(
        every(cron="30 2 * * *", interval_seconds=None, timezone="Europe/Berlin",
              start_at=datetime(2030, 10, 26), misfire="catch_up"),
    )  # fmt: skip
    out = fire_at(q, stored(q), _utc(2030, 10, 28, 3))
    assert out.task_ids == [
        "tick@2030-10-26T00:30:00Z",  # 02:30 CEST
        "tick@2030-10-27T00:30:00Z",  # twice 02:30: the first, once
        "tick@2030-10-28T01:30:00Z",  # 02:30 CET
    ]
