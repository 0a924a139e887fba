"""Worker hooks: plain methods with no-op defaults; override the ones you need."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fairque.models import TaskState

if TYPE_CHECKING:
    from fairque.worker.context import Context
    from fairque.worker.runner import Worker


@dataclass(frozen=True)
class Outcome:
    """How one execution ended: the task's new state, the result or the error."""

    state: TaskState | None
    result: Any = None
    error: BaseException | None = None
    lease_lost: bool = False


class Hooks:
    """Subclass and pass instances to ``Worker(hooks=[...])``; methods may be async."""

    def on_startup(self, worker: Worker) -> Any:
        """The worker registered and is about to fetch tasks."""

    def on_shutdown(self, worker: Worker) -> Any:
        """The worker stopped fetching and every in-flight task has ended."""

    def before_task(self, ctx: Context) -> Any:
        """A task is about to run."""

    def after_task(self, ctx: Context, outcome: Outcome) -> Any:
        """A task ran; ``outcome`` says how it ended."""


async def call_hooks(hooks: Sequence[Hooks], name: str, *args: Any) -> None:
    """Call hook ``name`` of every object in ``hooks``, awaiting the async ones.

    A hook that raises is logged and skipped: a hook never stops the worker.
    """
    for owner in hooks:
        try:
            result = getattr(owner, name)(*args)
            if inspect.isawaitable(result):
                await result
        except Exception:
            logging.getLogger("fairque.worker").exception(
                "hook %s.%s failed", type(owner).__name__, name
            )
