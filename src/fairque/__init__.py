"""fairque: fair, multi-tenant task processing on Redis, Valkey and Redis Cluster.

``from fairque import FairQueue`` loads the producer API only: the async client, the
worker runtime and its configuration (PyYAML, pydantic-settings) load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from fairque.client.queue import FairQueue
from fairque.constraints.model import Constraint, ConstraintInfo
from fairque.core.options import QueueOptions
from fairque.dedup import Dedup
from fairque.errors import (
    CancelRequested,
    ConfigError,
    ConstraintNotFound,
    DependencyCycleError,
    DependencyNotFound,
    DuplicateTask,
    FairqueError,
    InvalidTransition,
    LeaseLost,
    NotLeader,
    PayloadTooLarge,
    QuotaExceeded,
    ResultTimeout,
    ScheduleExists,
    ScheduleNotFound,
    SerializationError,
    ServerError,
    ServerFull,
    TaskCanceled,
    TaskFailed,
    TaskNotFound,
    ValidationError,
)
from fairque.models import (
    Priority,
    QueueMetrics,
    QueueStats,
    Task,
    TaskPage,
    TaskState,
    UserStats,
    WorkerInfo,
)
from fairque.schedules.model import Schedule

if TYPE_CHECKING:
    from fairque.client.aio import AsyncFairQueue
    from fairque.config import WorkerConfig
    from fairque.schedules.leader import Scheduler
    from fairque.worker import Context, Fail, Hooks, Registry, Retry, Worker, task

# name -> the module that defines it, imported when the name is first used
_LAZY = {
    "AsyncFairQueue": "fairque.client.aio",
    "WorkerConfig": "fairque.config",
    "Scheduler": "fairque.schedules.leader",
    **dict.fromkeys(
        ("Context", "Fail", "Hooks", "Registry", "Retry", "Worker", "task"), "fairque.worker"
    ),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fairque' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__version__ = "0.1.0"

__all__ = [
    "AsyncFairQueue",
    "CancelRequested",
    "ConfigError",
    "Constraint",
    "ConstraintInfo",
    "ConstraintNotFound",
    "Context",
    "Dedup",
    "DependencyCycleError",
    "DependencyNotFound",
    "DuplicateTask",
    "Fail",
    "FairQueue",
    "FairqueError",
    "Hooks",
    "InvalidTransition",
    "LeaseLost",
    "NotLeader",
    "PayloadTooLarge",
    "Priority",
    "QueueMetrics",
    "QueueOptions",
    "QueueStats",
    "QuotaExceeded",
    "Registry",
    "ResultTimeout",
    "Retry",
    "Schedule",
    "ScheduleExists",
    "ScheduleNotFound",
    "Scheduler",
    "SerializationError",
    "ServerError",
    "ServerFull",
    "Task",
    "TaskCanceled",
    "TaskFailed",
    "TaskNotFound",
    "TaskPage",
    "TaskState",
    "UserStats",
    "ValidationError",
    "Worker",
    "WorkerConfig",
    "WorkerInfo",
    "__version__",
    "task",
]
