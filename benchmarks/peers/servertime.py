"""The Redis server's own time per task, from ``INFO cpu`` and ``INFO commandstats``.

Two measures over the same window:

* **CPU**: the main thread's CPU time (``used_cpu_sys_main_thread`` +
  ``used_cpu_user_main_thread``; ``used_cpu_sys`` + ``used_cpu_user`` on servers without
  them). Everything the server does for the clients: reading and parsing requests, running
  commands and scripts, writing replies, and its own cron.
* **commandstats**: the ``usec`` the server spent inside commands, in two parts. Commands
  called from inside a Lua script are counted twice by ``INFO commandstats``: once under
  their own name and once in the time of the ``EVALSHA`` (or ``EVAL``/``FCALL``) that ran
  them. Checked on Valkey 8.1.8: one ``EVALSHA`` running ``INCR`` 100 times, called 50 times,
  shows ``cmdstat_incr calls=5000 usec=735`` and ``cmdstat_evalsha calls=50 usec=2871``
  (``total_commands_processed`` and ``CLIENT INFO tot-cmds`` count the 5,000 too), so no
  counter tells the two kinds of ``INCR`` apart. Hence ``scripts_us`` (script commands, the
  commands they call included) and ``other_us`` (every other command, including those
  called from scripts) are kept apart and never simply added: the time spent in top-level
  commands lies between ``max(scripts, other)`` and ``scripts + other``, and equals
  ``other`` for a system that runs no scripts.

The driver does not poll in these windows (it waits in ``BLPOP`` for the tasks' recorder to
say the count is reached); what the idle server spends per second on its own (cron) is
measured before each system runs (``Overhead``) and subtracted per second of window.
``INFO`` itself is left out of commandstats.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import redis

SCRIPT_COMMANDS = frozenset(
    {"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro", "script|load"}
)
#: The meter's own command, never the system's.
IGNORED = frozenset({"info"})


@dataclass(frozen=True)
class Sample:
    """One reading of the server's counters."""

    cpu_s: float
    scripts_us: float
    other_us: float
    at: float
    #: per command: (calls, usec)
    commands: dict[str, tuple[int, float]]


def sample(client: redis.Redis) -> Sample:
    cpu: dict[str, Any] = client.info("cpu")
    if "used_cpu_sys_main_thread" in cpu:
        cpu_s = float(cpu["used_cpu_sys_main_thread"]) + float(cpu["used_cpu_user_main_thread"])
    else:
        cpu_s = float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])
    stats: dict[str, Any] = client.info("commandstats")
    scripts = other = 0.0
    commands: dict[str, tuple[int, float]] = {}
    for key, value in stats.items():
        name = key.removeprefix("cmdstat_")
        if name in IGNORED:
            continue
        commands[name] = (int(value["calls"]), float(value["usec"]))
        if name in SCRIPT_COMMANDS:
            scripts += float(value["usec"])
        else:
            other += float(value["usec"])
    return Sample(cpu_s, scripts, other, time.perf_counter(), commands)


@dataclass(frozen=True)
class Overhead:
    """What the idle server spends per second with no client traffic (its cron)."""

    cpu_us_per_s: float = 0.0
    other_us_per_s: float = 0.0

    @classmethod
    def measure(cls, client: redis.Redis, seconds: float) -> Overhead:
        before = sample(client)
        time.sleep(seconds)
        after = sample(client)
        span = after.at - before.at
        return cls(
            cpu_us_per_s=max(0.0, (after.cpu_s - before.cpu_s) * 1e6 / span),
            other_us_per_s=max(0.0, (after.other_us - before.other_us) / span),
        )


def per_task(
    before: Sample, after: Sample, tasks: int, overhead: Overhead | None = None
) -> dict[str, Any]:
    """Server µs per task between two samples, less the idle server's own time."""
    if tasks <= 0:
        raise ValueError("no tasks in the window")
    span = after.at - before.at
    cpu_extra = overhead.cpu_us_per_s * span if overhead else 0.0
    other_extra = overhead.other_us_per_s * span if overhead else 0.0
    cpu = max(0.0, (after.cpu_s - before.cpu_s) * 1e6 - cpu_extra)
    scripts = after.scripts_us - before.scripts_us
    other = max(0.0, after.other_us - before.other_us - other_extra)
    commands = {}
    for name, (calls, usec) in after.commands.items():
        calls0, usec0 = before.commands.get(name, (0, 0.0))
        if calls > calls0:
            commands[name] = {
                "calls": round((calls - calls0) / tasks, 3),
                "us": round((usec - usec0) / tasks, 2),
            }
    return {
        "tasks": tasks,
        "cpu_us": round(cpu / tasks, 2),
        "scripts_us": round(scripts / tasks, 2),
        "other_us": round(other / tasks, 2),
        # per task, busiest first; commands called from scripts are counted here too
        "commands": dict(sorted(commands.items(), key=lambda kv: -kv[1]["us"])),
    }


def total(parts: list[dict[str, Any]]) -> dict[str, float]:
    """A task's full life (push + lease + complete): the sum of its phases' figures."""
    return {
        key: round(sum(p[key] for p in parts), 2) for key in ("cpu_us", "scripts_us", "other_us")
    }
