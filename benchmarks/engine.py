"""Core engine benchmark: push / pop / complete throughput and pop latency scaling.

Runs against a private Valkey (and optionally Redis) server that the script starts on a
free local port, or against ``--url`` when given explicitly. Prints one JSON document on
stdout; progress goes to stderr. Every throughput figure is checked against the queue's
own counters (``FairQueue.stats()``) before it is reported; a mismatch aborts the run.

Usage::

    uv run python benchmarks/engine.py [--quick] [--server valkey|redis|both] [--url URL]
        [--cases a,b,c,d,e] [--tasks N] [--big N] [--pop-samples N] [--repeat N]

Measurements (no-op tasks with a small JSON payload, a fresh queue each):

1. ``push`` and ``enqueue``, one task per call, tasks spread over 100 users;
2. ``push_many`` in batches of 100 and 1,000;
3. ``pop`` then ``complete``, one task per call;
4. ``pop_batch(100)`` then ``complete`` for each task;
5. latency of a single ``pop`` for (a) 10,000 users / 1,000,000 queued tasks and
   (b) 10 users / 1,000 queued, plus (c) 10,000 users / 20,000 queued (a big ring
   without the big backlog), (d) 10 users / 1,000,000 queued (long per-user lanes) and
   (e) 100,000 users / 1,000,000 queued (the biggest ring).
   The big queues are loaded with ``push_many`` batches of 10,000; the load rate, the
   server time per batch and the ``used_memory`` growth per queued task are reported.

Throughput phases run ``--repeat`` times (full: 3) and report the median repetition.
Besides the client-side figures, each measurement reports the server's script time
(``INFO commandstats``, wall clock; the commands a script runs are listed for pops) and
the server's CPU time (``INFO cpu``). The PING round trip, and how much CPU other
processes on the machine used during the run, help to judge how noisy the figures are.
Full sizes: 20,000 tasks per throughput phase, 1,000,000 queued, 10,000 timed pops
(a few minutes per server); ``--quick``: 2,000 / 100,000 / 2,000 (well under a minute).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from typing import Any

import redis

from fairque import FairQueue, Task, TaskState
from fairque.cli.embedded import EmbeddedServer, find_valkey_server

#: Lease long enough that no lease expires (and gets reclaimed) while a sample is open.
LEASE_SECONDS = 600.0
#: Users of the throughput phases.
THROUGHPUT_USERS = 100
#: ``push_many`` batch used to preload queues (untimed) in the throughput phases.
PRELOAD_BATCH = 1_000
#: Fields kept for each repetition of a throughput phase.
REPETITION_FIELDS = (
    "elapsed_s",
    "tasks_per_s",
    "server_script_us_per_task",
    "server_cpu_us_per_task",
)


class BenchmarkError(RuntimeError):
    """A figure could not be verified, or the benchmark cannot run as asked."""


@dataclass(frozen=True)
class Sizes:
    """Sizes of one run.

    Attributes:
        tasks: tasks per throughput phase.
        big_tasks: queued tasks of the big latency cases (a), (d) and (e).
        pop_samples: timed single pops per latency case (a small case is popped in
            rounds of at most half its tasks, refilled in between).
        load_batch: ``push_many`` batch used to load the latency cases.
        repeat: repetitions of each throughput phase (the median one is reported).
    """

    tasks: int
    big_tasks: int
    pop_samples: int
    load_batch: int = 10_000
    repeat: int = 1


FULL = Sizes(tasks=20_000, big_tasks=1_000_000, pop_samples=10_000, repeat=3)
QUICK = Sizes(tasks=2_000, big_tasks=100_000, pop_samples=2_000, repeat=1)


@dataclass(frozen=True)
class LatencyCase:
    """One pop-latency scenario: ``queued`` tasks spread evenly over ``users``."""

    key: str
    description: str
    users: int
    queued: int


def latency_cases(sizes: Sizes) -> list[LatencyCase]:
    """The pop-latency scenarios for ``sizes``, mandatory ones first."""
    return [
        LatencyCase("a_10k_users_big_queue", "10,000 users, big queue", 10_000, sizes.big_tasks),
        LatencyCase("b_10_users_1k_queue", "10 users, 1,000 queued", 10, 1_000),
        LatencyCase("c_10k_users_20k_queue", "10,000 users, 2 tasks each", 10_000, 20_000),
        LatencyCase(
            "d_10_users_big_queue", "10 users, big queue (long lanes)", 10, sizes.big_tasks
        ),
        LatencyCase("e_100k_users_big_queue", "100,000 users, big queue", 100_000, sizes.big_tasks),
    ]


# helpers ------------------------------------------------------------------------------


def log(message: str) -> None:
    """Print a progress line on stderr."""
    print(f"[engine {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def payload(i: int) -> dict[str, Any]:
    """The small JSON payload of task ``i``."""
    return {"n": i, "to": f"user{i}@example.com", "kind": "noop"}


def user_of(i: int, users: int) -> str:
    """The user owning task ``i`` when tasks are dealt round robin to ``users`` users."""
    return f"u{i % users}"


def make_tasks(start: int, count: int, users: int) -> list[Task]:
    """Tasks ``start .. start + count - 1``, dealt round robin over ``users`` users."""
    return [
        Task(user_id=user_of(i, users), name="noop", payload=payload(i))
        for i in range(start, start + count)
    ]


def rate(tasks: int, seconds: float) -> float:
    """Tasks per second, rounded."""
    return round(tasks / seconds, 1) if seconds > 0 else math.inf


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0..100) of an ascending sequence."""
    if not ordered:
        raise ValueError("no samples")
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def latency_summary(samples_ns: Sequence[int]) -> dict[str, float]:
    """Mean and percentiles of ``samples_ns`` in microseconds."""
    us = sorted(s / 1000 for s in samples_ns)
    return {
        "samples": len(us),
        "mean_us": round(sum(us) / len(us), 1),
        "p50_us": round(percentile(us, 50), 1),
        "p90_us": round(percentile(us, 90), 1),
        "p99_us": round(percentile(us, 99), 1),
        "p999_us": round(percentile(us, 99.9), 1),
        "max_us": round(us[-1], 1),
    }


def info(client: redis.Redis, section: str) -> dict[str, Any]:
    """``INFO <section>`` as a dict."""
    reply = client.info(section)
    if not isinstance(reply, dict):  # pragma: no cover - redis-py always parses INFO
        raise BenchmarkError(f"unexpected INFO {section} reply: {reply!r}")
    return reply


def used_memory(client: redis.Redis) -> int:
    """The server's ``used_memory`` in bytes."""
    return int(info(client, "memory")["used_memory"])


def command_stats(client: redis.Redis) -> dict[str, tuple[int, int]]:
    """``INFO commandstats`` as ``{command: (calls, usec)}``."""
    out: dict[str, tuple[int, int]] = {}
    for key, value in info(client, "commandstats").items():
        if key.startswith("cmdstat_") and isinstance(value, dict):
            out[key.removeprefix("cmdstat_")] = (int(value["calls"]), int(value["usec"]))
    return out


def stats_delta(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
) -> dict[str, tuple[int, int]]:
    """Per-command (calls, usec) difference, without the benchmark's own INFO calls."""
    out: dict[str, tuple[int, int]] = {}
    for name, (calls, usec) in after.items():
        if name == "info":
            continue
        c0, u0 = before.get(name, (0, 0))
        if calls - c0 > 0:
            out[name] = (calls - c0, usec - u0)
    return out


def merge_delta(total: dict[str, tuple[int, int]], delta: dict[str, tuple[int, int]]) -> None:
    """Add ``delta`` into ``total``."""
    for name, (calls, usec) in delta.items():
        c0, u0 = total.get(name, (0, 0))
        total[name] = (c0 + calls, u0 + usec)


def script_usec(delta: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """(calls, usec) of the script commands (EVALSHA / EVAL) in ``delta``."""
    calls = sum(c for n, (c, _) in delta.items() if n in ("evalsha", "eval"))
    usec = sum(u for n, (_, u) in delta.items() if n in ("evalsha", "eval"))
    return calls, usec


def server_breakdown(timer: ServerTimer, pops: int) -> dict[str, Any]:
    """Server time per pop: the script call, and the commands run inside it."""
    delta = timer.total
    calls, usec = script_usec(delta)
    inner = sorted(
        ((n, c, u) for n, (c, u) in delta.items() if n not in ("evalsha", "eval")),
        key=lambda item: -item[2],
    )
    inner_us = sum(u for _, _, u in inner)
    return {
        "script_calls": calls,
        "script_us_per_pop": round(usec / pops, 2) if pops else None,
        "server_cpu_us_per_pop": round(timer.cpu_s * 1e6 / pops, 2) if pops else None,
        # Script time not spent inside redis.call(): the Lua interpreter, argument and
        # reply conversion between Lua and RESP.
        "script_us_outside_commands_per_pop": round((usec - inner_us) / pops, 2) if pops else None,
        # Commands run by the script count in commandstats too (their time is part of
        # the script's); this shows where the script spends it.
        "inner_commands_per_pop": {
            n: {"calls": round(c / pops, 2), "us": round(u / pops, 2)} for n, c, u in inner[:12]
        },
    }


def server_cpu_seconds(client: redis.Redis) -> float:
    """CPU seconds the server process has used (``INFO cpu``, user + system)."""
    cpu = info(client, "cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


class ServerTimer:
    """Accumulates ``INFO commandstats`` and server CPU over measured sections.

    Command times are wall clock: they grow when the server is descheduled by other
    processes. The server's CPU time (which also counts its network I/O) does not.
    """

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.total: dict[str, tuple[int, int]] = {}
        self.last: dict[str, tuple[int, int]] = {}
        self.cpu_s = 0.0

    @contextlib.contextmanager
    def section(self) -> Iterator[None]:
        """Count the server work done inside the ``with`` block."""
        before = command_stats(self.client)
        cpu0 = server_cpu_seconds(self.client)
        yield
        self.cpu_s += server_cpu_seconds(self.client) - cpu0
        self.last = stats_delta(before, command_stats(self.client))
        merge_delta(self.total, self.last)

    def script(self) -> tuple[int, int]:
        """(calls, usec) of scripts over every section so far."""
        return script_usec(self.total)


# environment ---------------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or the platform's best guess)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def package_version(name: str) -> str | None:
    """The installed version of distribution ``name``, or None."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


class CpuAccount:
    """Who used the machine's CPUs during a run: this client, the server, or others.

    Other processes on a small machine skew every figure; ``other_processes_s`` says
    how much of that happened.
    """

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.wall0 = time.perf_counter()
        self.machine0 = self.machine()
        self.self0 = self.own()
        self.server0 = self.server()

    @staticmethod
    def machine() -> tuple[float, float] | None:
        """(busy, steal) CPU seconds of the whole machine from /proc/stat."""
        try:
            fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):
            return None
        hz = os.sysconf("SC_CLK_TCK")
        user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
        steal = fields[7] if len(fields) > 7 else 0
        return (user + nice + system + irq + softirq) / hz, steal / hz

    @staticmethod
    def own() -> float:
        """CPU seconds used by this process."""
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def server(self) -> float:
        """CPU seconds used by the server process."""
        return server_cpu_seconds(self.client)

    def report(self, *, local_server: bool) -> dict[str, Any]:
        """CPU use since construction."""
        wall = time.perf_counter() - self.wall0
        own = self.own() - self.self0
        server = self.server() - self.server0
        out: dict[str, Any] = {
            "wall_s": round(wall, 1),
            "cpus": os.cpu_count(),
            "benchmark_client_cpu_s": round(own, 1),
            "server_cpu_s": round(server, 1),
        }
        now = self.machine()
        if now is not None and self.machine0 is not None:
            busy = now[0] - self.machine0[0]
            out["machine_busy_cpu_s"] = round(busy, 1)
            out["steal_s"] = round(now[1] - self.machine0[1], 1)
            if local_server:
                other = busy - own - server
                out["other_processes_cpu_s"] = round(other, 1)
                out["other_share_of_capacity"] = round(other / (wall * (os.cpu_count() or 1)), 3)
        return out


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, when the platform has them."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def source_revision() -> dict[str, Any]:
    """The git commit of the checkout and whether ``src/`` differs from it (read-only)."""
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
            check=False,
        )

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return {"commit": None}
        dirty = git("diff", "--quiet", "HEAD", "--", "src")
        return {"commit": head.stdout.strip(), "src_modified": dirty.returncode == 1}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None}


def machine_info() -> dict[str, Any]:
    """The machine and client software the figures were taken on."""
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(affinity) if affinity is not None else os.cpu_count(),
        "platform": platform.platform(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "redis_py": package_version("redis"),
        "hiredis_installed": importlib.util.find_spec("hiredis") is not None,
        "hiredis": package_version("hiredis"),
        "fairque": package_version("fairque"),
        "pydantic": package_version("pydantic"),
        "orjson": package_version("orjson"),
    }


def client_info(client: redis.Redis) -> dict[str, Any]:
    """The RESP protocol and reply parser redis-py uses for ``client``."""
    conn: Any = client.connection_pool.make_connection()
    try:
        parser = getattr(conn, "_parser", None)
        return {
            "protocol": getattr(conn, "protocol", None),
            "parser": type(parser).__name__ if parser is not None else None,
        }
    finally:
        conn.disconnect()


def server_info(client: redis.Redis) -> dict[str, Any]:
    """Server kind and version from ``INFO server``."""
    server = info(client, "server")
    kind = (
        "valkey" if "valkey_version" in server or server.get("server_name") == "valkey" else "redis"
    )
    version = server.get("valkey_version", server.get("redis_version"))
    return {
        "kind": kind,
        "version": str(version),
        "redis_version": str(server.get("redis_version")),
        "mode": server.get("redis_mode", server.get("server_mode")),
        "arch_bits": server.get("arch_bits"),
        "multiplexing_api": server.get("multiplexing_api"),
        "executable": server.get("executable"),
    }


# the benchmark -------------------------------------------------------------------------


class EngineBench:
    """All measurements against one server.

    Args:
        client: connection to the server.
        private: the server was started by this script (so it may be flushed).
        sizes: how big each phase is.
    """

    def __init__(self, client: redis.Redis, *, private: bool, sizes: Sizes) -> None:
        self.client = client
        self.private = private
        self.sizes = sizes
        self.run_id = uuid.uuid4().hex[:8]

    # queues ---------------------------------------------------------------------
    def new_queue(self, label: str) -> FairQueue:
        """A queue with a name never used before."""
        return FairQueue(
            self.client, queue=f"bench-{label}-{self.run_id}", lease_seconds=LEASE_SECONDS
        )

    def drop(self, q: FairQueue) -> None:
        """Delete every key of ``q`` (the whole database on a private server)."""
        if self.private:
            # SYNC: Valkey 8 frees lazily by default, which would skew the next memory delta.
            self.client.execute_command("FLUSHDB", "SYNC")  # type: ignore[no-untyped-call]
            return
        pattern = f"fq:{{{q.queue}}}:*"
        batch: list[Any] = []
        for key in self.client.scan_iter(match=pattern, count=10_000):
            batch.append(key)
            if len(batch) >= 10_000:
                self.client.unlink(*batch)
                batch.clear()
        if batch:
            self.client.unlink(*batch)

    @contextlib.contextmanager
    def queue(self, label: str) -> Iterator[FairQueue]:
        """A fresh queue, dropped afterwards."""
        q = self.new_queue(label)
        try:
            yield q
        finally:
            self.drop(q)

    @staticmethod
    def verify(
        q: FairQueue,
        *,
        counters: dict[str, int],
        counts: dict[TaskState, int],
    ) -> dict[str, Any]:
        """Check the queue's counters and registry sizes; raise when one differs."""
        st = q.stats()
        problems = [
            f"counter {name}={st.counters.get(name, 0)}, expected {want}"
            for name, want in counters.items()
            if st.counters.get(name, 0) != want
        ] + [
            f"{state.value}={st.counts.get(state, 0)}, expected {want}"
            for state, want in counts.items()
            if st.counts.get(state, 0) != want
        ]
        if problems:
            raise BenchmarkError(f"queue {q.queue} failed verification: " + "; ".join(problems))
        return {
            "counters": dict(sorted(st.counters.items())),
            "counts": {s.value: n for s, n in st.counts.items() if n},
        }

    def preload(self, q: FairQueue, n: int, users: int) -> None:
        """Push ``n`` tasks (untimed) in batches of ``PRELOAD_BATCH``."""
        for start in range(0, n, PRELOAD_BATCH):
            q.push_many(make_tasks(start, min(PRELOAD_BATCH, n - start), users))

    @staticmethod
    def record(
        name: str, tasks: int, elapsed: float, verified: dict[str, Any], timer: ServerTimer
    ) -> dict[str, Any]:
        """One throughput measurement, with the server's share of the time."""
        calls, usec = timer.script()
        log(
            f"  {name}: {tasks} tasks in {elapsed:.3f} s = {rate(tasks, elapsed):,.0f} tasks/s"
            f" (server scripts {usec / tasks:.1f} us/task, {usec / 1e6 / elapsed:.0%} of the time)"
        )
        return {
            "name": name,
            "tasks": tasks,
            "elapsed_s": round(elapsed, 6),
            "tasks_per_s": rate(tasks, elapsed),
            "round_trips": calls,
            "server_script_us_per_task": round(usec / tasks, 2),
            "server_cpu_us_per_task": round(timer.cpu_s * 1e6 / tasks, 2),
            "server_script_share": round(usec / 1e6 / elapsed, 3),
            "verified": verified,
        }

    # 1. push one per call --------------------------------------------------------
    def push_one(self) -> dict[str, Any]:
        """``push`` of pre-built tasks, one per call."""
        n = self.sizes.tasks
        tasks = make_tasks(0, n, THROUGHPUT_USERS)
        timer = ServerTimer(self.client)
        with self.queue("push") as q:
            with timer.section():
                t0 = time.perf_counter()
                for task in tasks:
                    q.push(task)
                elapsed = time.perf_counter() - t0
            verified = self.verify(q, counters={"pushed": n}, counts={TaskState.QUEUED: n})
        return self.record("push", n, elapsed, verified, timer)

    def enqueue_one(self) -> dict[str, Any]:
        """``enqueue`` (builds and validates the Task too), one per call."""
        n = self.sizes.tasks
        timer = ServerTimer(self.client)
        with self.queue("enqueue") as q:
            with timer.section():
                t0 = time.perf_counter()
                for i in range(n):
                    q.enqueue("noop", payload(i), user_id=user_of(i, THROUGHPUT_USERS))
                elapsed = time.perf_counter() - t0
            verified = self.verify(q, counters={"pushed": n}, counts={TaskState.QUEUED: n})
        return self.record("enqueue", n, elapsed, verified, timer)

    # 2. push_many ---------------------------------------------------------------
    def push_many(self, batch: int) -> dict[str, Any]:
        """``push_many`` of pre-built batches of ``batch`` tasks."""
        n = self.sizes.tasks
        batches = [
            make_tasks(start, min(batch, n - start), THROUGHPUT_USERS)
            for start in range(0, n, batch)
        ]
        timer = ServerTimer(self.client)
        with self.queue(f"push-many-{batch}") as q:
            with timer.section():
                t0 = time.perf_counter()
                for tasks in batches:
                    q.push_many(tasks)
                elapsed = time.perf_counter() - t0
            verified = self.verify(q, counters={"pushed": n}, counts={TaskState.QUEUED: n})
        result = self.record(f"push_many_{batch}", n, elapsed, verified, timer)
        result["batch"] = batch
        return result

    # 3. pop + complete ----------------------------------------------------------
    def pop_complete(self) -> dict[str, Any]:
        """``pop`` then ``complete``, one task at a time."""
        n = self.sizes.tasks
        timer = ServerTimer(self.client)
        with self.queue("pop-complete") as q:
            self.preload(q, n, THROUGHPUT_USERS)
            with timer.section():
                t0 = time.perf_counter()
                for _ in range(n):
                    task = q.pop("bench")
                    if task is None:
                        raise BenchmarkError("pop returned None before the queue was drained")
                    if not q.complete(task):
                        raise BenchmarkError(f"complete({task.task_id}) lost its lease")
                elapsed = time.perf_counter() - t0
            if q.pop("bench") is not None:
                raise BenchmarkError("the queue still had tasks after the pop phase")
            verified = self.verify(
                q,
                counters={"pushed": n, "popped": n, "completed": n},
                counts={TaskState.QUEUED: 0, TaskState.STARTED: 0, TaskState.FINISHED: n},
            )
        return self.record("pop_complete", n, elapsed, verified, timer)

    # 4. pop_batch + complete ----------------------------------------------------
    def pop_batch_complete(self, batch: int = 100) -> dict[str, Any]:
        """``pop_batch(batch)`` then ``complete`` for each task."""
        n = self.sizes.tasks
        timer = ServerTimer(self.client)
        with self.queue("pop-batch") as q:
            self.preload(q, n, THROUGHPUT_USERS)
            done = 0
            with timer.section():
                t0 = time.perf_counter()
                while done < n:
                    tasks = q.pop_batch(batch, "bench")
                    if not tasks:
                        raise BenchmarkError("pop_batch returned nothing before the queue drained")
                    for task in tasks:
                        if not q.complete(task):
                            raise BenchmarkError(f"complete({task.task_id}) lost its lease")
                    done += len(tasks)
                elapsed = time.perf_counter() - t0
            verified = self.verify(
                q,
                counters={"pushed": n, "popped": n, "completed": n},
                counts={TaskState.QUEUED: 0, TaskState.STARTED: 0, TaskState.FINISHED: n},
            )
        result = self.record(f"pop_batch_{batch}_complete", n, elapsed, verified, timer)
        result["batch"] = batch
        return result

    # 5. pop latency scaling -----------------------------------------------------
    def ping_rtt(self, n: int = 2_000) -> dict[str, float]:
        """Round-trip latency of a bare PING: the floor under every call."""
        samples: list[int] = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            self.client.ping()
            samples.append(time.perf_counter_ns() - t0)
        return latency_summary(samples)

    def load(
        self, q: FairQueue, start: int, count: int, users: int, timer: ServerTimer | None = None
    ) -> tuple[float, float, list[int]]:
        """Push tasks ``start..start+count-1`` in ``load_batch`` batches.

        Returns:
            (seconds inside ``push_many``, wall seconds including building the Tasks,
            server script microseconds of each batch when a ``timer`` is given).
        """
        in_calls = 0.0
        per_batch: list[int] = []
        wall0 = time.perf_counter()
        for s in range(start, start + count, self.sizes.load_batch):
            tasks = make_tasks(s, min(self.sizes.load_batch, start + count - s), users)
            with timer.section() if timer is not None else contextlib.nullcontext():
                t0 = time.perf_counter()
                q.push_many(tasks)
                in_calls += time.perf_counter() - t0
            if timer is not None:
                per_batch.append(script_usec(timer.last)[1])
        return in_calls, time.perf_counter() - wall0, per_batch

    def task_hash_bytes(self, q: FairQueue) -> int | None:
        """``MEMORY USAGE`` of the hash of the oldest queued task of ``q``."""
        first: Any = self.client.zrange(q.ops.keys.queued, 0, 0)
        if not first:
            return None
        key = q.ops.keys.task(first[0].decode())
        usage: Any = self.client.memory_usage(key)
        return int(usage) if usage is not None else None

    def pop_latency(self, case: LatencyCase) -> dict[str, Any]:
        """Time single pops on a queue holding ``case.queued`` tasks over ``case.users``.

        Each round pops at most half the queue (so the shape barely changes), completes
        the popped tasks (timed separately) and pushes as many again (untimed), until
        ``pop_samples`` pops were timed.
        """
        samples = self.sizes.pop_samples
        per_round = max(1, min(samples, case.queued // 2))
        with self.queue(f"lat-{case.key[0]}") as q:
            log(f"  loading {case.queued:,} tasks over {case.users:,} users ...")
            load_timer = ServerTimer(self.client)
            mem0 = used_memory(self.client)
            in_calls, wall, batch_us = self.load(q, 0, case.queued, case.users, load_timer)
            mem1 = used_memory(self.client)
            script_total_us = sum(batch_us)
            self.verify(q, counters={"pushed": case.queued}, counts={TaskState.QUEUED: case.queued})
            task_hash_bytes = self.task_hash_bytes(q)
            load = {
                "tasks": case.queued,
                "batch": self.sizes.load_batch,
                "elapsed_s": round(in_calls, 6),
                "tasks_per_s": rate(case.queued, in_calls),
                "wall_s_including_task_build": round(wall, 6),
                "wall_tasks_per_s": rate(case.queued, wall),
                "server_script_us_per_task": round(script_total_us / case.queued, 2),
                "server_script_share": round(script_total_us / 1e6 / in_calls, 3),
                # One push_many is one script: the server serves nobody else meanwhile.
                "server_script_ms_per_batch": {
                    "first": round(batch_us[0] / 1000, 1),
                    "median": round(sorted(batch_us)[len(batch_us) // 2] / 1000, 1),
                    "last": round(batch_us[-1] / 1000, 1),
                    "max": round(max(batch_us) / 1000, 1),
                },
                "used_memory_delta_bytes": mem1 - mem0,
                "used_memory_bytes_per_task": round((mem1 - mem0) / case.queued, 1),
                "memory_usage_one_task_hash_bytes": task_hash_bytes,
            }
            log(
                f"  loaded at {load['tasks_per_s']:,.0f} tasks/s, "
                f"{load['used_memory_bytes_per_task']:,.0f} B/task"
            )

            ping = self.ping_rtt(1_000)
            pop_ns: list[int] = []
            complete_ns: list[int] = []
            served: Counter[str] = Counter()
            server = ServerTimer(self.client)
            pushed = case.queued
            while len(pop_ns) < samples:
                k = min(per_round, samples - len(pop_ns))
                leased: list[Task] = []
                with server.section():
                    for _ in range(k):
                        t0 = time.perf_counter_ns()
                        task = q.pop("bench")
                        pop_ns.append(time.perf_counter_ns() - t0)
                        if task is None:
                            raise BenchmarkError("pop returned None on a non-empty queue")
                        leased.append(task)
                for task in leased:
                    served[task.user_id] += 1
                    t0 = time.perf_counter_ns()
                    ok = q.complete(task)
                    complete_ns.append(time.perf_counter_ns() - t0)
                    if not ok:
                        raise BenchmarkError(f"complete({task.task_id}) lost its lease")
                if len(pop_ns) < samples:
                    self.load(q, pushed, k, case.users)
                    pushed += k
            popped = len(pop_ns)
            verified = self.verify(
                q,
                counters={"pushed": pushed, "popped": popped, "completed": popped},
                counts={
                    TaskState.QUEUED: pushed - popped,
                    TaskState.STARTED: 0,
                    TaskState.FINISHED: popped,
                },
            )
        spread = max(served.values()) - min(served.values()) if served else 0
        if len(served) < min(case.users, popped) or spread > math.ceil(per_round / case.users):
            log(f"  WARNING: uneven service: {len(served)} users served, spread {spread}")
        pop = latency_summary(pop_ns)
        breakdown = server_breakdown(server, popped)
        script_us = breakdown["script_us_per_pop"] or 0.0
        # What is neither the round trip (a PING just before) nor the script: redis-py
        # packing and RESP parsing, fairque's argument building and Task construction.
        breakdown["client_side_us_per_pop_estimate"] = round(
            pop["p50_us"] - ping["p50_us"] - script_us, 1
        )
        log(
            f"  pop p50 {pop['p50_us']} us, p99 {pop['p99_us']} us, mean {pop['mean_us']} us"
            f" (server script {breakdown['script_us_per_pop']} us/pop)"
        )
        return {
            "description": case.description,
            "users": case.users,
            "queued": case.queued,
            "rounds": math.ceil(samples / per_round),
            "pops_per_round": per_round,
            "load": load,
            "ping_rtt_before_pops": ping,
            "pop_latency": pop,
            "complete_latency": latency_summary(complete_ns),
            "server_side": breakdown,
            "users_served": len(served),
            "max_minus_min_pops_per_user": spread,
            "verified": verified,
        }

    # all --------------------------------------------------------------------------
    def run(self, cases: Sequence[LatencyCase]) -> dict[str, Any]:
        """Every measurement, in order."""
        steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            ("push (one per call)", self.push_one),
            ("enqueue (one per call)", self.enqueue_one),
            ("push_many(100)", lambda: self.push_many(100)),
            ("push_many(1000)", lambda: self.push_many(1_000)),
            ("pop + complete", self.pop_complete),
            ("pop_batch(100) + complete", self.pop_batch_complete),
        ]
        throughput = []
        for title, step in steps:
            log(f"{title} ...")
            reps = [step() for _ in range(self.sizes.repeat)]
            best = sorted(reps, key=lambda r: float(r["tasks_per_s"]))[len(reps) // 2]
            if len(reps) > 1:
                best = {
                    **best,
                    "repetitions": [{k: r[k] for k in REPETITION_FIELDS} for r in reps],
                }
            throughput.append(best)
        log("PING round trip ...")
        ping = self.ping_rtt()
        log(f"  PING p50 {ping['p50_us']} us, mean {ping['mean_us']} us")
        latency: dict[str, Any] = {}
        for case in cases:
            log(f"pop latency, case {case.key} ...")
            latency[case.key] = self.pop_latency(case)
        return {"throughput": throughput, "ping_rtt": ping, "pop_latency": latency}


# driver --------------------------------------------------------------------------------


def run_on(
    url: str, *, private: bool, sizes: Sizes, cases: Sequence[LatencyCase]
) -> dict[str, Any]:
    """Run every measurement against the server at ``url``."""
    client = redis.Redis.from_url(url)
    try:
        if info(client, "cluster").get("cluster_enabled"):
            raise BenchmarkError("cluster servers are not supported by this benchmark")
        srv = server_info(client)
        log(f"server: {srv['kind']} {srv['version']} at {url}")
        t0 = time.perf_counter()
        before_load = load_average()
        cpu = CpuAccount(client)
        results = EngineBench(client, private=private, sizes=sizes).run(cases)
        after_load = load_average()
        cpu_use = cpu.report(local_server=private)
        return {
            "server": srv,
            "client": client_info(client),
            # Other processes on the machine skew every figure; this shows whether any ran.
            "loadavg_before": before_load,
            "loadavg_after": after_load,
            "cpu_use": cpu_use,
            "url": url,
            "private_server": private,
            "total_seconds": round(time.perf_counter() - t0, 1),
            **results,
        }
    finally:
        client.close()


def server_binary(kind: str) -> Path | None:
    """The executable for ``kind``, or None when it is not installed."""
    if kind == "valkey":
        try:
            return find_valkey_server()
        except FileNotFoundError:
            found = shutil.which("valkey-server")
            return Path(found) if found else None
    found = shutil.which("redis-server")
    return Path(found) if found else None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    parser.add_argument(
        "--server",
        choices=("valkey", "redis", "both"),
        default="valkey",
        help="private server(s) to start (default: valkey); ignored with --url",
    )
    parser.add_argument(
        "--url", help="benchmark this server instead of a private one (its data is kept)"
    )
    parser.add_argument(
        "--cases",
        default="a,b,c,d,e",
        help="pop-latency cases to run, comma-separated letters (default: a,b,c,d,e)",
    )
    parser.add_argument("--tasks", type=int, help="tasks per throughput phase")
    parser.add_argument("--big", type=int, help="queued tasks of the big latency cases")
    parser.add_argument("--pop-samples", type=int, help="timed pops per latency case")
    parser.add_argument(
        "--repeat", type=int, help="repetitions of each throughput phase (full: 3, quick: 1)"
    )
    return parser.parse_args(argv)


def interrupt_on_sigterm(signum: int, frame: FrameType | None) -> None:
    """Turn SIGTERM into KeyboardInterrupt, so the private servers are stopped."""
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the JSON report; returns the exit code."""
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, interrupt_on_sigterm)
    base = QUICK if args.quick else FULL
    sizes = Sizes(
        tasks=args.tasks or base.tasks,
        big_tasks=args.big or base.big_tasks,
        pop_samples=args.pop_samples or base.pop_samples,
        load_batch=base.load_batch,
        repeat=args.repeat or base.repeat,
    )
    wanted = {c.strip() for c in args.cases.split(",") if c.strip()}
    cases = [c for c in latency_cases(sizes) if c.key[0] in wanted]
    if not {"a", "b"} <= wanted:
        log("note: cases a and b are the headline cases; running only " + ", ".join(sorted(wanted)))
    report: dict[str, Any] = {
        "benchmark": "fairque.engine",
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(
            [Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]
        ),
        "machine": machine_info(),
        "source": source_revision(),
        "parameters": {
            **asdict(sizes),
            "mode": "quick" if args.quick else "full",
            "throughput_users": THROUGHPUT_USERS,
            "preload_batch": PRELOAD_BATCH,
            "lease_seconds": LEASE_SECONDS,
            "payload_example": payload(0),
            "payload_bytes": len(json.dumps(payload(0), separators=(",", ":"))),
            "task_name": "noop",
            "clock": "time.perf_counter / perf_counter_ns",
            "latency_cases": [asdict(c) for c in cases],
        },
        "runs": [],
        "skipped": [],
    }
    try:
        if args.url:
            report["runs"].append(run_on(args.url, private=False, sizes=sizes, cases=cases))
        else:
            kinds = ["valkey", "redis"] if args.server == "both" else [args.server]
            for kind in kinds:
                binary = server_binary(kind)
                if binary is None:
                    if args.server == "both":
                        log(f"{kind}-server not found; skipped")
                        report["skipped"].append(kind)
                        continue
                    raise BenchmarkError(f"{kind}-server not found")
                log(f"starting a private {kind} server ({binary}) ...")
                with EmbeddedServer(binary) as server:
                    report["runs"].append(
                        run_on(server.url, private=True, sizes=sizes, cases=cases)
                    )
                log(f"{kind} server stopped")
    except KeyboardInterrupt:
        log("interrupted; no report")
        return 130
    except BenchmarkError as exc:
        log(f"error: {exc}")
        return 1
    report["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
