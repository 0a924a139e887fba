"""Server instructions per task of the lease and completion scripts, counted by callgrind.

Wall-clock figures on a shared machine move by tens of per cent from run to run; the
number of instructions the server executes inside ``EVALSHA`` does not (a few per cent,
from the random task ids). This starts a private Valkey under ``valgrind --tool=callgrind
--toggle-collect=evalShaCommand`` (only script calls are counted), runs each phase on a
fresh queue of ``--users`` users and dumps the counts after it:

- ``pop1``: ``pop`` of one task, ``--tasks`` times; ``complete``: each of them, one call each;
- ``pop100``: ``pop_batch(100)``;
- ``complete_and_pop1``: one completion and a lease of one per call (a worker's round trip);
- ``complete_and_pop100``: 100 completions and a lease of 100 per call;
- ``push1``: ``push`` of one task per call, ``--tasks`` times; ``push100``: ``push_many``
  of 100 per call. These also print the server commands per task (INFO commandstats).
- ``flow1``: a steady stream, per task one ``push`` and one completion-and-lease of one.
  A task pushed on its own is placed in its lane by a later lease call, which ``pop1``,
  ``complete_and_pop1`` and so ``life1`` do not count (their tasks come from
  ``push_many``, placed at once); ``flow1`` does.

Each phase runs again on the floor of a leased, fenced, fair queue (``floor.py``: the
least such a queue must ask of the server, as plain scripts) in the same server, and
``life1`` / ``life100`` add a push to a completion-and-lease (a task's whole life, one or
100 per call).

Prints instructions per task for each phase and repetition, fairque's and the floor's,
then one JSON document: the medians and fairque's ratio to the floor per phase. Needs
``valgrind`` and ``callgrind_control`` on the PATH. To compare two versions, run it with each on the
``PYTHONPATH`` (e.g. a ``git archive`` of the older commit's ``src``).

Usage::

    uv run python benchmarks/script_instructions.py [--tasks N] [--users N] [--repeat N]
        [--groups N] [--floors]

``--groups 10`` puts the users in ten groups and ``--floors`` gives every tenth a floor:
the lease phases' cost with the ring counted, against a run without.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import socket
import statistics
import subprocess
import tempfile
import time

import redis
from floor import FloorQueue

from fairque import FairQueue, Task
from fairque.cli.embedded import find_valkey_server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Counted:
    """A Valkey server under callgrind, counting instructions inside EVALSHA."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir
        self.port = free_port()
        self.proc = subprocess.Popen(
            [
                "valgrind", "--tool=callgrind", "--toggle-collect=evalShaCommand",
                f"--callgrind-out-file={out_dir}/callgrind.%p", find_valkey_server(),
                "--port", str(self.port), "--save", "", "--appendonly", "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port)
        for _ in range(300):
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.1)
        raise RuntimeError("the server under callgrind did not start")

    def since_last(self) -> int:
        """Instructions counted since the previous call (a callgrind dump)."""
        subprocess.run(
            ["callgrind_control", "-d", str(self.proc.pid)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
        )
        dumps = glob.glob(f"{self.out_dir}/callgrind.*.*")
        last = max(dumps, key=lambda path: int(path.rsplit(".", 1)[1]))
        with open(last) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
        raise RuntimeError(f"no totals in {last}")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


def run(
    server: Counted, name: str, tasks: int, users: int, fairness: str | None = None,
    groups: int = 0, floors: bool = False,
) -> dict[str, float]:  # fmt: skip
    q = FairQueue(redis.Redis(port=server.port), name)
    if fairness:
        q.set_fairness(fairness)  # type: ignore[arg-type]
    for i in range(users if groups or floors else 0):  # the users' groups and shares
        q.set_user_limits(
            f"u{i}", group=f"g{i % groups}" if groups else None,
            floor=0.01 if floors and i % 10 == 0 else None,
        )  # fmt: skip
    load = [Task(user_id=f"u{i % users}", name="noop", payload={"n": i}) for i in range(5 * tasks)]
    for at in range(0, len(load), 1000):
        q.push_many(load[at : at + 1000])
    out: dict[str, float] = {}
    server.since_last()
    held = [q.pop(worker_id="w") for _ in range(tasks)]
    out["pop1"] = server.since_last() / tasks
    for task in held:
        assert task is not None
        assert q.complete(task, None)
    out["complete"] = server.since_last() / tasks
    batch = []
    for _ in range(tasks // 100):
        batch.extend(q.pop_batch(100, worker_id="w"))
    out["pop100"] = server.since_last() / len(batch)
    for task in batch:
        q.complete(task, None)
    one = q.pop(worker_id="w")
    server.since_last()
    for _ in range(tasks // 2):
        assert one is not None
        _, leased = q.complete_and_pop([(one, None)], 1, worker_id="w")
        one = leased[0]
    out["complete_and_pop1"] = server.since_last() / (tasks // 2)
    assert one is not None
    assert q.complete(one, None)
    group = q.pop_batch(100, worker_id="w")
    server.since_last()
    rounds = max(1, tasks // 100)
    for _ in range(rounds):
        acks, group = q.complete_and_pop([(t, None) for t in group], 100, worker_id="w")
        assert all(acks)
        assert len(group) == 100
    out["complete_and_pop100"] = server.since_last() / (100 * rounds)
    # a steady stream: each task pushed on its own (placed by a later lease call, which
    # this counts and life1 does not), then one completion and one lease
    acks, held = q.complete_and_pop([(t, None) for t in group], 1, worker_id="w")
    assert all(acks)
    fresh = [Task(user_id=f"u{i % users}", name="noop", payload={"n": i}) for i in range(tasks)]
    server.since_last()
    for task in fresh:
        q.push(task)
        _, held = q.complete_and_pop([(held[0], None)], 1, worker_id="w")
    out["flow1"] = server.since_last() / tasks
    return out


def commands(client: redis.Redis) -> int:
    """Commands the server ran, the script calls themselves and this count's left out."""
    stats = client.info("commandstats")
    return sum(
        int(value["calls"])
        for name, value in stats.items()
        if name not in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_info", "cmdstat_config")
    )


def run_push(
    server: Counted, name: str, tasks: int, users: int, fairness: str | None = None
) -> dict[str, float]:
    """Instructions and server commands per task of ``push`` and of ``push_many(100)``."""
    client = redis.Redis(port=server.port)
    q = FairQueue(client, name)
    if fairness:
        q.set_fairness(fairness)  # type: ignore[arg-type]
    out: dict[str, float] = {}
    one = [Task(user_id=f"u{i % users}", name="noop", payload={"n": i}) for i in range(tasks)]
    q.push(Task(user_id="u0", name="noop", payload={}))  # loads the script
    client.config_resetstat()
    server.since_last()
    for task in one:
        q.push(task)
    out["push1"] = server.since_last() / tasks
    out["push1 commands"] = commands(client) / tasks
    rounds = max(1, tasks // 100)
    batches = [
        [Task(user_id=f"u{i % users}", name="noop", payload={"n": i}) for i in range(100)]
        for _ in range(rounds)
    ]
    client.config_resetstat()
    server.since_last()
    for batch in batches:
        q.push_many(batch)
    out["push100"] = server.since_last() / (100 * rounds)
    out["push100 commands"] = commands(client) / (100 * rounds)
    return out


def run_floor(server: Counted, name: str, tasks: int, users: int) -> dict[str, float]:
    """The phases of ``run`` and ``run_push``, on the floor's scripts."""
    q = FloorQueue(redis.Redis(port=server.port), name)
    load = [(f"u{i % users}", "noop", b'{"n":%d}' % i) for i in range(5 * tasks)]
    for at in range(0, len(load), 1000):
        q.push_many(load[at : at + 1000])
    out: dict[str, float] = {}
    server.since_last()
    held = [q.pop(1)[0] for _ in range(tasks)]
    out["pop1"] = server.since_last() / tasks
    for task in held:
        assert q.complete([task]) == [1]
    out["complete"] = server.since_last() / tasks
    batch = []
    for _ in range(tasks // 100):
        batch.extend(q.pop(100))
    out["pop100"] = server.since_last() / len(batch)
    q.complete(batch)
    one = q.pop(1)
    server.since_last()
    for _ in range(tasks // 2):
        _, one = q.complete_and_pop(one, 1)
    out["complete_and_pop1"] = server.since_last() / (tasks // 2)
    q.complete(one)
    group = q.pop(100)
    server.since_last()
    rounds = max(1, tasks // 100)
    for _ in range(rounds):
        acks, group = q.complete_and_pop(group, 100)
        assert all(acks)
        assert len(group) == 100
    out["complete_and_pop100"] = server.since_last() / (100 * rounds)
    fresh = [(f"u{i % users}", "noop", b'{"n":%d}' % i) for i in range(tasks)]
    server.since_last()
    for task in fresh:
        q.push_many([task])
    out["push1"] = server.since_last() / tasks
    for at in range(0, tasks, 100):
        q.push_many(fresh[at : at + 100])
    out["push100"] = server.since_last() / tasks
    _, one = q.complete_and_pop(group, 1)
    stream = [(f"u{i % users}", "noop", b'{"n":%d}' % i) for i in range(tasks)]
    server.since_last()
    for task in stream:
        q.push_many([task])
        _, one = q.complete_and_pop(one, 1)
    out["flow1"] = server.since_last() / tasks
    return out


def with_lives(phases: dict[str, float]) -> dict[str, float]:
    """``phases`` with a task's whole life: a push and a completion-and-lease."""
    out = dict(phases)
    if "complete_and_pop1" in out and "push1" in out:
        out["life1"] = out["push1"] + out["complete_and_pop1"]
        out["life100"] = out["push100"] + out["complete_and_pop100"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tasks", type=int, default=300, help="tasks per phase (default 300)")
    parser.add_argument("--users", type=int, default=100, help="users (default 100)")
    parser.add_argument("--repeat", type=int, default=2, help="repetitions (default 2)")
    parser.add_argument("--only-push", action="store_true", help="only the push phases")
    parser.add_argument(
        "--fairness", choices=["time", "count"], help="set the queues' mode (default: theirs)"
    )
    parser.add_argument("--groups", type=int, default=0, help="put the users in N groups")
    parser.add_argument(
        "--floors", action="store_true", help="give every tenth user a floor of 1 %%"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out_dir:
        server = Counted(out_dir)
        try:
            rows: dict[str, list[float]] = {}
            floor_rows: dict[str, list[float]] = {}
            for rep in range(args.repeat):
                if not args.only_push:
                    floor = with_lives(run_floor(server, f"fl{rep}{os.getpid()}", args.tasks,
                                                 args.users))  # fmt: skip
                    for phase, value in floor.items():
                        floor_rows.setdefault(phase, []).append(value)
                phases = (
                    {}
                    if args.only_push
                    else run(
                        server,
                        f"ir{rep}{os.getpid()}",
                        args.tasks,
                        args.users,
                        args.fairness,
                        args.groups,
                        args.floors,
                    )
                )
                pushed = run_push(
                    server, f"ip{rep}{os.getpid()}", args.tasks, args.users, args.fairness
                )
                phases.update(pushed)
                for phase, value in with_lives(phases).items():
                    rows.setdefault(phase, []).append(value)
        finally:
            server.stop()
    for phase, values in rows.items():
        if phase.endswith("commands"):
            print(f"{phase:20s} per task: " + "  ".join(f"{v:.1f}" for v in values))
        else:
            print(f"{phase:20s} instructions per task: " + "  ".join(f"{v:,.0f}" for v in values))
    for phase, values in floor_rows.items():
        print(f"floor {phase:14s} instructions per task: " + "  ".join(f"{v:,.0f}" for v in values))
    report: dict[str, dict[str, float]] = {}
    for phase, values in rows.items():
        if phase.endswith("commands"):
            continue
        mine = statistics.median(values)
        row = {"fairque": round(mine)}
        if phase in floor_rows:
            least = statistics.median(floor_rows[phase])
            row |= {"floor": round(least), "ratio": round(mine / least, 2)}
        report[phase] = row
    print(json.dumps({"tasks": args.tasks, "users": args.users, "phases": report}))


if __name__ == "__main__":
    main()
