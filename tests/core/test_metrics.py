"""``metrics()``: counters and wait/run-time histograms kept by the scripts in the
transition itself, on every server kind and both clients."""

from __future__ import annotations

import bisect
import itertools
import math
import random
import time

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, expire_lease

import fairque
from fairque import FairQueue, LeaseLost, QueueMetrics, TaskState
from fairque.core.tally import bucket_of
from fairque.models import HISTOGRAM_BOUNDS_SECONDS, HISTOGRAM_STEPS_PER_DOUBLING, Histogram
from fairque.service.ui.fairness import histogram_quantile


def _under(bound: float) -> int:
    """How many buckets close at or under ``bound`` seconds."""
    return bisect.bisect_right(HISTOGRAM_BOUNDS_SECONDS, bound + 1e-12)


def test_histogram_bounds_are_the_buckets_a_process_counts_in() -> None:
    assert HISTOGRAM_BOUNDS_SECONDS[0] == 0.001
    assert HISTOGRAM_BOUNDS_SECONDS[-1] >= 3600
    ratios = {round(b / a, 9) for a, b in itertools.pairwise(HISTOGRAM_BOUNDS_SECONDS)}
    assert ratios == {round(2 ** (1 / HISTOGRAM_STEPS_PER_DOUBLING), 9)}
    for i, bound in enumerate(HISTOGRAM_BOUNDS_SECONDS, 1):
        assert bucket_of(bound * 1000) == i  # a value on a bound is in the bucket it closes
        assert bucket_of(bound * 1000 * 1.001) == i + 1
    assert bucket_of(0) == bucket_of(-5) == 1


def _observed(q: FairQueue, values_ms: list[int]) -> Histogram:
    """``values_ms`` counted as lease waits by the client's own tally, flushed into
    ``q``'s stats by ``flush_metrics.lua`` (``metrics`` flushes first)."""
    task = fairque.Task(user_id="u", name="n")
    tally = q._place.parts[0].ops.tally  # the first shard's (the queue's own when unsharded)
    for start in range(0, len(values_ms), 5000):
        chunk = values_ms[start : start + 5000]
        tally.leased([task] * len(chunk), chunk, f"r{start}")
    return q.metrics().wait_time


def test_each_value_lands_in_the_bucket_of_its_bound(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    # every bound, one either side of it, and the edges
    probes = sorted({0, 1, 2, 3, 5, 7, 4_194_304, 4_194_305, 10**9} | {
        v for b in HISTOGRAM_BOUNDS_SECONDS for v in (
            math.floor(b * 1000), math.ceil(b * 1000), math.ceil(b * 1000) + 1
        )
    })  # fmt: skip
    hist = _observed(q, probes)
    expected = [0] * (len(HISTOGRAM_BOUNDS_SECONDS) + 1)
    for v in probes:
        expected[bisect.bisect_left(HISTOGRAM_BOUNDS_SECONDS, v / 1000 - 1e-12)] += 1
    assert hist.counts == expected
    assert hist.sum == pytest.approx(sum(probes) / 1000)


@pytest.mark.parametrize("scale_ms", [5, 10, 300, 5_000, 60_000, 600_000, 3_600_000])
def test_percentiles_from_the_buckets_are_within_20_percent(
    make_queue: MakeQueue, redis_client: SyncClient, scale_ms: int
) -> None:
    """p50, p95 and p99 read from the buckets (as the dashboard and Prometheus read
    them) against the exact ones, for spread-out durations around each scale. The
    scripts time in whole milliseconds, so the smallest scale is a few of them."""
    rng = random.Random(scale_ms)
    values = sorted(max(1, round(rng.lognormvariate(0, 0.6) * scale_ms)) for _ in range(4000))
    hist = _observed(make_queue(), values)
    for q in (0.5, 0.95, 0.99):
        exact = values[math.ceil(q * len(values)) - 1]
        found = histogram_quantile(HISTOGRAM_BOUNDS_SECONDS, hist.counts, q)
        assert found is not None
        estimate, above = found
        if exact > HISTOGRAM_BOUNDS_SECONDS[-1] * 1000:
            assert above
            continue
        assert not above
        assert abs(estimate * 1000 - exact) <= 0.2 * exact, (q, estimate, exact)


def test_a_fresh_queue_has_zero_metrics(make_queue: MakeQueue) -> None:
    m = make_queue().metrics()
    assert isinstance(m, QueueMetrics)
    assert (m.pushed, m.finished, m.failed, m.lease_lost) == (0, 0, 0, 0)
    assert m.wait_time.counts == [0] * (len(HISTOGRAM_BOUNDS_SECONDS) + 1)
    assert m.run_time.count == 0


def test_every_transition_counts_once(make_queue: MakeQueue, redis_client: SyncClient) -> None:
    q = make_queue(retry_base_seconds=0.01)
    for i in range(5):
        q.enqueue("n", user_id=f"u{i}", task_id=f"t{i}", max_retries=1)
    q.enqueue("n", user_id="u", task_id="gone")  # canceled below
    assert q.cancel("gone")
    time.sleep(0.03)  # every task waited at least 30 ms
    tasks = {t.task_id: t for t in q.pop_batch(5, "w")}
    time.sleep(0.06)  # and ran at least 60 ms
    assert q.complete(tasks["t0"], 1)
    assert q.complete(tasks["t1"])
    assert q.fail(tasks["t2"], "boom", retry=False) is TaskState.FAILED
    assert q.fail(tasks["t3"], "again") is TaskState.SCHEDULED
    expire_lease(redis_client, q.queue, "t4")
    assert q.reclaim() == 1
    # a stale lease (reclaimed): each refusal counts
    assert not q.complete(tasks["t4"])
    with pytest.raises(LeaseLost):
        q.extend(tasks["t4"])
    with pytest.raises(LeaseLost):
        q.fail(tasks["t4"], "late")
    assert q.extend_many([tasks["t4"]]) == [False]
    m = q.metrics()
    assert m.queue == q.queue
    assert m.pushed == 6
    assert m.popped == 5
    assert m.finished == 2
    assert m.failed == 1
    assert m.canceled == 1
    assert m.retried == 2  # t3 failed with a retry left; t4's expired lease
    assert m.reclaimed == 1
    assert m.lease_lost == 4
    assert (m.requeued, m.schedule_fired, m.schedule_skipped) == (0, 0, 0)
    # waits: five leases, each of 30 ms or more
    assert m.wait_time.count == 5
    assert m.wait_time.sum >= 0.15
    assert sum(m.wait_time.counts[: _under(0.025)]) == 0  # none at or under 25 ms
    # runs: two completions and two failures (the reclaimed lease is not timed)
    assert m.run_time.count == 4
    assert m.run_time.sum >= 0.24
    assert sum(m.run_time.counts[: _under(0.05)]) == 0  # none at or under 50 ms
    assert m.run_time.cumulative[-1] == 4
    # the stats snapshot shows the same counters, without the histograms' buckets
    counters = q.stats().counters
    assert counters["lease_lost"] == 4
    assert counters["completed"] == 2
    assert not [name for name in counters if ":" in name]


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_resent_transitions_do_not_count_again(make_queue: MakeQueue) -> None:
    q = make_queue()
    call = q.ops.push_many([fairque.Task(user_id="u", name="n")])
    q._run(call)
    q._run(call)
    leased = q.pop("w")
    assert leased is not None
    done = q.ops.complete(leased, None)
    assert q._run(done)
    assert q._run(done)
    m = q.metrics()
    assert (m.pushed, m.popped, m.finished, m.lease_lost) == (1, 1, 1, 0)
    assert m.run_time.count == 1
    assert m.wait_time.count == 1


@pytest.mark.one_shard("sends one shard's operations itself; every shard runs the same scripts")
def test_a_give_back_counts_once(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u")
    leased = q.pop("w")
    assert leased is not None
    back = q.ops.requeue(leased, 0)
    assert q._run(back) is TaskState.QUEUED
    assert q._run(back) is TaskState.QUEUED  # a resend: answered again, not counted
    m = q.metrics()
    assert (m.requeued, m.retried, m.failed) == (1, 0, 0)
    assert q.stats().counters["requeued"] == 1


def test_histogram_cumulative_counts() -> None:
    h = Histogram(counts=[1, 0, 2] + [0] * (len(HISTOGRAM_BOUNDS_SECONDS) - 2), sum=1.5, count=3)
    assert h.cumulative[:3] == [1, 1, 3]
    assert h.cumulative[-1] == 3
    assert len(h.cumulative) == len(h.bounds) + 1


def test_completions_sent_together_count_once_each(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    for i in range(4):
        q.enqueue("n", user_id=f"u{i}", task_id=f"t{i}")
    tasks = {t.task_id: t for t in q.pop_batch(4, "w")}
    expire_lease(redis_client, q.queue, "t3")
    assert q.reclaim() == 1
    time.sleep(0.03)  # each ran at least 30 ms
    done = [(tasks[f"t{i}"], i) for i in range(4)]
    acks, leased = q.complete_and_pop(done, count=0)
    assert (acks, leased) == ([True, True, True, False], [])
    m = q.metrics()
    assert (m.finished, m.lease_lost) == (3, 1)
    assert m.run_time.count == 3
    assert m.run_time.sum >= 0.09
    assert sum(m.run_time.counts[:2]) == 0  # none at or under 10 ms
    assert [q.result(f"t{i}") for i in range(3)] == [0, 1, 2]
