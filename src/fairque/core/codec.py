"""Payload and result serializers: JSON (orjson) by default, msgpack optional."""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from fairque.core.checks import non_finite_path
from fairque.errors import ConfigError, SerializationError


class Serializer(Protocol):
    """Turns Python values into bytes and back."""

    name: str

    def dumps(self, value: Any) -> bytes:
        """Serialize ``value``; raise ``SerializationError`` when it cannot be."""
        ...

    def loads(self, data: bytes) -> Any:
        """Deserialize ``data``; raise ``SerializationError`` when it is invalid."""
        ...


class JsonSerializer:
    """JSON through orjson (str keys, no NaN or Infinity, no arbitrary objects)."""

    name = "json"

    def dumps(self, value: Any) -> bytes:
        try:
            data = orjson.dumps(value)
        except TypeError as exc:
            raise SerializationError(f"value is not JSON serializable: {exc}") from exc
        # orjson writes NaN and Infinity as null; only a value whose JSON holds a null
        # can hold one, so the common value costs one substring search (find: ``in``
        # would first try the operand as an integer and build an exception)
        if data.find(b"null") != -1:
            where = non_finite_path(value)
            if where is not None:
                raise SerializationError(
                    f"value is not JSON serializable: NaN or Infinity at {where} "
                    "(JSON has no such number)"
                )
        return data

    def loads(self, data: bytes) -> Any:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise SerializationError(f"stored value is not valid JSON: {exc}") from exc


class MsgpackSerializer:
    """MessagePack (requires the ``msgpack`` extra)."""

    name = "msgpack"

    def __init__(self) -> None:
        try:
            import msgpack
        except ImportError as exc:  # pragma: no cover - depends on the environment
            from fairque.extras import install_hint

            raise ConfigError(
                f"serializer='msgpack' needs the msgpack package: {install_hint('msgpack')}"
            ) from exc
        self._msgpack = msgpack

    def dumps(self, value: Any) -> bytes:
        try:
            data: bytes = self._msgpack.packb(value, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as exc:
            raise SerializationError(f"value is not msgpack serializable: {exc}") from exc
        return data

    def loads(self, data: bytes) -> Any:
        try:
            return self._msgpack.unpackb(data, raw=False, strict_map_key=False)
        except Exception as exc:
            raise SerializationError(f"stored value is not valid msgpack: {exc}") from exc


def get_serializer(name: str | Serializer) -> Serializer:
    """Return the serializer called ``name`` (``"json"`` or ``"msgpack"``) or ``name`` itself.

    Raises:
        ConfigError: unknown serializer name.
    """
    if not isinstance(name, str):
        return name
    if name == "json":
        return JsonSerializer()
    if name == "msgpack":
        return MsgpackSerializer()
    raise ConfigError(f"serializer must be 'json' or 'msgpack', got {name!r}")
