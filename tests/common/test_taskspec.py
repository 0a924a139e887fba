"""One outward task shape: the HTTP API's body type and the command line's task files
are both the table of ``fairque.common.taskspec``."""

from __future__ import annotations

import msgspec
import pytest

from fairque.common.taskspec import FIELDS, check_fields, normalized, task_of
from fairque.errors import ValidationError
from fairque.models import Priority


def test_the_http_body_is_the_table() -> None:
    from fairque.service.wire import (
        TaskIn,
    )

    schema = msgspec.json.schema(TaskIn)["$defs"]["TaskIn"]
    assert list(schema["properties"]) == [f.name for f in FIELDS]
    # user_id alone may be left out over HTTP: a token held to one tenant pushes as it
    # (the service asks for it from any other token)
    assert schema["required"] == [f.name for f in FIELDS if f.required and f.name != "user_id"]
    assert schema["properties"]["user_id"]["anyOf"][1] == {"type": "null"}
    for spec in FIELDS:
        assert schema["properties"][spec.name]["description"] == spec.description


@pytest.mark.parametrize(
    ("extra", "problems"),
    [
        ({"user_id": None}, [("user_id", "is required")]),
        ({"size": 1}, [("size", "unknown field")]),
        ({"max_retries": "3"}, [("max_retries", "must be an integer")]),
        ({"keep_result": 1}, [("keep_result", "must be true or false")]),
        ({"priority": True}, [("priority", "must be an integer 1..5")]),
        ({"keep_result": None}, [("keep_result", "must be true")]),
        ({"depends_on": ["a", 1]}, [("depends_on", "must be a list")]),
    ],
)
def test_kinds_are_checked_as_json_has_them(
    extra: dict[str, object], problems: list[tuple[str, str]]
) -> None:
    item = {"name": "n", "user_id": "u", **extra}
    found = check_fields(item)
    assert [f for f, _ in found] == [f for f, _ in problems]
    for (_, message), (_, start) in zip(found, problems, strict=True):
        assert message.startswith(start), message


def test_the_engine_checks_the_values_and_names_them_outward() -> None:
    with pytest.raises(ValidationError) as caught:
        task_of({"name": "n", "user_id": "u", "timeout_seconds": -1.0, "result_ttl_seconds": -1})
    assert [f for f, _ in caught.value.problems] == ["timeout_seconds", "result_ttl_seconds"]
    task, delay = task_of({"name": "n", "user_id": "u", "priority": "critical", "max_retries": 2.0,
                           "delay_seconds": 5})  # fmt: skip
    assert (task.priority, task.max_retries, delay) == (Priority.CRITICAL, 2, 5)


def test_older_names_are_read_as_the_new_ones() -> None:
    fields, written = normalized({"name": "n", "user_id": "u", "delay": 1, "timeout": 2,
                                  "result_ttl": 3, "priority": 6})  # fmt: skip
    assert fields == {"name": "n", "user_id": "u", "delay_seconds": 1, "timeout_seconds": 2,
                      "result_ttl_seconds": 3, "priority": "critical"}  # fmt: skip
    assert written["delay_seconds"] == "delay"
    assert check_fields(fields) == []


def test_a_schedules_task_template_is_the_same_fields() -> None:
    from fairque.service.schedules import TEMPLATE, ScheduleAddIn, ScheduleIn
    from fairque.service.wire import (
        TaskIn,
    )

    task = msgspec.json.schema(TaskIn)["$defs"]["TaskIn"]["properties"]
    for kind in (ScheduleIn, ScheduleAddIn):
        schedule = msgspec.json.schema(kind)["$defs"][kind.__name__]["properties"]
        assert {name: schedule[name] for name in TEMPLATE if name != "user_id"} == {
            name: task[name] for name in TEMPLATE if name != "user_id"
        }
        # a schedule names its tenant always (schedules take no tenant-scoped token)
        assert task["user_id"]["anyOf"][0] == schedule["user_id"]
