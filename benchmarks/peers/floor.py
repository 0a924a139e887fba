"""The latency floor of the machine: what no Redis-based queue can beat here.

``python floor.py URL N GAP_MS`` prints JSON with two figures, taken the same way as
every system's idle pick-up latency (a pause of ``GAP_MS`` before each sample, so the
processes are idle when it starts):

* ``ping_ms``: one PING round trip from an idle client;
* ``handoff_ms``: a bare ``LPUSH`` by one process to a second process blocked in
  ``BLPOP`` (the smallest possible queue), from just before the push until the second
  process has the item.

On a virtual machine, waking an idle process costs far more than a busy round trip;
these figures say how much of every system's idle latency is that cost.
"""

from __future__ import annotations

import json
import multiprocessing
import statistics
import sys
import time

import redis

QUEUE, ACK = "bench:floor:queue", "bench:floor:ack"


def consumer(url: str, n: int) -> None:
    """Pop each item (a start time) and report how long after it the pop returned."""
    client = redis.Redis.from_url(url)
    for _ in range(n):
        _, started = client.blpop([QUEUE])  # type: ignore[misc]
        took = time.time() - float(started)
        client.rpush(ACK, repr(took))


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 3),
    }


def main(url: str, n: int, gap: float) -> dict[str, object]:
    client = redis.Redis.from_url(url)
    client.delete(QUEUE, ACK)
    pings = []
    for _ in range(n):
        time.sleep(gap)
        t0 = time.perf_counter()
        client.ping()
        pings.append((time.perf_counter() - t0) * 1000)
    worker = multiprocessing.get_context("spawn").Process(target=consumer, args=(url, n + 1))
    worker.start()
    client.lpush(QUEUE, repr(time.time()))  # warm-up: the consumer is up after this
    client.blpop([ACK], timeout=30)
    handoffs = []
    for _ in range(n):
        time.sleep(gap)
        client.lpush(QUEUE, repr(time.time()))
        reply = client.blpop([ACK], timeout=30)
        if reply is None:
            raise SystemExit("the consumer did not answer within 30 s")
        handoffs.append(float(reply[1]) * 1000)
    worker.join(10)
    client.delete(QUEUE, ACK)
    client.close()
    return {
        "samples": n,
        "gap_ms": gap * 1000,
        "ping_ms": summary(pings),
        "handoff_ms": summary(handoffs),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) / 1000)))
