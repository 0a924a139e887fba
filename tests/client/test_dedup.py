"""Push modes by key (``Dedup``): a push merges into the task its tenant has waiting
with the same key: ``keep`` answers it, ``replace`` gives it the new payload in its
place, ``debounce`` also moves its start (bounded by ``max_wait``)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, queue_snapshot, resend

from fairque import Dedup, Task, TaskState, ValidationError
from fairque.core.checks import MAX_SECONDS
from fairque.core.keys import QueueKeys


def push(q: Any, payload: Any, user: str = "u", **dedup: Any) -> Task:
    task: Task = q.enqueue("job", payload, user_id=user, dedup=Dedup(**dedup))
    return task


def test_keep_answers_the_waiting_task_and_writes_nothing(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    first = push(q, 1, key="k")
    before = queue_snapshot(redis_client, q.queue)
    again = push(q, 2, key="k")
    assert queue_snapshot(redis_client, q.queue) == before
    assert again.task_id == first.task_id
    assert again.payload == 1
    assert again.dedup == Dedup(key="k")
    assert q.stats().counters.get("pushed") == 1
    other = push(q, 3, user="v", key="k")  # keys are per tenant
    assert other.task_id != first.task_id
    leased = q.pop_batch(10, "w")
    assert sorted(t.payload for t in leased) == [1, 3]


def test_replace_takes_the_payload_and_keeps_the_place(make_queue: MakeQueue) -> None:
    q = make_queue()
    first = push(q, "old", key="k", mode="replace")
    q.enqueue("job", "later", user_id="u")
    replaced = push(q, "new", key="k", mode="replace")
    assert (replaced.task_id, replaced.payload) == (first.task_id, "new")
    assert [t.payload for t in q.pop_batch(10, "w")] == ["new", "later"]


def test_one_runs_while_one_waits(make_queue: MakeQueue) -> None:
    """A task that runs no longer holds its key: the next push makes one to wait, and
    the pushes after it are answered with that one."""
    q = make_queue()
    running = push(q, 1, key="k")
    leased = q.pop("w")
    assert leased is not None
    assert leased.task_id == running.task_id
    waiting = push(q, 2, key="k")
    assert waiting.task_id != running.task_id
    assert waiting.state is TaskState.QUEUED
    assert push(q, 3, key="k").task_id == waiting.task_id
    assert q.complete(leased, None)
    assert push(q, 4, key="k").task_id == waiting.task_id


def test_a_canceled_task_frees_its_key(make_queue: MakeQueue) -> None:
    q = make_queue()
    first = push(q, 1, key="k")
    assert q.cancel(first.task_id or "")
    assert push(q, 2, key="k").task_id != first.task_id


def test_a_batch_merges_into_its_first_task_of_a_key(make_queue: MakeQueue) -> None:
    q = make_queue()
    tasks = [Task(user_id="u", name="job", payload=i, dedup=Dedup(key="k", mode="replace"))
             for i in range(3)]  # fmt: skip
    pushed = q.push_many(tasks)
    assert len({t.task_id for t in pushed}) == 1
    [only] = q.pop_batch(10, "w")
    assert only.payload == 2


def test_a_waiting_deferred_task_takes_the_payload(make_queue: MakeQueue) -> None:
    q = make_queue()
    up = q.enqueue("up", None, user_id="u")
    held = q.enqueue("job", 1, user_id="u", depends_on=[up.task_id or ""],
                     dedup=Dedup(key="k", mode="replace"))  # fmt: skip
    assert held.state is TaskState.DEFERRED
    assert push(q, 2, key="k", mode="replace").task_id == held.task_id
    stored = q.get(held.task_id or "")
    assert stored is not None
    assert stored.payload == 2


def test_a_deferred_debounced_task_keeps_its_new_start_past_its_upstream(
    make_queue: MakeQueue,
) -> None:
    """A debounce that finds its task DEFERRED moves its start too: released by its
    upstream, it is SCHEDULED for that start, not QUEUED."""
    q = make_queue()
    up = q.enqueue("up", None, user_id="u")
    dedup: dict[str, Any] = {"key": "k", "mode": "debounce", "window": 30.0}
    held = q.enqueue("job", 1, user_id="u", depends_on=[up.task_id or ""], dedup=Dedup(**dedup))
    assert push(q, 2, **dedup).task_id == held.task_id
    upstream = q.pop("w")
    assert upstream is not None
    assert upstream.task_id == up.task_id
    assert q.complete(upstream, None)
    released = q.get(held.task_id or "")
    assert released is not None
    assert (released.state, released.payload) == (TaskState.SCHEDULED, 2)
    assert q.pop("w") is None


def test_debounced_pushes_run_once_with_the_last_payload(make_queue: MakeQueue) -> None:
    """100 pushes within the window: one task, due a window after the last push, with
    the last payload."""
    q = make_queue()
    window = 0.4
    answers = [push(q, i, key="d", mode="debounce", window=window) for i in range(100)]
    assert len({t.task_id for t in answers}) == 1
    assert answers[-1].state is TaskState.SCHEDULED
    assert q.pop("w") is None  # not before the window has passed since the last push
    deadline = time.monotonic() + 10
    while (task := q.pop("w")) is None:
        assert time.monotonic() < deadline, "the debounced task never became due"
        time.sleep(0.02)
    assert task.payload == 99
    assert task.started_at is not None
    assert task.created_at is not None
    assert q.pop("w") is None
    assert q.stats().counters.get("pushed") == 1


def test_a_steady_stream_still_runs_within_max_wait(make_queue: MakeQueue) -> None:
    """Pushes every 50 ms with a 0.3 s window would move the start for ever: max_wait
    (1 s) holds it to a second after the first push, by the server's clock."""
    q = make_queue()
    slowest = 0.0
    task = None
    end = time.monotonic() + 5
    while task is None:
        assert time.monotonic() < end, "the debounced task never ran"
        began = time.monotonic()
        push(q, "x", key="s", mode="debounce", window=0.3, max_wait=1.0)
        task = q.pop("w")
        slowest = max(slowest, time.monotonic() - began)
        time.sleep(0.05)
    assert task.created_at is not None
    assert task.started_at is not None
    waited = (task.started_at - task.created_at).total_seconds()
    assert 1.0 - 0.002 <= waited <= 1.0 + 2 * (slowest + 0.05) + 0.05, (waited, slowest)


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_resent_merging_push_merges_once(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    first = push(q, 1, key="d", mode="debounce", window=30)
    later = Task(
        user_id="u", name="job", payload=2, dedup=Dedup(key="d", mode="debounce", window=30)
    )
    first_answer, second_answer = resend(q, redis_client, q.ops.push_many([later]))
    assert first_answer[0].task_id == first.task_id
    assert second_answer[0].task_id == first.task_id
    assert second_answer[0].payload == 2
    assert first_answer.created == second_answer.created == [False]


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
@pytest.mark.parametrize("mode", ["replace", "debounce"])
def test_a_resend_after_another_merge_changes_nothing(
    make_queue: MakeQueue, redis_client: SyncClient, mode: str
) -> None:
    q = make_queue()
    window = 30 if mode == "debounce" else None
    first = push(q, 0, key="d", mode=mode, window=window)

    def merging(payload: str) -> Task:
        return Task(user_id="u", name="job", payload=payload,
                    dedup=Dedup(key="d", mode=mode, window=window))  # fmt: skip

    call_a = q.ops.push_many([merging("A")])
    q._run(call_a)
    time.sleep(0.01)  # a debounce's start moves with the server's clock
    q._run(q.ops.push_many([merging("B")]))  # another client's push of the key
    before = queue_snapshot(redis_client, q.queue)
    again = q._run(call_a)  # A's reply was lost: the client sends it again
    assert queue_snapshot(redis_client, q.queue) == before
    assert again[0].task_id == first.task_id
    assert again[0].payload == "B"
    stored = q.get(first.task_id or "")
    assert stored is not None
    assert stored.payload == "B"


@pytest.mark.one_shard("reads one shard's dedup hash")
def test_maintain_drops_the_names_of_tasks_that_no_longer_wait(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    names = QueueKeys(q.queue).dedup
    push(q, 1, key="a")
    push(q, 2, key="b")
    leased = q.pop("w")
    assert leased is not None
    assert redis_client.hlen(names) == 2
    q.maintain()
    assert redis_client.hlen(names) == 1  # the one still waiting keeps its name


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize(
    "fields",
    [{"key": ""}, {"key": "k\n"}, {"key": "k" * 257}, {"key": 1}, {"key": "k", "mode": "x"},
     {"key": "k", "mode": "debounce"}, {"key": "k", "window": 1.0},
     {"key": "k", "mode": "debounce", "window": 0}, {"key": "k", "mode": "debounce",
     "window": 2.0, "max_wait": 1.0}, {"key": "k", "mode": "debounce", "window": "1"}],
)  # fmt: skip
def test_a_bad_dedup_is_a_typed_error_and_writes_nothing(
    make_queue: MakeQueue, redis_client: SyncClient, fields: dict[str, Any]
) -> None:
    q = make_queue()
    push(q, 0, key="k")
    before = queue_snapshot(redis_client, q.queue)
    with pytest.raises(ValidationError):
        push(q, 1, **fields)
    with pytest.raises(ValidationError):
        q.enqueue("job", 1, user_id="u", dedup={"key": "k"})  # type: ignore[arg-type]
    assert queue_snapshot(redis_client, q.queue) == before


def test_a_debounce_of_a_long_window_reads_back_within_the_longest_wait(
    make_queue: MakeQueue,
) -> None:
    """Ten windows past the longest ``max_wait`` are cut to it, so the stored task reads
    back (the service's push answered 422 for such a window, found by schemathesis)."""
    q = make_queue()
    longest = MAX_SECONDS  # the most a max_wait may name
    window = longest / 2
    pushed = q.push(
        Task(user_id="u", name="n", dedup=Dedup(key="k", mode="debounce", window=window))
    )
    got = q.get(pushed.task_id or "")
    assert got is not None
    assert got.dedup is not None
    assert got.dedup.window == window
    assert got.dedup.wait_cap == longest
