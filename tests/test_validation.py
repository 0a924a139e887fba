"""Bad input gets a typed FairqueError with a clear message and changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from servers import SyncClient
from support import queue_snapshot

from fairque import (
    ConfigError,
    DependencyCycleError,
    DependencyNotFound,
    FairqueError,
    FairQueue,
    LeaseLost,
    PayloadTooLarge,
    SerializationError,
    Task,
    TaskNotFound,
    ValidationError,
)
from fairque.options import QueueOptions

MakeQueue = Callable[..., FairQueue]


BAD_CALLS: list[tuple[str, Callable[[FairQueue], Any], type[FairqueError], str]] = [
    ("empty user", lambda q: q.enqueue("n", user_id=""), ValidationError, "user_id"),
    ("long user", lambda q: q.enqueue("n", user_id="u" * 257), ValidationError, "user_id"),
    ("control char user", lambda q: q.enqueue("n", user_id="a\nb"), ValidationError, "control"),
    ("priority 0", lambda q: q.enqueue("n", user_id="u", priority=0), ValidationError, "priority"),
    ("priority 7", lambda q: q.enqueue("n", user_id="u", priority=7), ValidationError, "priority"),
    ("priority str", lambda q: q.enqueue("n", user_id="u", priority="high"), ValidationError, "priority"),  # type: ignore[arg-type]
    ("unserializable", lambda q: q.enqueue("n", {1, 2}, user_id="u"), SerializationError, "JSON"),
    ("too large", lambda q: q.enqueue("n", "x" * 2000, user_id="u"), PayloadTooLarge, "limit is 1000"),
    ("negative delay", lambda q: q.enqueue("n", user_id="u", delay=-1), ValidationError, "negative"),
    ("delay and execute_after", lambda q: q.enqueue("n", user_id="u", delay=1, execute_after=__import__("datetime").datetime.now()), ValidationError, "either"),
    ("empty name", lambda q: q.enqueue("", user_id="u"), ValidationError, "name"),
    ("negative retries", lambda q: q.enqueue("n", user_id="u", max_retries=-1), ValidationError, "max_retries"),
    ("zero timeout", lambda q: q.enqueue("n", user_id="u", timeout=0), ValidationError, "timeout"),
    ("deps string", lambda q: q.enqueue("n", user_id="u", depends_on="abc"), ValidationError, "depends_on"),
    ("unknown dependency", lambda q: q.enqueue("n", user_id="u", depends_on=["abc"]), DependencyNotFound, "unknown task abc"),
    ("empty dependency id", lambda q: q.enqueue("n", user_id="u", depends_on=[""]), ValidationError, "depends_on"),
    ("self dependency", lambda q: q.push(Task(user_id="u", name="n", task_id="me", depends_on=["me"])), DependencyCycleError, "itself"),
    ("batch cycle", lambda q: q.push_many([Task(user_id="u", name="a", task_id="a", depends_on=["c"]), Task(user_id="u", name="b", task_id="b", depends_on=["a"]), Task(user_id="u", name="c", task_id="c", depends_on=["b"])]), DependencyCycleError, "a -> c -> b -> a"),
    ("batch unknown upstream", lambda q: q.push_many([Task(user_id="u", name="a", task_id="a"), Task(user_id="u", name="b", depends_on=["a", "ghost"])]), DependencyNotFound, "ghost"),
    ("bad dependency policy", lambda q: q.enqueue("n", user_id="u", on_dependency_failure="ignore"), ValidationError, "on_dependency_failure"),  # type: ignore[arg-type]
    ("delays length", lambda q: q.push_many([Task(user_id="u", name="a")], delays=[1, 2]), ValidationError, "2 delays"),
    ("result negative timeout", lambda q: q.result("x", timeout=-1), ValidationError, "timeout"),
    ("xcom empty key", lambda q: q.xcom_push("", 1), ValidationError, "xcom key"),
    ("xcom zero ttl", lambda q: q.xcom_push("k", 1, ttl=0), ValidationError, "ttl"),
    ("xcom too large", lambda q: q.xcom_push("k", "x" * 2000), PayloadTooLarge, "limit"),
    ("xcom unserializable", lambda q: q.xcom_push("k", object()), SerializationError, "JSON"),
    ("batch with a bad task", lambda q: q.push_many([Task(user_id="u", name="ok"), "nope"]), ValidationError, "Task"),  # type: ignore[list-item]
    ("batch twice the same id", lambda q: q.push_many([Task(user_id="u", name="a", task_id="x"), Task(user_id="u", name="b", task_id="x")]), ValidationError, "twice"),
    ("empty batch", lambda q: q.push_many([]), ValidationError, "at least one"),
    ("unknown task cancel", lambda q: q.cancel("nope"), TaskNotFound, "nope"),
    ("empty task id get", lambda q: q.get(""), ValidationError, "task_id"),
    ("complete unleased", lambda q: q.complete(Task(user_id="u", name="n", task_id="zz")), LeaseLost, "no lease"),
    ("complete not a task", lambda q: q.complete("id"), ValidationError, "Task"),  # type: ignore[arg-type]
    ("fail negative delay", lambda q: q.fail(Task(user_id="u", name="n", task_id="zz", lease_token="1"), "e", delay=-1), ValidationError, "negative"),
    ("extend zero", lambda q: q.extend(Task(user_id="u", name="n", task_id="zz", lease_token="1"), 0), ValidationError, "positive"),
    ("pop count 0", lambda q: q.pop_batch(0), ValidationError, "count"),
    ("pop lease 0", lambda q: q.pop("w", lease_seconds=0), ValidationError, "lease"),
    ("pop assigned str", lambda q: q.pop("w", assigned_users="user:1"), ValidationError, "assigned_users"),
    ("pop steal empty id", lambda q: q.pop("w", steal_targets=[""]), ValidationError, "steal_targets"),
    ("weight 0", lambda q: q.set_user_limits("u", weight=0), ValidationError, "weight"),
    ("cap negative", lambda q: q.set_user_limits("u", max_in_flight=-1), ValidationError, "max_in_flight"),
    ("limits empty user", lambda q: q.set_user_limits(""), ValidationError, "user_id"),
    ("reclaim 0", lambda q: q.reclaim(0), ValidationError, "limit"),
    ("stats negative", lambda q: q.stats(-1), ValidationError, "user_limit"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("call", "error", "message"), [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS]
)
def test_bad_input_is_rejected_and_changes_nothing(
    make_queue: MakeQueue,
    redis_client: SyncClient,
    call: Callable[[FairQueue], Any],
    error: type[FairqueError],
    message: str,
) -> None:
    q = make_queue(max_payload_bytes=1000)
    q.enqueue("existing", {"k": 1}, user_id="u")
    q.enqueue("later", user_id="v", delay=60)
    before = queue_snapshot(redis_client, q.queue)
    with pytest.raises(error, match=message):
        call(q)
    assert queue_snapshot(redis_client, q.queue) == before


@pytest.mark.parametrize(
    ("options", "bad"),
    [
        ({"ordering": "random"}, "ordering"),
        ({"aging_horizon_seconds": 0}, "aging_horizon_seconds"),
        ({"lease_seconds": -1}, "lease_seconds"),
        ({"max_retries": -2}, "max_retries"),
        ({"serializer": "pickle"}, "serializer"),
        ({"max_payload_bytes": 0}, "max_payload_bytes"),
        ({"on_duplicate": "ignore"}, "on_duplicate"),
        ({"no_such_option": 1}, "no_such_option"),
    ],
)
def test_bad_queue_options_name_the_option(options: dict[str, Any], bad: str) -> None:
    with pytest.raises(ConfigError, match=bad):
        QueueOptions.build(**options)


@pytest.mark.parametrize("name", ["", "a{b", "a}b", "with space", "x" * 129])
def test_bad_queue_names(redis_client: SyncClient, name: str) -> None:
    with pytest.raises(ConfigError, match="queue name"):
        FairQueue(redis_client, name)


def test_errors_form_one_hierarchy() -> None:
    import fairque.errors as errors

    for code, cls in errors.SCRIPT_ERRORS.items():
        assert issubclass(cls, FairqueError)
        assert cls.__doc__
        assert isinstance(errors.script_error(code, "detail"), cls)
    assert type(errors.script_error(-99, "x")) is FairqueError
    assert str(TaskNotFound("abc")) == "abc"
    assert str(TaskNotFound()) == "task not found"
