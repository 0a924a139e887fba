"""The lease call's upkeep reads no registry until something can be due (meta 'due').

A lease call reclaims expired leases and promotes due SCHEDULED tasks; it reads the two
registries only once the queue's 'due' hint has passed. Each test first makes the hint
late (a lease held for a minute, so the hint is that deadline), then writes an entry
that comes due long before it, through each writer that can: a delayed push, a retry,
a requeue with a delay, a shorter extension, a dependent released into SCHEDULED. The
entry must be served when it comes due, not when the hint would have said.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue

from fairque import FairQueue, Task, TaskState
from fairque.core.keys import QueueKeys

pytestmark = pytest.mark.one_shard("reads the hint in one shard's meta hash")

LONG = 60.0  # the lease that makes the hint late
SHORT = 0.2  # how soon the entry under test comes due


def hold_long(q: FairQueue) -> Task:
    """Lease a task for a minute and run the upkeep, so the hint is that deadline."""
    q.enqueue("long", user_id="holder")
    held = q.pop("w", lease_seconds=LONG)
    assert held is not None
    assert q.pop("w") is None  # the upkeep looked and set the hint
    return held


def held_queue(make_queue: MakeQueue, **options: Any) -> FairQueue:
    """A fresh queue whose hint is late: one of its tasks is leased for a minute."""
    q = make_queue(**options)
    hold_long(q)
    return q


def hint(client: SyncClient, q: FairQueue) -> float:
    value = client.hget(QueueKeys(q.queue).meta, "due")
    assert value is not None
    return int(value) / 1000


def served_within(q: FairQueue, seconds: float, pick: Callable[[FairQueue], bool]) -> float:
    """Seconds until ``pick`` holds, polling; fails past ``seconds``."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if pick(q):
            return time.monotonic() - start
        time.sleep(0.02)
    raise AssertionError(f"not served within {seconds} s")


def served_early(client: SyncClient, q: FairQueue, name: str) -> None:
    """The writer lowered the hint well below the held lease's minute, and task ``name``
    is served when it comes due."""
    assert hint(client, q) < time.time() + LONG / 2
    served_within(q, LONG / 4, popped_name(name))


def popped_name(name: str) -> Callable[[FairQueue], bool]:
    def pick(q: FairQueue) -> bool:
        task = q.pop("w2")
        return task is not None and task.name == name

    return pick


def test_the_hint_is_the_first_deadline_and_spares_the_scan(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    held = hold_long(q)
    assert held.lease_deadline is not None
    assert hint(redis_client, q) == pytest.approx(held.lease_deadline.timestamp(), abs=0.002)
    redis_client.config_resetstat()
    assert q.pop("w") is None
    stats = redis_client.info("commandstats")
    assert "cmdstat_zrangebyscore" not in stats  # nothing can be due: no registry read


def test_a_delayed_push_before_the_hint_is_promoted_on_time(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = held_queue(make_queue)
    q.enqueue("soon", user_id="u", delay=SHORT)
    served_early(redis_client, q, "soon")


def test_a_batch_with_a_scheduled_task_lowers_the_hint(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = held_queue(make_queue)
    now = datetime.now(timezone.utc)
    later, soon = now + timedelta(seconds=30), now + timedelta(seconds=SHORT)
    q.push_many([Task(user_id="u", name="later", execute_after=later),
                 Task(user_id="u", name="soon", execute_after=soon)])  # fmt: skip
    served_early(redis_client, q, "soon")


def test_a_retry_before_the_hint_is_served_on_time(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = held_queue(make_queue, retry_base_seconds=SHORT)
    q.enqueue("flaky", user_id="u")
    task = q.pop("w")
    assert task is not None
    assert q.fail(task, "boom") == TaskState.SCHEDULED
    served_early(redis_client, q, "flaky")


def test_a_requeue_with_a_delay_before_the_hint_is_served_on_time(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = held_queue(make_queue)
    q.enqueue("back", user_id="u")
    task = q.pop("w")
    assert task is not None
    assert q.requeue(task, delay=SHORT) == TaskState.SCHEDULED
    served_early(redis_client, q, "back")


@pytest.mark.parametrize("many", [False, True])
def test_a_shorter_extension_is_reclaimed_on_time(
    make_queue: MakeQueue, redis_client: SyncClient, many: bool
) -> None:
    q = held_queue(make_queue, retry_base_seconds=0)
    q.enqueue("short", user_id="u")
    task = q.pop("w", lease_seconds=LONG)
    assert task is not None
    if many:
        q.extend_many([task], seconds=SHORT)
    else:
        q.extend(task, seconds=SHORT)
    served_early(redis_client, q, "short")


def test_a_dependent_released_into_scheduled_is_served_on_time(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = held_queue(make_queue)
    up = q.enqueue("up", user_id="u")
    due = datetime.now(timezone.utc) + timedelta(seconds=2)
    q.push(Task(user_id="u", name="down", depends_on=(up.task_id or "",), execute_after=due))
    leased = q.pop("w")
    assert leased is not None
    assert leased.name == "up"
    assert q.complete(leased)
    assert hint(redis_client, q) <= due.timestamp() + 0.002
    served_early(redis_client, q, "down")


def test_a_shorter_lease_is_reclaimed_on_time(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = held_queue(make_queue, retry_base_seconds=0)
    q.enqueue("brief", user_id="u")
    task = q.pop("w", lease_seconds=SHORT)
    assert task is not None
    served_early(redis_client, q, "brief")
