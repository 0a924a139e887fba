"""A group's backlog quota: a push that would take a group's tenants' tasks in QUEUED,
SCHEDULED or DEFERRED together past the group's quota raises ``QuotaExceeded`` (naming
the group) and writes nothing; the group's backlog, the sum of its tenants' backlogs,
follows every transition, a regrouping and the first quota set (every server kind,
both clients)."""

from __future__ import annotations

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, expire_lease, queue_snapshot, resend

from fairque import FairQueue, QuotaExceeded, Task, TaskState, ValidationError
from fairque.models import GroupLoad


def group_backlog(q: FairQueue, group: str) -> int:
    return q.group_loads([group])[0].queued


def user_backlogs(q: FairQueue, users: list[str]) -> int:
    return sum(load.queued for load in q.user_loads(users))


@pytest.mark.one_shard("a group's quota holds in each shard: its tenants spread over shards")
def test_a_group_quota_takes_exactly_its_count_and_refuses_the_next(
    make_queue: MakeQueue,
) -> None:
    q = make_queue()
    for u in ("a", "b"):
        q.set_user_limits(u, group="org")
    q.set_group_limits("org", max_queued=5)
    for _ in range(3):
        q.enqueue("work", {}, user_id="a")
    for _ in range(2):
        q.enqueue("work", {}, user_id="b")
    before = q.stats().counts
    with pytest.raises(QuotaExceeded) as caught:
        q.enqueue("work", {}, user_id="b")
    err = caught.value
    assert (err.user_id, err.group_id, err.quota, err.queued) == ("b", "org", 5, 5)
    assert "group 'org'" in str(err)
    assert "'b'" in str(err)
    # a batch past it writes nothing, not even another tenant's task
    with pytest.raises(QuotaExceeded) as caught:
        q.push_many([Task(user_id="c", name="work"), Task(user_id="a", name="work")])
    assert (caught.value.group_id, caught.value.queued) == ("org", 5)
    assert q.stats().counts == before
    assert group_backlog(q, "org") == 5
    assert user_backlogs(q, ["a", "b", "c"]) == 5
    # a tenant of no group, or of another group, is not held to it
    q.set_user_limits("d", group="other")
    q.enqueue("work", {}, user_id="c")
    q.enqueue("work", {}, user_id="d")
    assert group_backlog(q, "other") == 1
    # a lease frees a place: the group takes one more, then refuses again
    assert q.pop("w", assigned_users=["a"]) is not None
    assert group_backlog(q, "org") == 4
    q.enqueue("work", {}, user_id="b")
    with pytest.raises(QuotaExceeded):
        q.enqueue("work", {}, user_id="a")


@pytest.mark.one_shard("a group's quota holds in each shard: its tenants spread over shards")
def test_a_batch_that_fits_the_group_exactly_is_taken(make_queue: MakeQueue) -> None:
    q = make_queue()
    for u in ("a", "b"):
        q.set_user_limits(u, group="org")
    q.set_group_limits("org", max_queued=10)
    q.push_many([Task(user_id="a", name="w") for _ in range(4)])
    with pytest.raises(QuotaExceeded) as caught:
        q.push_many([Task(user_id=u, name="w") for u in ("a", "b") for _ in range(4)])
    assert caught.value.queued == 4
    q.push_many([Task(user_id=u, name="w") for u in ("a", "b") for _ in range(3)])
    assert group_backlog(q, "org") == 10
    # the tenant's own quota is checked too, and names no group
    q.set_user_limits("b", max_queued=3)
    q.set_group_limits("org", max_queued=100)
    with pytest.raises(QuotaExceeded) as own:
        q.enqueue("w", {}, user_id="b")
    assert own.value.group_id is None
    assert group_backlog(q, "org") == 10


def test_the_group_backlog_follows_every_transition(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    """One tenant in the group (a tenant lives in one shard): the group's backlog is
    its tenant's after each step."""
    q = make_queue(retry_base_seconds=30.0)
    q.set_user_limits("t", group="org")
    q.set_group_limits("org", max_queued=1000)

    def both() -> tuple[int, int]:
        return group_backlog(q, "org"), user_backlogs(q, ["t"])

    q.enqueue("work", {}, user_id="t", task_id="up")
    q.enqueue("work", {}, user_id="t", depends_on=["up"])  # DEFERRED
    q.enqueue("work", {}, user_id="t", delay=600)  # SCHEDULED
    q.enqueue("work", {}, user_id="t", task_id="victim")
    q.push(Task(user_id="t", name="work", cost=3))
    assert both() == (5, 5)
    assert q.cancel("victim")
    assert both() == (4, 4)
    up = q.pop("w", assigned_users=["t"])
    assert up is not None
    assert up.task_id == "up"
    assert both() == (3, 3)
    assert q.fail(up, error="boom", retry=True) == TaskState.SCHEDULED
    assert both() == (4, 4)
    # an expired lease is a failed attempt: its task is retried, back in the backlog
    leased = q.pop("w", assigned_users=["t"])
    assert leased is not None
    assert leased.task_id is not None
    assert both() == (3, 3)
    expire_lease(redis_client, q.queue, leased.task_id)
    q.reclaim()
    assert both() == (4, 4)


def test_the_first_quota_counts_the_backlogs_there_are(make_queue: MakeQueue) -> None:
    q = make_queue()
    for u in ("a", "b"):
        q.set_user_limits(u, group="org")
    q.push_many([Task(user_id=u, name="w") for u in ("a", "b", "c") for _ in range(3)])
    assert group_backlog(q, "org") == 0  # not kept before a group quota
    q.set_group_limits("org", max_queued=7)
    assert group_backlog(q, "org") == 6
    with pytest.raises(QuotaExceeded):
        q.push_many([Task(user_id="a", name="w") for _ in range(2)])
    q.enqueue("w", {}, user_id="b")
    assert group_backlog(q, "org") == 7


def test_a_tenant_that_changes_group_takes_its_backlog_along(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.set_user_limits("a", group="one")
    q.set_group_limits("one", max_queued=100)
    q.set_group_limits("two", max_queued=4)
    q.push_many([Task(user_id="a", name="w") for _ in range(3)])
    q.set_user_limits("a", group="two")
    assert (group_backlog(q, "one"), group_backlog(q, "two")) == (0, 3)
    q.enqueue("w", {}, user_id="a")
    with pytest.raises(QuotaExceeded) as caught:
        q.enqueue("w", {}, user_id="a")
    assert caught.value.group_id == "two"
    q.set_user_limits("a", group="")
    assert group_backlog(q, "two") == 0
    q.enqueue("w", {}, user_id="a")  # in no group: only its own quota holds


def test_a_removed_quota_holds_no_more_and_the_backlog_is_kept_while_a_quota_is(
    make_queue: MakeQueue,
) -> None:
    q = make_queue()
    q.set_user_limits("a", group="org")
    q.set_group_limits("org", max_queued=1)
    q.set_group_limits("other", max_queued=5)  # another group's quota: backlogs kept
    q.enqueue("w", {}, user_id="a")
    q.set_group_limits("org", max_queued=0)
    q.enqueue("w", {}, user_id="a")
    load = q.group_loads(["org"])[0]
    assert (load.max_queued, load.queued) == (None, 2)
    q.set_group_limits("other", max_queued=0)  # the last quota: backlogs no longer kept
    assert q.group_loads(["org"])[0].queued == 0
    q.set_group_limits("org", max_queued=3)  # counted again from its tenants' backlogs
    assert q.group_loads(["org"])[0].queued == 2


def test_group_loads_read_every_limit(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.set_group_limits("org", weight=3, floor=0.2, ceiling=0.6, max_in_flight=4, max_queued=9)
    assert q.group_loads(["org", "none", "org"]) == [
        GroupLoad("org", weight=3, floor=0.2, ceiling=0.6, max_in_flight=4, max_queued=9),
        GroupLoad("none"),
    ]
    with pytest.raises(ValidationError):
        q.group_loads(["bad\x00id"])


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize("value", [-1, True, 2.5, "3", 1_000_000_001])
def test_a_bad_group_quota_is_refused_and_changes_nothing(
    make_queue: MakeQueue, redis_client: SyncClient, value: object
) -> None:
    q = make_queue()
    q.set_group_limits("org", max_queued=5)
    before = queue_snapshot(redis_client, q.queue)
    with pytest.raises(ValidationError, match="max_queued"):
        q.set_group_limits("org", max_queued=value)  # type: ignore[arg-type]
    assert queue_snapshot(redis_client, q.queue) == before


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_resent_quota_grouping_and_push_count_once(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.set_user_limits("a", group="one")
    q.push_many([Task(user_id="a", name="w") for _ in range(2)])
    resend(q, redis_client, q.ops.set_group_limits("one", None, max_queued=5))
    assert group_backlog(q, "one") == 2
    resend(q, redis_client, q.ops.set_user_limits("a", None, None, None, "two"))
    assert (group_backlog(q, "one"), group_backlog(q, "two")) == (0, 2)
    # a resent push (one task, then a batch) joins the group's backlog once
    resend(q, redis_client, q.ops.push(Task(user_id="a", name="w", task_id="p1")))
    batch = [Task(user_id="a", name="w", task_id=f"b{i}", priority=6) for i in range(2)]
    resend(q, redis_client, q.ops.push_many(batch))
    assert group_backlog(q, "two") == 5
    # a resent refusal writes nothing either time
    q.set_group_limits("two", max_queued=5)
    before = queue_snapshot(redis_client, q.queue)
    for _ in range(2):
        with pytest.raises(QuotaExceeded):
            q.enqueue("w", {}, user_id="a")
    assert queue_snapshot(redis_client, q.queue) == before
