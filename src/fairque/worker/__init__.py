"""The worker runtime: handler registry, context, hooks and the worker loop."""

from fairque.worker.context import Context, Fail, Retry
from fairque.worker.hooks import Hooks, Outcome
from fairque.worker.registry import Handler, Registry, default_registry, task
from fairque.worker.runner import Worker

__all__ = [
    "Context",
    "Fail",
    "Handler",
    "Hooks",
    "Outcome",
    "Registry",
    "Retry",
    "Worker",
    "default_registry",
    "task",
]
