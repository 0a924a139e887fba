"""fairque: fair, multi-tenant task processing on Redis, Valkey and Redis Cluster."""

from fairque.aio import AsyncFairQueue
from fairque.errors import (
    ConfigError,
    DependencyCycleError,
    DependencyNotFound,
    DuplicateTask,
    FairqueError,
    InvalidTransition,
    LeaseLost,
    PayloadTooLarge,
    SerializationError,
    TaskNotFound,
    ValidationError,
)
from fairque.models import Priority, QueueStats, Task, TaskState, UserStats
from fairque.options import QueueOptions
from fairque.queue import FairQueue

__version__ = "0.1.0"

__all__ = [
    "AsyncFairQueue",
    "ConfigError",
    "DependencyCycleError",
    "DependencyNotFound",
    "DuplicateTask",
    "FairQueue",
    "FairqueError",
    "InvalidTransition",
    "LeaseLost",
    "PayloadTooLarge",
    "Priority",
    "QueueOptions",
    "QueueStats",
    "SerializationError",
    "Task",
    "TaskNotFound",
    "TaskState",
    "UserStats",
    "ValidationError",
    "__version__",
]
