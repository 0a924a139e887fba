"""Where the engine steps around a library for speed, next to what it assumes.

``stored_task``: a ``Task`` from trusted, complete field values without pydantic's
validation (pydantic 2.x: a model instance is its ``__dict__`` plus
``__pydantic_fields_set__``, ``__pydantic_extra__`` and ``__pydantic_private__``, as
``BaseModel.model_construct`` sets them), measured and tested against pydantic
(``tests/core/test_taskhash.py``). The client's bypass of redis-py's command layers, the
one that does I/O, is ``fairque.client.quicksend``.
"""

from __future__ import annotations

from typing import Any

from fairque.models import Task

_ALL_FIELDS_SET = frozenset(Task.model_fields)
_set_dict = object.__setattr__


def stored_task(values: dict[str, Any]) -> Task:
    """A Task from trusted, complete values (every field), without validation.

    Does what ``Task.model_construct`` does for a complete set of fields, minus the
    per-field default handling that made it the costliest step of leasing a task.
    """
    task = object.__new__(Task)
    _set_dict(task, "__dict__", values)
    _set_dict(task, "__pydantic_fields_set__", set(_ALL_FIELDS_SET))
    _set_dict(task, "__pydantic_extra__", None)
    # Task.run_seconds: none yet; no progress reported yet
    _set_dict(task, "__pydantic_private__", {"_run_us": "", "_progress": ""})
    return task
