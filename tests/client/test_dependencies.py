"""Dependencies (DESIGN §4): DEFERRED until upstreams finish, cascades, cleanup."""

from __future__ import annotations

import time

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue

from fairque import FairQueue, Task, TaskState
from fairque.core.keys import QueueKeys
from fairque.workflow import Step, chain, collect, group, push_workflow


def members(client: SyncClient, key: str) -> set[str]:
    return {m.decode() for m in client.smembers(key)}  # type: ignore[union-attr]


def waiting(client: SyncClient, q: FairQueue, task_id: str) -> set[str]:
    return members(client, QueueKeys(q.queue).deps_waiting(task_id))


def blocked(client: SyncClient, q: FairQueue, task_id: str) -> set[str]:
    return members(client, QueueKeys(q.queue).deps_blocked(task_id))


def deps_keys(client: SyncClient, q: FairQueue) -> list[str]:
    pattern = f"fq:\\{{{q.queue}\\}}:deps:*"
    return sorted(k.decode() for k in client.scan_iter(match=pattern))


def state(q: FairQueue, task_id: str) -> TaskState | None:
    task = q.get(task_id)
    return task.state if task else None


def run(q: FairQueue, name: str, result: object = None) -> Task:
    """Pop the next task, check it is ``name``, complete it."""
    task = q.pop("w")
    assert task is not None, f"expected {name} to be ready"
    assert task.name == name
    assert q.complete(task, result)
    return task


def t(name: str, *deps: str, user: str = "u", **kw: object) -> Task:
    return Task(user_id=user, name=name, task_id=name, depends_on=deps, **kw)


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_linear_extract_transform_load(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    pushed = q.push_many([t("load", "transform"), t("transform", "extract"), t("extract")])
    assert [p.state for p in pushed] == [TaskState.DEFERRED, TaskState.DEFERRED, TaskState.QUEUED]
    assert waiting(redis_client, q, "transform") == {"extract"}
    assert waiting(redis_client, q, "load") == {"transform"}
    assert blocked(redis_client, q, "extract") == {"transform"}
    assert blocked(redis_client, q, "transform") == {"load"}
    assert q.stats().counts[TaskState.DEFERRED] == 2
    run(q, "extract")
    assert state(q, "transform") == TaskState.QUEUED
    assert waiting(redis_client, q, "transform") == set()
    assert blocked(redis_client, q, "extract") == set()
    assert q.pop("w", steal_targets=["nobody"]) is None
    run(q, "transform")
    run(q, "load")
    assert deps_keys(redis_client, q) == []
    got = q.get("load")
    assert got is not None
    assert got.depends_on == ("transform",)


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_fan_out_fan_in(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    q.push_many([t("prepare"), t("process_a", "prepare"), t("process_b", "prepare"),
                 t("combine", "process_a", "process_b")])  # fmt: skip
    assert blocked(redis_client, q, "prepare") == {"process_a", "process_b"}
    assert waiting(redis_client, q, "combine") == {"process_a", "process_b"}
    run(q, "prepare")
    assert {state(q, "process_a"), state(q, "process_b")} == {TaskState.QUEUED}
    first = q.pop("w")
    assert first is not None
    assert q.complete(first)
    assert state(q, "combine") == TaskState.DEFERRED
    assert waiting(redis_client, q, "combine") == {"process_a", "process_b"} - {first.name}
    second = q.pop("w")
    assert second is not None
    assert q.complete(second)
    run(q, "combine")
    assert deps_keys(redis_client, q) == []


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_partial_release_of_shared_upstreams(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.push_many([t("A"), t("B"), t("C"), t("D", "A", "B", "C"), t("E", "A", "B"), t("F", "C")])
    assert blocked(redis_client, q, "A") == {"D", "E"}
    assert blocked(redis_client, q, "B") == {"D", "E"}
    assert blocked(redis_client, q, "C") == {"D", "F"}
    leased = {task.name: task for task in q.pop_batch(3)}
    assert set(leased) == {"A", "B", "C"}
    q.complete(leased["A"])
    assert (state(q, "D"), state(q, "E")) == (TaskState.DEFERRED, TaskState.DEFERRED)
    assert waiting(redis_client, q, "D") == {"B", "C"}
    assert waiting(redis_client, q, "E") == {"B"}
    q.complete(leased["B"])
    assert state(q, "E") == TaskState.QUEUED
    assert state(q, "D") == TaskState.DEFERRED
    assert waiting(redis_client, q, "D") == {"C"}
    assert blocked(redis_client, q, "B") == set()
    q.complete(leased["C"])
    assert state(q, "D") == TaskState.QUEUED
    assert state(q, "F") == TaskState.QUEUED
    assert deps_keys(redis_client, q) == []


@pytest.mark.one_shard("turns between tenants are exact within a shard, on average across shards")
def test_dependents_across_users_keep_the_round_robin(make_queue: MakeQueue) -> None:
    q = make_queue()
    # exact turns are count mode's promise (time mode orders by measured run times of
    # microseconds, which a loaded machine reorders; tests/client/test_time_fair.py)
    q.set_fairness("count")
    q.push_many(Task(user_id="busy", name=f"b{i}") for i in range(6))
    q.push_many([t("up", user="small"), t("down-1", "up", user="small"),
                 t("down-2", "up", user="other")])  # fmt: skip
    order = []
    while (task := q.pop("w")) is not None:
        order.append(task.user_id)
        q.complete(task)
    # once "up" finished, its dependents join the ring at the tail like any push
    assert order[:2] == ["busy", "small"]
    assert order.count("busy") == 6
    tail = order[2:]
    assert tail.index("other") < len(tail) - 1
    assert tail.index("small") < len(tail) - 1


def test_finished_dependency_counts_as_satisfied(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.push(t("first"))
    run(q, "first")
    assert q.push(t("second", "first")).state == TaskState.QUEUED
    assert deps_keys(redis_client, q) == []


def test_delayed_dependent_is_scheduled_when_released(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.push(t("up"))
    q.push_many([t("later", "up")], delays=[60])
    run(q, "up")
    assert state(q, "later") == TaskState.SCHEDULED


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_failure_cascades_through_dependents(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.push_many([t("root", max_retries=0), t("child", "root"), t("grandchild", "child"),
                 t("patient", "root", on_dependency_failure="wait"), t("other")])  # fmt: skip
    root = q.pop("w", steal_targets=["u"])
    assert root is not None
    assert root.name == "root"
    assert q.fail(root, "boom") == TaskState.FAILED
    child, grandchild = q.get("child"), q.get("grandchild")
    assert child is not None
    assert grandchild is not None
    assert (child.state, child.error) == (TaskState.CANCELED, "dependency root is FAILED")
    assert (grandchild.state, grandchild.error) == (
        TaskState.CANCELED,
        "dependency child is CANCELED",
    )
    assert state(q, "patient") == TaskState.DEFERRED
    assert deps_keys(redis_client, q) == sorted(
        [QueueKeys(q.queue).deps_blocked("root"), QueueKeys(q.queue).deps_waiting("patient")]
    )
    # the operator retries the upstream: the waiting dependent is released when it finishes
    assert q.retry("root") == TaskState.QUEUED
    assert redis_client.pttl(QueueKeys(q.queue).deps_blocked("root")) == -1
    run(q, "other")
    run(q, "root")
    run(q, "patient")
    assert deps_keys(redis_client, q) == []


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_push_after_upstream_failed(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    q.push(t("bad", max_retries=0))
    leased = q.pop("w")
    assert leased is not None
    q.fail(leased, "nope")
    doomed = q.push(t("doomed", "bad"))
    assert doomed.state == TaskState.CANCELED
    got = q.get("doomed")
    assert got is not None
    assert got.error == "dependency bad is FAILED"
    hopeful = q.push(t("hopeful", "bad", on_dependency_failure="wait"))
    assert hopeful.state == TaskState.DEFERRED
    assert blocked(redis_client, q, "bad") == {"hopeful"}
    assert redis_client.pttl(QueueKeys(q.queue).deps_blocked("bad")) > 0  # expires with "bad"


def test_cancel_cleans_both_directions(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    q.push_many([t("a"), t("b"), t("mid", "a", "b"), t("leaf", "mid")])
    assert q.cancel("mid")
    assert blocked(redis_client, q, "a") == set()
    assert blocked(redis_client, q, "b") == set()
    assert state(q, "leaf") == TaskState.CANCELED
    assert q.stats().counts[TaskState.DEFERRED] == 0
    run(q, "a")
    run(q, "b")
    assert deps_keys(redis_client, q) == []
    # canceling a queued upstream cancels its dependents too
    q.push_many([t("x"), t("y", "x")])
    assert q.cancel("x")
    assert state(q, "y") == TaskState.CANCELED
    assert deps_keys(redis_client, q) == []


def test_expired_upstream_is_repaired_by_cleanup(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue(failed_ttl_seconds=0.3)
    q.push_many([t("gone", max_retries=0), t("stuck", "gone", on_dependency_failure="wait"),
                 t("after", "stuck")])  # fmt: skip
    leased = q.pop("w")
    assert leased is not None
    q.fail(leased, "x")
    assert state(q, "stuck") == TaskState.DEFERRED
    time.sleep(0.4)
    assert q.get("gone") is None
    assert q.cleanup_dependencies(batch=1) == 2
    stuck = q.get("stuck")
    assert stuck is not None
    assert stuck.state == TaskState.CANCELED
    assert stuck.error == "dependency gone expired before finishing"
    assert state(q, "after") == TaskState.CANCELED
    assert deps_keys(redis_client, q) == []
    assert q.cleanup_dependencies() == 0


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_workflow_builders_push_atomically(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    prepare, a, b, combine = (Step(n, user_id="u") for n in ("prepare", "a", "b", "combine"))
    prepare >> [a, b] >> combine
    ids = push_workflow(q, combine)
    assert len(ids) == 4
    assert waiting(redis_client, q, combine.task_id) == {a.task_id, b.task_id}
    x, y, z = (Step(n, user_id="v") for n in "xyz")
    chain(x, group(y, z))
    tasks = {task.name: task for task in collect(x)}
    assert tasks["y"].depends_on == (x.task_id,)
    assert tasks["z"].depends_on == (x.task_id,)
    one, two = Step("one", user_id="w"), Step("two", user_id="w")
    [one] >> two
    assert two.upstream == [one]
    with pytest.raises(ValueError, match="itself"):
        one.after(one)
    with pytest.raises(TypeError, match="Steps"):
        one >> ["nope"]  # type: ignore[list-item]
    with pytest.raises(ValueError, match="at least one"):
        chain()
