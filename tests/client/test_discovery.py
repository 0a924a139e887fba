"""The server's registry of queues: written beside a push and a worker's registration,
cleaned by a purge, read by ``queues()`` on both clients and every server kind."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from helpers.servers import ServerInfo
from helpers.support import MakeQueue, run_here, unique_queue

from fairque import FairQueue, Task
from fairque.client import base
from fairque.models import WorkerInfo


def test_a_push_lists_the_queue_and_a_purge_unlists_it(make_queue: MakeQueue) -> None:
    q = make_queue()
    assert q.queue not in q.queues()
    q.enqueue("n", user_id="u")
    assert q.queue in q.queues()
    q.purge()
    assert q.queue not in q.queues()
    q.push_many([Task(user_id="u", name="n")])  # the same client lists it again at once
    assert q.queue in q.queues()
    assert q.queues() == sorted(q.queues())


def test_a_worker_registration_lists_the_queue(make_queue: MakeQueue) -> None:
    q = make_queue()
    info = WorkerInfo(worker_id="w", queue=q.queue, host="h", pid=1,
                      started_at=datetime.now(timezone.utc), concurrency=1)  # fmt: skip
    q.register_worker(info, ttl_seconds=30)
    assert q.queue in q.queues()


def test_one_registry_write_per_client_per_interval(make_queue: MakeQueue) -> None:
    """Pushes do not pay a registry write each: after the first, the next is due a
    ``LIST_EVERY`` later (a purge elsewhere is mended then)."""
    q = make_queue()
    other = make_queue(queue=q.queue)
    q.enqueue("n", user_id="u")
    other.purge()  # another client purges: q does not know
    q.enqueue("n", user_id="u")
    assert q.queue not in q.queues()
    getattr(q, "_queue", q)._list_at = 0.0  # what LIST_EVERY seconds do
    q.enqueue("n", user_id="u")
    assert q.queue in q.queues()
    assert base.LIST_EVERY == 60.0


def test_the_queues_command_lists_them_with_counts(server: ServerInfo) -> None:
    name = unique_queue("listed")
    q = FairQueue.from_url(server.url, name)
    try:
        q.push_many([Task(user_id="u", name="n") for _ in range(3)])
        table = run_here("--url", server.url, "queues")
        assert table.returncode == 0, table.stderr
        assert name in table.stdout
        doc = json.loads(run_here("--url", server.url, "queues", "--json").stdout)
        [mine] = [d for d in doc if d["queue"] == name]
        assert mine["counts"]["QUEUED"] == 3
        # status of a queue that does not exist names those that do
        lost = run_here("--url", server.url, "--queue", unique_queue("typo"), "status")
        assert lost.returncode == 0
        assert "no queue named" in lost.stderr
        assert "fairque queues" in lost.stderr
    finally:
        q.purge()
        q.close()
