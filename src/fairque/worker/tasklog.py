"""The lines a worker logs about each task, and the tracebacks it logs and keeps.

``log_line`` writes the lines every task writes without the walk up the stack that
``logging`` makes to find the caller; ``log_end`` writes the line that ends a task's
execution. A task that starts and finishes writes both lines at DEBUG (the worker's
summary line counts them at INFO); a failure, a retry and a give-back write theirs at
WARNING/ERROR or INFO. Tracebacks are bounded: the log keeps the innermost ``TRACEBACK_FRAMES``
frames, the task the innermost ``STORED_FRAMES``.
"""

from __future__ import annotations

import logging
import sys
import traceback
from typing import Any

from fairque.models import TaskState
from fairque.worker.acker import Failed, Finished, GivenBack, Report
from fairque.worker.context import Context, Fail, Retry
from fairque.worker.threads import ExecutionTimeout

#: The most frames and characters of a failure's traceback in its log line (the
#: innermost are kept: a runaway recursion must not flood the log).
TRACEBACK_FRAMES = 30
TRACEBACK_CHARS = 8000

#: The most frames of a failure's traceback kept with the task (the queue keeps its
#: last 64 KiB).
STORED_FRAMES = 100


def log_line(logger: logging.LoggerAdapter[Any], level: int, msg: str, *args: Any) -> None:
    """``logger.log(level, msg, *args)`` for the lines every task writes, without the
    walk up the stack that looks for the caller: the record names its caller all the
    same (file, line and function), read from the calling frame."""
    base = logger.logger
    if not base.isEnabledFor(level):
        return
    frame = sys._getframe(1)
    code = frame.f_code
    record = base.makeRecord(
        base.name, level, code.co_filename, frame.f_lineno, msg, args, None, code.co_name,
        logger.extra,
    )  # fmt: skip
    base.handle(record)


def log_end(
    ctx: Context,
    report: Report,
    state: TaskState | None,
    error: BaseException | None,
    took: float,
    canceled: bool = False,
) -> None:
    """The line that ends a task's execution on this worker (``state``: the queue's
    answer; None when it did not record the report; ``canceled``: its task was
    canceled while it ran)."""
    task, logger = ctx.task, ctx.logger
    if state is not None and type(report) is Finished and not logger.isEnabledFor(logging.DEBUG):
        return  # the usual line, not logged: skip building it
    about = f"{task.name} for user {task.user_id}, attempt {task.retry_count + 1}, {took:.3f}s"
    if canceled:
        log_line(logger, logging.INFO, "task %s canceled (%s)", task.task_id, about)
    elif state is None:  # the lease was lost, or the stopping worker gave up reporting
        what = {Finished: "finished", Failed: "failed"}.get(type(report), "was given back")
        log_line(
            logger, logging.WARNING,
            "task %s %s (%s) but the queue did not record it (its lease was lost, or the "
            "worker left before reporting it)",
            task.task_id, what, about,
        )  # fmt: skip
    elif isinstance(report, Finished):  # at DEBUG: the summary line counts them (summary)
        log_line(logger, logging.DEBUG, "task %s finished (%s)", task.task_id, about)
    elif isinstance(report, GivenBack):
        log_line(
            logger, logging.INFO, "task %s given back (%s), now %s",
            task.task_id, about, state.value,
        )  # fmt: skip
    else:
        level = logging.ERROR if state is TaskState.FAILED else logging.WARNING
        then = "failed for good" if state is TaskState.FAILED else f"will retry ({state.value})"
        if isinstance(error, Retry) and state is not TaskState.FAILED:
            level = logging.INFO  # the handler asked for it
        if isinstance(error, (Retry, Fail, ExecutionTimeout)) or error is None:
            log_line(logger, level, "task %s %s: %s (%s)", task.task_id, then, report.reason, about)
        else:
            log_line(
                logger, level, "task %s %s: %s (%s)\n%s",
                task.task_id, then, report.reason, about, bounded_traceback(error),
            )  # fmt: skip


def bounded_traceback(error: BaseException) -> str:
    """``error``'s traceback, its innermost ``TRACEBACK_FRAMES`` frames, at most
    ``TRACEBACK_CHARS`` characters (the end is kept)."""
    lines = traceback.format_exception(
        type(error), error, error.__traceback__, limit=-TRACEBACK_FRAMES
    )
    text = "".join(lines).rstrip("\n")
    if len(text) > TRACEBACK_CHARS:
        text = "...\n" + text[-TRACEBACK_CHARS:]
    return text


def stored_traceback(error: BaseException) -> str:
    """``error``'s traceback as kept with its task: its innermost ``STORED_FRAMES``
    frames, causes included, as ``traceback.format_exc()`` writes it."""
    lines = traceback.format_exception(
        type(error), error, error.__traceback__, limit=-STORED_FRAMES
    )
    return "".join(lines).rstrip("\n")
