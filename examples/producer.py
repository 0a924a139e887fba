"""Enqueue work for several tenants: one floods, the others submit a little.

python examples/producer.py --url redis://127.0.0.1:6379/0 [--queue examples]
"""

from __future__ import annotations

import argparse

from fairque import FairQueue, Priority, Task, TaskState


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True, help="Redis URL, e.g. redis://127.0.0.1:6379/0")
    parser.add_argument("--queue", default="examples")
    args = parser.parse_args()

    with FairQueue.from_url(args.url, args.queue) as q:
        flood = [
            Task(user_id="big-customer", name="send_email", payload={"to": f"user{i}@big.example"})
            for i in range(200)
        ]
        q.push_many(flood)
        for tenant in ("acme", "globex", "initech"):
            q.enqueue("send_email", {"to": f"ceo@{tenant}.example"}, user_id=tenant)
            q.enqueue("resize_image", {"image": f"{tenant}.png", "flaky": True}, user_id=tenant)
        q.enqueue("send_email", {"to": "oncall@acme.example"}, user_id="acme",
                  priority=Priority.CRITICAL)  # fmt: skip
        stats = q.stats()
        print(f"queued {stats.counts[TaskState.QUEUED]} tasks for {stats.active_users} tenants")


if __name__ == "__main__":
    main()
