"""Time-fair mode (the default): users are charged the worker time their leases hold.

Each test reads the ring's scores (the users' start tags, in virtual ms) and the
tenant hashes the scripts keep, against a real server; durations are real sleeps
measured on the server's clock, so the figures hold whatever the machine's load.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest
from helpers.servers import SyncClient
from helpers.support import CheckedThread, MakeQueue, queue_snapshot

from fairque import FairQueue, Priority, Task, TaskState, ValidationError
from fairque.core.keys import QueueKeys


def start_tag(client: SyncClient, q: FairQueue, user: str) -> float:
    """The user's start tag (virtual us): its ring score, or its saved tag while out of
    the ring."""
    keys = QueueKeys(q.queue)
    score = client.zscore(keys.ring, user)
    if score is not None:
        return float(score)
    return float(client.hget(keys.tenant(user), "tag") or 0)


def field(client: SyncClient, key: str, name: str) -> float:
    """A numeric hash field (0 when absent)."""
    value: Any = client.hget(key, name)
    return float(value or 0)


def watermark(client: SyncClient, q: FairQueue, task_id: str | None) -> float:
    """What a held lease moved its user's tag by so far (virtual us): the first number
    of the task's 'fair' field."""
    value: Any = client.hget(QueueKeys(q.queue).task(task_id or ""), "fair")
    return float(value.split()[0])


def floor(client: SyncClient, q: FairQueue) -> float:
    return float(client.hget(QueueKeys(q.queue).meta, "floor") or 0)


def attempt_ms(task: Task) -> int:
    """How long a finished task's last lease was held (server clock, whole ms)."""
    assert task.started_at is not None
    assert task.ended_at is not None
    return round((task.ended_at - task.started_at).total_seconds() * 1000)


def test_the_default_mode_is_time_and_it_can_be_switched(make_queue: MakeQueue) -> None:
    q = make_queue()
    assert q.fairness() == "time"
    assert q.stats().fairness == "time"
    assert q.set_fairness("count") == "time"
    assert q.set_fairness("count") == "count"  # the same mode again: a no-op
    assert q.fairness() == "count"
    assert q.stats().fairness == "count"
    assert q.set_fairness("time") == "count"
    with pytest.raises(ValidationError, match="fairness must be one of time, count"):
        q.set_fairness("fast")  # type: ignore[arg-type]
    assert q.fairness() == "time"


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_slow_tasks_buy_fewer_turns(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    """A user whose tasks run 30 ms gets far fewer leases than one whose tasks run 1 ms,
    and the worker time the two used comes out about even. Each run is reported, as the
    worker reports it, so the charges do not depend on how long this machine takes for a
    round trip (the lease's span, the charge without a report, includes it)."""
    q = make_queue()
    q.push_many(Task(user_id="slow", name="s") for _ in range(200))
    q.push_many(Task(user_id="fast", name="f") for _ in range(10_000))
    served: Counter[str] = Counter()
    deadline = time.monotonic() + 1.2
    # both stay backlogged: the loop ends before either runs out
    while time.monotonic() < deadline and served["fast"] < 9_000 and served["slow"] < 180:
        task = q.pop("w")
        assert task is not None
        if task.user_id == "slow":
            time.sleep(0.03)
            task.run_seconds = 0.03
        else:  # (a run the lease's span covers: the charge is the report)
            time.sleep(0.001)
            task.run_seconds = 0.001
        assert q.complete(task)
        served[task.user_id] += 1
    q.flush_metrics()  # the worker time this client counted
    busy = {
        u: int(redis_client.hget(QueueKeys(q.queue).tenant(u), "busy_us") or 0)
        for u in ("slow", "fast")
    }
    # count mode would give each the same number of turns
    assert served["fast"] > 5 * served["slow"], served
    # each side's worker time: within a factor of 2 of the other, where count mode
    # gives the slow side 30 ms per turn against ~1
    assert 0.5 < busy["slow"] / max(busy["fast"], 1) < 2, busy


@pytest.mark.one_shard("turns between tenants are exact within a shard, on average across shards")
def test_weights_share_worker_time(make_queue: MakeQueue) -> None:
    """With tasks of equal (sub-millisecond) cost, weight 3 gets three leases per one."""
    q = make_queue()
    q.set_user_limits("heavy", weight=3)
    q.push_many(Task(user_id="heavy", name="h") for _ in range(300))
    q.push_many(Task(user_id="light", name="l") for _ in range(300))
    served = Counter(t.user_id for t in q.pop_batch(200, worker_id="w"))
    # charged at the first estimate, before any task ended: exactly 3 to 1
    assert served == {"heavy": 150, "light": 50}


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_lease_is_charged_what_it_held(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    """Lease (charged an estimate), two heartbeats (charged what ran), completion
    (corrected to the lease's span): the start tag moves by the span, once, however
    often each call is resent."""
    q = make_queue()
    q.set_user_limits("u", weight=2)
    q.push_many(Task(user_id="u", name="x") for _ in range(3))
    before = start_tag(redis_client, q, "u")
    task = q.pop("w")
    assert task is not None
    assert start_tag(redis_client, q, "u") == before + 10_000 / 2  # the first estimate, 10 ms
    for _ in range(2):
        time.sleep(0.03)
        call = q.ops.extend(task, 30)
        q._run(call)
        charged = watermark(redis_client, q, task.task_id)
        tag = start_tag(redis_client, q, "u")
        assert tag == before + charged  # the watermark: virtual us, over the weight
        q._run(call)  # the resend charges what ran since, nothing twice
        charged = watermark(redis_client, q, task.task_id)
        assert start_tag(redis_client, q, "u") == before + charged
    time.sleep(0.02)
    done = q.ops.complete(task, None)
    assert q._run(done)
    after = start_tag(redis_client, q, "u")
    snapshot = queue_snapshot(redis_client, q.queue)
    assert q._run(done)  # the resend: no charge, no change at all
    assert queue_snapshot(redis_client, q.queue) == snapshot
    ended = q.get(task.task_id or "")
    assert ended is not None
    q.flush_metrics()  # what this client counted of the attempt
    tenant = redis_client.hgetall(QueueKeys(q.queue).tenant("u"))
    held = float(tenant[b"est"])  # the first run sets the estimate: the span (ms, exact)
    assert held == pytest.approx(attempt_ms(ended), abs=1)  # within 1 ms of the ms fields
    assert held >= 80
    assert after == pytest.approx(before + held * 1000 / 2, abs=1)
    # the process counted its worker time from its own clock: at least the span
    assert int(tenant[b"busy_us"]) / 1000 >= held - 1
    assert int(tenant[b"done"]) == 1


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_a_reclaimed_lease_is_charged_its_span_and_a_late_completion_nothing(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue(retry_base_seconds=0)
    q.push_many(Task(user_id="u", name="x") for _ in range(2))
    before = start_tag(redis_client, q, "u")
    task = q.pop("w", lease_seconds=0.05)
    assert task is not None
    time.sleep(0.1)
    assert q.reclaim() == 1
    after = start_tag(redis_client, q, "u")
    assert after == before + 50_000  # deadline - start: the lease's span
    assert q.complete(task) is False  # the stale lease charges nothing
    assert start_tag(redis_client, q, "u") == after
    tenant = redis_client.hgetall(QueueKeys(q.queue).tenant("u"))
    assert int(tenant[b"busy_us"]) == 50_000
    assert int(tenant[b"failed"]) == 1
    assert b"est" not in tenant  # an expired lease says nothing about run time


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_a_give_back_and_a_cancel_charge_the_time_held(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.push_many(Task(user_id="u", name="x") for _ in range(3))
    before = start_tag(redis_client, q, "u")
    first = q.pop("w")
    assert first is not None
    time.sleep(0.03)
    assert q.requeue(first) == TaskState.QUEUED
    given_back = q.get(first.task_id or "")
    assert given_back is not None
    held_us = start_tag(redis_client, q, "u") - before  # the span the server saw
    assert held_us >= 30_000
    q.flush_metrics()  # the give-back, counted by this client from its own clock
    counted = field(redis_client, QueueKeys(q.queue).tenant("u"), "busy_us")
    assert counted >= held_us - 1_000
    second = q.pop("w")
    assert second is not None
    time.sleep(0.03)
    assert q.cancel(second.task_id or "")
    # a cancel is counted by its script: the same span it charged
    busy = field(redis_client, QueueKeys(q.queue).tenant("u"), "busy_us")
    assert busy - counted >= 30_000
    assert start_tag(redis_client, q, "u") == before + held_us + busy - counted


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_an_idle_user_returns_at_the_floor_with_no_credit(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.push(Task(user_id="idle", name="x"))
    q.push_many(Task(user_id="busy", name="y") for _ in range(50))
    task = q.pop("w", assigned_users=["idle"])
    assert task is not None
    assert task.user_id == "idle"
    assert q.complete(task)
    for _ in range(30):
        t = q.pop("w")
        assert t is not None
        assert t.user_id == "busy"
        assert q.complete(t)
    saved = start_tag(redis_client, q, "idle")
    assert saved < floor(redis_client, q)  # the others ran on while it was away
    q.push(Task(user_id="idle", name="back"))
    q.place()  # (a lease call places it first)
    assert start_tag(redis_client, q, "idle") == floor(redis_client, q)
    nxt = q.pop("w")
    assert nxt is not None
    assert nxt.user_id == "idle"


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_a_returning_user_owes_at_most_a_minute(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.push(Task(user_id="other", name="x"))
    keys = QueueKeys(q.queue)
    redis_client.hset(keys.tenant("debtor"), "tag", 1e9)  # a debt from long tasks
    q.push(Task(user_id="debtor", name="x"))
    q.place()
    assert start_tag(redis_client, q, "debtor") == floor(redis_client, q) + 60_000_000


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_a_tenant_charged_for_a_fault_waits_at_most_the_lead_bound(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue(retry_base_seconds=0)
    assert q.max_lead() == 60.0
    assert q.set_fairness("time", max_lead_seconds=0.05) == "time"
    assert q.max_lead() == 0.05
    q.push_many(Task(user_id="hog", name="x") for _ in range(12))
    q.push_many(Task(user_id="small", name="x") for _ in range(200))
    # the fault: ten of the hog's leases are never reported and expire (0.2 s each)
    hung = q.pop_batch(10, "w", lease_seconds=0.2, assigned_users=["hog"])
    assert len(hung) == 10
    time.sleep(0.25)
    assert q.reclaim() == 10  # charged two seconds of worker time, and brought back
    lead = start_tag(redis_client, q, "hog") - floor(redis_client, q)
    assert 0 < lead <= 50_000
    # served again once the other tenant has caught up the bound (50 ms of its
    # turns), not the 2 s it was charged (thousands of turns of well under a ms)
    served: list[str] = []
    while not served or served[-1] != "hog":
        task = q.pop("w")
        assert task is not None
        assert q.complete(task)
        served.append(task.user_id)
    busy = field(redis_client, QueueKeys(q.queue).tenant("small"), "busy_us")
    assert busy <= 50_000 + 2 * busy / len(served) + 10_000, (len(served), busy)


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_maintenance_brings_a_tenant_back_to_the_bound(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.set_fairness("time", max_lead_seconds=1)
    q.push_many(Task(user_id=u, name="x") for u in ("ahead", "behind", "behind"))
    q.place()
    keys = QueueKeys(q.queue)
    redis_client.zadd(keys.ring, {"ahead": floor(redis_client, q) + 5e9})  # days ahead
    q.maintain()
    assert start_tag(redis_client, q, "ahead") == floor(redis_client, q) + 1_000_000
    q.set_fairness("count")
    redis_client.zadd(keys.ring, {"ahead": 5e9})
    q.maintain()  # count mode: scores are turns, no lead to bound
    assert start_tag(redis_client, q, "ahead") == 5e9


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@pytest.mark.parametrize("bad", [0, -1, 30 * 86_400 + 1, True, "60", float("nan")])
def test_a_bad_lead_bound_is_a_typed_error(make_queue: MakeQueue, bad: Any) -> None:
    q = make_queue()
    with pytest.raises(ValidationError, match="max_lead_seconds"):
        q.set_fairness("time", max_lead_seconds=bad)
    assert q.max_lead() == 60.0


@pytest.mark.one_shard("turns between tenants are exact within a shard, on average across shards")
def test_critical_work_is_charged_too(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue()
    q.push_many(Task(user_id="c", name="x", priority=Priority.CRITICAL) for _ in range(20))
    q.push_many(Task(user_id="n", name="y") for _ in range(20))
    served = Counter(t.user_id for t in q.pop_batch(20, worker_id="w"))
    assert served == {"c": 10, "n": 10}


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_a_cap_holds_in_time_mode_and_the_tag_survives_it(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.set_user_limits("capped", max_in_flight=2)
    q.push_many(Task(user_id="capped", name="c") for _ in range(5))
    q.push_many(Task(user_id="free", name="f") for _ in range(5))
    held = q.pop_batch(10, worker_id="w")
    assert Counter(t.user_id for t in held) == {"capped": 2, "free": 5}
    tag = start_tag(redis_client, q, "capped")
    assert tag == 20_000  # two leases at the first estimate (10 ms), kept while out
    for t in held:
        assert q.complete(t)
    nxt = q.pop_batch(10, worker_id="w")
    assert Counter(t.user_id for t in nxt) == {"capped": 2}


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_a_tenant_its_cap_held_out_rejoins_with_a_cap_of_credit(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    """Time a cap held a tenant out is not idle time: when its cap frees, it rejoins at
    its saved tag, at most its cap times its run estimate behind the floor (not at the
    floor), so the slots its cap frees together go to it, not half to a tenant at the
    floor; a long hold earns no more than that."""
    q = make_queue()
    keys = QueueKeys(q.queue)
    q.set_user_limits("capped", max_in_flight=2)
    redis_client.hset(keys.tenant("capped"), "est", 2)  # its tasks run 2 ms
    q.push_many(Task(user_id="capped", name="c") for _ in range(6))
    q.push_many(Task(user_id="free", name="f") for _ in range(80))
    held = []
    for t in q.pop_batch(4, worker_id="w"):
        if t.user_id == "capped":
            held.append(t)
        else:
            assert q.complete(t)
    assert len(held) == 2  # at its cap: out of the ring
    for _ in range(60):  # the other tenant runs on, far past the capped one's tag
        one = q.pop("w")
        assert one is not None
        assert one.user_id == "free"
        assert q.complete(one)
    saved = start_tag(redis_client, q, "capped")
    assert saved == 4_000  # two leases at its estimate
    credit = 2 * 2_000  # a cap of its tasks
    assert saved < floor(redis_client, q) - credit
    for t in held:  # they ran as long as they were charged: no correction
        t.run_seconds = 0.002
    assert q.complete(held[0])
    assert start_tag(redis_client, q, "capped") == floor(redis_client, q) - credit
    done, nxt = q.complete_and_pop([(held[1], None)], count=2, worker_id="w")
    assert done == [True]
    assert Counter(t.user_id for t in nxt) == {"capped": 2}  # both freed slots
    after = q.pop("w")
    assert after is not None
    assert after.user_id == "free"  # capped again


def test_switching_modes_under_racing_workers_loses_nothing(make_queue: MakeQueue) -> None:
    q = make_queue()
    total = 600
    q.push_many(Task(user_id=f"u{i % 7}", name="x", payload=i) for i in range(total))
    done: list[Any] = []
    lock = threading.Lock()
    stop = threading.Event()

    def work() -> None:
        while not stop.is_set():
            batch = q.pop_batch(3, worker_id=threading.current_thread().name)
            if not batch:
                if len(done) >= total:
                    return
                continue
            for t in batch:
                assert q.complete(t)
                with lock:
                    done.append(t.payload)

    workers = [CheckedThread(target=work, name=f"w{i}") for i in range(3)]
    for w in workers:
        w.start()
    modes = ["count", "time"]
    flips = 0
    while any(w.is_alive() for w in workers) and flips < 200:
        q.set_fairness(modes[flips % 2])  # type: ignore[arg-type]
        flips += 1
    for w in workers:
        w.join(60)
    stop.set()
    assert sorted(done) == list(range(total))  # each once: none lost, none twice
    assert q.stats().counts[TaskState.FINISHED] == total
    assert flips > 10


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_batch_heartbeat_charges_each_lease_once(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.push_many(Task(user_id=u, name="x") for u in ("a", "a", "b", "b"))
    held = q.pop_batch(2, worker_id="w")
    assert sorted(t.user_id for t in held) == ["a", "b"]
    before = {u: start_tag(redis_client, q, u) for u in ("a", "b")}
    time.sleep(0.03)
    call = q.ops.extend_many(held, 30)
    assert q._run(call) == [True, True]
    for t in held:
        charged = watermark(redis_client, q, t.task_id)
        assert charged >= 30_000
        # the tag moved from the lease's estimate (10 ms) to what ran
        assert start_tag(redis_client, q, t.user_id) == pytest.approx(
            before[t.user_id] + charged - 10_000
        )
    tags = {u: start_tag(redis_client, q, u) for u in ("a", "b")}
    watermarks = [watermark(redis_client, q, t.task_id) for t in held]
    assert q._run(call) == [True, True]  # resent within the same ms or later: no double
    for t, mark in zip(held, watermarks, strict=True):
        now = watermark(redis_client, q, t.task_id)
        assert start_tag(redis_client, q, t.user_id) == pytest.approx(tags[t.user_id] + now - mark)


@pytest.mark.one_shard("reads or ages one shard's keys")
def test_users_not_leased_for_a_month_are_forgotten(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.push_many(Task(user_id=u, name="x") for u in ("old", "new"))
    for _ in range(2):
        task = q.pop("w")
        assert task is not None
        assert q.complete(task)
    keys = QueueKeys(q.queue)
    assert redis_client.exists(keys.tenant("old"), keys.tenant("new")) == 2
    redis_client.zadd(keys.active, {"old": 1})  # its last lease, long ago
    q.maintain()
    assert redis_client.exists(keys.tenant("old")) == 0
    assert redis_client.zscore(keys.active, "old") is None
    assert redis_client.exists(keys.tenant("new")) == 1
    report = q.tenants()
    assert [t.user_id for t in report.tenants] == ["new"]
    q.purge()
    assert redis_client.exists(keys.tenant("new"), keys.active) == 0


@pytest.mark.one_shard("turns between tenants are exact within a shard, on average across shards")
@pytest.mark.parametrize("size", [3, 7, 50])
def test_a_batch_leases_what_single_pops_would_in_time_mode(
    make_queue: MakeQueue, size: int
) -> None:
    """A batch follows the lowest tags as single pops do, also when it has to read the
    ring again (more users than the batch reads at once), with weights, a cap, users
    emptying and the critical lane."""
    queues = make_queue(), make_queue()
    for q in queues:
        q.set_user_limits("u3", weight=3)
        q.set_user_limits("u5", max_in_flight=2)
        for i in range(30):
            q.push_many(
                Task(user_id=f"u{i}", name="n", task_id=f"u{i}-{k}") for k in range(i % 4 + 1)
            )
        q.push(Task(user_id="u7", name="n", task_id="u7-!", priority=Priority.CRITICAL))
    batched, single = queues
    by_batch: list[str | None] = []
    while batch := batched.pop_batch(size, "w"):
        by_batch += [t.task_id for t in batch]
    one_by_one = []
    while (task := single.pop("w")) is not None:
        one_by_one.append(task.task_id)
    assert by_batch == one_by_one
    assert len(one_by_one) == 74  # u5: 2 of its 2 (cap), every other task
