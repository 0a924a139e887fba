"""HTTP service benchmark: the API's throughput next to the Python client's.

Starts a private Valkey and ``fairque serve`` (a separate process, as deployed) on free
local ports, then measures, with ``--concurrency`` requests in flight:

1. enqueue, one task per request (``POST /tasks``);
2. enqueue in batches of ``--batch`` tasks (``POST /tasks`` with ``{"tasks": [...]}``);
3. lease + outcome cycles, one task each (``POST /leases`` then ``POST .../outcome``);
4. the same cycles with each outcome carried by the next lease request (one request
   per cycle; ``complete_and_pop`` for the client);

each in JSON and in MessagePack, and the same operations through ``AsyncFairQueue``
(``push``, ``push_many``, ``pop`` + ``complete``) with the same concurrency. Every phase
is checked against the queue's own counters. Prints one JSON document on stdout.

Usage::

    uv run python benchmarks/http_api.py [--tasks N] [--concurrency C] [--batch B]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import msgspec
from served import machine, start_service

from fairque import AsyncFairQueue, Task
from fairque.cli.embedded import EmbeddedServer

MSGPACK = "application/msgpack"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (Linux ``/proc``), 0 elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ServiceCpu:
    """CPU time the service process spends per operation of a phase."""

    pid = 0

    def __init__(self) -> None:
        self.start = cpu_seconds(self.pid)

    def per_op_us(self, ops: int) -> float:
        return (cpu_seconds(self.pid) - self.start) / ops * 1e6


def task_body(i: int) -> dict[str, Any]:
    return {"name": "noop", "user_id": f"user{i % 100}", "payload": {"i": i, "to": "x@y.z"}}


class Client:
    """One encoding's requests against the service."""

    def __init__(self, http: httpx.AsyncClient, queue: str, msgpack: bool) -> None:
        self.http = http
        self.prefix = f"/v1/queues/{queue}"
        self.msgpack = msgpack
        media = MSGPACK if msgpack else "application/json"
        self.headers = {"Content-Type": media, "Accept": media}

    async def post(self, path: str, body: Any, status: int = 200) -> Any:
        data = msgspec.msgpack.encode(body) if self.msgpack else msgspec.json.encode(body)
        response = await self.http.post(self.prefix + path, content=data, headers=self.headers)
        if response.status_code != status:
            raise RuntimeError(f"{path}: {response.status_code} {response.text[:200]}")
        if self.msgpack:
            return msgspec.msgpack.decode(response.content)
        return msgspec.json.decode(response.content)


async def timed(total: int, concurrency: int, one: Callable[[int], Awaitable[None]]) -> float:
    """Run ``one(i)`` for i < total with ``concurrency`` loops; the items per second."""
    counter = iter(range(total))

    async def loop() -> None:
        for i in counter:
            await one(i)

    started = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(concurrency)))
    return total / (time.perf_counter() - started)


async def check(q: AsyncFairQueue, counter: str, expected: int) -> None:
    stats = await q.stats(user_limit=0)
    if stats.counters.get(counter, 0) != expected:
        raise RuntimeError(f"{q.queue}: {counter} = {stats.counters.get(counter)} != {expected}")


async def http_phases(
    base: str, url: str, name: str, msgpack: bool, tasks: int, concurrency: int, batch: int
) -> dict[str, float]:
    out: dict[str, float] = {}
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60) as http:
        api = Client(http, name, msgpack)
        q = AsyncFairQueue.from_url(url, name)
        try:
            await api.post("/tasks", task_body(-1), 201)  # warm the connection and scripts

            async def push_one(i: int) -> None:
                await api.post("/tasks", task_body(i), 201)

            cpu = ServiceCpu()
            out["enqueue_per_s"] = await timed(tasks, concurrency, push_one)
            out["enqueue_service_cpu_us"] = cpu.per_op_us(tasks)
            await check(q, "pushed", tasks + 1)

            async def push_batch(i: int) -> None:
                body = {"tasks": [task_body(i * batch + j) for j in range(batch)]}
                await api.post("/tasks", body, 201)

            batches = max(tasks // batch, 1)
            cpu = ServiceCpu()
            out["enqueue_batch_tasks_per_s"] = batch * await timed(batches, concurrency, push_batch)
            out["enqueue_batch_service_cpu_us_per_task"] = cpu.per_op_us(batches * batch)
            await check(q, "pushed", tasks + 1 + batches * batch)

            async def cycle(i: int) -> None:
                leased = (await api.post("/leases", {"worker_id": f"w{i % concurrency}"}))["tasks"]
                for task in leased:
                    outcome = {"type": "success", "lease_token": task["lease_token"]}
                    await api.post(f"/tasks/{task['task_id']}/outcome", outcome)

            cpu = ServiceCpu()
            out["lease_outcome_cycles_per_s"] = await timed(tasks, concurrency, cycle)
            out["lease_outcome_service_cpu_us"] = cpu.per_op_us(tasks)
            await check(q, "completed", tasks)

            # the outcome rides on the next lease request: one request per cycle
            held: dict[int, dict[str, Any]] = {}

            async def carried(i: int) -> None:
                worker = i % concurrency
                body: dict[str, Any] = {"worker_id": f"w{worker}"}
                previous = held.pop(worker, None)
                if previous is not None:
                    body["outcomes"] = [{"type": "success", "task_id": previous["task_id"],
                                         "lease_token": previous["lease_token"]}]  # fmt: skip
                leased = (await api.post("/leases", body))["tasks"]
                if leased:
                    held[worker] = leased[0]

            cpu = ServiceCpu()
            out["lease_with_outcome_cycles_per_s"] = await timed(tasks, concurrency, carried)
            out["lease_with_outcome_service_cpu_us"] = cpu.per_op_us(tasks)
        finally:
            await q.purge()
            await q.close()
    return out


async def client_phases(url: str, tasks: int, concurrency: int, batch: int) -> dict[str, float]:
    out: dict[str, float] = {}
    q = AsyncFairQueue.from_url(url, f"bench-{uuid.uuid4().hex[:8]}")

    def task(i: int) -> Task:
        body = task_body(i)
        return Task(name=body["name"], user_id=body["user_id"], payload=body["payload"])

    try:
        await q.push(task(-1))

        async def push_one(i: int) -> None:
            await q.push(task(i))

        out["enqueue_per_s"] = await timed(tasks, concurrency, push_one)

        async def push_batch(i: int) -> None:
            await q.push_many([task(i * batch + j) for j in range(batch)])

        batches = max(tasks // batch, 1)
        out["enqueue_batch_tasks_per_s"] = batch * await timed(batches, concurrency, push_batch)
        await check(q, "pushed", tasks + 1 + batches * batch)

        async def cycle(i: int) -> None:
            leased = await q.pop(worker_id=f"w{i % concurrency}")
            if leased is not None:
                await q.complete(leased)

        out["lease_outcome_cycles_per_s"] = await timed(tasks, concurrency, cycle)
        await check(q, "completed", tasks)
        held: dict[int, Task] = {}

        async def carried(i: int) -> None:
            worker = i % concurrency
            previous = held.pop(worker, None)
            done = [] if previous is None else [(previous, None)]
            _, leased = await q.complete_and_pop(done, 1, f"w{worker}")
            if leased:
                held[worker] = leased[0]

        out["lease_with_outcome_cycles_per_s"] = await timed(tasks, concurrency, carried)
    finally:
        await q.purge()
        await q.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=3000, help="operations per phase")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight")
    parser.add_argument("--batch", type=int, default=100, help="tasks per batch request")
    args = parser.parse_args()
    with EmbeddedServer() as valkey:
        port = free_port()
        queues = {label: f"bench-{uuid.uuid4().hex[:8]}" for label in ("http_json", "http_msgpack")}
        service = start_service(valkey.url, port, *queues.values())
        ServiceCpu.pid = service.pid
        try:
            base = f"http://127.0.0.1:{port}"
            results: dict[str, Any] = {}
            for label, msgpack in (("http_json", False), ("http_msgpack", True)):
                log(f"{label}...")
                phases = http_phases(
                    base, valkey.url, queues[label], msgpack, args.tasks, args.concurrency,
                    args.batch,
                )  # fmt: skip
                results[label] = asyncio.run(phases)
            log("python client...")
            results["python_client"] = asyncio.run(
                client_phases(valkey.url, args.tasks, args.concurrency, args.batch)
            )
        finally:
            service.terminate()
            service.wait(timeout=15)
    direct = results["python_client"]
    for label in ("http_json", "http_msgpack"):
        results[label]["ratio_to_client"] = {
            key: round(value / direct[key], 3)
            for key, value in results[label].items()
            if key in direct
        }
    report = {
        "benchmark": "http",
        "settings": vars(args),
        "machine": machine(),
        "results": {
            label: {k: (round(v) if isinstance(v, float) else v) for k, v in figures.items()}
            for label, figures in results.items()
        },
        "note": (
            "the service, the benchmark's client and Valkey share the machine's cores; "
            "*_service_cpu_us is the service process's CPU time per operation"
        ),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
