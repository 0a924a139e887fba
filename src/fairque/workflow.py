"""Declare a DAG of tasks and push it atomically.

    extract = Step("extract", user_id="acme", payload={"day": "2026-11-22"})
    transform, load = Step("transform", user_id="acme"), Step("load", user_id="acme")
    extract >> transform >> load                  # a chain
    prepare >> [process_a, process_b] >> combine  # fan-out, fan-in
    ids = push_workflow(q, extract)               # every step reachable from `extract`

``chain(a, b, c)`` and ``group(b, c)`` build the same shapes. The whole graph goes in
one ``push_many`` call, so it is written completely or not at all.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol, Union

from fairque.models import Task

Target = Union["Step", "Group", Sequence["Step"]]


class Pushes(Protocol):
    """What a workflow is pushed to: a queue's atomic batch push (``FairQueue``)."""

    def push_many(self, tasks: list[Task]) -> Sequence[Task]: ...


class PushesAsync(Protocol):
    """The same for ``AsyncFairQueue``."""

    def push_many(self, tasks: list[Task]) -> Awaitable[Sequence[Task]]: ...


class Step:
    """One task of a workflow; ``a >> b`` makes ``b`` depend on ``a``."""

    def __init__(self, name: str, payload: Any = None, *, user_id: str, **fields: Any) -> None:
        fields.setdefault("task_id", uuid.uuid4().hex)
        self.task = Task(user_id=user_id, name=name, payload=payload, **fields)
        self.upstream: list[Step] = []
        self.downstream: list[Step] = []

    @property
    def task_id(self) -> str:
        """The id the task will have once pushed."""
        return self.task.task_id or ""

    def __rshift__(self, other: Target) -> Step | Group:
        targets = _steps(other)
        for target in targets:
            target.after(self)
        return other if isinstance(other, (Step, Group)) else Group(*targets)

    def __rrshift__(self, other: Sequence[Step]) -> Step:
        for step in _steps(other):
            self.after(step)
        return self

    def after(self, *upstream: Step) -> Step:
        """Make this step depend on ``upstream`` steps; returns self."""
        for up in upstream:
            if up is self:
                raise ValueError(f"step {self.task_id} cannot depend on itself")
            if up not in self.upstream:
                self.upstream.append(up)
                up.downstream.append(self)
        return self

    def __repr__(self) -> str:
        return f"Step({self.task.name!r}, id={self.task_id})"


class Group:
    """Steps that run side by side: ``a >> group(b, c) >> d``."""

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)

    def __rshift__(self, other: Target) -> Step | Group:
        targets = _steps(other)
        for target in targets:
            target.after(*self.steps)
        return other if isinstance(other, (Step, Group)) else Group(*targets)

    def __rrshift__(self, other: Step | Sequence[Step]) -> Group:
        for step in self.steps:
            step.after(*_steps(other))
        return self


def _steps(value: Target | Step) -> list[Step]:
    if isinstance(value, Step):
        return [value]
    if isinstance(value, Group):
        return list(value.steps)
    steps = list(value)
    if not all(isinstance(s, Step) for s in steps):
        raise TypeError("a workflow edge needs Steps, a Group or a list of Steps")
    return steps


def group(*steps: Step) -> Group:
    """Steps with no order between them."""
    return Group(*steps)


def chain(*steps: Step | Group) -> Step | Group:
    """``chain(a, b, c)`` is ``a >> b >> c``; returns the last element."""
    if not steps:
        raise ValueError("chain needs at least one step")
    current: Step | Group = steps[0]
    for nxt in steps[1:]:
        current = current >> nxt
    return current


def collect(*roots: Step | Group) -> list[Task]:
    """Every task connected to ``roots`` (up- and downstream), with ``depends_on`` set."""
    seen: dict[int, Step] = {}
    pending = [s for r in roots for s in _steps(r)]
    while pending:
        step = pending.pop()
        if id(step) in seen:
            continue
        seen[id(step)] = step
        pending.extend(step.upstream)
        pending.extend(step.downstream)
    tasks = []
    for step in seen.values():
        deps = tuple(dict.fromkeys([*step.task.depends_on, *(u.task_id for u in step.upstream)]))
        tasks.append(step.task.model_copy(update={"depends_on": deps}))
    return tasks


def push_workflow(queue: Pushes, *roots: Step | Group) -> list[str]:
    """Push the whole graph around ``roots`` in one atomic batch; returns the task ids."""
    return [t.task_id or "" for t in queue.push_many(collect(*roots))]


async def push_workflow_async(queue: PushesAsync, *roots: Step | Group) -> list[str]:
    """``push_workflow`` for ``AsyncFairQueue``."""
    return [t.task_id or "" for t in await queue.push_many(collect(*roots))]
