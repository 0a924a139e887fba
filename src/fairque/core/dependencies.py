"""Ordering a batch of tasks so that upstreams inside the batch are pushed first.

``push.lua`` accepts an upstream that is pushed in the same batch only when it comes
before its dependents; a cycle inside a batch is rejected here, before anything is sent.
"""

from __future__ import annotations

from collections.abc import Sequence

from fairque.errors import DependencyCycleError


def dependency_order(tasks: Sequence[tuple[str, Sequence[str]]]) -> list[int]:
    """Indexes of ``tasks`` (``(task_id, depends_on)`` pairs) with in-batch upstreams
    first, stable otherwise: a depth-first walk that places a task after its upstreams.

    Raises:
        DependencyCycleError: the in-batch dependencies form a cycle (named in the message).
    """
    ids = [task_id for task_id, _ in tasks]
    index = {task_id: i for i, task_id in enumerate(ids)}
    ups = [[index[d] for d in deps if d in index] for _, deps in tasks]
    for task_id, deps in tasks:
        if task_id in deps:
            raise DependencyCycleError(f"task {task_id} depends on itself")
    order: list[int] = []
    state = [0] * len(tasks)  # 0 new, 1 on the current path, 2 placed
    for root in range(len(tasks)):
        if state[root]:
            continue
        stack: list[tuple[int, int]] = [(root, 0)]
        state[root] = 1
        while stack:
            node, child = stack[-1]
            if child < len(ups[node]):
                stack[-1] = (node, child + 1)
                nxt = ups[node][child]
                if state[nxt] == 1:
                    path = [ids[n] for n, _ in stack]
                    cycle = [*path[path.index(ids[nxt]) :], ids[nxt]]
                    raise DependencyCycleError("dependency cycle: " + " -> ".join(cycle))
                if state[nxt] == 0:
                    state[nxt] = 1
                    stack.append((nxt, 0))
            else:
                stack.pop()
                state[node] = 2
                order.append(node)
    return order
