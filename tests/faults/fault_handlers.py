"""Handlers for the fault suite's worker processes (``--import faults.fault_handlers``).

Every execution appends ``run <task id> <time>`` to a file private to the process
(``$FAULTS_RECORD_DIR/<pid>.log``) before the handler sleeps, so executions of a
task killed mid-run are counted too. A completion the queue accepted (``complete``
returned True, seen through the worker's public ``after_task`` hook) appends
``won``; one it refused appends ``lost``. The test reads the files afterwards:
nothing here talks to the server, so a fault cannot corrupt the records. An empty
``<pid>.ready`` file says the process has imported its handlers (it is about to
connect).
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from typing import Any

from fairque import Context, task
from fairque.models import TaskState
from fairque.worker import Hooks, Outcome, runner

RECORD_DIR_ENV = "FAULTS_RECORD_DIR"

_fd: int | None = None


def _record(kind: str, task_id: str) -> None:
    """Append one line with a single ``write`` (O_APPEND: lines never interleave)."""
    global _fd
    if _fd is None:
        path = os.path.join(os.environ[RECORD_DIR_ENV], f"{os.getpid()}.log")
        _fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(_fd, f"{kind} {task_id} {time.time():.6f}\n".encode())


@task(name="chaos")
async def chaos(ctx: Context, payload: Any) -> str:
    """Record the execution, then sleep ``payload["ms"]`` milliseconds."""
    _record("run", ctx.task_id)
    await asyncio.sleep(float(payload.get("ms", 0)) / 1000 if isinstance(payload, dict) else 0)
    return ctx.task_id


class Recorder(Hooks):
    """Records whether the queue accepted each completion."""

    def after_task(self, ctx: Context, outcome: Outcome) -> None:
        if outcome.state is TaskState.FINISHED:
            _record("won", ctx.task_id)
        elif outcome.lease_lost and outcome.error is None:
            _record("lost", ctx.task_id)


def _attach_recorder() -> None:
    """Give every ``Worker`` of this process a ``Recorder`` (the CLI takes no hooks)."""
    original = runner.Worker.__init__

    @functools.wraps(original)
    def init(self: runner.Worker, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.hooks.append(Recorder())

    runner.Worker.__init__ = init  # type: ignore[method-assign]


if os.environ.get(RECORD_DIR_ENV):
    _attach_recorder()
    # the worker imports its handlers before it first connects: tell the test
    with open(os.path.join(os.environ[RECORD_DIR_ENV], f"{os.getpid()}.ready"), "w"):
        pass
