"""Task handlers and the decorator that registers them."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from fairque.core.checks import MAX_COST
from fairque.errors import ConfigError
from fairque.models import Priority, Task

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Handler:
    """A registered task function and its defaults.

    A handler takes ``(ctx, payload)``, ``(payload)``, ``(ctx)`` (a single parameter
    named ``ctx`` or ``context``) or nothing, decided once from its signature; ``ctx``
    is the worker's ``Context``.
    """

    name: str
    func: Callable[..., Any]
    is_async: bool
    arity: int
    max_retries: int | None = None
    timeout: float | None = None
    priority: Priority = Priority.NORMAL
    cost: int = 1
    options: dict[str, Any] = field(default_factory=dict)

    def arguments(self, ctx: Any, payload: Any) -> tuple[Any, ...]:
        """The positional arguments of one call."""
        if self.arity == 2:
            return (ctx, payload)
        if self.arity == 1:
            return (payload,)
        if self.arity == -1:
            return (ctx,)
        return ()

    def make_task(self, payload: Any = None, *, user_id: str, **fields: Any) -> Task:
        """A Task for this handler with its defaults (fields override them)."""
        values: dict[str, Any] = {"priority": self.priority, "cost": self.cost}
        if self.max_retries is not None:
            values["max_retries"] = self.max_retries
        if self.timeout is not None:
            values["timeout"] = self.timeout
        values.update(fields)
        return Task(user_id=user_id, name=self.name, payload=payload, **values)


def _arity(func: Callable[..., Any], name: str) -> int:
    required_kw = [
        p.name
        for p in inspect.signature(func).parameters.values()
        if p.kind is p.KEYWORD_ONLY and p.default is p.empty
    ]
    if required_kw:
        raise ConfigError(
            f"handler {name!r} has required keyword-only parameter(s) {required_kw}; "
            "the worker passes only (ctx, payload)"
        )
    params = [
        p
        for p in inspect.signature(func).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if len(params) > 2:
        raise ConfigError(
            f"handler {name!r} must take (ctx, payload), (payload), (ctx) or no arguments; "
            f"it requires {len(params)}"
        )
    if len(params) == 1 and params[0].name in ("ctx", "context"):
        return -1
    return len(params)


class Registry:
    """Maps task names to handlers; ``@registry.task`` registers a function."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        self._handled: tuple[str, ...] | None = None  # handled()'s answer, kept

    @overload
    def task(self, func: F, /) -> F: ...

    @overload
    def task(
        self,
        *,
        name: str | None = None,
        max_retries: int | None = None,
        timeout: float | None = None,
        priority: int = Priority.NORMAL,
        cost: int = 1,
    ) -> Callable[[F], F]: ...

    def task(
        self,
        func: F | None = None,
        *,
        name: str | None = None,
        max_retries: int | None = None,
        timeout: float | None = None,
        priority: int = Priority.NORMAL,
        cost: int = 1,
    ) -> F | Callable[[F], F]:
        """Register a handler, as ``@registry.task`` or ``@registry.task(name=...)``.

        Args:
            func: the function (when used without arguments).
            name: the task name (default: the function's qualified module path).
            max_retries: retries for tasks made with ``Handler.make_task``.
            timeout: execution timeout in seconds (else the worker's default).
            priority: default priority for tasks made with ``Handler.make_task``.
            cost: default cost (slots and rate tokens, 1..1000) for tasks made with
                ``Handler.make_task``.

        Raises:
            ConfigError: invalid option, name already taken by another function, or
                a signature the worker cannot call.
        """

        def register(f: F) -> F:
            self.register(
                f, name=name, max_retries=max_retries, timeout=timeout, priority=priority,
                cost=cost,
            )  # fmt: skip
            return f

        return register(func) if func is not None else register

    def register(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        max_retries: int | None = None,
        timeout: float | None = None,
        priority: int = Priority.NORMAL,
        cost: int = 1,
    ) -> Handler:
        """Register ``func`` (the non-decorator form of ``task``)."""
        if not callable(func):
            raise ConfigError(f"handler must be callable, got {func!r}")
        task_name = name or f"{func.__module__}.{func.__qualname__}"
        if timeout is not None and timeout <= 0:
            raise ConfigError(f"handler {task_name!r}: timeout must be positive")
        if max_retries is not None and max_retries < 0:
            raise ConfigError(f"handler {task_name!r}: max_retries must not be negative")
        if priority not in set(Priority):
            raise ConfigError(f"handler {task_name!r}: priority must be 1..6, got {priority!r}")
        if type(cost) is not int or not 1 <= cost <= MAX_COST:
            raise ConfigError(
                f"handler {task_name!r}: cost must be an integer 1..{MAX_COST}, got {cost!r}"
            )
        existing = self._handlers.get(task_name)
        if existing is not None and existing.func is not func:
            raise ConfigError(f"task name {task_name!r} is already registered")
        handler = Handler(
            name=task_name,
            func=func,
            is_async=inspect.iscoroutinefunction(func),
            arity=_arity(func, task_name),
            max_retries=max_retries,
            timeout=timeout,
            priority=Priority(priority),
            cost=cost,
        )
        self._handlers[task_name] = handler
        return handler

    def get(self, name: str) -> Handler | None:
        """The handler registered as ``name``, if any."""
        return self._handlers.get(name)

    def handled(self) -> tuple[str, ...] | None:
        """The task names a worker with this registry leases (None: any name, which a
        registry whose ``get`` takes every name answers)."""
        if self._handled is None or len(self._handled) != len(self._handlers):
            self._handled = tuple(sorted(self._handlers))
        return self._handled or None

    def __getitem__(self, name: str) -> Handler:
        return self._handlers[name]

    def __contains__(self, name: object) -> bool:
        return name in self._handlers

    def __iter__(self) -> Iterator[str]:
        return iter(self._handlers)

    def __len__(self) -> int:
        return len(self._handlers)


#: The registry used by ``fairque.task`` and by workers given no registry.
default_registry = Registry()
task = default_registry.task
