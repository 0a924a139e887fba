"""Groups (organisations over tenants): worker time (time mode) or turns (count mode)
are shared between groups by their weights first, then between a group's tenants by
theirs; a tenant with no group is a group of one. Each case leases against a real
server at the first estimate (no task ended yet: every lease is charged alike), so the
shares are exact counts in both modes."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from helpers.servers import SyncClient
from helpers.support import CheckedThread, MakeQueue, expire_lease, queue_snapshot, resend

from fairque import FairQueue, Task, TaskState, ValidationError
from fairque.core.keys import QueueKeys
from fairque.models import Fairness

#: groups hold in both modes: of worker time (time) and of turns (count); shares (floors
#: and ceilings) are of worker time
FAIR_MODES: list[Fairness] = ["time", "count"]


def load(q: FairQueue, users: dict[str, int]) -> None:
    """``users[u]`` tasks for each user, interleaved in small batches."""
    left = dict(users)
    while any(left.values()):
        for u, n in left.items():
            if n:
                q.push_many(Task(user_id=u, name="n") for _ in range(min(n, 50)))
                left[u] = max(n - 50, 0)


def served(q: FairQueue, n: int) -> Counter[str]:
    return Counter(t.user_id for t in q.pop_batch(n, "w"))


@pytest.mark.one_shard("a group's share is exact in each shard: tenants spread over shards")
@pytest.mark.parametrize("mode", FAIR_MODES)
def test_a_group_of_ten_shares_its_half_with_its_tenants(
    make_queue: MakeQueue, mode: Fairness
) -> None:
    """Two groups of weight 1, one with one tenant, one with ten: 50 % and 5 % each."""
    q = make_queue()
    q.set_fairness(mode)
    q.set_user_limits("solo", group="a")
    team = [f"b{i}" for i in range(10)]
    for u in team:
        q.set_user_limits(u, group="b")
    load(q, {"solo": 300, **dict.fromkeys(team, 60)})
    got = served(q, 200)
    assert abs(got["solo"] - 100) <= 2, got
    assert all(abs(got[u] - 10) <= 1 for u in team), got


@pytest.mark.one_shard("a group's share is exact in each shard: tenants spread over shards")
@pytest.mark.parametrize("mode", FAIR_MODES)
def test_group_weights_and_tenant_weights_nest(make_queue: MakeQueue, mode: Fairness) -> None:
    """A group of weight 3 against a tenant with no group (a group of one, weight 1);
    inside the group, tenants of weights 1 and 2 split its three quarters 1:2."""
    q = make_queue()
    q.set_fairness(mode)
    q.set_group_limits("org", weight=3)
    q.set_user_limits("small", group="org")
    q.set_user_limits("big", group="org", weight=2)
    load(q, {"small": 200, "big": 200, "alone": 200})
    got = served(q, 240)
    assert abs(got["alone"] - 60) <= 2, got
    assert abs(got["small"] - 60) <= 2, got
    assert abs(got["big"] - 120) <= 2, got


@pytest.mark.one_shard("a group's share is exact in each shard: tenants spread over shards")
@pytest.mark.parametrize("mode", FAIR_MODES)
def test_a_tenant_without_work_leaves_its_share_to_its_group(
    make_queue: MakeQueue, mode: Fairness
) -> None:
    q = make_queue()
    q.set_fairness(mode)
    for u in ("b0", "b1"):
        q.set_user_limits(u, group="b")
    load(q, {"b0": 200, "solo": 200})
    got = served(q, 100)  # b1 has nothing: b0 holds the whole group's half
    assert abs(got["b0"] - 50) <= 2, got


@pytest.mark.one_shard("a group's share is exact in each shard: tenants spread over shards")
def test_count_mode_shares_turns_by_group_then_tenant(make_queue: MakeQueue) -> None:
    """Count mode: a tenant of weight 3, a group of weight 2 (tenants of weights 1 and 3)
    and a tenant of weight 1 whose tasks cost 2 turns each: turns 3 : 2 (0.5 + 1.5) : 1."""
    q = make_queue()
    q.set_fairness("count")
    q.set_user_limits("heavy", weight=3)
    q.set_group_limits("org", weight=2)
    q.set_user_limits("g1", group="org")
    q.set_user_limits("g3", group="org", weight=3)
    load(q, {"heavy": 300, "g1": 100, "g3": 200})
    q.push_many(Task(user_id="dear", name="n", cost=2) for _ in range(100))
    got = served(q, 240 - 20)  # 240 turns: the 20 tasks of "dear" take 40
    assert abs(got["heavy"] - 120) <= 3, got
    assert abs(got["g1"] - 20) <= 2, got
    assert abs(got["g3"] - 60) <= 3, got
    assert abs(got["dear"] - 20) <= 2, got


@pytest.mark.one_shard("reads one shard's keys")
def test_the_group_count_follows_the_ring(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    """A group's 'active' is the weights of its tenants in the ring: joins, leaves, a
    weight changed and a tenant moved between groups while in the ring."""
    q = make_queue()
    keys = QueueKeys(q.queue)

    def active(group: str) -> int:
        return int(redis_client.hget(keys.group(group), "active") or 0)

    q.set_user_limits("u", group="g")
    q.set_user_limits("v", group="g", weight=2)
    assert (active("g"), active("h")) == (0, 0)  # nobody has work yet
    q.enqueue("n", user_id="u")
    q.push_many([Task(user_id="v", name="n") for _ in range(3)])
    q.place()
    assert active("g") == 3
    q.set_user_limits("v", weight=5)
    assert active("g") == 6
    q.set_user_limits("v", group="h")
    assert (active("g"), active("h")) == (1, 5)
    q.set_user_limits("v", group="")
    assert (active("g"), active("h")) == (1, 0)
    while q.pop_batch(10, "w"):
        pass
    assert (active("g"), active("h")) == (0, 0)


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_resent_grouping_changes_nothing(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u")
    q.place()
    resend(q, redis_client, q.ops.set_user_limits("u", 2, None, None, "g"))
    assert int(redis_client.hget(QueueKeys(q.queue).group("g"), "active") or 0) == 2
    resend(q, redis_client, q.ops.set_group_limits("g", 4))
    snapshot = queue_snapshot(redis_client, q.queue)
    q._run(q.ops.set_group_limits("g", 4))
    assert queue_snapshot(redis_client, q.queue) == snapshot
    # a share and a cap, resent: each changes the keyspace once
    resend(q, redis_client, q.ops.set_user_limits("u", None, None, None, None, 0.2, 0.8))
    resend(q, redis_client, q.ops.set_group_limits("g", None, 0.1, 0.9, 3))
    assert redis_client.hget(QueueKeys(q.queue).group("g"), "cap") == b"3"


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_resent_lease_and_completion_hold_a_group_slot_once(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.set_user_limits("u", group="g")
    q.set_group_limits("g", max_in_flight=2)
    q.push_many(Task(user_id="u", name="n", cost=2) for _ in range(2))
    gheld = QueueKeys(q.queue).group_held("g")
    first, second = resend(q, redis_client, q.ops.pop(5, "w", None, None, None))
    assert [t.task_id for t in first] == [t.task_id for t in second]
    assert len(first) == 1
    assert redis_client.zcard(gheld) == 2  # its two slots, held once
    _, again = resend(q, redis_client, q.ops.complete(first[0], None))
    assert again is True
    assert redis_client.zcard(gheld) == 0
    assert len(q.pop_batch(5, "w")) == 1


@pytest.mark.one_shard("a group's share is exact in each shard: tenants spread over shards")
@pytest.mark.parametrize("mode", FAIR_MODES)
def test_a_live_change_of_group_takes_effect_at_the_next_lease(
    make_queue: MakeQueue, mode: Fairness
) -> None:
    q = make_queue()
    q.set_fairness(mode)
    for u in ("x", "y"):
        q.set_user_limits(u, group="pair")
    load(q, {"x": 300, "y": 300, "z": 300})
    first = served(q, 100)
    assert abs(first["z"] - 50) <= 2, first
    q.set_user_limits("y", group="")  # now three groups of one
    then = served(q, 150)
    assert all(abs(then[u] - 50) <= 3 for u in "xyz"), then


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda q: q.set_user_limits("u", group="bad\nid"), "control characters"),
        (lambda q: q.set_user_limits("u", group=3), "group must be a non-empty string"),
        (lambda q: q.set_group_limits("", weight=2), "group_id must be a non-empty string"),
        (lambda q: q.set_group_limits("g", weight=0), "weight"),
        (lambda q: q.set_group_limits("g", weight=True), "weight"),
    ],
)
def test_bad_group_input_is_a_typed_error_and_writes_nothing(
    make_queue: MakeQueue, call: object, message: str
) -> None:
    q = make_queue()
    with pytest.raises(ValidationError, match=message):
        call(q)  # type: ignore[operator]
    assert q.stats().users == []


@pytest.mark.one_shard("reads one shard's keys")
def test_a_purge_forgets_the_groups(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    q.set_group_limits("g", weight=2)
    q.set_user_limits("u", group="g")
    q.enqueue("n", user_id="u")
    q.pop("w")
    q.purge()
    keys = QueueKeys(q.queue)
    for key in (keys.groups, keys.group_weights, keys.group("g"), keys.tenant("u")):
        assert not redis_client.exists(key), key


# shares: floors and ceilings ----------------------------------------------------------
@pytest.mark.one_shard("a share is of one shard's workers: tenants spread over shards")
def test_a_floor_holds_against_a_heavier_tenant(make_queue: MakeQueue) -> None:
    """A floor of 20 % against a tenant of weight 9: 20 % of the leases, not 10 %."""
    q = make_queue()
    q.set_user_limits("flood", weight=9)
    q.set_user_limits("owner", floor=0.2)
    load(q, {"flood": 400, "owner": 200})
    got = served(q, 200)
    assert abs(got["owner"] - 40) <= 2, got


@pytest.mark.one_shard("a share is of one shard's workers: tenants spread over shards")
def test_a_ceiling_holds_while_others_wait_and_lifts_when_alone(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.set_user_limits("big", weight=8, ceiling=0.3)
    load(q, {"big": 400, "a": 100, "b": 100})
    got = served(q, 100)
    assert abs(got["big"] - 30) <= 2, got
    alone = make_queue()
    alone.set_user_limits("big", ceiling=0.3)
    load(alone, {"big": 50})
    assert served(alone, 50) == {"big": 50}  # nobody waits: it may use every worker


@pytest.mark.one_shard("reads one shard's keys")
def test_the_ring_weights_follow_joins_leaves_and_changes(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    """The ring's top-level weights: each ungrouped user's own, each group's once."""
    q = make_queue()
    keys = QueueKeys(q.queue)
    q.set_user_limits("heavy", weight=4)
    load(q, {"heavy": 5, "light": 5, "m1": 5, "m2": 5})
    q.place()  # every user in the ring before the ring is counted

    def weights() -> int:
        return int(redis_client.hget(keys.meta, "weights") or 0)

    q.set_user_limits("light", ceiling=0.5)  # the first share: the ring is counted
    assert weights() == 4 + 1 + 1 + 1
    q.set_group_limits("team", weight=3)
    q.set_user_limits("m1", group="team")
    q.set_user_limits("m2", group="team")
    assert weights() == 4 + 1 + 3
    q.set_group_limits("team", weight=2)
    assert weights() == 4 + 1 + 2
    q.set_user_limits("heavy", weight=1)
    assert weights() == 1 + 1 + 2
    while q.pop_batch(10, "w"):
        pass
    assert weights() == 0
    assert int(redis_client.hget(keys.group("team"), "active") or 0) == 0


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize(
    ("floor", "ceiling", "message"),
    [(1.0, None, "floor must be a fraction"), (-0.1, None, "floor must be a fraction"),
     (None, 0.0, "ceiling must be a fraction"), (None, 1.5, "ceiling must be a fraction"),
     ("0.2", None, "floor must be a fraction"), (True, None, "floor must be a fraction"),
     (0.5, 0.4, "must be below ceiling")],
)  # fmt: skip
def test_a_bad_share_is_a_typed_error_and_writes_nothing(
    make_queue: MakeQueue, floor: object, ceiling: object, message: str
) -> None:
    q = make_queue()
    with pytest.raises(ValidationError, match=message):
        q.set_user_limits("u", floor=floor, ceiling=ceiling)  # type: ignore[arg-type]
    assert q.stats().users == []


@pytest.mark.one_shard("a share is of one shard's workers: tenants spread over shards")
def test_a_group_floor_holds_for_its_tenants_together(make_queue: MakeQueue) -> None:
    """A group of two tenants with a floor of 40 % against a tenant of weight 9: the two
    get 20 % each; a group ceiling of 20 % holds them to 10 % each."""
    q = make_queue()
    q.set_user_limits("flood", weight=9)
    for u in ("m1", "m2"):
        q.set_user_limits(u, group="org")
    q.set_group_limits("org", floor=0.4)
    load(q, {"flood": 400, "m1": 200, "m2": 200})
    got = served(q, 200)
    assert abs(got["m1"] + got["m2"] - 80) <= 3, got
    assert abs(got["m1"] - got["m2"]) <= 2, got
    q.set_user_limits("flood", weight=1)
    q.set_group_limits("org", floor=0, ceiling=0.2)
    got = served(q, 100)
    assert abs(got["m1"] + got["m2"] - 20) <= 3, got
    with pytest.raises(ValidationError, match="floor"):
        q.set_group_limits("org", floor=0.5, ceiling=0.4)


# a group's in-flight cap -------------------------------------------------------------
@pytest.mark.one_shard("a group's cap holds in each shard: tenants spread over shards")
def test_a_group_cap_holds_its_tenants_together(make_queue: MakeQueue) -> None:
    q = make_queue()
    for u in ("m1", "m2", "m3"):
        q.set_user_limits(u, group="org")
    q.set_group_limits("org", max_in_flight=3)
    load(q, {"m1": 5, "m2": 5, "m3": 5, "solo": 5})
    first = q.pop_batch(20, "w")
    grouped = [t for t in first if t.user_id != "solo"]
    assert len(grouped) == 3, Counter(t.user_id for t in first)
    assert sum(t.user_id == "solo" for t in first) == 5  # others are not held back
    assert q.pop_batch(20, "w") == []
    assert q.complete(grouped[0])
    assert len(q.pop_batch(20, "w")) == 1  # one slot freed: one more of the group
    q.set_group_limits("org", max_in_flight=5)  # a raised cap lets them back at once
    assert len(q.pop_batch(20, "w")) == 2
    q.set_group_limits("org", max_in_flight=0)  # removed
    assert len(q.pop_batch(20, "w")) == 15 - 6


@pytest.mark.one_shard("a group's cap holds in each shard: tenants spread over shards")
def test_a_group_cap_counts_cost_and_every_end_frees_it(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue(retry_base_seconds=0, lease_seconds=5)
    for u in ("m1", "m2"):
        q.set_user_limits(u, group="org")
    q.set_group_limits("org", max_in_flight=4)
    q.push_many(Task(user_id=u, name="n", cost=2) for u in ("m1", "m2") for _ in range(6))
    keys = QueueKeys(q.queue)

    def lease_two() -> list[Task]:
        got = q.pop_batch(10, "w")
        assert len(got) == 2, got  # 4 slots of cost 2
        assert redis_client.zcard(keys.group_held("org")) == 4
        return got

    a, b = lease_two()
    q.extend(a, 10)
    assert redis_client.zcard(keys.group_held("org")) == 4
    assert q.complete(a)
    assert q.fail(b, "boom", retry=False) == TaskState.FAILED
    c, d = lease_two()
    q.requeue(c)
    assert q.cancel(d.task_id or "")
    e, f = lease_two()
    expire_lease(redis_client, q.queue, e.task_id or "")
    expire_lease(redis_client, q.queue, f.task_id or "")
    q.reclaim()
    assert redis_client.zcard(keys.group_held("org")) == 0
    assert len(q.pop_batch(10, "w")) == 2


@pytest.mark.one_shard("a group's cap holds in each shard: tenants spread over shards")
def test_a_group_cap_holds_under_racing_workers(make_queue: MakeQueue) -> None:
    """Four threads lease and complete as fast as they can: the group never holds more
    than its cap, counted by the tasks each thread held at once."""
    q = make_queue()
    for u in ("m1", "m2", "m3"):
        q.set_user_limits(u, group="org")
    q.set_group_limits("org", max_in_flight=2)
    load(q, {"m1": 40, "m2": 40, "m3": 40})
    lock = threading.Lock()
    held, most = [0], [0]

    def work() -> None:
        idle = 0
        while idle < 50:
            task = q.pop("w")
            if task is None:  # the group at its cap, or nothing left: look again
                idle += 1
                time.sleep(0.002)
                continue
            idle = 0
            with lock:
                held[0] += 1
                most[0] = max(most[0], held[0])
            time.sleep(0.001)
            with lock:  # counted out before the completion frees the slot
                held[0] -= 1
            assert q.complete(task)

    threads = [CheckedThread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] <= 2
    assert q.stats().counts[TaskState.FINISHED] == 120
