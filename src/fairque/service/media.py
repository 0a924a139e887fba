"""Encodings of the HTTP API: JSON or MessagePack in, what ``Accept`` asks for out.

Errors are RFC 9457 problem details (``application/problem+json``, or MessagePack
when the client accepts only that), raised anywhere as ``ProblemError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from fairque.service.wire import (
    FieldError,
    Problem,
)

T = TypeVar("T")

JSON = "application/json"
PROBLEM_JSON = "application/problem+json"
MSGPACK_TYPES = ("application/msgpack", "application/x-msgpack", "application/vnd.msgpack")
#: the media types every body may use, in the order the spec lists them
BODY_TYPES = (JSON, *MSGPACK_TYPES)

_json = msgspec.json.Encoder()
_msgpack = msgspec.msgpack.Encoder()
_decoders: dict[tuple[type[Any] | Any, bool], Any] = {}


class ProblemError(Exception):
    """An answer that is a problem: its status, type slug, title and detail."""

    def __init__(
        self,
        status: int,
        kind: str,
        title: str,
        detail: str,
        *,
        errors: list[FieldError] | None = None,
        headers: Mapping[str, str] | None = None,
        task_state: str | None = None,
        tenant: str | None = None,
    ) -> None:
        super().__init__(detail)
        #: the tenant the refused request acted for (the audit line's; not answered)
        self.tenant = tenant
        self.problem = Problem(
            type=problem_type(kind), title=title, status=status, detail=detail, errors=errors,
            task_state=task_state,
        )  # fmt: skip
        self.headers = dict(headers or {})


#: every problem ``type`` the API answers (``urn:fairque:problem:<kind>``): its status
#: and what it means (the OpenAPI document and the reference page list them; a test
#: holds the code to this table)
PROBLEM_TYPES: dict[str, tuple[int, str]] = {
    "malformed-body": (400, "the body is not valid JSON or MessagePack"),
    "unauthorized": (401, "no bearer token, or one the server does not know"),
    "forbidden": (
        403,
        "the token's role may not do this, or the route reads or changes the whole queue"
        " and the token is held to some tenants",
    ),
    "forbidden-tenant": (403, "the token is held to some tenants, and this is another one"),
    "not-found": (404, "no such path"),
    "queue-not-found": (
        404,
        "this server does not serve the queue (the detail names those it does)",
    ),
    "task-not-found": (404, "the queue holds no task with this id (never pushed, or expired)"),
    "schedule-not-found": (404, "the queue has no schedule with this id"),
    "constraint-not-found": (404, "the queue has no constraint with this id"),
    "method-not-allowed": (405, "the path does not take this method (see Allow)"),
    "not-acceptable": (406, "Accept names no media type the API answers in"),
    "already-ended": (409, "the task has ended: it cannot be canceled"),
    "conflict": (409, "the request conflicts with the stored state"),
    "duplicate-task": (409, "a task with this id exists (on_duplicate: error)"),
    "invalid-transition": (409, "the task's state does not allow this (task_state says which)"),
    "lease-lost": (409, "the lease expired or another worker holds the task now"),
    "schedule-exists": (409, "a schedule with this id exists"),
    "task-id-taken": (
        409,
        "a tenant-scoped push chose an id that names a task of another tenant (only a token"
        " of the whole queue can have pushed it so); choose another",
    ),
    "body-too-large": (413, "the body is over server.max_body_bytes"),
    "payload-too-large": (413, "a payload is over the queue's max_payload_bytes"),
    "unsupported-media-type": (415, "Content-Type is not JSON or MessagePack"),
    "validation": (422, "a field or query parameter is invalid (errors lists each)"),
    "result-refused": (
        422,
        "the result is not serializable or over max_payload_bytes: the task was failed with"
        " the refusal as its error (task_state says where it went)",
    ),
    "quota-exceeded": (
        429,
        "the push would take its tenant past its backlog quota; nothing was pushed"
        " (retry after Retry-After)",
    ),
    "rate-limited": (429, "the token is over its request rate (retry after Retry-After)"),
    "too-many-bad-tokens": (
        429,
        "this address sent too many tokens the server does not know; every token it sends"
        " waits (retry after Retry-After)",
    ),
    "http-error": (400, "another HTTP error (the status says which)"),
    "internal": (500, "a bug: the server logged it"),
    "unavailable": (503, "the queue server does not answer (retry after Retry-After)"),
    "server-full": (
        503,
        "the queue server is at its memory limit and takes no new work; nothing was pushed"
        " (retry after Retry-After)",
    ),
}


def problem_type(kind: str) -> str:
    """The ``type`` URI of a problem kind (``lease-lost`` -> ``urn:fairque:problem:...``)."""
    return f"urn:fairque:problem:{kind}"


def _media(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


def body_media(content_type: str | None) -> str:
    """The request body's media type, or ``ProblemError`` 415."""
    media = _media(content_type or "")
    if media == JSON or media in MSGPACK_TYPES or media.endswith("+json"):
        return JSON if media.endswith("json") else media
    raise ProblemError(
        415,
        "unsupported-media-type",
        "Unsupported Media Type",
        f"request bodies are {', '.join(BODY_TYPES)}; got {content_type or 'no Content-Type'!r}",
    )


def decode(body: bytes, media: str, kind: type[T] | Any) -> T:
    """Decode and validate ``body`` as ``kind``, or ``ProblemError`` 422/400."""
    msgpack = media != JSON
    decoder = _decoders.get((kind, msgpack))
    if decoder is None:
        module = msgspec.msgpack if msgpack else msgspec.json
        decoder = _decoders[(kind, msgpack)] = module.Decoder(kind)
    try:
        return decoder.decode(body)  # type: ignore[no-any-return]
    except msgspec.ValidationError as exc:
        if _INTEGRAL not in str(exc):
            raise _invalid(exc) from None
        module = msgspec.msgpack if msgpack else msgspec.json
        fixed: T = convert(module.decode(body), kind)  # 47.0 where an integer goes
        return fixed
    except msgspec.DecodeError as exc:
        raise ProblemError(
            400, "malformed-body", "Bad Request", f"body is not {media}: {exc}"
        ) from None
    except RecursionError:
        raise ProblemError(
            422, "validation", "Unprocessable Content", "the body is nested too deeply",
            errors=[FieldError(field="body", message="nested too deeply")],
        ) from None  # fmt: skip


def convert(value: Any, kind: type[T]) -> T:
    """Validate an already decoded ``value`` as ``kind``, or ``ProblemError`` 422.

    JSON Schema counts ``47.0`` as an integer, and so does the API: where validation
    finds an integral float in place of an integer, that value alone (payloads keep
    their floats) is taken as the integer and the value is validated again.
    """
    fixes = 0
    while True:
        try:
            return msgspec.convert(value, kind)
        except msgspec.ValidationError as exc:
            fixes += 1
            if (
                fixes > MAX_INTEGRAL_FIXES
                or _INTEGRAL not in str(exc)
                or not _take_integral(value, str(exc))
            ):
                raise _invalid(exc) from None


#: msgspec's message for a float where an integer is expected
_INTEGRAL = "got `float`"
#: integral floats taken as integers in one body at most
MAX_INTEGRAL_FIXES = 64


def _take_integral(value: Any, message: str) -> bool:
    """Replace the integral float at the path ``message`` names by its integer;
    False when the value there is no integral float."""
    path = split_validation(message)[0]
    if path == "body":
        return False
    steps: list[str | int] = []
    for part in path.split("."):
        name, _, rest = part.partition("[")
        if name:
            steps.append(name)
        steps += [int(i) for i in rest.rstrip("]").split("][") if i] if rest else []
    parent: Any = None
    node: Any = value
    for step in steps:
        try:
            parent, node = node, node[step]
        except (KeyError, IndexError, TypeError):
            return False
    if parent is None or not isinstance(node, float) or not node.is_integer():
        return False
    parent[steps[-1]] = int(node)
    return True


def _invalid(exc: msgspec.ValidationError) -> ProblemError:
    field, message = split_validation(str(exc))
    return ProblemError(
        422, "validation", "Unprocessable Content", f"{field}: {message}",
        errors=[FieldError(field=field, message=message)],
    )  # fmt: skip


def split_validation(text: str) -> tuple[str, str]:
    """msgspec's ``Expected ... - at `$.tasks[0].name``` as (field path, message)."""
    message, sep, where = text.rpartition(" - at `")
    if not sep:
        return "body", text
    path = where.rstrip("`").removeprefix("$").lstrip(".") or "body"
    return path, message


def _ranges(accept: str) -> list[tuple[float, str]]:
    out = []
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if media and 0 < q <= 1:
            out.append((q, media.lower()))
    return sorted(out, key=lambda r: -r[0])


def response_media(accept: str | None, *, problem: bool = False) -> str | None:
    """The media type to answer in, or None when ``Accept`` allows none we speak."""
    if not accept or not accept.strip():
        return PROBLEM_JSON if problem else JSON
    for _, media in _ranges(accept):
        if media in MSGPACK_TYPES:
            return media
        if media in (JSON, "application/*", "*/*") or (problem and media == PROBLEM_JSON):
            return PROBLEM_JSON if problem else JSON
    return None


def negotiate(accept: str | None) -> str:
    """The media type for a success answer, or ``ProblemError`` 406."""
    media = response_media(accept)
    if media is None:
        raise ProblemError(
            406, "not-acceptable", "Not Acceptable",
            f"answers are {', '.join(BODY_TYPES)}; Accept asked for {accept!r}",
        )  # fmt: skip
    return media


def encode(value: Any, media: str) -> bytes:
    """``value`` in ``media`` (JSON or MessagePack)."""
    return _msgpack.encode(value) if media in MSGPACK_TYPES else _json.encode(value)


def problem_media(accept: str | None) -> str:
    """How to send a problem: MessagePack when asked for, else problem+json."""
    media = response_media(accept, problem=True)
    return media if media in MSGPACK_TYPES else PROBLEM_JSON
