"""``list_tasks``: pages newest first with a cursor, by state, user and name, on every
server kind, and the listing's indexes leave nothing behind."""

from __future__ import annotations

import time
from typing import Any

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue

from fairque import FairQueue, Task, TaskState, ValidationError
from fairque.core.keys import QueueKeys
from fairque.core.ops import LIST_SCAN, make_cursor


def all_pages(q: FairQueue, **filters: Any) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor = None
    while True:
        page = q.list_tasks(cursor=cursor, **filters)
        pages.append([t.task_id or "" for t in page.tasks])
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


def flat(pages: list[list[str]]) -> list[str]:
    return [i for page in pages for i in page]


@pytest.mark.one_shard("a listing walks the shards in turn, each newest first")
def test_pages_by_state_are_newest_first_and_complete(make_queue: MakeQueue) -> None:
    q = make_queue()
    # one batch shares one push time: ties go by id, descending
    q.push_many([Task(user_id=f"u{i % 3}", name="n", task_id=f"t{i:02}") for i in range(25)])
    pages = all_pages(q, state="QUEUED", limit=10)
    assert [len(p) for p in pages] == [10, 10, 5]
    assert flat(pages) == [f"t{i:02}" for i in reversed(range(25))]
    page = q.list_tasks(TaskState.QUEUED, limit=25)
    assert page.next_cursor is None
    assert all(t.state is TaskState.QUEUED for t in page.tasks)
    assert q.list_tasks("FINISHED").tasks == []


def test_newest_created_first_across_pushes(make_queue: MakeQueue) -> None:
    q = make_queue()
    for i in range(3):
        q.enqueue("n", user_id="u", task_id=f"a{i}")
        time.sleep(0.003)
    assert flat(all_pages(q, user_id="u", limit=2)) == ["a2", "a1", "a0"]
    assert flat(all_pages(q, name="n", limit=1)) == ["a2", "a1", "a0"]


@pytest.mark.one_shard("a listing walks the shards in turn, each newest first")
def test_filters_by_user_name_and_state(make_queue: MakeQueue) -> None:
    q = make_queue()
    tasks = [Task(user_id=f"u{i % 4}", name=f"n{i % 3}", task_id=f"t{i:03}") for i in range(120)]
    q.push_many(tasks)
    for _ in range(10):
        leased = q.pop("w")
        assert leased is not None
        assert q.complete(leased)
    done = {t.task_id for t in q.list_tasks("FINISHED", limit=500).tasks}
    assert len(done) == 10
    for user in ("u0", "u3"):
        for name in (None, "n1"):
            for state in (None, TaskState.QUEUED, TaskState.FINISHED):
                want = [
                    t.task_id or ""
                    for t in reversed(tasks)
                    if t.user_id == user
                    and (name is None or t.name == name)
                    and (state is None or (t.task_id in done) == (state is TaskState.FINISHED))
                ]
                got = flat(all_pages(q, state=state, user_id=user, name=name, limit=7))
                if state is TaskState.FINISHED:
                    # by the FINISHED registry's time (expiry: end order), then id
                    order = [
                        (t.ended_at or 0, t.task_id or "") for t in map(q.get, got) if t is not None
                    ]
                    assert order == sorted(order, reverse=True)
                    assert sorted(got) == sorted(want), (user, name, state)
                else:
                    assert got == want, (user, name, state)
    assert flat(all_pages(q, name="n2", limit=50)) == [
        t.task_id for t in reversed(tasks) if t.name == "n2"
    ]
    assert q.list_tasks(user_id="nobody").tasks == []


def test_a_filtered_page_examines_a_bounded_number_of_entries(make_queue: MakeQueue) -> None:
    q = make_queue()
    n = LIST_SCAN + 300
    q.push_many([Task(user_id="u", name="n", task_id=f"t{i:05}") for i in range(n)])
    q.push_many([Task(user_id="u", name="rare", task_id="rare")])  # the newest
    q.push_many([Task(user_id="u", name="n", task_id=f"s{i:05}") for i in range(n)])
    pages = all_pages(q, user_id="u", name="rare")
    # the name's index is the smaller: one page finds it
    assert pages == [["rare"]]
    # FAILED has no tasks: a small registry is read whole, whatever the user's size
    assert all_pages(q, user_id="u", state="FAILED") == [[]]
    # QUEUED is large: the user's index is walked, LIST_SCAN entries a page
    q2 = make_queue()
    q2.push_many([Task(user_id="u", name="n", task_id=f"t{i:05}") for i in range(n)])
    q2.push_many([Task(user_id="v", name="n", task_id=f"v{i:05}") for i in range(n)])
    pages = all_pages(q2, user_id="u", name="n", state="QUEUED", limit=500)
    assert len(flat(pages)) == n
    assert flat(pages) == [f"t{i:05}" for i in reversed(range(n))]


@pytest.mark.one_shard("a listing walks the shards in turn, each newest first")
def test_a_cursor_whose_task_left_resumes_after_its_time(make_queue: MakeQueue) -> None:
    q = make_queue()
    for i in range(4):
        q.enqueue("n", user_id="u", task_id=f"a{i}")
        time.sleep(0.003)
    first = q.list_tasks(user_id="u", limit=2)
    assert [t.task_id for t in first.tasks] == ["a3", "a2"]
    assert q.cancel("a2")
    q.purge()  # the cursor's task is gone entirely
    assert q.list_tasks(user_id="u", cursor=first.next_cursor).tasks == []
    q.push_many([Task(user_id="u", name="n", task_id=f"b{i}") for i in range(3)])
    page = q.list_tasks("QUEUED", limit=1)
    assert [t.task_id for t in page.tasks] == ["b2"]
    assert page.next_cursor is not None
    assert q.cancel("b1")
    rest = q.list_tasks("QUEUED", cursor=page.next_cursor, limit=5)
    assert [t.task_id for t in rest.tasks] == ["b0"]


@pytest.mark.one_shard("a listing walks the shards in turn, each newest first")
def test_a_cursor_whose_task_left_keeps_the_tasks_sharing_its_time(
    make_queue: MakeQueue,
) -> None:
    q = make_queue()
    # one push: every task gets the same time, so ties go by id
    q.push_many([Task(user_id="u", name="n", task_id=f"c{i}") for i in range(4)])
    page = q.list_tasks("QUEUED", limit=1)
    assert [t.task_id for t in page.tasks] == ["c3"]
    assert q.cancel("c3")  # the cursor's own task leaves QUEUED
    rest = q.list_tasks("QUEUED", cursor=page.next_cursor, limit=2)
    assert [t.task_id for t in rest.tasks] == ["c2", "c1"]
    assert q.cancel("c1")
    last = q.list_tasks("QUEUED", cursor=rest.next_cursor, limit=5)
    assert [t.task_id for t in last.tasks] == ["c0"]
    assert last.next_cursor is None


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "needs a state"),
        ({"state": "NOPE"}, "state must be one of"),
        ({"state": "QUEUED", "limit": 0}, "limit"),
        ({"state": "QUEUED", "limit": 501}, "limit"),
        ({"state": "QUEUED", "cursor": "!!"}, "cursor"),
        ({"state": "QUEUED", "cursor": make_cursor("x", 1, "a")}, "cursor"),
        ({"user_id": ""}, "user_id"),
        ({"name": "a\nb"}, "name"),
    ],
)
def test_bad_listing_arguments_are_rejected(
    make_queue: MakeQueue, kwargs: dict[str, Any], message: str
) -> None:
    q = make_queue()
    with pytest.raises(ValidationError, match=message):
        q.list_tasks(**kwargs)


def index_keys(client: SyncClient, queue: str) -> list[str]:
    pattern = QueueKeys(queue).prefix.replace("{", "\\{").replace("}", "\\}")
    found = []
    for suffix in ("uidx:*", "nidx:*", "ends"):
        found += [k.decode() for k in client.scan_iter(match=pattern + suffix, count=1000)]
    return sorted(found)


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_indexes_leave_with_expiry_deletion_and_purge(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue(failed_ttl_seconds=1)
    q.enqueue("kept", user_id="a", result_ttl=1)
    q.enqueue("dropped", user_id="b", result_ttl=0)
    q.enqueue("failing", user_id="c", max_retries=0)
    q.enqueue("canceled", user_id="d", task_id="x")
    for _ in range(3):
        task = q.pop("w")
        assert task is not None
        if task.name == "failing":
            assert q.fail(task, "boom") is TaskState.FAILED
        else:
            assert q.complete(task)
    assert q.cancel("x")
    keys = QueueKeys(q.queue)
    # the task kept for no time left its indexes at once
    assert index_keys(redis_client, q.queue) == sorted(
        [keys.user_index(u) for u in "acd"]
        + [keys.name_index(n) for n in ("kept", "failing", "canceled")]
        + [keys.ends]
    )
    time.sleep(1.2)
    assert q.list_tasks(user_id="a").tasks == []  # expired: skipped before maintain
    q.maintain()
    assert index_keys(redis_client, q.queue) == []
    # purge takes the rest, including tasks whose data expired before maintain ran
    q.enqueue("n", user_id="e")
    q.enqueue("n", user_id="f", result_ttl=1)
    task = q.pop("w")
    assert task is not None
    assert q.complete(task)
    time.sleep(1.2)
    q.purge()
    assert index_keys(redis_client, q.queue) == []


def test_retried_task_stays_listed_and_indexed(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue(failed_ttl_seconds=1)
    q.enqueue("n", user_id="u", task_id="r", max_retries=0)
    task = q.pop("w")
    assert task is not None
    assert q.fail(task, "boom") is TaskState.FAILED
    assert q.retry("r") is TaskState.QUEUED
    time.sleep(1.2)
    q.maintain()
    assert [t.task_id for t in q.list_tasks(user_id="u").tasks] == ["r"]
    assert redis_client.zcard(QueueKeys(q.queue).ends) == 0


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_a_task_pushed_again_after_expiry_keeps_its_index(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u", task_id="again", result_ttl=1)
    task = q.pop("w")
    assert task is not None
    assert q.complete(task)
    time.sleep(1.2)
    redis_client.delete(QueueKeys(q.queue).gone("again"))  # as if a minute had passed
    assert q.push_many([Task(user_id="u", name="n", task_id="again")]).created == [True]
    q.maintain()  # the first run's expired entry must not unindex the new task
    assert [t.task_id for t in q.list_tasks(user_id="u").tasks] == ["again"]
    assert [t.task_id for t in q.list_tasks(name="n").tasks] == ["again"]
