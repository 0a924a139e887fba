"""Settings: defaults, YAML, ``FAIRQUE_...`` environment, explicit overrides, validation."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable
from pathlib import Path

import pydantic
import pytest

from fairque import ConfigError, WorkerConfig
from fairque.config import RedisSettings, Settings, default_worker_id, load_settings

WriteYaml = Callable[[str], Path]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No FAIRQUE_ variable of the calling environment leaks into a test."""
    for name in list(os.environ):
        if name.upper().startswith("FAIRQUE_"):
            monkeypatch.delenv(name)


@pytest.fixture
def write_yaml(tmp_path: Path) -> WriteYaml:
    def write(text: str) -> Path:
        path = tmp_path / "fairque.yaml"
        path.write_text(text)
        return path

    return write


FULL = """
redis:
  host: cache.internal
  port: 6380
  db: 2
  password: "s3cret"
  ssl: true
worker:
  id: worker-a
  assigned_users: [alice, bob]
  steal_targets: ["*"]
  poll_interval_seconds: 0.5
  task_timeout_seconds: 60
  max_concurrent_tasks: 4
queue:
  name: emails
  ordering: strict
  lease_seconds: 12
  max_retries: 5
"""


def test_defaults_without_file_or_environment() -> None:
    s = load_settings()
    assert isinstance(s, Settings)
    assert not s.redis.configured
    assert (s.redis.port, s.redis.db, s.redis.ssl, s.redis.cluster) == (6379, 0, False, None)
    assert s.worker.poll_interval_seconds == 1.0
    assert s.worker.task_timeout_seconds == 300.0
    assert s.worker.max_concurrent_tasks == 10
    assert (s.worker.assigned_users, s.worker.steal_targets) == ([], [])
    assert s.worker.lease_seconds is None
    assert s.queue.name == "default"
    assert s.queue.ordering == "aging"
    assert s.queue.options()["lease_seconds"] == 30.0
    assert "name" not in s.queue.options()
    assert load_settings().worker.id != s.worker.id  # a fresh id every time


def test_default_worker_id_is_host_pid_random() -> None:
    wid = default_worker_id()
    assert wid.startswith(f"{socket.gethostname()}-{os.getpid()}-")
    assert re.fullmatch(r"[0-9a-f]{6}", wid.rsplit("-", 1)[1])
    assert WorkerConfig().id != WorkerConfig().id


def test_yaml_file_with_host_fields(write_yaml: WriteYaml) -> None:
    s = load_settings(write_yaml(FULL))
    assert s.redis.configured
    assert s.redis.to_url() == "rediss://:s3cret@cache.internal:6380/2"
    assert s.worker.id == "worker-a"
    assert s.worker.assigned_users == ["alice", "bob"]
    assert s.worker.steal_targets == ["*"]
    assert s.worker.poll_interval_seconds == 0.5
    assert s.worker.task_timeout_seconds == 60
    assert s.worker.max_concurrent_tasks == 4
    assert s.queue.name == "emails"
    options = s.queue.options()
    assert (options["ordering"], options["lease_seconds"], options["max_retries"]) == (
        "strict",
        12,
        5,
    )
    assert options["retry_base_seconds"] == 1.0  # not in the file: the default


def test_yaml_file_with_url(write_yaml: WriteYaml) -> None:
    s = load_settings(str(write_yaml("redis:\n  url: redis://10.0.0.1:7000/3\n")))
    assert s.redis.to_url() == "redis://10.0.0.1:7000/3"
    assert s.worker.max_concurrent_tasks == 10


def test_empty_file_means_defaults(write_yaml: WriteYaml) -> None:
    assert load_settings(write_yaml("")).queue.name == "default"


def test_environment_beats_yaml_and_merges_with_it(
    write_yaml: WriteYaml, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAIRQUE_WORKER__MAX_CONCURRENT_TASKS", "20")
    monkeypatch.setenv("FAIRQUE_WORKER__ASSIGNED_USERS", '["carol"]')
    monkeypatch.setenv("FAIRQUE_REDIS__URL", "redis://env-host:6390/1")
    monkeypatch.setenv("fairque_queue__max_retries", "0")  # case-insensitive
    s = load_settings(write_yaml(FULL))
    assert s.worker.max_concurrent_tasks == 20
    assert s.worker.assigned_users == ["carol"]
    assert s.redis.to_url() == "redis://env-host:6390/1"
    assert s.queue.max_retries == 0
    assert s.worker.id == "worker-a"  # untouched keys still come from the file
    assert s.queue.ordering == "strict"


def test_environment_without_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRQUE_WORKER__STEAL_TARGETS", '["*"]')
    monkeypatch.setenv("FAIRQUE_QUEUE__NAME", "from-env")
    monkeypatch.setenv("FAIRQUE_REDIS__HOST", "h")
    s = load_settings()
    assert s.worker.steal_targets == ["*"]
    assert s.queue.name == "from-env"
    assert s.redis.to_url() == "redis://h:6379/0"


def test_explicit_overrides_beat_environment_and_none_is_ignored(
    write_yaml: WriteYaml, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAIRQUE_WORKER__ID", "from-env")
    monkeypatch.setenv("FAIRQUE_WORKER__MAX_CONCURRENT_TASKS", "20")
    path = write_yaml(FULL)
    s = load_settings(path, worker={"id": "x", "max_concurrent_tasks": None}, redis={"db": 5})
    assert s.worker.id == "x"
    assert s.worker.max_concurrent_tasks == 20  # None did not mask the environment
    assert s.redis.db == 5
    assert s.redis.host == "cache.internal"
    none_only = load_settings(path, worker={"id": None}, queue={}, redis=None)
    assert none_only.worker.id == "from-env"
    assert none_only.queue.name == "emails"


def test_settings_are_frozen() -> None:
    s = load_settings()
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        s.worker = WorkerConfig()


def test_every_invalid_key_is_named_with_its_value(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        "worker: {max_concurrent_tasks: abc, poll_interval_seconds: -1, bogus: 1,"
        " assigned_users: ['']}\n"
        "redis: {url: 'http://x', port: 70000}\n"
        "queue: {name: 'bad{name}', ordering: fifo}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    message = str(info.value)
    for fragment in (
        "worker.max_concurrent_tasks = 'abc'",
        "worker.poll_interval_seconds = -1",
        "worker.bogus = 1: Extra inputs are not permitted",
        "worker.assigned_users = ['']",
        "user ids must not be empty",
        "redis.url = 'http://x'",
        "must start with redis://",
        "redis.port = 70000",
        "queue.name = 'bad{name}'",
        "queue.ordering = 'fifo'",
    ):
        assert fragment in message


@pytest.mark.parametrize(
    ("env", "value", "fragment"),
    [
        ("FAIRQUE_WORKER__MAX_CONCURRENT_TASKS", "0", "worker.max_concurrent_tasks = '0'"),
        ("FAIRQUE_WORKER__TASK_TIMEOUT_SECONDS", "-5", "worker.task_timeout_seconds = '-5'"),
        ("FAIRQUE_WORKER__BOGUS", "1", "worker.bogus = '1'"),
        ("FAIRQUE_REDIS__URL", "localhost:6379", "redis.url = 'localhost:6379'"),
        ("FAIRQUE_REDIS__DB", "-1", "redis.db = '-1'"),
        ("FAIRQUE_QUEUE__NAME", "has space", "queue.name = 'has space'"),
        ("FAIRQUE_QUEUE__SERIALIZER", "pickle", "queue.serializer = 'pickle'"),
    ],
)
def test_invalid_environment_values_are_named(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, fragment: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        load_settings()


def test_invalid_explicit_override_is_named() -> None:
    with pytest.raises(ConfigError, match=re.escape("worker.id = ''")):
        load_settings(worker={"id": ""})


def test_malformed_json_list_in_environment_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAIRQUE_WORKER__ASSIGNED_USERS", "alice,bob")
    with pytest.raises(ConfigError, match="assigned_users"):
        load_settings()


def test_empty_yaml_section_means_defaults(write_yaml: WriteYaml) -> None:
    s = load_settings(write_yaml("worker:\nredis:\n  host: h\n"))
    assert s.worker.max_concurrent_tasks == 10


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("redis: [unclosed\n", "is not valid YAML"),
        ("- a\n- b\n", "must hold a mapping at the top level"),
        ("plain string\n", "must hold a mapping at the top level"),
        ("redis: {}\nworkers: {}\nextra: 1\n", "unknown section(s) ['extra', 'workers']"),
        ("worker: 5\n", "worker = 5: Input should be a valid dictionary"),
    ],
)
def test_bad_files(write_yaml: WriteYaml, text: str, message: str) -> None:
    path = write_yaml(text)
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        load_settings(path)
    if "section" in message or "YAML" in message or "mapping" in message:
        assert str(path) in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match=f"{re.escape(str(missing))} does not exist"):
        load_settings(missing)
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path)  # a directory is not a config file


@pytest.mark.parametrize(
    ("fields", "url"),
    [
        ({"host": "h"}, "redis://h:6379/0"),
        ({"host": "h", "port": 7000, "db": 3}, "redis://h:7000/3"),
        ({"host": "h", "password": "p@ss:w/rd%#?"}, "redis://:p%40ss%3Aw%2Frd%25%23%3F@h:6379/0"),
        ({"host": "h", "username": "u s", "password": "x"}, "redis://u%20s:x@h:6379/0"),
        ({"host": "h", "ssl": True, "db": 1}, "rediss://h:6379/1"),
        ({"url": "unix:///tmp/r.sock", "host": "ignored"}, "unix:///tmp/r.sock"),
        ({"url": "rediss://a:6380/0"}, "rediss://a:6380/0"),
    ],
)
def test_redis_url(fields: dict[str, object], url: str) -> None:
    settings = RedisSettings.model_validate(fields)
    assert settings.configured
    assert settings.to_url() == url
    assert "p@ss" not in repr(settings)  # the password is a secret


def test_redis_url_needs_a_server() -> None:
    settings = RedisSettings(port=7000)
    assert not settings.configured
    with pytest.raises(ConfigError, match=r"no Redis configured: set redis\.url or redis\.host"):
        settings.to_url()


def test_short_variables_name_the_url_and_the_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRQUE_QUEUE", "emails")
    monkeypatch.setenv("FAIRQUE_URL", "redis://cache:6380/2")
    s = load_settings()
    assert s.queue.name == "emails"
    assert s.redis.to_url() == "redis://cache:6380/2"
    monkeypatch.setenv("FAIRQUE_QUEUE__NAME", "other")  # the short one wins, as --queue reads it
    monkeypatch.setenv("FAIRQUE_QUEUE__LEASE_SECONDS", "12")
    s = load_settings()
    assert (s.queue.name, s.queue.lease_seconds) == ("emails", 12)
    assert load_settings(queue={"name": "given"}).queue.name == "given"
    monkeypatch.setenv("FAIRQUE_QUEUE", "bad name")
    with pytest.raises(ConfigError, match=re.escape("queue.name = 'bad name'")):
        load_settings()


def test_a_section_variable_that_is_not_json_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRQUE_WORKER", '{"id": "w9"}')  # a whole section as JSON
    assert load_settings().worker.id == "w9"
    monkeypatch.setenv("FAIRQUE_WORKER", "w9")
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert "FAIRQUE_WORKER = 'w9' is not valid JSON" in str(info.value)
    assert "FAIRQUE_WORKER__KEY" in str(info.value)


def test_messages_carry_no_pydantic_prefix(write_yaml: WriteYaml) -> None:
    path = write_yaml("redis: {url: 'http://x'}\nworker: {assigned_users: ['']}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert "Value error" not in str(info.value)
    assert "redis.url = 'http://x': must start with redis://" in str(info.value)


def test_a_yaml_error_names_the_file_and_line(write_yaml: WriteYaml) -> None:
    path = write_yaml("worker:\n  id: w1\n  imports: [a, b\nqueue: {}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    message = str(info.value)
    assert message.startswith(f"config file {path} is not valid YAML: line ")
    assert "<unicode string>" not in message
    assert "\n" not in message


def test_every_settings_section_may_be_in_the_file(write_yaml: WriteYaml) -> None:
    s = load_settings(write_yaml("server: {port: 8123}\ndispatch: {}\nqueue: {name: q}\n"))
    assert s.server.port == 8123
    with pytest.raises(ConfigError, match=r"unknown section\(s\) \['srever'\] \(known: "):
        load_settings(write_yaml("srever: {port: 1}\n"))


def test_unknown_task_names_are_given_back_unless_configured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert WorkerConfig().unknown_tasks == "give_back"
    monkeypatch.setenv("FAIRQUE_WORKER__UNKNOWN_TASKS", "fail")
    assert load_settings().worker.unknown_tasks == "fail"
    monkeypatch.setenv("FAIRQUE_WORKER__UNKNOWN_TASKS", "drop")
    with pytest.raises(ConfigError, match=re.escape("worker.unknown_tasks = 'drop'")):
        load_settings()


def test_metrics_buckets_are_checked_and_sorted(write_yaml: WriteYaml) -> None:
    good = load_settings(write_yaml("server: {metrics_buckets: [60, 0.01, 1, 1]}\n"))
    assert good.server.metrics_buckets == [0.01, 1, 60]
    with pytest.raises(ConfigError) as info:
        load_settings(write_yaml("server: {metrics_buckets: [0.0001, 1]}\n"))
    assert "server.metrics_buckets" in str(info.value)
    assert "between 0.001 and 86400 seconds" in str(info.value)
