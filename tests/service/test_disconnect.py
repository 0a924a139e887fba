"""A client that hangs up during a long poll or a result wait: nothing is leased or
consumed for nobody (a load balancer's idle timeout does this to long polls)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from urllib.parse import urlsplit

from fairque import FairQueue, TaskState
from fairque.client.aio import AsyncFairQueue
from fairque.service import handlers, pull
from fairque.service.wire_pull import (
    LeaseIn,
)
from service.harness import Api, LiveServer

#: a long poll no test waits out: a wait that ends early ends by what the test did
LONG_POLL = 20


def _hang_up_after_sending(live: LiveServer, method: str, path: str, body: bytes = b"") -> None:
    """Send one request on a raw connection, give the server time to start waiting on
    it, then close the connection without reading the answer."""
    where = urlsplit(live.base)
    assert where.port is not None
    sock = socket.create_connection((where.hostname, where.port))
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: {where.netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    time.sleep(0.3)
    sock.close()
    time.sleep(0.3)  # the server reads the hang-up


def test_a_long_poll_whose_client_left_leases_nothing(live: LiveServer, api: Api) -> None:
    poll = {"worker_id": "gone", "max_tasks": 1, "wait_seconds": 15}
    _hang_up_after_sending(live, "POST", f"{api.prefix}/leases", json.dumps(poll).encode())
    api.push(task_id="after")
    time.sleep(0.3)  # a waiting long poll would have leased it by now
    task = api.ok("GET", "/tasks/after")
    assert task["state"] == "QUEUED"
    [leased] = api.lease(worker_id="alive")
    assert leased["task_id"] == "after"
    assert leased["attempt"] == 1
    assert leased["worker_id"] == "alive"


def test_a_result_wait_whose_client_left_consumes_nothing(live: LiveServer, api: Api) -> None:
    api.push(task_id="r", keep_result=True)
    path = f"{api.prefix}/tasks/r/result?wait_seconds=15&consume=true"
    _hang_up_after_sending(live, "GET", path)
    [task] = api.lease()
    done = {"type": "success", "lease_token": task["lease_token"], "result": {"n": 1}}
    api.ok("POST", "/tasks/r/outcome", done)
    time.sleep(0.2)
    answer = api.ok("GET", "/tasks/r/result", params={"consume": "true"})
    assert answer["result"] == {"n": 1}


def test_tasks_leased_as_the_client_leaves_are_given_back(live: LiveServer) -> None:
    """The lease answered after the client hung up: the tasks go back QUEUED at once,
    no attempt spent (the lease itself is what a gone client could not refuse)."""
    name = live.service.names[0]
    sync = FairQueue.from_url(live.service.url, name)
    sync.enqueue("n", user_id="u", task_id="x")

    async def run() -> handlers.Reply:
        q = AsyncFairQueue.from_url(live.service.url, name)
        try:
            ctx = handlers.Ctx(names=[name], path={"queue": name}, query={}, queue=q)
            ctx.body = LeaseIn(worker_id="gone", max_tasks=5, wait_seconds=LONG_POLL)
            ctx.left.set()
            return await pull.lease(ctx)
        finally:
            await q.close()

    try:
        started = time.monotonic()
        reply = asyncio.run(run())
        assert time.monotonic() - started < LONG_POLL / 2  # it did not wait out its long poll
        assert reply.value.tasks == []
        task = sync.get("x")
        assert task is not None
        assert task.state is TaskState.QUEUED
        assert task.retry_count == 0
        assert sync.metrics().requeued == 1
    finally:
        sync.close()
