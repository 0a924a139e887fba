"""Settings for workers and the CLI: YAML file, ``FAIRQUE_...`` environment, arguments.

Precedence, highest first: explicit arguments (the CLI's options), environment
variables (``FAIRQUE_WORKER__MAX_CONCURRENT_TASKS=20``; nested keys joined by ``__``,
lists as JSON), the YAML file, the defaults.  Every error names the bad key and value.

``FAIRQUE_URL`` and ``FAIRQUE_QUEUE`` (the environment variables of the CLI's
``--url`` and ``--queue``) are short for ``FAIRQUE_REDIS__URL`` and
``FAIRQUE_QUEUE__NAME``, and win over them when both are set. ``FAIRQUE_REDIS``,
``FAIRQUE_WORKER``... hold a whole section as a JSON object.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_origin
from urllib.parse import quote

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from fairque.common.urls import plain_scheme
from fairque.constraints.model import Constraint, constraint_list
from fairque.core.keys import validate_queue_name
from fairque.core.options import QueueOptions
from fairque.errors import ConfigError, ValidationError, pydantic_message
from fairque.service.settings import DispatchSettings, ServerSettings


def default_worker_id() -> str:
    """``<host>-<pid>-<random>``: unique across hosts and restarts."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class RedisSettings(BaseModel):
    """Where the server is: ``url``, or ``host``/``port``/``db``/``password``/``ssl``."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = None
    host: str | None = None
    port: int = Field(default=6379, ge=1, le=65535)
    db: int = Field(default=0, ge=0)
    username: str | None = None
    password: SecretStr | None = None
    ssl: bool = False
    cluster: bool | None = None

    @field_validator("url")
    @classmethod
    def _scheme(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = plain_scheme(value)
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss://, unix:// (or valkey://)")
        return value

    @property
    def configured(self) -> bool:
        """True when a server was named (url or host)."""
        return bool(self.url or self.host)

    def to_url(self) -> str:
        """The connection URL (``url`` as given, else built from the host fields)."""
        if self.url:
            return self.url
        if not self.host:
            raise ConfigError("no Redis configured: set redis.url or redis.host")
        auth = ""
        if self.password is not None:
            user = quote(self.username or "", safe="")
            auth = f"{user}:{quote(self.password.get_secret_value(), safe='')}@"
        scheme = "rediss" if self.ssl else "redis"
        return f"{scheme}://{auth}{self.host}:{self.port}/{self.db}"


class WorkerConfig(BaseModel):
    """How a worker runs (the ``worker:`` section of the YAML file)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    id: str = Field(default_factory=default_worker_id, min_length=1, max_length=200)
    #: the queues this worker serves, fairly across them as well as within each
    #: (empty: the one named by the ``queue:`` section); every one takes the
    #: ``queue:`` section's options
    queues: list[str] = Field(default_factory=list, max_length=100)
    assigned_users: list[str] = Field(default_factory=list)
    steal_targets: list[str] = Field(default_factory=list)
    #: accepted for compatibility and has no effect: an idle worker does not poll, it
    #: blocks on the queue's wake-up list (a push, a retry or a give-back wakes it at
    #: once; a due time or a lease expiry ends its wait by itself)
    poll_interval_seconds: float = Field(default=1.0, gt=0, le=300)
    task_timeout_seconds: float = Field(default=300.0, gt=0)
    max_concurrent_tasks: int = Field(default=10, ge=1, le=10_000)
    #: tasks the worker may hold leased ahead of a free slot, so that a slot's next
    #: task is at hand when its handler ends (at most one per slot; None: one per
    #: slot; 0: none). A task leased ahead waits for this worker even while another
    #: is idle: with long tasks and several workers, a small value (or 0) spreads
    #: them better.
    lease_ahead: int | None = Field(default=None, ge=0, le=10_000)
    batch_size: int = Field(default=50, ge=1, le=1000)
    lease_seconds: float | None = Field(default=None, gt=0)
    heartbeat_interval_seconds: float | None = Field(default=None, gt=0)
    shutdown_grace_seconds: float = Field(default=30.0, ge=0)
    #: how long a sync handler whose task was canceled (or whose lease was lost) may
    #: run on after ``ctx.cancelled`` turns true before the worker gives up on its
    #: thread (an async handler is cancelled at once)
    cancel_grace_seconds: float = Field(default=5.0, ge=0, le=3600)
    #: how long a starting worker waits for an unreachable server before it gives up
    wait_for_server_seconds: float = Field(default=30.0, ge=0, le=86_400)
    #: seconds between maintenance rounds (dependency clean-up, registry trims); 0 = none
    maintenance_interval_seconds: float = Field(default=60.0, ge=0, le=86_400)
    #: seconds between the worker's summary lines (tasks finished and failed since the
    #: last line); 0 = none. A finished task has no line of its own at INFO.
    summary_interval_seconds: float = Field(default=10.0, ge=0, le=86_400)
    imports: list[str] = Field(default_factory=list)
    #: a leased task whose name has no handler in this worker: "give_back" returns it
    #: to the queue for another worker (no attempt counted, not failed); "fail" fails
    #: the attempt as a raising handler would (retried, then FAILED)
    unknown_tasks: Literal["give_back", "fail"] = "give_back"
    #: how long a task given back for its unknown name waits before any worker may
    #: lease it again (so a name no worker handles does not spin)
    unknown_task_delay_seconds: float = Field(default=5.0, gt=0, le=3600)
    #: exit (gracefully) once a lease request finds nothing ready while nothing runs
    #: and no outcome waits to be reported; scheduled tasks not yet due are left
    burst: bool = False

    @model_validator(mode="after")
    def _ahead(self) -> WorkerConfig:
        if self.lease_ahead is not None and self.lease_ahead > self.max_concurrent_tasks:
            raise ValueError(
                f"lease_ahead ({self.lease_ahead}) must be at most max_concurrent_tasks "
                f"({self.max_concurrent_tasks}): one task ahead per slot"
            )
        return self

    @property
    def ahead(self) -> int:
        """Tasks leased ahead at most (``lease_ahead``; one per slot when None)."""
        return self.max_concurrent_tasks if self.lease_ahead is None else self.lease_ahead

    @field_validator("queues")
    @classmethod
    def _queues(cls, value: list[str]) -> list[str]:
        for name in value:
            try:
                validate_queue_name(name)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        if len(set(value)) < len(value):
            raise ValueError("a queue is named twice")
        return value

    @field_validator("assigned_users", "steal_targets")
    @classmethod
    def _users(cls, value: list[str]) -> list[str]:
        if any(not u for u in value):
            raise ValueError("user ids must not be empty")
        return value


class QueueSettings(QueueOptions):
    """The ``queue:`` section: the queue name plus every queue option."""

    # environment variables are text: read "30" as a number here (never True)
    model_config = ConfigDict(strict=False)

    name: str = "default"

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        try:
            return validate_queue_name(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    def options(self) -> dict[str, Any]:
        """The queue options as keywords for ``FairQueue``."""
        return self.model_dump(exclude={"name"})


class SchedulerSettings(BaseModel):
    """The ``scheduler:`` section (``fairque scheduler``, ``fairque worker --scheduler``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the leader lock's TTL: a dead leader is replaced within it (renewed every third)
    lock_ttl_seconds: float = Field(default=10.0, ge=0.1, le=3600, allow_inf_nan=False)


class Settings(BaseSettings):
    """Everything a worker or the CLI needs: ``redis``, ``worker`` and ``queue``."""

    @property
    def worker_queues(self) -> list[str]:
        """The queues a worker serves: ``worker.queues``, else the ``queue:`` section's name."""
        return list(self.worker.queues) or [self.queue.name]

    model_config = SettingsConfigDict(
        env_prefix="FAIRQUE_", env_nested_delimiter="__", extra="ignore", frozen=True
    )

    redis: RedisSettings = Field(default_factory=RedisSettings)
    worker: WorkerConfig = Field(default_factory=WorkerConfig)
    queue: QueueSettings = Field(default_factory=QueueSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    dispatch: DispatchSettings = Field(default_factory=DispatchSettings)
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    #: constraints to define on the queue (``fairque.constraints.model``): a list of mappings,
    #: or a mapping id -> fields; ``fairque constraint apply`` and ``fairque worker``
    #: define them at start (constraints not listed are left alone)
    constraints: list[dict[str, Any]] | dict[str, dict[str, Any]] = Field(default_factory=list)

    @field_validator("constraints")
    @classmethod
    def _constraints(
        cls, value: list[dict[str, Any]] | dict[str, dict[str, Any]]
    ) -> list[dict[str, Any]] | dict[str, dict[str, Any]]:
        try:
            constraint_list(value)
        except ValidationError as exc:
            raise ValueError(str(exc)) from None
        return value

    def constraint_definitions(self) -> list[Constraint]:
        """The ``constraints:`` section as constraints."""
        return constraint_list(self.constraints)


#: short environment variables -> the nested variable they stand for
SHORT_VARIABLES = {"FAIRQUE_URL": "FAIRQUE_REDIS__URL", "FAIRQUE_QUEUE": "FAIRQUE_QUEUE__NAME"}


class _Environment(EnvSettingsSource):
    """``FAIRQUE_...`` variables, with ``FAIRQUE_URL`` and ``FAIRQUE_QUEUE`` as shorthands.

    ``FAIRQUE_QUEUE`` is the queue's name (``--queue`` reads it), never the
    ``queue:`` section as JSON.
    """

    def _load_env_vars(self) -> Mapping[str, str | None]:
        env = dict(super()._load_env_vars())
        for short, nested in SHORT_VARIABLES.items():
            if not self.case_sensitive:
                short, nested = short.lower(), nested.lower()
            value = env.pop(short, None)
            if value is not None:
                env[nested] = value
        return env


def _describe(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        shown = err.get("input")
        value = "" if isinstance(shown, dict) else f" = {shown!r}"
        parts.append(f"{key}{value}: {pydantic_message(err)}")
    return "; ".join(parts)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """One line: where the YAML parser stopped (line, column) and why."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"
    return " ".join(str(exc).split())


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {_yaml_problem(exc)}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc}") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    unknown = {str(k) for k in data or {}} - set(Settings.model_fields)
    if unknown:
        raise ConfigError(
            f"config file {path}: unknown section(s) {sorted(unknown)} "
            f"(known: {', '.join(Settings.model_fields)})"
        )
    # a section whose keys are all commented out reads as None: it means the defaults
    return {section: values or {} for section, values in (data or {}).items()}


def _env_problem(environ: Mapping[str, str]) -> str:
    """Name the ``FAIRQUE_`` variables holding a list or mapping that is not valid JSON."""
    bad = []
    for section in Settings.model_fields:
        var = f"FAIRQUE_{section.upper()}"
        value = environ.get(var)
        if value is None or var in SHORT_VARIABLES:
            continue
        try:
            json.loads(value)
        except ValueError:
            bad.append(
                f"{var} = {value!r} is not valid JSON (it holds the whole {section}: "
                f"section, e.g. '{{\"key\": 1}}'; set one key with {var}__KEY)"
            )
    for section, model in (
        ("redis", RedisSettings),
        ("worker", WorkerConfig),
        ("queue", QueueSettings),
    ):
        for field, info in model.model_fields.items():
            if get_origin(info.annotation) not in (list, dict):
                continue
            var = f"FAIRQUE_{section.upper()}__{field.upper()}"
            value = environ.get(var)
            if value is None:
                continue
            try:
                json.loads(value)
            except ValueError:
                bad.append(
                    f"{section}.{field} ({var} = {value!r}) is not valid JSON "
                    """(write lists as '["a", "b"]')"""
                )
    return "; ".join(bad) or "an environment variable could not be parsed"


def load_settings(config: str | Path | None = None, **overrides: Any) -> Settings:
    """Read settings from ``config`` (YAML), the environment and ``overrides``.

    ``overrides`` are nested dicts by section, e.g. ``worker={"id": "w1"}``; None
    values are ignored so CLI options that were not given do not mask the file.

    Raises:
        ConfigError: the file is missing or invalid, or a value is invalid (the
            message names each bad key and its value).
    """
    yaml_path = Path(config) if config is not None else None
    file_values = _read_yaml(yaml_path) if yaml_path is not None else None
    cleaned = {
        section: {k: v for k, v in values.items() if v is not None}
        for section, values in overrides.items()
        if values
    }

    class _Loader(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            sources: list[PydanticBaseSettingsSource] = [init_settings, _Environment(settings_cls)]
            if file_values is not None:
                sources.append(InitSettingsSource(settings_cls, init_kwargs=file_values))
            return tuple(sources)

    try:
        loaded = _Loader(**cleaned)  # type: ignore[arg-type]
    except pydantic.ValidationError as exc:
        raise ConfigError(f"invalid configuration: {_describe(exc)}") from None
    except SettingsError:
        raise ConfigError(f"invalid configuration: {_env_problem(os.environ)}") from None
    return Settings.model_construct(
        **{name: getattr(loaded, name) for name in Settings.model_fields}
    )
