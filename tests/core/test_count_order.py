"""Count mode keeps today's ring: a recorded lease sequence replays byte for byte.

``tests/core/data/count_order.json`` holds the order in which the ring of fairque's count
mode served a fixed scenario (weights, a cap, the critical lane, priorities, assigned
users and stealing, single pops and batches, completions, failures and give-backs in
between). The test plays the scenario again and compares every lease. To record it
again (only when the count-mode order is meant to change): ``python
tests/core/test_count_order.py`` with ``FAIRQUE_RECORD_URL`` pointing at a server.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from helpers.servers import ServerInfo
from helpers.support import unique_queue

from fairque import FairQueue, Priority, Task

RECORDING = Path(__file__).parent / "data" / "count_order.json"


def play(q: FairQueue) -> list[str]:
    """Run the scenario on a fresh queue; return one line per lease: 'user name'."""
    served: list[str] = []
    q.set_fairness("count")

    def note(tasks: list[Task]) -> list[Task]:
        served.extend(f"{t.user_id} {t.name}" for t in tasks)
        return tasks

    q.set_user_limits("heavy", weight=3)
    q.set_user_limits("capped", max_in_flight=2)
    q.set_user_limits("mid", weight=2)
    for i in range(12):
        q.push(Task(user_id="heavy", name=f"h{i}"))
        q.push(Task(user_id="light", name=f"l{i}", priority=Priority(1 + i % 5)))
        q.push(Task(user_id="capped", name=f"c{i}"))
        if i % 3 == 0:
            q.push(Task(user_id="mid", name=f"m{i}"))
            q.push(Task(user_id="urgent", name=f"u{i}", priority=Priority.CRITICAL))
    held: list[Task] = []
    for step in range(30):
        if step % 4 == 3:
            held += note(q.pop_batch(3, worker_id="w"))
        else:
            t = q.pop("w")
            if t is not None:
                held += note([t])
        if step % 2 == 1 and held:
            done = held.pop(0)
            if step % 10 == 9:
                q.fail(done, "boom", retry=False)
            elif step % 6 == 5:
                q.requeue(done)
            else:
                q.complete(done)
        if step == 12:
            q.push(Task(user_id="late", name="z1"))
            q.push(Task(user_id="late", name="z2", priority=Priority.CRITICAL))
    for t in held:
        q.complete(t)
    held = []
    held += note(q.pop_batch(2, worker_id="w", assigned_users=["light"], steal_targets=["*"]))
    held += note(q.pop_batch(4, worker_id="w", assigned_users=["nobody"], steal_targets=["mid"]))
    for t in held:
        q.complete(t)
    while True:
        batch = q.pop_batch(5, worker_id="w")
        if not batch:
            break
        note(batch)
        for t in batch:
            q.complete(t)
    return served


def test_count_mode_replays_the_recorded_order(server: ServerInfo) -> None:
    q = FairQueue.from_url(server.url, unique_queue())
    try:
        served = play(q)
    finally:
        q.close()
    assert served == json.loads(RECORDING.read_text())


def _record(url: str) -> None:  # pragma: no cover - run by hand
    q = FairQueue.from_url(url, unique_queue())
    try:
        served: Any = play(q)
    finally:
        q.close()
    RECORDING.write_text(json.dumps(served, indent=0) + "\n")
    print(f"{len(served)} leases recorded in {RECORDING}")


if __name__ == "__main__":  # pragma: no cover
    _record(os.environ["FAIRQUE_RECORD_URL"])
