"""What every fault scenario shares: worker processes, a paced producer, the tally.

A scenario starts ``fairque worker`` processes running ``faults.fault_handlers``,
pushes tasks from a producer thread while it injects faults, stops the faults,
keeps pushing for a while (so every worker must have recovered to take part),
waits for the queue to drain and then checks, from the queue's own records and
the handlers' records, that no task was lost and none completed twice.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from fairque import FairQueue, Priority, Task, TaskState
from fairque.core.tally import FLUSH_EVERY

TESTS = Path(__file__).resolve().parent.parent
HANDLERS = "faults.fault_handlers"
RECORD_DIR_ENV = "FAULTS_RECORD_DIR"  # read by fault_handlers in the worker processes
SUMMARY: list[str] = []  # one "faults: ..." line per scenario, printed at the session end


def resilient_client(port: int, socket_timeout: float = 1.0) -> redis.Redis:
    """A producer's client that rides out outages of ~20 s by resending (redis-py's retry)."""
    return redis.Redis(
        host="127.0.0.1",
        port=port,
        socket_timeout=socket_timeout,
        socket_connect_timeout=socket_timeout,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 40),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError],
    )


# ---------------------------------------------------------------------- workers
@dataclass
class Fleet:
    """``fairque worker`` processes of one scenario; logs under ``workdir``."""

    url: str
    queue: str
    workdir: Path
    cluster: bool = False
    concurrency: int = 8
    env: dict[str, str] = field(default_factory=dict)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)
    alive_at_stop: set[str] = field(default_factory=set)
    exited_before_stop: dict[int, int | None] = field(default_factory=dict)

    @property
    def record_dir(self) -> Path:
        path = self.workdir / "records"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def spawn(self) -> subprocess.Popen[bytes]:
        """Start one worker process (it may start while the server is down)."""
        n = len(self.procs) + 1
        env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRQUE_")}
        env.update(
            FAIRQUE_URL=self.url,
            FAIRQUE_REDIS__CLUSTER="true" if self.cluster else "false",
            FAIRQUE_QUEUE__RETRY_BASE_SECONDS="0",
            FAIRQUE_WORKER__SHUTDOWN_GRACE_SECONDS="10",
            PYTHONPATH=os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]),
            **{RECORD_DIR_ENV: str(self.record_dir)},
            **self.env,
        )
        cmd = [sys.executable, "-m", "fairque", "--queue", self.queue, "worker"]
        cmd += ["--import", HANDLERS, "--concurrency", str(self.concurrency), "--id", f"w{n}"]
        with (self.workdir / f"worker-{n}.log").open("wb") as log:
            proc = subprocess.Popen(cmd, env=env, cwd=TESTS, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.procs if p.poll() is None]

    def kill_random(self, rng: random.Random, keep: int = 2) -> int | None:
        """SIGKILL a random worker that has run tasks, if ``keep`` others have too.

        A worker still importing its modules holds nothing: killing it proves little.
        Keeping a few serving workers makes the longest stall measure the queue's
        recovery (lease expiry, reclaim), not the time a new process takes to start.

        Returns:
            The killed worker's pid, or None when no worker could be killed.
        """
        busy = [p for p in self.alive() if (self.record_dir / f"{p.pid}.log").exists()]
        if len(busy) <= keep:
            return None
        victim = rng.choice(busy)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        self.killed.append(victim.pid)
        return victim.pid

    def ready(self, proc: subprocess.Popen[bytes]) -> bool:
        """The worker imported its handlers (so it is about to connect), or it ended."""
        return proc.poll() is not None or (self.record_dir / f"{proc.pid}.ready").exists()

    def all_busy(self) -> bool:
        """Every live worker has run at least one task."""
        return all((self.record_dir / f"{p.pid}.log").exists() for p in self.alive())

    def exited(self) -> dict[int, int | None]:
        """Workers that ended without being killed by the test: pid -> exit code."""
        return {
            p.pid: p.returncode
            for p in self.procs
            if p.poll() is not None and p.pid not in self.killed
        }

    def stop(self) -> None:
        """SIGTERM every live worker and wait for it; SIGKILL those that hang."""
        if not self.alive_at_stop:
            self.alive_at_stop = {str(p.pid) for p in self.alive()}
            self.exited_before_stop = self.exited()
        for proc in self.alive():
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def log_lines(self) -> tuple[int, int]:
        """The most lines one worker logged, and the tracebacks all workers logged."""
        most = tracebacks = 0
        for path in self.workdir.glob("worker-*.log"):
            text = path.read_text(errors="replace").splitlines()
            most = max(most, len(text))
            tracebacks += sum(1 for line in text if line.startswith("Traceback"))
        return most, tracebacks

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of every worker log, for failure messages."""
        out = []
        for path in sorted(self.workdir.glob("worker-*.log")):
            text = path.read_text(errors="replace").splitlines()
            out.append(f"--- {path.name} ({len(text)} lines)")
            out.extend(text[-lines:])
        return "\n".join(out)


# ---------------------------------------------------------------------- producer
@dataclass
class Producer:
    """Pushes a batch of ``batch`` tasks every ``every`` seconds until ``finish()``.

    fairque generates the task ids (the client's resend of a push whose reply was
    lost is part of what is tested); ``ids`` are the ids the pushes returned.
    ``limit`` caps the number of batches.
    """

    queue: FairQueue
    batch: int = 50
    every: float = 0.4
    users: int = 20
    seed: int = 0
    limit: int = 150
    ids: list[str] = field(default_factory=list)
    error: BaseException | None = None
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="producer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        rng = random.Random(self.seed)
        try:
            start = time.monotonic()
            for b in range(self.limit):
                tasks = [
                    Task(
                        user_id=f"u{rng.randrange(self.users)}",
                        name="chaos",
                        payload={"ms": rng.randint(5, 40)},
                        priority=Priority.CRITICAL if rng.random() < 0.2 else rng.randint(1, 5),
                        max_retries=1000,  # a task may be killed again and again: never FAIL it
                    )
                    for _ in range(self.batch)
                ]
                pushed = self.queue.push_many(tasks)
                self.ids.extend(t.task_id or "" for t in pushed)
                if self._stop.wait(max(start + (b + 1) * self.every - time.monotonic(), 0)):
                    return
        except BaseException as exc:
            self.error = exc

    @property
    def pushing(self) -> bool:
        """The producer is still pushing (it stops at ``limit`` batches or ``finish()``)."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """Stop pushing (for cleanup: raises nothing)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)

    def finish(self, timeout: float = 60.0) -> None:
        """Stop pushing, wait for the last push; raise if the producer failed."""
        self._stop.set()
        assert self._thread is not None, "the producer was never started"
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError(f"the producer did not finish within {timeout} s")
        if self.error is not None:
            raise AssertionError(f"the producer failed: {self.error!r}") from self.error


# ---------------------------------------------------------------------- tally
@dataclass
class Records:
    """What the handlers recorded: executions and accepted completions per task."""

    runs: Counter[str] = field(default_factory=Counter)
    won: Counter[str] = field(default_factory=Counter)
    lost_acks: Counter[str] = field(default_factory=Counter)
    won_at: list[float] = field(default_factory=list)
    won_after: dict[str, float] = field(default_factory=dict)  # pid -> last won time
    won_by: dict[str, list[float]] = field(default_factory=dict)  # pid -> won times

    @classmethod
    def read(cls, directory: Path) -> Records:
        rec = cls()
        for path in directory.glob("*.log"):
            pid = path.stem
            for line in path.read_text().splitlines():
                kind, task_id, at = line.split()
                if kind == "run":
                    rec.runs[task_id] += 1
                elif kind == "won":
                    rec.won[task_id] += 1
                    rec.won_at.append(float(at))
                    rec.won_after[pid] = max(rec.won_after.get(pid, 0.0), float(at))
                    rec.won_by.setdefault(pid, []).append(float(at))
                else:
                    rec.lost_acks[task_id] += 1
        return rec

    def unflushed_bound(self, concurrency: int) -> int:
        """The most completions the workers' processes may have counted and not flushed
        when they ended: each worker's completions in the last ``2 * FLUSH_EVERY`` of
        its work (a process flushes at most once a second, after a call), and one
        batch of ``concurrency`` more (acknowledged, not yet recorded by its hook)."""
        window = 2 * FLUSH_EVERY
        return sum(
            sum(1 for at in times if at >= max(times) - window) + concurrency
            for times in self.won_by.values()
        )

    def longest_stall(self) -> tuple[float, float]:
        """The longest gap between two consecutive accepted completions, and its start.

        The start is in seconds after the first completion.
        """
        times = sorted(self.won_at)
        gaps = [(b - a, a - times[0]) for a, b in itertools.pairwise(times)]
        return max(gaps, default=(0.0, 0.0))


def wait_drained(q: FairQueue, total: int, timeout: float) -> bool:
    """Wait until ``total`` tasks are FINISHED and nothing is waiting or running.

    The state must hold over two looks 0.5 s apart, so a task written back into a
    lane by a replayed command still gets its chance to run (and be counted).
    """
    deadline = time.monotonic() + timeout
    calm = 0
    while time.monotonic() < deadline:
        try:
            c = q.stats().counts
        except redis.RedisError:
            calm = 0
        else:
            busy = sum(c[s] for s in (TaskState.QUEUED, TaskState.STARTED, TaskState.SCHEDULED))
            calm = calm + 1 if c[TaskState.FINISHED] >= total and busy == 0 else 0
            if calm >= 2:
                return True
        time.sleep(0.5)
    return False


@dataclass
class Tally:
    """The figures of one scenario, from the queue and from the handlers."""

    scenario: str
    tasks: int
    lost: int
    completed_twice: int
    executed_twice: int
    longest_stall: float
    stall_at: float
    completed_counter: int
    lost_acks: int
    states: dict[str, int]
    leaked_in_flight: dict[str, int]
    not_finished: list[str]
    extra: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        extra = "".join(f" {k}={v}" for k, v in self.extra.items())
        return (
            f"faults: scenario={self.scenario} tasks={self.tasks} lost={self.lost} "
            f"completed_twice={self.completed_twice} executed_twice={self.executed_twice} "
            f"longest_stall={self.longest_stall:.2f}s stall_at=+{self.stall_at:.1f}s "
            f"completed_counter={self.completed_counter} "
            f"acks_refused={self.lost_acks}{extra}"
        )

    def detail(self) -> str:
        return (
            f"{self.line()}\n  states of the pushed tasks: {self.states}\n"
            f"  users with in-flight left after the drain: {self.leaked_in_flight}\n"
            f"  first tasks not FINISHED: {self.not_finished[:5]}"
        )


def tally(
    scenario: str, q: FairQueue, ids: list[str], rec: Records, fleet: Fleet, **extra: Any
) -> Tally:
    """Count lost, completed-twice and executed-twice tasks of ``ids``.

    The worker logs' size is reported too (not asserted): an outage should cost a
    few lines, not a traceback per retry.
    """
    states: Counter[str] = Counter()
    not_finished = []
    for task_id in ids:
        got = q.get(task_id)
        state = "missing" if got is None or got.state is None else got.state.value
        states[state] += 1
        if state != TaskState.FINISHED.value:
            not_finished.append(f"{task_id}:{state}")
    stats = q.stats(user_limit=1000)
    twice_by_handlers = sum(1 for n in rec.won.values() if n > 1)
    counter = stats.counters.get("completed", 0)
    stall, stall_at = rec.longest_stall()
    result = Tally(
        scenario=scenario,
        tasks=len(ids),
        lost=len(not_finished),
        # a task the queue counted as completed more than once is completed twice even
        # when its second completion's hook never ran (its worker was killed)
        completed_twice=max(twice_by_handlers, counter - len(ids)),
        executed_twice=sum(1 for n in rec.runs.values() if n > 1),
        longest_stall=stall,
        stall_at=stall_at,
        completed_counter=counter,
        lost_acks=sum(rec.lost_acks.values()),
        states=dict(states),
        leaked_in_flight={u.user_id: u.in_flight for u in stats.users if u.in_flight},
        not_finished=not_finished,
        extra=extra,
    )
    result.extra["worker_log_lines_max"], result.extra["tracebacks"] = fleet.log_lines()
    SUMMARY.append(result.line())
    print(result.line())
    return result


def assert_sound(t: Tally, rec: Records, ids: list[str], fleet: Fleet) -> None:
    """The promise: every task FINISHED, exactly one accepted completion each."""
    where = f"{t.detail()}\n{fleet.log_tail()}"
    assert t.lost == 0, f"tasks lost (not FINISHED):\n{where}"
    twice = sorted(k for k, n in rec.won.items() if n > 1)
    assert twice == [], f"tasks whose completion was accepted twice: {twice[:5]}\n{where}"
    # a worker's process counts its completions and flushes them at most once a
    # second: one killed loses what it counted since its last flush, never more
    unflushed = t.tasks - t.completed_counter
    assert 0 <= unflushed <= rec.unflushed_bound(fleet.concurrency), (
        f"the queue's 'completed' counter is {t.completed_counter} for {t.tasks} tasks\n{where}"
    )
    assert t.completed_twice == 0, where
    unknown = set(rec.runs) - set(ids)
    assert unknown == set(), f"handlers ran tasks nobody pushed: {sorted(unknown)[:5]}\n{where}"
    assert set(rec.runs) == set(ids), f"tasks FINISHED without running\n{where}"
    assert t.leaked_in_flight == {}, f"in-flight counts left after the drain\n{where}"


def assert_recovered(fleet: Fleet, rec: Records, faults_end: float, survivors: int) -> None:
    """Every worker not killed by the test was alive at the end and worked after the faults.

    Call it after ``fleet.stop()``, which notes who was alive.
    """
    exited = fleet.exited_before_stop
    assert exited == {}, f"workers exited by themselves: {exited}\n{fleet.log_tail()}"
    alive = fleet.alive_at_stop
    assert len(alive) == survivors, f"expected {survivors} live workers, found {len(alive)}"
    idle = sorted(pid for pid in alive if rec.won_after.get(pid, 0.0) <= faults_end)
    assert idle == [], (
        f"workers {idle} completed nothing after the faults ended (not recovered)\n"
        f"{fleet.log_tail()}"
    )


def worked_since(fleet: Fleet, since: float) -> list[str]:
    """Live workers without an accepted completion after ``since`` (time.time())."""
    rec = Records.read(fleet.record_dir)
    return sorted(str(p.pid) for p in fleet.alive() if rec.won_after.get(str(p.pid), 0.0) <= since)


def wait_recovered(fleet: Fleet, since: float, timeout: float) -> bool:
    """Wait until every live worker has completed a task after ``since``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not worked_since(fleet, since):
            return True
        time.sleep(0.25)
    return False


def until_all(count: Callable[[], int], target: int, what: str, floor: float = 30.0) -> None:
    """Wait until ``count()`` reaches ``target`` while it keeps moving: the wait fails
    only when no step came for three times the slowest step so far (and at least
    ``floor`` seconds), so a busy machine that starts processes slowly is waited for,
    and a stuck one still fails."""
    seen, last, slowest = count(), time.monotonic(), 0.0
    while seen < target:
        time.sleep(0.05)
        now, at = count(), time.monotonic()
        if now > seen:
            slowest = max(slowest, at - last)
            seen, last = now, at
        elif at - last > max(floor, 3 * slowest):
            raise AssertionError(
                f"waiting for {what}: {seen} of {target}, none for {at - last:.0f} s"
            )


def start_fleet(fleet: Fleet, n: int, count: Callable[[], int]) -> None:
    """Spawn ``n`` workers of ``fleet`` and wait until ``count()`` says all registered.

    One starts first, alone, and its start is timed: the others start together, and on
    a busy machine (other tests beside, coverage in every process) the first of them may
    register only after all of them have imported, so their wait allows three times
    ``n`` such starts before it calls them stuck (``until_all`` then keeps waiting
    while they keep coming)."""
    began = time.monotonic()
    fleet.spawn()
    until_all(count, 1, "the first worker to register", floor=120.0)
    one = time.monotonic() - began
    for _ in range(n - 1):
        fleet.spawn()
    until_all(count, n, "the workers to register", floor=max(30.0, 3 * n * one))


def until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
