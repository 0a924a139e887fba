"""A sharded queue: N partitions under their own hash tags, a tenant in exactly one.

What must hold on every server (the cluster too): the shard count is kept on the server
and a client that names another gets a clear error; each tenant's keys sit in its
shard's slot; every task is leased once whichever shard it is in; reads by id find the
task's shard; a batch is split by shard and a dependency across shards is refused
before anything is written; a worker serves every shard; tenants on different shards
are served at one pace; constraints and schedules span the shards (global limits
split in shares, a schedule fires in its tenant's shard).
"""

from __future__ import annotations

import inspect
import threading
import time
from collections import Counter
from typing import Any

import pytest
from helpers.servers import ServerInfo, SyncClient
from helpers.support import MakeQueue, expire_lease, queue_snapshot, unique_queue
from helpers.worker_handlers import Harness, wait_state

from fairque import (
    AsyncFairQueue,
    ConfigError,
    Context,
    DependencyNotFound,
    FairQueue,
    Registry,
    SerializationError,
    Task,
    TaskNotFound,
    TaskState,
    ValidationError,
)
from fairque.client.shards.spread import STATE_TTL, Shards
from fairque.core.keys import QueueKeys
from fairque.core.records import LeaseRequest
from fairque.core.shards import choose_tags, jump_hash, shard_of

#: what a sharded client has beside the plain client's methods, and ``resize`` (the
#: same method on both: it reads and changes the layout kept in shard 0)
SHARD_NAMES = ("shards", "shard_of", "layout", "resize", "refresh_layout")


def users_on(q: Any, shard: int, count: int) -> list[str]:
    """``count`` user ids that live in ``shard`` of ``q``."""
    out = [f"u{i}" for i in range(10_000) if q.shard_of(f"u{i}") == shard]
    return out[:count]


def test_the_shard_count_is_kept_on_the_server(make_queue: MakeQueue) -> None:
    name = unique_queue()
    q = make_queue(name, shards=3)
    assert q.shards == 3
    again = make_queue(name)  # no count named: whatever the server holds
    assert again.shards == 3
    with pytest.raises(ConfigError, match="has 3 shards, not 4"):
        make_queue(name, shards=4)
    with pytest.raises(ConfigError, match="has 3 shards, not 1"):
        make_queue(name, shards=1)
    plain = make_queue(unique_queue(), shards=1)
    assert not hasattr(plain, "parts")  # one shard: the plain client, unchanged


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize("bad", [0, 1025, -1, "3", True, 2.0])
def test_a_bad_shard_count_is_refused_before_anything_is_written(
    make_queue: MakeQueue, redis_client: SyncClient, bad: Any
) -> None:
    name = unique_queue()
    with pytest.raises(ConfigError, match="shards must be"):
        make_queue(name, shards=bad)
    assert queue_snapshot(redis_client, name) == {}


def test_a_queue_that_holds_tasks_stays_unsharded(make_queue: MakeQueue) -> None:
    name = unique_queue()
    make_queue(name).enqueue("job", user_id="ann")
    with pytest.raises(ConfigError, match="has 1 shard, not 3; it already holds tasks"):
        make_queue(name, shards=3)
    opened = make_queue(name)  # opened as it is: one shard, its task there
    assert not hasattr(opened, "parts")
    assert opened.stats().counts[TaskState.QUEUED] == 1


def test_each_tenant_lives_in_its_shard(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q: Any = make_queue(shards=4)
    tags = [p.ops.keys.tag for p in q._place.parts]
    assert tags[0] is None
    assert len(set(tags)) == 4
    for i in range(40):
        t = q.enqueue("job", {"i": i}, user_id=f"user-{i}")
        shard = shard_of(f"user-{i}", 4)
        key = QueueKeys(q.queue, tags[shard]).task(t.task_id)
        assert redis_client.exists(key) == 1
        for other in set(range(4)) - {shard}:
            assert redis_client.exists(QueueKeys(q.queue, tags[other]).task(t.task_id)) == 0


def test_every_task_is_leased_once_across_shards(make_queue: MakeQueue) -> None:
    q: Any = make_queue(shards=3)
    ids = {q.enqueue("job", {"i": i}, user_id=f"u{i % 17}").task_id for i in range(240)}
    seen: Counter[str] = Counter()
    done: list[tuple[Task, Any]] = []
    while True:
        acks, leased = q.complete_and_pop(done, 7, "w1")
        assert all(acks)
        if not leased:
            break
        seen.update(t.task_id for t in leased)
        done = [(t, {"n": t.payload["i"]}) for t in leased]
    assert set(seen) == ids
    assert set(seen.values()) == {1}
    stats = q.stats()
    assert stats.counts[TaskState.FINISHED] == 240
    assert stats.counters["completed"] == 240
    assert q.result(next(iter(ids))) is not None


def test_reads_and_changes_by_id_find_the_tasks_shard(make_queue: MakeQueue) -> None:
    q: Any = make_queue(shards=3)
    tasks = [q.enqueue("job", i, user_id=u) for i, u in enumerate(users_on(q, 2, 2))]
    first, second = tasks
    assert q.get(first.task_id).state is TaskState.QUEUED
    assert q.cancel(first.task_id) is True
    assert q.cancel(first.task_id) is False  # ended already: the same answer as unsharded
    assert q.outcome(first.task_id).state is TaskState.CANCELED
    assert q.retry(first.task_id) is TaskState.QUEUED
    assert q.get("nope") is None
    with pytest.raises(TaskNotFound, match="no task 'nope'"):
        q.cancel("nope")
    leased = q.pop_batch(5, "w")
    assert {t.task_id for t in leased} == {first.task_id, second.task_id}
    for t in leased:
        assert q.extend(t, 5) is not None
        assert q.extend_many([t], 5) == [True]
    fetched = q.get(leased[0].task_id)  # its token carries its shard, as a lease's does
    assert fetched.lease_token == leased[0].lease_token
    assert q.complete(fetched, "r0") is True
    assert q.fail(leased[1], "boom", retry=False) is TaskState.FAILED
    assert q.result(leased[0].task_id) == "r0"


def test_a_resent_lease_request_answers_what_the_first_send_leased(
    make_queue: MakeQueue,
) -> None:
    q: Any = make_queue(shards=3)
    for shard in range(3):
        for u in users_on(q, shard, 2):
            q.enqueue("job", user_id=u)
    first = q.pop_batch(2, "w", request_id="req-1")
    again = q.pop_batch(2, "w", request_id="req-1")
    assert [t.task_id for t in again] == [t.task_id for t in first]
    assert [t.lease_token for t in again] == [t.lease_token for t in first]
    assert q.stats().counts[TaskState.STARTED] == 2


def test_a_lease_answers_its_shards_state_and_a_resend_the_same_tasks(
    server: ServerInfo,
) -> None:
    """The lease call of a sharded client asks for its shard's state beside the tasks
    (what the next lease weighs), so most leases are one call; a resend answers the
    same tasks, and the state as it is then."""
    q = FairQueue.from_url(server.url, unique_queue(), shards=2)
    try:
        assert isinstance(q._place, Shards)
        user = users_on(q, 1, 1)[0]
        for _ in range(3):
            q.enqueue("job", user_id=user)
        ops = q._place.parts[1].ops
        request = LeaseRequest(1, "w", None, None, None, "req-state")
        _, first = q._run(ops.complete_and_pop([], request, with_state=True))
        _, again = q._run(ops.complete_and_pop([], request, with_state=True))
        assert [t.task_id for t in again] == [t.task_id for t in first]
        assert len(first) == 1
        assert first.state is not None
        assert first.state == q._run(ops.shard_state())
        assert (first.state.ready, first.state.users) == (True, 1)
        _, plain = q._run(ops.complete_and_pop([], request._replace(request_id="other")))
        assert plain.state is None  # not asked: the reply a plain queue gets
        _, none_left = q._run(
            ops.complete_and_pop([], request._replace(request_id="last", count=5), with_state=True)
        )
        assert len(none_left) == 1
        assert none_left.state is not None
        # nothing left to lease: not ready (leases in flight count once they expire)
        assert (none_left.state.ready, none_left.state.users) == (False, 0)
    finally:
        q.close()


def test_push_many_is_split_by_shard(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q: Any = make_queue(shards=3)
    a, b = users_on(q, 0, 1)[0], users_on(q, 1, 1)[0]
    batch = [
        Task(user_id=a, name="up", task_id="a1"),
        Task(user_id=b, name="other", task_id="b1"),
        Task(user_id=a, name="down", task_id="a2", depends_on=["a1"]),
    ]
    pushed = q.push_many(batch)
    assert [t.task_id for t in pushed] == ["a1", "b1", "a2"]
    assert pushed.created == [True, True, True]
    assert q.get("a2").state is TaskState.DEFERRED
    again = q.push_many(batch)  # a resend: the stored tasks, nothing created
    assert again.created == [False, False, False]
    before = {p: queue_snapshot(redis_client, p) for p in (q.queue,)}
    cross = [
        Task(user_id=a, name="up", task_id="a3"),
        Task(user_id=b, name="down", task_id="b2", depends_on=["a3"]),
    ]
    with pytest.raises(ValidationError, match="another shard"):
        q.push_many(cross)
    assert {p: queue_snapshot(redis_client, p) for p in (q.queue,)} == before
    assert q.get("a3") is None
    assert q.get("b2") is None
    with pytest.raises(DependencyNotFound):  # an existing task of another shard
        q.enqueue("down", user_id=b, depends_on=["a1"])
    # a bad task in a later shard's part: every part is checked before any is sent
    bad = [
        Task(user_id=a, name="fine", task_id="a4"),
        Task(user_id=b, name="bad", task_id="b3", payload={"x": float("nan")}),
    ]
    keyspace = queue_snapshot(redis_client, q.queue)
    with pytest.raises(SerializationError, match="payload"):
        q.push_many(bad)
    assert queue_snapshot(redis_client, q.queue) == keyspace
    with pytest.raises(ValidationError, match="Task"):
        q.push_many([Task(user_id=a, name="fine"), "not a task"])
    assert queue_snapshot(redis_client, q.queue) == keyspace
    with pytest.raises(ValidationError, match="1 delays given for 3 tasks"):
        q.push_many(batch, delays=[None])


def test_tenants_on_different_shards_are_served_at_one_pace(make_queue: MakeQueue) -> None:
    """One tenant alone on a shard, four on another: each of the five gets a fifth of
    the worker time, not the lone tenant half of it. Each lease is held 5 ms or more;
    the bound on the spread of worker time is taken from the longest hold measured
    (a queue fair by worker time is fair within a task or so of each tenant's)."""
    q: Any = make_queue(shards=2)
    lone = users_on(q, 0, 1)
    crowd = users_on(q, 1, 4)
    for u in lone + crowd:
        for i in range(40):
            q.enqueue("job", i, user_id=u)
    served: Counter[str] = Counter()
    longest = 0.0
    done: list[tuple[Task, Any]] = []
    for _ in range(50):
        before = time.monotonic()
        _, leased = q.complete_and_pop(done, 1, "w")
        served.update(t.user_id for t in leased)
        time.sleep(0.005)
        done = [(t, None) for t in leased]
        longest = max(longest, time.monotonic() - before)
    q.complete_and_pop(done, 0, "w")
    assert sum(served.values()) == 50
    busy = {t.user_id: t.busy_seconds for t in q.tenants(limit=10).tenants}
    assert sorted(busy) == sorted(lone + crowd)
    # an even split is a fifth each; a split by shard would give the lone tenant half
    # (25 holds against about 6 each: a spread of 19 holds)
    assert max(busy.values()) - min(busy.values()) <= 3 * longest + 0.02, (busy, longest)


def test_listing_walks_every_shard(make_queue: MakeQueue) -> None:
    q: Any = make_queue(shards=3)
    ids = {q.enqueue("job", user_id=f"u{i}").task_id for i in range(25)}
    listed: list[str] = []
    sizes: list[int] = []
    cursor = None
    for _ in range(50):
        page = q.list_tasks(state=TaskState.QUEUED, limit=7, cursor=cursor)
        listed += [t.task_id for t in page.tasks]
        sizes.append(len(page.tasks))
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(listed) == sorted(ids)
    # a page the end of a shard leaves short is filled from the next shard, so a
    # listing by state has full pages as on a plain queue
    assert sizes[:3] == [7, 7, 7], sizes
    assert len(sizes) <= 5, sizes
    mine = q.list_tasks(user_id="u3")
    assert [t.user_id for t in mine.tasks] == ["u3"]
    with pytest.raises(ValidationError, match="not a cursor of this queue"):
        q.list_tasks(state=TaskState.QUEUED, cursor="9/x")


def test_the_readers_merge_every_shard(make_queue: MakeQueue) -> None:
    """What the dashboard, /metrics and the command line read, over 3 shards."""
    q: Any = make_queue(shards=3)
    users = [u for s in range(3) for u in users_on(q, s, 2)]
    capped = users[-1]
    q.set_user_limits(capped, max_in_flight=1)
    q.set_user_limits(users[0], weight=4)
    for u in users:
        for i in range(3):
            q.enqueue("job", i, user_id=u)
    assert q.oldest_queued_ms() is not None
    ring, size = q.ring_users()
    assert sorted(ring) == sorted(users)
    assert size == 6
    page, _ = q.ring_users(limit=2, offset=3)
    assert page == ring[3:5]
    assert q.ring_users(limit=0) == ([], 6)
    assert q.backlogs(users) == dict.fromkeys(users, (0, 3))
    loads = q.user_loads([*users, users[0]])
    assert [load.user_id for load in loads] == users
    assert [load.ready for load in loads] == [3] * 6
    assert q.user_weights(users) == [4, 1, 1, 1, 1, 1]
    waiting = q.get(q.list_tasks(user_id=users[2]).tasks[0].task_id)
    place = q.wait_place(waiting)
    assert place.ahead is not None
    assert place.ring_size == 2  # its shard's ring
    held = q.pop("w", assigned_users=[capped])
    assert held.user_id == capped
    assert set(q.capped_users()) <= {capped}
    done: list[tuple[Task, Any]] = [(held, None)]
    # until all are done: a lease weighs shard states it kept, and may come back empty
    # once while another shard has just become ready (the capped user's, freed by the
    # finish that rode on it); the next lease reads the states again
    for _ in range(100):
        _, leased = q.complete_and_pop(done, 2, "w")
        done = [(t, None) for t in leased]
        if not leased and q.metrics().finished == 18:
            break
    metrics = q.metrics()
    assert metrics.pushed == 18
    assert metrics.finished == 18
    assert metrics.wait_time.count == metrics.popped
    report = q.tenants(limit=3)
    assert len(report.tenants) == 3
    assert sum(t.started for t in report.tenants) + report.others.started == metrics.popped
    assert report.users_known == 6
    starts = q.recent_starts()
    assert len(starts) == metrics.popped
    assert [s.started for s in starts] == sorted((s.started for s in starts), reverse=True)
    up, down = (
        Task(user_id=users[0], name="up", task_id="up"),
        Task(user_id=users[0], name="down", task_id="down", depends_on=["up"]),
    )
    q.push_many([up, down])
    assert q.task_links("up") == (["down"], [])
    assert q.task_links("down") == ([], ["up"])


def test_every_method_is_shard_aware_or_kept_in_shard_0() -> None:
    """No method of the plain client answers from shard 0 alone by accident."""
    shard_0 = {
        "close", "encode_result", "fairness", "from_url", "max_lead", "open", "options", "queue",
        "queues", "register_worker", "server_memory", "memory_report", "server_time_ms",
        "unregister_worker",
        "wake", "workers", "xcom_pull", "xcom_push",
        # the scheduler's hand-over lives in shard 0 (the last lock a leader releases)
        "scheduler_holder", "wait_for_handover",
    }  # fmt: skip
    for cls in (FairQueue, AsyncFairQueue):
        for name in dir(cls):
            if name.startswith("_") or name in shard_0 or name in SHARD_NAMES:
                continue
            source = inspect.getsource(getattr(cls, name))
            routed = any(
                flow in source
                for flow in ("self._place.", "self._purge_all_flow(", "self._metrics_flow(")
            )  # (the last two flows go through every partition of the placement)
            assert routed, f"{cls.__name__}.{name} names no placement"


def test_housekeeping_spans_every_shard(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q: Any = make_queue(shards=3, failed_ttl_seconds=0.05)
    for shard in range(3):
        q.enqueue("job", user_id=users_on(q, shard, 1)[0])
    assert q.place() == 3
    leased: list[Task] = []
    while len(leased) < 3:
        leased += q.pop_batch(3, "w")
    assert q.next_wakeup() is not None
    for task in leased:  # (a short lease could expire, and be reclaimed, mid-loop)
        expire_lease(redis_client, q.queue, task.task_id or "")
    assert q.reclaim() == 3  # each a failed attempt: back for a retry
    assert q.stats().counts[TaskState.SCHEDULED] == 3
    assert q.maintain() == 0  # nothing has expired yet
    assert q.cleanup_dependencies() == 0
    q.set_user_limits(users_on(q, 2, 1)[0], weight=3)
    assert q.set_fairness("count") == "time"
    assert q.set_fairness("time") == "count"
    assert q.purge() == 3
    assert q.stats().counts[TaskState.SCHEDULED] == 0
    for shard in range(3):  # a FAILED record on each shard, kept 50 ms
        q.enqueue("job", user_id=users_on(q, shard, 1)[0], max_retries=0)
    failed: list[Task] = []
    while len(failed) < 3:
        for task in q.pop_batch(3, "w"):
            assert q.fail(task, "boom", retry=False) == TaskState.FAILED
            failed.append(task)
    while any(q.get(t.task_id or "") is not None for t in failed):  # until they expire
        time.sleep(0.01)
    assert q.maintain() == 3  # each shard's expired registry entry


def test_an_idle_client_wakes_on_a_push_to_any_shard(make_queue: MakeQueue) -> None:
    q: Any = make_queue(shards=3)
    assert q.wait_for_work(0.05) is False  # nothing pushed: the wait runs out
    late = users_on(q, 2, 1)[0]
    timer = threading.Timer(0.2, lambda: q.enqueue("job", user_id=late))
    timer.start()
    start, timeout = time.monotonic(), 30
    try:
        got = q.wait_and_pop(timeout, 1, "w")
    finally:
        timer.join()
    assert [t.user_id for t in got] == [late]
    assert time.monotonic() - start < timeout / 2  # woken, not timed out


async def test_a_worker_serves_every_shard(h: Harness, server: ServerInfo) -> None:
    q: Any = h.queue(shards=3)
    reg = Registry()

    @reg.task(name="double")
    async def double(ctx: Context, payload: Any) -> int:
        return int(payload) * 2

    tasks = [await q.enqueue("double", i, user_id=f"u{i % 9}") for i in range(60)]
    h.start(q, reg)
    for t in tasks:
        await wait_state(q, t.task_id, TaskState.FINISHED)
    assert [await q.result(t.task_id) for t in tasks] == [2 * i for i in range(60)]
    late = await q.enqueue("double", 21, user_id=users_on(q, 2, 1)[0])
    assert await q.result(late.task_id, timeout=10) == 42  # an idle worker wakes
    assert (await q.stats()).counts[TaskState.FINISHED] == 61


def test_tags_spread_over_the_slot_space() -> None:
    from redis.crc import key_slot

    from fairque.core.keys import QueueKeys
    from fairque.core.shards import SLOT_GAP

    tags = choose_tags("orders", 6)
    # the slot each partition's keys really land in, as the cluster computes it
    slots = [key_slot(QueueKeys("orders", tag).ring.encode()) for tag in (None, *tags)]
    for i, slot in enumerate(slots):
        assert (slot - slots[0]) % 16384 == pytest.approx(i * 16384 // 6, abs=SLOT_GAP)
    assert choose_tags("orders", 8, tags)[:5] == tags  # existing tags are kept


def test_jump_hash_moves_only_to_the_new_shard() -> None:
    keys = range(0, 2**64, 2**64 // 5000)
    before = [jump_hash(k, 6) for k in keys]
    after = [jump_hash(k, 7) for k in keys]
    moved = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    assert all(a == 6 for _, a in moved)
    assert 0.10 < len(moved) / len(before) < 0.19  # about 1/7
    assert Counter(before).most_common()[-1][1] > 5000 / 6 * 0.85


async def test_the_async_client_opens_with_the_servers_count(server: ServerInfo) -> None:
    import redis.asyncio as aredis

    from fairque import AsyncFairQueue

    name = unique_queue()
    FairQueue.from_url(server.url, name, shards=2).close()
    client: Any = (
        aredis.RedisCluster.from_url(server.url)
        if server.cluster
        else aredis.Redis.from_url(server.url)
    )
    q: Any = await AsyncFairQueue.open(client, name)
    try:
        assert isinstance(q._place, Shards)
        assert q.shards == 2
        with pytest.raises(ConfigError, match="has 2 shards, not 5"):
            await AsyncFairQueue.open(client, name, shards=5)
    finally:
        await q.close()


async def test_a_worker_given_a_plain_client_serves_every_shard(
    h: Harness, server: ServerInfo
) -> None:
    """A client made without reading the count (the constructor, or ``from_url`` while
    the server was down) is shard 0's; the worker opens the queue again at start."""
    from fairque import AsyncFairQueue

    name = unique_queue()
    opened: Any = h.queue(name, shards=3)
    plain = AsyncFairQueue(opened.client, name)
    assert not isinstance(plain._place, Shards)
    reg = Registry()
    reg.register(lambda: "ran", name="job")
    tasks = [
        await opened.enqueue("job", user_id=u) for s in range(3) for u in users_on(opened, s, 2)
    ]
    worker = h.start(plain, reg)
    for t in tasks:
        await wait_state(opened, t.task_id, TaskState.FINISHED)
    assert worker.queue is plain  # it serves every shard now, through a new placement
    assert type(plain) is AsyncFairQueue
    assert isinstance(plain._place, Shards)
    assert await plain.refresh_layout() == 3
    other = AsyncFairQueue(opened.client, name)
    assert other.shards == 1
    assert await other.refresh_layout() == 3
    assert other.shards == 3


def test_an_unreachable_server_opens_shard_0_unless_a_count_is_named() -> None:
    import redis

    from fairque.cli.embedded import free_port

    url = f"redis://127.0.0.1:{free_port()}/0"
    q = FairQueue.from_url(url, "later", cluster=False)
    assert type(q) is FairQueue
    q.close()
    with pytest.raises(redis.ConnectionError):
        FairQueue.from_url(url, "later", cluster=False, shards=3)


def drain_all(q: Any, worker: str = "w") -> Counter[str]:
    """Lease and finish everything; how many times each task id was leased."""
    seen: Counter[str] = Counter()
    done: list[tuple[Task, Any]] = []
    while True:
        acks, leased = q.complete_and_pop(done, 5, worker)
        assert all(acks)
        if not leased:
            return seen
        seen.update(str(t.task_id) for t in leased)
        done = [(t, None) for t in leased]


def test_a_queue_that_holds_tasks_grows_by_a_resize(make_queue: MakeQueue) -> None:
    name = unique_queue()
    q: Any = make_queue(name)
    before = [q.enqueue("job", i, user_id=f"u{i % 9}").task_id for i in range(27)]
    leased = q.pop("w")  # leased before the resize: acknowledged on shard 0 after it
    assert q.resize(3) == 1
    assert q.shards == 3  # this client follows at once
    assert make_queue(name).shards == 3
    assert q.complete(leased, "early") is True
    after = [q.enqueue("job", i, user_id=f"u{i % 9}").task_id for i in range(27)]
    placed = {q.shard_of(f"u{i}") for i in range(9)}
    assert len(placed) > 1  # new tasks spread; the old ones stay in shard 0
    seen = drain_all(q)
    assert set(seen) == set(before + after) - {leased.task_id}
    assert set(seen.values()) == {1}
    assert q.stats().counts[TaskState.FINISHED] == 54
    assert q.resize(3) == 3  # already so: nothing changes


def test_a_shrink_retires_shards_that_workers_drain(make_queue: MakeQueue) -> None:
    q: Any = make_queue(shards=3)
    last = users_on(q, 2, 3)
    ids = [q.enqueue("job", user_id=u).task_id for u in last]
    assert q.resize(2) == 3
    assert q.shards == 2
    assert len(q._place.parts) == 3  # the retired shard is still served
    moved = [q.enqueue("job", user_id=u).task_id for u in last]
    for task_id in moved:  # new tasks of its tenants go to the remaining shards
        assert q.get(task_id).lease_token is None
    seen = drain_all(q)
    assert set(seen) == set(ids + moved)
    assert set(seen.values()) == {1}
    assert q.resize(3) == 2  # grows back onto the retired shard's tag
    assert len(q._place.parts) == 3


def test_another_client_follows_a_resize(
    make_queue: MakeQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fairque.client.base as base

    name = unique_queue()
    early: Any = make_queue(name)
    early.enqueue("job", user_id="first")
    monkeypatch.setattr(base, "LAYOUT_EVERY", 0.0)
    getattr(early, "_queue", early)._layout_at = 0.0  # the client, not the test's wrapper
    make_queue(name).resize(4)
    users = [f"u{i}" for i in range(40)]
    for u in users:
        early.enqueue("job", user_id=u)  # the first push reads the layout after it
    assert early.shards == 4
    where = Counter(early.shard_of(u) for u in users)
    assert len(where) == 4
    assert sum(drain_all(early).values()) == 41


def test_a_resize_is_checked_and_safe_to_resend(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q: Any = make_queue(shards=2)
    for bad in (0, 1025, "3", True):
        with pytest.raises(ConfigError, match="shards must be"):
            q.resize(bad)
    ops = q._place.parts[0].ops
    layout = q.layout
    call = ops.resize(4, len(layout.tags), ["x{1.1", "x{2.2"][:0] or list(layout.tags[:0]))
    with pytest.raises(ValidationError, match="needs their tags"):
        q._run(call)
    tags = ["t-one", "t-two"]
    first = q._run(ops.resize(4, len(layout.tags), tags))
    again = q._run(ops.resize(4, len(layout.tags), tags))  # a resend after a lost reply
    assert first == again
    assert first.count == 4
    assert first.tags == (*layout.tags, *tags)
    stale = q._run(ops.resize(2, 0, []))  # saw an older list: nothing changes
    assert stale == first


def test_creating_the_shards_is_safe_to_resend(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    name = unique_queue()
    plain: Any = make_queue(name, shards=1)  # nothing written yet: a new queue
    create = plain.ops.create_shards(["c{1.1", "c{2.2"])
    first = plain._run(create)
    snapshot = queue_snapshot(redis_client, name)
    assert plain._run(create) == first  # a resend after a lost reply: the same answer
    assert queue_snapshot(redis_client, name) == snapshot  # and nothing changed
    assert (first.count, first.tags) == (3, ("c{1.1", "c{2.2"))
    assert plain._run(plain.ops.create_shards(["other{1.9"])) == first  # a racing creator


async def test_a_resize_under_load_loses_nothing_and_runs_nothing_twice(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain queue grows to 3 shards, then to 6, while a producer pushes and two
    workers, each with its own client, serve it; they follow at their heartbeats."""
    import fairque.client.base as base

    monkeypatch.setattr(base, "LAYOUT_EVERY", 0.1)
    name = unique_queue()
    q: Any = h.queue(name)
    reg = Registry()
    runs: Counter[str] = Counter()

    @reg.task(name="job")
    async def job(ctx: Context, payload: Any) -> None:
        runs[ctx.task.task_id or ""] += 1

    workers = []
    for i in range(2):
        served: Any = h.queue(name)
        served._layout_at = 0.0
        workers.append(served)
        h.start(served, reg, id=f"w{i}", max_concurrent_tasks=4, heartbeat_interval_seconds=0.1)
    ids: list[str] = []
    for round_ in range(8):
        ids += [(await q.enqueue("job", i, user_id=f"u{i % 23}")).task_id for i in range(50)]
        if round_ == 2:
            assert await q.resize(3) == 1
        if round_ == 5:
            assert await q.resize(6) == 3
    for task_id in ids:
        await wait_state(q, task_id, TaskState.FINISHED, timeout=60)
    assert set(runs) == set(ids)
    assert set(runs.values()) == {1}
    stats = await q.stats()
    assert stats.counts[TaskState.FINISHED] == len(ids)
    for served in workers:  # what each worker's client counted, on every shard it knew
        await served.flush_metrics()
    assert (await q.stats()).counters["completed"] == len(ids)
    assert all(w.shards == 6 for w in workers)  # both workers followed
    assert len({q.shard_of(f"u{i}") for i in range(23)}) > 3


def test_a_shard_that_stood_still_gets_no_credit_for_it(make_queue: MakeQueue) -> None:
    """A tenant arriving on a shard that was idle while another served (in virtual
    time) starts at the queue's virtual time, as it would on a plain queue; left at its
    shard's old floor, it would take every lease until it caught up."""
    q: Any = make_queue(shards=2)
    busy, late = users_on(q, 0, 1)[0], users_on(q, 1, 1)[0]
    for i in range(30):
        q.enqueue("job", i, user_id=busy)
    for _ in range(4):  # leases held 0.35 s: the busy shard's floor moves ~1 s on
        task = q.pop("w")
        time.sleep(0.35)
        assert q.complete(task)
    floor = q._run(q._place.parts[0].ops.shard_state()).floor
    assert floor > 1_000_000
    for i in range(5):
        q.enqueue("job", i, user_id=late)
    assert q._run(q._place.parts[1].ops.shard_state()).position < floor  # joined at its old floor
    time.sleep(STATE_TTL)  # the states the last lease read beside it are too old now
    task = q.pop("w")  # weighs both shards: lifts the one that stood still
    assert task.user_id == late  # it has used no worker time yet
    assert q._run(q._place.parts[1].ops.shard_state()).floor >= floor
    again = q._run(q._place.parts[1].ops.lift_floor(0))  # lower: nothing changes, same answer
    assert again >= floor
