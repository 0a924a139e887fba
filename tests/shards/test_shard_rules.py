"""Constraints and schedules on a sharded queue.

What must hold on every server (the cluster too): a global limit is split in shares
that add up to it, so racing workers never pass it whichever shards its tasks are in,
and a limit too small to split is refused before anything is written; a per-user limit
is whole in the user's shard; a resize writes the new shares before new shards take
tenants; a schedule lives and fires in its tenant's shard, found by its id from any
client; the leading scheduler holds every shard's lock, and each slot fires once while
leaders crash.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from helpers.servers import ServerInfo
from helpers.support import CheckedThread, MakeQueue, Schedulers, unique_queue

from fairque import (
    AsyncFairQueue,
    Constraint,
    ConstraintNotFound,
    FairQueue,
    NotLeader,
    ScheduleNotFound,
    Task,
    ValidationError,
)
from fairque.schedules.leader import Scheduler
from fairque.schedules.model import slot_task_id


def users_on(q: Any, shard: int, count: int) -> list[str]:
    """``count`` user ids that live in ``shard`` of ``q``."""
    return [f"u{i}" for i in range(10_000) if q.shard_of(f"u{i}") == shard][:count]


def drain(q: Any, worker: str = "w") -> list[Task]:
    """Lease until nothing more is given (each shard is asked: ``pop_batch`` per call
    leases from the shards of a pair, then the rest)."""
    leased: list[Task] = []
    for _ in range(20):
        got = q.pop_batch(100, worker)
        if not got:
            break
        leased += got
    return leased


def push_on_every_shard(q: Any, per_shard: int, name: str = "call") -> list[str]:
    """``per_shard`` tasks of ``name`` for one user of each shard; the users."""
    users = [users_on(q, s, 1)[0] for s in range(q.shards)]
    for user in users:
        for i in range(per_shard):
            q.enqueue(name, {"i": i}, user_id=user)
    return users


def test_a_global_limit_is_split_in_shares_that_add_up_to_it(make_queue: MakeQueue) -> None:
    q: Any = make_queue(shards=3)
    q.define_constraint(id="api", name="call", concurrency=4)
    push_on_every_shard(q, 4)
    q.enqueue("other", user_id="someone")  # unmatched: not limited
    leased = drain(q)
    calls = [t for t in leased if t.name == "call"]
    per_shard = sorted(sum(1 for t in calls if q.shard_of(t.user_id) == s) for s in range(3))
    assert per_shard == [1, 1, 2]  # 4 split over 3 shards: the shares add up to 4
    assert len(leased) == len(calls) + 1
    info = q.constraint("api")
    assert info.running == 4
    assert info.parked == 8
    assert [c.constraint.id for c in q.constraints()] == ["api"]
    # a finished call frees its shard's share: the next one there goes
    first = calls[0]
    assert q.complete(first)
    again = drain(q)
    assert [q.shard_of(t.user_id) for t in again] == [q.shard_of(first.user_id)]


def test_racing_workers_never_pass_a_global_limit(make_queue: MakeQueue) -> None:
    q: Any = make_queue(shards=3)
    q.define_constraint(id="api", name="call", concurrency=3)
    push_on_every_shard(q, 10)
    leased: list[Task] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def worker(n: int) -> None:
        start.wait()
        for _ in range(5):
            got = q.pop_batch(5, f"w{n}")
            with lock:
                leased.extend(got)

    threads = [CheckedThread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(leased) == 3
    assert q.constraint("api").running == 3


def test_a_per_user_limit_is_whole_in_the_users_shard(make_queue: MakeQueue) -> None:
    q: Any = make_queue(shards=3)
    q.define_constraint(Constraint(id="each", concurrency=2, per_user=True))
    push_on_every_shard(q, 5)
    leased = drain(q)
    per_user: dict[str, int] = {}
    for t in leased:
        per_user[t.user_id] = per_user.get(t.user_id, 0) + 1
    assert sorted(per_user.values()) == [2, 2, 2]
    buckets = q.constraint("each").buckets
    assert sorted(buckets) == sorted(f"each:{u}" for u in per_user)
    assert all(b == (2, 3) for b in buckets.values())


def test_a_rate_is_split_too(make_queue: MakeQueue) -> None:
    q: Any = make_queue(shards=3)
    # 3 per hour over 3 shards: one start per shard, then every shard waits
    q.define_constraint(id="slow", name="call", rate=3, per=3600)
    push_on_every_shard(q, 3)
    leased = drain(q)
    assert sorted(q.shard_of(t.user_id) for t in leased) == [0, 1, 2]
    assert q.constraint("slow").parked == 6


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize(
    "fields",
    [{"concurrency": 2}, {"rate": 1, "per": 60}, {"rate": 10, "concurrency": 1}],
)
def test_a_global_limit_too_small_to_split_is_refused(
    make_queue: MakeQueue, fields: dict[str, Any]
) -> None:
    q: Any = make_queue(shards=3)
    with pytest.raises(ValidationError, match="cannot be split over 3 shards"):
        q.define_constraint(id="tiny", **fields)
    assert q.constraints() == []
    with pytest.raises(ValidationError, match="cannot be split"):
        q.apply_constraints([Constraint(id="ok", concurrency=9), Constraint(id="no", **fields)])
    assert q.constraints() == []  # checked before anything was written
    per_user = q.define_constraint(id="tiny", per_user=True, **fields)
    assert q.constraint("tiny").constraint == per_user


def test_removing_a_constraint_frees_its_parked_tasks_on_every_shard(
    make_queue: MakeQueue,
) -> None:
    q: Any = make_queue(shards=3)
    q.define_constraint(id="api", name="call", concurrency=3)
    push_on_every_shard(q, 2)
    assert len(drain(q)) == 3
    assert q.remove_constraint("api") is True
    assert q.remove_constraint("api") is False
    assert len(drain(q)) == 3
    with pytest.raises(ConstraintNotFound):
        q.constraint("api")


def test_defining_again_changes_nothing_and_apply_prunes_every_shard(
    make_queue: MakeQueue,
) -> None:
    q: Any = make_queue(shards=3)
    first = q.apply_constraints([Constraint(id="a", concurrency=6), Constraint(id="b", rate=9)])
    again = q.apply_constraints([Constraint(id="a", concurrency=6), Constraint(id="b", rate=9)])
    assert again == first  # the same shares again: no shard's version moved
    kept = q.apply_constraints([Constraint(id="b", rate=9)], prune=True)
    assert [c.id for c in kept.constraints] == ["b"]
    other: Any = make_queue(q.queue)  # another client reads every shard the same
    assert [c.constraint.id for c in other.constraints()] == ["b"]


def test_a_resize_splits_the_limits_over_the_new_shards(make_queue: MakeQueue) -> None:
    q: Any = make_queue(shards=3)
    q.define_constraint(id="api", name="call", concurrency=6)
    with pytest.raises(ValidationError, match="cannot be split over 7 shards"):
        q.resize(7)
    assert q.shards == 3
    assert q.refresh_layout() == 3  # nothing changed
    q.resize(6)
    assert q.shards == 6
    push_on_every_shard(q, 3)
    leased = [t for t in drain(q) if t.name == "call"]
    assert sorted(q.shard_of(t.user_id) for t in leased) == list(range(6))  # one each


def test_sharding_a_queue_with_constraints_splits_them(make_queue: MakeQueue) -> None:
    q: Any = make_queue()
    q.define_constraint(id="api", name="call", concurrency=2)
    q.define_constraint(id="mine", concurrency=1, per_user=True)
    q.enqueue("warm", user_id="x")  # a queue that holds tasks grows by a resize
    q.resize(2)
    assert q.shards == 2
    push_on_every_shard(q, 3)
    leased = [t for t in drain(q) if t.name == "call"]
    assert sorted(q.shard_of(t.user_id) for t in leased) == [0, 1]
    assert sorted(c.constraint.id for c in q.constraints()) == ["api", "mine"]


# schedules ------------------------------------------------------------------------


def test_a_schedule_lives_in_its_tenants_shard(make_queue: MakeQueue) -> None:
    q: Any = make_queue(shards=3)
    users = [users_on(q, s, 1)[0] for s in range(3)]
    for s, user in enumerate(users):
        added = q.add_schedule(
            schedule_id=f"s{s}", name="tick", user_id=user, interval_seconds=3600
        )
        assert added.next_fire_at is not None
    # the same definition again is a no-op; another definition of the id is refused
    assert (
        q.add_schedule(
            schedule_id="s1", name="tick", user_id=users[1], interval_seconds=3600
        ).revision
        == q.get_schedule("s1").revision
    )
    other: Any = make_queue(q.queue)
    assert sorted(s.schedule_id for s in other.schedules()) == ["s0", "s1", "s2"]
    assert [s.schedule_id for s in other.schedules(limit=2)] == [
        s.schedule_id for s in other.schedules()[:2]
    ]
    paused = other.pause_schedule("s2")
    assert paused.enabled is False
    assert other.schedules()[-1].schedule_id == "s2"  # paused ones last
    assert other.resume_schedule("s2").enabled is True
    updated = other.update_schedule(
        schedule_id="s0", name="tock", user_id=users[0], interval_seconds=60
    )
    assert updated.name == "tock"
    assert other.get_schedule("s0").name == "tock"
    assert other.remove_schedule("s0") is True
    assert other.remove_schedule("s0") is False
    assert other.get_schedule("s0") is None
    with pytest.raises(ScheduleNotFound):
        other.pause_schedule("s0")
    with pytest.raises(ScheduleNotFound):
        other.update_schedule(schedule_id="s0", name="x", user_id="y", interval_seconds=5)


def test_a_schedule_fires_into_its_tenants_shard(make_queue: MakeQueue) -> None:
    q: Any = make_queue(shards=3)
    users = [users_on(q, s, 1)[0] for s in range(3)]
    for s, user in enumerate(users):
        q.add_schedule(schedule_id=f"s{s}", name="tick", user_id=user, interval_seconds=0.1)
    time.sleep(0.15)
    token = "test:1:leader"
    assert q.acquire_scheduler_lock(token, 10) == (True, 10)
    assert q.acquire_scheduler_lock("test:2:other", 10)[0] is False
    read = q.due_schedules()
    assert sorted(s.schedule.schedule_id for s in read.due) == ["s0", "s1", "s2"]
    fired = {s.schedule.schedule_id: q.fire_schedule(s, read.now_ms, token) for s in read.due}
    for s, user in enumerate(users):
        outcome = fired[f"s{s}"]
        assert outcome.created >= 1
        for task_id in outcome.task_ids:
            task = q.get(task_id)
            assert task.user_id == user
            assert q.shard_of(task.user_id) == s
    # a resent firing creates nothing more
    again = q.fire_schedule(read.due[0], read.now_ms, token)
    assert again.created == 0
    assert q.renew_scheduler_lock(token, 10) is True
    assert q.release_scheduler_lock(token) is True
    assert q.scheduler_holder() is None
    assert q.renew_scheduler_lock(token, 10) is False
    time.sleep(0.15)
    later = q.due_schedules()
    assert later.due
    with pytest.raises(NotLeader):  # each firing is fenced by its shard's lock
        q.fire_schedule(later.due[-1], later.now_ms, token)


def test_a_schedule_change_on_any_shard_wakes_the_leader(make_queue: MakeQueue) -> None:
    q: Any = make_queue(shards=3)
    other: Any = make_queue(q.queue)
    user = users_on(q, 2, 1)[0]
    assert q.wait_for_schedules(0.05) is False
    timer = threading.Timer(
        0.2,
        lambda: other.add_schedule(schedule_id="w", name="t", user_id=user, interval_seconds=60),
    )
    timer.start()
    started, timeout = time.monotonic(), 30
    try:
        assert q.wait_for_schedules(timeout) is True
    finally:
        timer.join()
    assert time.monotonic() - started < timeout / 2  # woken, not timed out


async def test_racing_schedulers_fire_each_slot_once_on_every_shard(server: ServerInfo) -> None:
    """Two schedulers race over schedules on three shards; the leader crashes (its
    locks lapse) and is replaced; every slot of every schedule is fired once, into
    its tenant's shard."""
    name = unique_queue("sched")
    clients: list[AsyncFairQueue] = []
    q = AsyncFairQueue.from_url(server.url, name, shards=3)
    clients.append(q)

    def fresh() -> Scheduler:
        clients.append(AsyncFairQueue.from_url(server.url, name))
        return Scheduler(clients[-1], lock_ttl=0.3)

    users = [users_on(q, s, 1)[0] for s in range(3)]
    for s, user in enumerate(users):
        await q.add_schedule(
            schedule_id=f"s{s}", name="tick", user_id=user, interval_seconds=0.1,
            misfire="catch_up",
        )  # fmt: skip

    async def fired(shard: int) -> int:
        stored = await q.get_schedule(f"s{shard}")
        return 0 if stored is None else stored.fired

    racing = Schedulers(fresh)
    deadline = time.monotonic() + 60
    try:
        while racing.crashes < 3 or min([await fired(s) for s in range(3)]) < 20:
            assert time.monotonic() < deadline, f"{racing.crashes} crashes"
            await asyncio.sleep(0.6)
            await racing.crash_leader()
    finally:
        await racing.stop()
    sync = FairQueue.from_url(server.url, name)
    try:
        leased = drain(sync)
        for s, user in enumerate(users):
            stored = await q.get_schedule(f"s{s}")
            assert stored is not None
            assert stored.last_fire_at is not None
            ids = sorted(t.task_id or "" for t in leased if t.user_id == user)
            assert len(ids) == stored.fired >= 20
            last = round(stored.last_fire_at.timestamp() * 1000)
            first = last - (len(ids) - 1) * 100
            assert ids == sorted(slot_task_id(f"s{s}", first + n * 100) for n in range(len(ids)))
            assert all(sync.shard_of(t.user_id) == s for t in leased if t.user_id == user)
        assert len(leased) == sum([await fired(s) for s in range(3)])
    finally:
        sync.close()
        for client in clients:
            await client.close()


def test_a_client_made_before_the_shards_splits_what_it_defines(server: ServerInfo) -> None:
    """A client built with the constructor starts as the first shard's; a change of
    constraints reads the layout first, so it is written to every shard, split."""
    sharded: Any = FairQueue.from_url(server.url, unique_queue(), shards=3)
    plain = FairQueue(sharded.client, sharded.queue)
    try:
        assert plain.layout.tags == ()
        plain.define_constraint(id="api", name="call", concurrency=3)
        assert plain.layout.tags == sharded.layout.tags  # it serves every shard now
        push_on_every_shard(sharded, 3)
        leased = drain(sharded)
        assert sorted(sharded.shard_of(t.user_id) for t in leased) == [0, 1, 2]
        late = FairQueue(sharded.client, sharded.queue)
        with pytest.raises(ValidationError, match="cannot be split over 3 shards"):
            late.apply_constraints([Constraint(id="tiny", concurrency=2)])
        assert FairQueue(sharded.client, sharded.queue).remove_constraint("api") is True
        assert sharded.constraints() == []  # removed from every shard
    finally:
        sharded.close()


async def test_an_async_client_made_before_the_shards_splits_what_it_defines(
    server: ServerInfo,
) -> None:
    sharded: Any = AsyncFairQueue.from_url(server.url, unique_queue(), shards=3)
    plain = AsyncFairQueue(sharded.client, sharded.queue)
    try:
        await plain.define_constraint(id="api", name="call", concurrency=3)
        assert plain.layout.tags == sharded.layout.tags
        infos = await sharded.constraints()
        assert [i.constraint.id for i in infos] == ["api"]
        late = AsyncFairQueue(sharded.client, sharded.queue)
        with pytest.raises(ValidationError, match="cannot be split over 3 shards"):
            await late.apply_constraints([Constraint(id="tiny", concurrency=2)])
        assert await AsyncFairQueue(sharded.client, sharded.queue).remove_constraint("api")
        assert await sharded.constraints() == []
    finally:
        await sharded.close()
