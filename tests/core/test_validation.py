"""Bad input gets a typed FairqueError with a clear message and changes nothing."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue, queue_snapshot, server_ms, unique_queue
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fairque import (
    AsyncFairQueue,
    ConfigError,
    DependencyCycleError,
    DependencyNotFound,
    FairqueError,
    FairQueue,
    LeaseLost,
    PayloadTooLarge,
    ResultTimeout,
    SerializationError,
    Task,
    TaskNotFound,
    TaskState,
    ValidationError,
)
from fairque.config import load_settings
from fairque.core.checks import (
    MAX_BATCH,
    MAX_DEPENDENCIES,
    MAX_SECONDS,
    check_text,
    error_text,
    non_finite_path,
)
from fairque.core.codec import get_serializer
from fairque.core.options import QueueOptions
from fairque.core.scripts import ScriptLoadError

INF, NAN = math.inf, math.nan
SURROGATE = "a\ud800b"


def leased(**fields: Any) -> Task:
    """A task that looks leased (the lease is checked by the server, after the door)."""
    return Task(user_id="u", name="n", task_id="zz", lease_token="1", **fields)


def far_future() -> datetime:
    return datetime.now(timezone.utc) + timedelta(seconds=MAX_SECONDS + 86_400)


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
    # numbers of seconds: never inf, nan, over 10 years, a bool or a string
    ("delay inf", lambda q: q.enqueue("n", user_id="u", delay=INF), ValidationError, "delay"),
    ("delay nan", lambda q: q.enqueue("n", user_id="u", delay=NAN), ValidationError, "delay"),
    ("delay 1e12", lambda q: q.enqueue("n", user_id="u", delay=1e12), ValidationError, "delay"),
    ("delay timedelta huge", lambda q: q.enqueue("n", user_id="u", delay=timedelta(days=4000)), ValidationError, "delay"),
    ("delay True", lambda q: q.enqueue("n", user_id="u", delay=True), ValidationError, "delay"),
    ("delay str", lambda q: q.enqueue("n", user_id="u", delay="5"), ValidationError, "delay"),  # type: ignore[arg-type]
    ("execute_after far", lambda q: q.enqueue("n", user_id="u", execute_after=far_future()), ValidationError, "execute_after"),
    ("execute_after max", lambda q: q.enqueue("n", user_id="u", execute_after=datetime.max), ValidationError, "execute_after"),
    ("timeout inf", lambda q: q.enqueue("n", user_id="u", timeout=INF), ValidationError, "timeout"),
    ("timeout nan", lambda q: q.enqueue("n", user_id="u", timeout=NAN), ValidationError, "timeout"),
    ("timeout 1e300", lambda q: q.enqueue("n", user_id="u", timeout=1e300), ValidationError, "timeout"),
    ("timeout str", lambda q: q.enqueue("n", user_id="u", timeout="10"), ValidationError, "timeout"),  # type: ignore[arg-type]
    ("timeout True", lambda q: q.enqueue("n", user_id="u", timeout=True), ValidationError, "timeout"),
    ("result_ttl 1e16", lambda q: q.enqueue("n", user_id="u", result_ttl=10**16), ValidationError, "result_ttl"),
    ("result_ttl str", lambda q: q.enqueue("n", user_id="u", result_ttl="60"), ValidationError, "result_ttl"),  # type: ignore[arg-type]
    ("result_ttl float", lambda q: q.enqueue("n", user_id="u", result_ttl=60.5), ValidationError, "result_ttl"),  # type: ignore[arg-type]
    ("max_retries True", lambda q: q.enqueue("n", user_id="u", max_retries=True), ValidationError, "max_retries"),
    ("max_retries str", lambda q: q.enqueue("n", user_id="u", max_retries="3"), ValidationError, "max_retries"),  # type: ignore[arg-type]
    ("max_retries 1001", lambda q: q.enqueue("n", user_id="u", max_retries=1001), ValidationError, "max_retries"),
    ("priority True", lambda q: q.enqueue("n", user_id="u", priority=True), ValidationError, "priority"),
    ("priority float", lambda q: q.enqueue("n", user_id="u", priority=3.0), ValidationError, "priority"),  # type: ignore[arg-type]
    ("keep_result 1", lambda q: q.enqueue("n", user_id="u", keep_result=1), ValidationError, "keep_result"),  # type: ignore[arg-type]
    ("keep_result str", lambda q: q.enqueue("n", user_id="u", keep_result="yes"), ValidationError, "keep_result"),  # type: ignore[arg-type]
    ("task max_retries True", lambda q: q.push(Task(user_id="u", name="n", max_retries=True)), ValidationError, "max_retries"),
    ("task timeout inf", lambda q: q.push(Task(user_id="u", name="n", timeout=INF)), ValidationError, "timeout"),
    ("task timeout set later", lambda q: setattr(Task(user_id="u", name="n"), "timeout", 1e300), ValidationError, "timeout"),
    ("task user set later", lambda q: setattr(Task(user_id="u", name="n"), "user_id", SURROGATE), ValidationError, "user_id"),
    ("batch delay nan", lambda q: q.push_many([Task(user_id="u", name="n")], delays=[NAN]), ValidationError, "delay"),
    ("batch delay inf", lambda q: q.push_many([Task(user_id="u", name="n")], delays=[INF]), ValidationError, "delay"),
    ("pop lease inf", lambda q: q.pop("w", lease_seconds=INF), ValidationError, "lease_seconds"),
    ("pop lease nan", lambda q: q.pop("w", lease_seconds=NAN), ValidationError, "lease_seconds"),
    ("pop lease str", lambda q: q.pop("w", lease_seconds="30"), ValidationError, "lease_seconds"),  # type: ignore[arg-type]
    ("pop_batch count huge", lambda q: q.pop_batch(10**9), ValidationError, "count"),
    ("pop_batch count True", lambda q: q.pop_batch(True), ValidationError, "count"),
    ("extend inf", lambda q: q.extend(leased(), INF), ValidationError, "seconds"),
    ("extend nan", lambda q: q.extend(leased(), NAN), ValidationError, "seconds"),
    ("extend_many inf", lambda q: q.extend_many([leased()], INF), ValidationError, "seconds"),
    ("fail delay nan", lambda q: q.fail(leased(), "e", delay=NAN), ValidationError, "delay"),
    ("fail delay inf", lambda q: q.fail(leased(), "e", delay=INF), ValidationError, "delay"),
    ("requeue delay inf", lambda q: q.requeue(leased(), delay=INF), ValidationError, "delay"),
    ("xcom ttl inf", lambda q: q.xcom_push("k", 1, ttl=INF), ValidationError, "ttl"),
    ("xcom ttl nan", lambda q: q.xcom_push("k", 1, ttl=NAN), ValidationError, "ttl"),
    ("xcom ttl huge", lambda q: q.xcom_push("k", 1, ttl=1e12), ValidationError, "ttl"),
    ("result timeout nan", lambda q: q.result("x", timeout=NAN), ValidationError, "timeout"),
    ("result timeout inf", lambda q: q.result("x", timeout=INF), ValidationError, "timeout"),
    ("result timeout timedelta", lambda q: q.result("x", timeout=timedelta(seconds=1)), ValidationError, "timeout"),  # type: ignore[arg-type]
    ("result timeout str", lambda q: q.result("x", timeout="1"), ValidationError, "timeout"),  # type: ignore[arg-type]
    ("wait_for_work nan", lambda q: q.wait_for_work(NAN), ValidationError, "timeout"),
    ("wait_for_work inf", lambda q: q.wait_for_work(INF), ValidationError, "timeout"),
    ("wait_for_work 0", lambda q: q.wait_for_work(0), ValidationError, "timeout"),
    ("wait_and_pop nan", lambda q: q.wait_and_pop(NAN), ValidationError, "timeout"),
    # integers: never a bool, a string, or beyond the documented limits
    ("weight True", lambda q: q.set_user_limits("u", weight=True), ValidationError, "weight"),
    ("weight str", lambda q: q.set_user_limits("u", weight="3"), ValidationError, "weight"),  # type: ignore[arg-type]
    ("weight huge", lambda q: q.set_user_limits("u", weight=10**20), ValidationError, "weight"),
    ("cap True", lambda q: q.set_user_limits("u", max_in_flight=True), ValidationError, "max_in_flight"),
    ("cap huge", lambda q: q.set_user_limits("u", max_in_flight=10**30), ValidationError, "max_in_flight"),
    ("cap float", lambda q: q.set_user_limits("u", max_in_flight=2.0), ValidationError, "max_in_flight"),  # type: ignore[arg-type]
    ("reclaim huge", lambda q: q.reclaim(10**30), ValidationError, "limit"),
    ("reclaim True", lambda q: q.reclaim(True), ValidationError, "limit"),
    ("stats huge", lambda q: q.stats(10**30), ValidationError, "user_limit"),
    ("wake True", lambda q: q.wake(True), ValidationError, "n"),
    # lone surrogates cannot be encoded for the server
    ("surrogate user", lambda q: q.enqueue("n", user_id=SURROGATE), ValidationError, "user_id"),
    ("surrogate name", lambda q: q.enqueue(SURROGATE, user_id="u"), ValidationError, "name"),
    ("surrogate task id", lambda q: q.enqueue("n", user_id="u", task_id=SURROGATE), ValidationError, "task_id"),
    ("surrogate dependency", lambda q: q.enqueue("n", user_id="u", depends_on=[SURROGATE]), ValidationError, "depends_on"),
    ("surrogate task push", lambda q: q.push(Task(user_id=SURROGATE, name="n")), ValidationError, "user_id"),
    ("surrogate get", lambda q: q.get(SURROGATE), ValidationError, "task_id"),
    ("surrogate cancel", lambda q: q.cancel(SURROGATE), ValidationError, "task_id"),
    ("surrogate retry", lambda q: q.retry(SURROGATE), ValidationError, "task_id"),
    ("surrogate result", lambda q: q.result(SURROGATE), ValidationError, "task_id"),
    ("surrogate xcom key", lambda q: q.xcom_push(SURROGATE, 1), ValidationError, "xcom key"),
    ("surrogate xcom pull", lambda q: q.xcom_pull(SURROGATE), ValidationError, "xcom key"),
    ("surrogate worker id", lambda q: q.pop(SURROGATE), ValidationError, "worker_id"),
    ("long worker id", lambda q: q.pop("w" * 257), ValidationError, "worker_id"),
    ("surrogate assigned", lambda q: q.pop("w", assigned_users=[SURROGATE]), ValidationError, "assigned_users"),
    ("surrogate steal", lambda q: q.pop("w", steal_targets=["*", SURROGATE]), ValidationError, "steal_targets"),
    ("surrogate limits user", lambda q: q.set_user_limits(SURROGATE), ValidationError, "user_id"),
    ("long task id get", lambda q: q.get("t" * 257), ValidationError, "task_id"),
    ("payload surrogate", lambda q: q.enqueue("n", {"s": SURROGATE}, user_id="u"), SerializationError, "payload"),
    # NaN and Infinity have no JSON form: rejected, never stored as null
    ("payload nan", lambda q: q.enqueue("n", {"a": [1, NAN]}, user_id="u"), SerializationError, r"payload: .*NaN or Infinity at \['a'\]\[1\]"),
    ("payload inf", lambda q: q.enqueue("n", -INF, user_id="u"), SerializationError, "payload"),
    ("payload nan slow path", lambda q: q.enqueue("n", [None, NAN], user_id="u", delay=1), SerializationError, "payload"),
    ("task payload nan", lambda q: q.push(Task(user_id="u", name="n", payload={"x": NAN})), SerializationError, "payload"),
    ("batch payload nan", lambda q: q.push_many([Task(user_id="u", name="a"), Task(user_id="u", name="b", payload=(NAN,))]), SerializationError, r"payload: .*\[0\]"),
    ("result nan", lambda q: q.complete(leased(), {"r": INF}), SerializationError, "result"),
    ("result nan complete_and_pop", lambda q: q.complete_and_pop([(leased(), NAN)]), SerializationError, "result"),
    ("xcom value nan", lambda q: q.xcom_push("k", {"v": NAN}), SerializationError, "xcom value"),
    # sizes
    ("too many upstreams", lambda q: q.enqueue("n", user_id="u", depends_on=[f"d{i}" for i in range(MAX_DEPENDENCIES + 1)]), ValidationError, "depends_on"),
    ("batch too large", lambda q: q.push_many([Task(user_id="u", name="n")] * (MAX_BATCH + 1)), ValidationError, "limit is 10000"),
    ("batch not a list", lambda q: q.push_many(5), ValidationError, "tasks"),  # type: ignore[arg-type]
    ("batch a string", lambda q: q.push_many("abc"), ValidationError, "tasks"),  # type: ignore[arg-type]
    ("batch delays not a list", lambda q: q.push_many([Task(user_id="u", name="n")], delays=5), ValidationError, "delays"),  # type: ignore[arg-type]
]  # fmt: skip


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
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


_SECONDS_OPTIONS = (
    "aging_horizon_seconds", "lease_seconds", "retry_base_seconds", "result_ttl_seconds",
    "failed_ttl_seconds",
)  # fmt: skip
_INT_OPTIONS = ("max_retries", "max_payload_bytes", "maintenance_batch")
BAD_OPTIONS: list[tuple[dict[str, Any], str]] = [
    ({"ordering": "random"}, "ordering"),
    ({"aging_horizon_seconds": 0}, "aging_horizon_seconds"),
    ({"lease_seconds": -1}, "lease_seconds"),
    ({"max_retries": -2}, "max_retries"),
    ({"serializer": "pickle"}, "serializer"),
    ({"max_payload_bytes": 0}, "max_payload_bytes"),
    ({"max_payload_bytes": 2**40}, "max_payload_bytes"),
    ({"on_duplicate": "ignore"}, "on_duplicate"),
    ({"no_such_option": 1}, "no_such_option"),
    *[({name: bad}, name) for name in _SECONDS_OPTIONS for bad in (INF, NAN, 1e300, True, "30")],
    *[({name: bad}, name) for name in _INT_OPTIONS for bad in (True, 10**30, "3", 3.0)],
]


@pytest.mark.parametrize(("options", "bad"), BAD_OPTIONS, ids=[repr(o) for o, _ in BAD_OPTIONS])
def test_bad_queue_options_name_the_option(options: dict[str, Any], bad: str) -> None:
    with pytest.raises(ConfigError, match=bad):
        QueueOptions.build(**options)


@pytest.mark.parametrize("client", ["sync", "async"])
def test_bad_queue_options_are_rejected_by_both_clients(client: str) -> None:
    cls = FairQueue if client == "sync" else AsyncFairQueue
    with pytest.raises(ConfigError, match="lease_seconds"):
        cls.from_url("redis://127.0.0.1:1/0", "q", cluster=False, lease_seconds=INF)


def test_every_duration_option_has_the_documented_limit() -> None:
    for name in _SECONDS_OPTIONS:
        assert QueueOptions.build(**{name: MAX_SECONDS}).model_dump()[name] == MAX_SECONDS
        with pytest.raises(ConfigError, match=name):
            QueueOptions.build(**{name: MAX_SECONDS + 1})


@pytest.mark.parametrize(
    ("variable", "value", "bad"),
    [
        ("FAIRQUE_QUEUE__LEASE_SECONDS", "inf", "lease_seconds"),
        ("FAIRQUE_QUEUE__RETRY_BASE_SECONDS", "Infinity", "retry_base_seconds"),
        ("FAIRQUE_QUEUE__RESULT_TTL_SECONDS", "nan", "result_ttl_seconds"),
        ("FAIRQUE_QUEUE__FAILED_TTL_SECONDS", "1e300", "failed_ttl_seconds"),
        ("FAIRQUE_QUEUE__MAX_RETRIES", "true", "max_retries"),
    ],
)
def test_bad_queue_options_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, bad: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=bad):
        load_settings()


def test_queue_options_from_yaml_and_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "fairque.yaml"
    config.write_text("queue:\n  max_retries: yes\n")
    with pytest.raises(ConfigError, match="max_retries"):
        load_settings(config)
    config.write_text("queue:\n  lease_seconds: .inf\n")
    with pytest.raises(ConfigError, match="lease_seconds"):
        load_settings(config)
    # numbers written as text are fine where all values are text
    monkeypatch.setenv("FAIRQUE_QUEUE__LEASE_SECONDS", "45")
    monkeypatch.setenv("FAIRQUE_QUEUE__MAX_RETRIES", "5")
    settings = load_settings()
    assert (settings.queue.lease_seconds, settings.queue.max_retries) == (45.0, 5)
    assert QueueOptions.build(**settings.queue.options()).lease_seconds == 45.0


@pytest.mark.parametrize("name", ["", "a{b", "a}b", "with space", "x" * 129, "q\ud800"])
def test_bad_queue_names(redis_client: SyncClient, name: str) -> None:
    with pytest.raises(ConfigError, match="queue name"):
        FairQueue(redis_client, name)
    with pytest.raises(ConfigError, match="queue name"):
        AsyncFairQueue.from_url("redis://127.0.0.1:1/0", name, cluster=False)


def test_errors_form_one_hierarchy() -> None:
    import fairque.errors as errors

    for code, cls in errors.SCRIPT_ERRORS.items():
        assert issubclass(cls, FairqueError)
        assert cls.__doc__
        assert isinstance(errors.script_error(code, "detail"), cls)
    assert type(errors.script_error(-99, "x")) is FairqueError
    assert issubclass(ScriptLoadError, FairqueError)
    assert str(TaskNotFound("abc")) == "abc"
    assert str(TaskNotFound()) == "task not found"


# random junk at the public methods: only FairqueError escapes, and a rejected
# call leaves the keyspace as it was
_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 2**63, 10**16, 1e300, -0.0, 5e-324, MAX_SECONDS + 1]),
    st.text(max_size=8),
    st.sampled_from([SURROGATE, "\udfff", "", "x" * 300, "x" * 200_000, "a\x00b", "*"]),
    st.binary(max_size=8),
    st.lists(st.one_of(st.integers(), st.text(max_size=3), st.floats()), max_size=3),
    st.dictionaries(st.text(max_size=3), st.floats(), max_size=3),
    st.timedeltas(),
    st.datetimes(timezones=st.just(timezone.utc)),
    st.builds(object),
)
_JUNK_SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _spoil(valid: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """``valid`` arguments with one or two of them replaced by junk."""
    return st.builds(
        lambda names, values: {**valid, **dict(zip(names, values, strict=False))},
        st.lists(st.sampled_from(sorted(valid)), min_size=1, max_size=2, unique=True),
        st.lists(_JUNK, min_size=2, max_size=2),
    )


def _enqueue(kw: dict[str, Any]) -> Callable[[FairQueue], Any]:
    return lambda q: q.enqueue(kw.pop("name"), kw.pop("payload"), **kw)


def _push_many(kw: dict[str, Any]) -> Callable[[FairQueue], Any]:
    def call(q: FairQueue) -> Any:
        task = Task(**{k: v for k, v in kw.items() if k not in ("delay", "batch")})
        return q.push_many(kw["batch"] if kw["batch"] != "ok" else [task], delays=[kw["delay"]])

    return call


def _pop(kw: dict[str, Any]) -> Callable[[FairQueue], Any]:
    return lambda q: q.pop_batch(kw.pop("count"), **kw)


_ENQUEUE = {
    "name": "n", "payload": {"a": [1.5, None, "x"]}, "user_id": "u", "priority": 4,
    "delay": 0.01, "execute_after": None, "depends_on": (), "task_id": None,
    "max_retries": 2, "timeout": 5.0, "keep_result": True, "result_ttl": 60,
    "on_dependency_failure": "cancel",
}  # fmt: skip
_TASK = {k: v for k, v in _ENQUEUE.items() if k != "delay"} | {"batch": "ok", "delay": None}
_POP = {
    "count": 2, "worker_id": "w", "lease_seconds": 30.0, "assigned_users": ["u"],
    "steal_targets": ["*"],
}  # fmt: skip

_JUNK_CALLS = st.one_of(
    _spoil(_ENQUEUE).map(_enqueue),
    _spoil(_TASK).map(_push_many),
    _spoil(_POP).map(_pop),
    _spoil({"user_id": "u", "weight": 2, "max_in_flight": 3}).map(
        lambda kw: lambda q: q.set_user_limits(**kw)
    ),
    # an id no task has, so a valid timeout never waits
    _spoil({"task_id": "none", "timeout": 0.01, "consume": False}).map(
        lambda kw: lambda q: q.result(**kw)
    ),
    _spoil({"key": "k", "value": [1, 2.5], "ttl": 60}).map(lambda kw: lambda q: q.xcom_push(**kw)),
)


@pytest.fixture
def junk_queue(make_queue: MakeQueue) -> FairQueue:
    """One client on one fresh queue for every example of a run: the calls, not the
    client's start (a cluster's slot discovery each time), are what the examples test."""
    return make_queue(queue=unique_queue("junk"), max_payload_bytes=10_000)


@pytest.mark.server_kinds("valkey")  # input checks: one kind suffices
@_JUNK_SETTINGS
@given(call=_JUNK_CALLS)
def test_random_junk_raises_fairque_errors_only(
    junk_queue: FairQueue, redis_client: SyncClient, call: Callable[[FairQueue], Any]
) -> None:
    q = junk_queue
    before = queue_snapshot(redis_client, q.queue)
    try:
        call(q)
    except ResultTimeout:
        # a valid wait for a task an earlier example pushed: it registered as a waiter
        event("ResultTimeout")
    except FairqueError as exc:
        event(type(exc).__name__)
        after = queue_snapshot(redis_client, q.queue)
        # earlier examples' lease records may expire meanwhile: that is time, not the call
        now = server_ms(redis_client)

        def alive(snapshot: dict[str, tuple[bytes, int]]) -> dict[str, tuple[bytes, int]]:
            return {k: v for k, v in snapshot.items() if v[1] == -1 or v[1] > now}

        assert alive(after) == alive(before)
    else:
        event("accepted")


def test_a_failure_message_with_lone_surrogates_is_recorded_escaped(make_queue: MakeQueue) -> None:
    q = make_queue()
    q.enqueue("n", user_id="u")
    task = q.pop("w")
    assert task is not None
    # a handler's message built from bytes decoded with surrogateescape
    message = b"file \xff gone".decode("utf-8", "surrogateescape")
    assert q.fail(task, RuntimeError(message), retry=False) == TaskState.FAILED
    stored = q.get(str(task.task_id))
    assert stored is not None
    assert stored.error == "RuntimeError: file \\udcff gone"


def test_non_finite_floats_are_found_wherever_json_would_write_them() -> None:
    @dataclasses.dataclass
    class Point:
        x: float
        y: float

    class Level(enum.Enum):
        TOP = math.inf

    assert non_finite_path({"a": [1, {"b": (2.0, NAN)}]}) == "['a'][1]['b'][1]"
    assert non_finite_path([Point(1.0, -INF)]) == "[0].y"
    assert non_finite_path({"level": Level.TOP}) == "['level']"
    assert non_finite_path(NAN) == "the value itself"
    assert non_finite_path({"a": [None, "NaN", 1e308, Point(0.0, 0.0)]}) is None
    with pytest.raises(SerializationError, match=r"NaN or Infinity at \[0\]\.y"):
        get_serializer("json").dumps([Point(1.0, NAN)])
    # msgpack has NaN and Infinity: kept exactly
    packer = get_serializer("msgpack")
    assert packer.loads(packer.dumps([INF]))[0] == INF


@pytest.mark.parametrize(
    ("when", "ok"),
    [
        (datetime.now() + timedelta(days=1), True),  # naive: taken as UTC
        (datetime.now(timezone.utc) + timedelta(seconds=MAX_SECONDS - 86_400), True),
        (datetime(1969, 1, 1, tzinfo=timezone.utc), True),  # in the past: due now
        (datetime.max.replace(tzinfo=timezone(timedelta(hours=-12))), False),
        (datetime.min.replace(tzinfo=timezone(timedelta(hours=12))), True),
    ],
)
def test_execute_after_limits(when: datetime, ok: bool) -> None:
    if ok:
        assert Task(user_id="u", name="n", execute_after=when).execute_after is not None
    else:
        with pytest.raises(ValidationError, match="execute_after"):
            Task(user_id="u", name="n", execute_after=when)


def test_text_checks() -> None:
    assert check_text("", "worker_id", 10) == ""
    with pytest.raises(ValidationError, match="worker_id must not be empty"):
        check_text("", "worker_id", 10, empty=False)
    with pytest.raises(ValidationError, match="worker_id must be a string"):
        check_text(b"w", "worker_id", 10)
    assert error_text("plain") == "plain"
    assert error_text(ValueError("x")) == "ValueError: x"


def test_model_and_option_messages_carry_no_pydantic_prefix() -> None:
    """A validator's message reaches the caller as written, without ``Value error, ``."""
    with pytest.raises(ValidationError) as task_error:
        Task(name="x", user_id="u", priority=9)
    assert "Value error" not in str(task_error.value)
    assert "priority: must be an integer 1..5" in str(task_error.value)
    assert task_error.value.problems == (
        ("priority", "must be an integer 1..5 or 6 (CRITICAL), got 9"),
    )
    with pytest.raises(ConfigError) as option_error:
        QueueOptions.build(ordering="sideways")
    assert "Value error" not in str(option_error.value)
