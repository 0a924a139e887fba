"""fairque: fair, multi-tenant task processing on Redis, Valkey and Redis Cluster."""

from fairque.aio import AsyncFairQueue
from fairque.config import WorkerConfig
from fairque.errors import (
    ConfigError,
    DependencyCycleError,
    DependencyNotFound,
    DuplicateTask,
    FairqueError,
    InvalidTransition,
    LeaseLost,
    PayloadTooLarge,
    ResultTimeout,
    SerializationError,
    ServerError,
    TaskCanceled,
    TaskFailed,
    TaskNotFound,
    ValidationError,
)
from fairque.models import Priority, QueueStats, Task, TaskState, UserStats, WorkerInfo
from fairque.options import QueueOptions
from fairque.queue import FairQueue
from fairque.worker import Context, Hooks, Registry, Retry, Worker, task

__version__ = "0.1.0"

__all__ = [
    "AsyncFairQueue",
    "ConfigError",
    "Context",
    "DependencyCycleError",
    "DependencyNotFound",
    "DuplicateTask",
    "FairQueue",
    "FairqueError",
    "Hooks",
    "InvalidTransition",
    "LeaseLost",
    "PayloadTooLarge",
    "Priority",
    "QueueOptions",
    "QueueStats",
    "Registry",
    "ResultTimeout",
    "Retry",
    "SerializationError",
    "ServerError",
    "Task",
    "TaskCanceled",
    "TaskFailed",
    "TaskNotFound",
    "TaskState",
    "UserStats",
    "ValidationError",
    "Worker",
    "WorkerConfig",
    "WorkerInfo",
    "__version__",
    "task",
]
