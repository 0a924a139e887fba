"""The OpenAPI 3.1 document of the HTTP API, built from the route table and the wire
structs (``docs/openapi.json`` is this document with sorted keys)."""

from __future__ import annotations

import functools
import json
import types
import typing
from typing import Any

import msgspec

from fairque.service import wire, wire_pull
from fairque.service.dispatch import DispatchJob
from fairque.service.media import (
    BODY_TYPES,
    MSGPACK_TYPES,
    PROBLEM_JSON,
    PROBLEM_TYPES,
    problem_type,
)
from fairque.service.routes import ROUTES, Route
from fairque.service.wire import (
    ConstraintId,
    Identifier,
    Problem,
    QueueName,
    ScheduleId,
)
from fairque.service.wire_pull import (
    WorkerFailure,
    WorkerSuccess,
)

REF = "#/components/schemas/{name}"

_TITLES = {
    200: "OK", 201: "Created", 202: "Accepted (the task has not ended yet)",
    400: "Malformed body", 401: "No valid bearer token", 403: "The token's role may not do this",
    404: "Not found", 405: "Method not allowed", 406: "Accept names no type this API speaks",
    409: "Conflict (lease lost, already ended...)", 413: "Body too large",
    415: "Body media type not supported", 422: "Validation failed",
    429: "Over the tenant's or its group's backlog quota (retry after Retry-After)",
    503: "The queue server is unavailable or at its memory limit (retry after Retry-After)",
}  # fmt: skip

#: each path parameter: its description and the rule the server applies to it
_PATH_PARAMS: dict[str, tuple[str, Any]] = {
    "queue": ("queue name", QueueName),
    "task_id": ("task id", Identifier),
    "user_id": ("user (tenant) id", Identifier),
    "group_id": ("group id", Identifier),
    "schedule_id": ("schedule id", ScheduleId),
    "constraint_id": ("constraint id", ConstraintId),
}

#: every struct the OpenAPI documents name, in one place
SCHEMAS: tuple[Any, ...] = (
    wire.TaskIn, wire.TaskBatchIn, wire.TaskOut, wire.TaskBatchOut, wire.TaskPage,
    wire_pull.LeaseIn, wire_pull.LeasedTask, wire_pull.LeasesOut, wire_pull.WorkerSuccess,
    wire_pull.WorkerFailure, wire_pull.SuccessIn, wire_pull.FailureIn, wire_pull.SuccessItem,
    wire_pull.FailureItem, wire_pull.OutcomeBatchIn, wire_pull.OutcomeOut, wire.Problem,
    wire.FieldError, wire_pull.OutcomeItemOut, wire_pull.OutcomeBatchOut, wire_pull.ExtendIn,
    wire_pull.ExtendOut, wire.ResultSuccess, wire.ResultFailure, wire.Pending, wire.QueuesOut,
    wire.QueueInfo, wire.StatsOut, wire.UsersOut, wire.UserLoad, wire.WorkersOut,
    wire.WorkerOut, wire.PurgeOut, wire.FairnessIn, wire.FairnessOut, wire.TenantOut,
    wire.TenantsOut,
)  # fmt: skip


def _content(schema: dict[str, Any], types: tuple[str, ...]) -> dict[str, Any]:
    return {media: {"schema": schema} for media in types}


def _members(kind: Any) -> tuple[Any, ...]:
    return typing.get_args(kind) if isinstance(kind, types.UnionType) else (kind,)


def _schemas(routes: tuple[Route, ...]) -> tuple[dict[Any, dict[str, Any]], dict[str, Any]]:
    """Schemas of every body; a union is ``anyOf`` its members (msgspec cannot take
    untagged unions of structs, such as one task or a batch)."""
    used: list[Any] = []
    for spec in routes:
        if spec.body is not None:
            used.append(spec.body)
        used.extend(kind for _, kind in spec.responses)
    members = list(dict.fromkeys(m for kind in used for m in _members(kind)))
    kinds = list(dict.fromkeys([*SCHEMAS, DispatchJob, *members]))
    found, components = msgspec.json.schema_components(kinds, ref_template=REF)
    one = dict(zip(kinds, found, strict=True))
    out = {}
    for kind in used:
        parts = [one[m] for m in _members(kind)]
        out[kind] = parts[0] if len(parts) == 1 else {"anyOf": parts}
    # rules across fields that a struct cannot state: a constraint limits by a rate, a
    # concurrency or both; a schedule fires by a cron expression or an interval
    for name, rule, fields in (
        ("ConstraintIn", "anyOf", {"rate": "integer", "concurrency": "integer"}),
        ("ScheduleIn", "oneOf", {"cron": "string", "interval_seconds": "number"}),
        ("ScheduleAddIn", "oneOf", {"cron": "string", "interval_seconds": "number"}),
    ):
        if name in components:
            components[name][rule] = [
                {"required": [field], "properties": {field: {"type": kind}}}
                for field, kind in fields.items()
            ]
    return out, components


def _operation(spec: Route, schemas: dict[Any, dict[str, Any]]) -> dict[str, Any]:
    params = [
        {"name": name, "in": "path", "required": True, "description": text,
         "schema": msgspec.json.schema(kind)}
        for name, (text, kind) in _PATH_PARAMS.items()
        if "{" + name + "}" in spec.path
    ]  # fmt: skip
    params += [
        {"name": q.name, "in": "query", "required": False, "description": q.description,
         "schema": q.schema}
        for q in spec.query
    ]  # fmt: skip
    responses: dict[str, Any] = {}
    for status, kind in spec.responses:
        responses[str(status)] = {
            "description": _TITLES[status],
            "content": _content(schemas[kind], BODY_TYPES),
        }
    codes = {401, 403, 406, 503, *spec.errors}
    if spec.has_queue:
        codes.add(404)
    if spec.body is not None:
        codes |= {400, 413, 415, 422}
    if spec.query or any(f"{{{p}}}" in spec.path for p in ("task_id", "user_id", "group_id")):
        codes.add(422)
    if "{schedule_id}" in spec.path:
        codes.add(422)
    problem = {"$ref": REF.format(name=Problem.__name__)}
    for status in sorted(codes):
        responses[str(status)] = {
            "description": _TITLES[status],
            "content": _content(problem, (PROBLEM_JSON, *MSGPACK_TYPES)),
        }
    out: dict[str, Any] = {
        "operationId": spec.operation_id,
        "summary": spec.summary,
        "description": (spec.operation.__doc__ or "").strip()
        + f"\n\nRoles: {', '.join(sorted(spec.roles))}.",
        "parameters": params,
        "responses": responses,
    }
    if spec.body is not None:
        out["requestBody"] = {"required": True, "content": _content(schemas[spec.body], BODY_TYPES)}
    return out


def openapi() -> dict[str, Any]:
    """The API's OpenAPI 3.1 document."""
    schemas, components = _schemas(ROUTES)
    paths: dict[str, Any] = {}
    for spec in ROUTES:
        paths.setdefault(spec.path, {})[spec.method.lower()] = _operation(spec, schemas)
    paths.update(_probes())
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "fairque",
            "version": "1",
            "description": (
                "A fair, multi-tenant task queue over HTTP. Bodies are JSON or MessagePack "
                "(application/msgpack, application/x-msgpack, application/vnd.msgpack); "
                "answers follow Accept (JSON by default); errors are RFC 9457 problem "
                "details. Times are ISO 8601 UTC."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
        "x-problem-types": {
            problem_type(kind): {"status": status, "meaning": meaning}
            for kind, (status, meaning) in PROBLEM_TYPES.items()
        },
    }


def _probes() -> dict[str, Any]:
    """``/healthz`` (liveness) and ``/readyz`` (readiness): no token needed."""
    status = {
        "type": "object", "required": ["status"],
        "properties": {
            "status": {"type": "string"},
            "warnings": {"type": "array", "items": {"type": "string"}},
        },
    }  # fmt: skip
    problem = {"$ref": REF.format(name="Problem")}

    def probe(op: str, summary: str, description: str, ok: str) -> dict[str, Any]:
        answers: dict[str, Any] = {
            "200": {"description": ok, "content": _content(status, ("application/json",))}
        }
        if op == "ready":
            answers["503"] = {
                "description": _TITLES[503], "content": _content(problem, (PROBLEM_JSON,)),
            }  # fmt: skip
        return {"get": {
            "operationId": op, "summary": summary, "description": description,
            "security": [], "tags": ["probes"], "responses": answers,
        }}  # fmt: skip

    return {
        "/healthz": probe(
            "health",
            "Liveness: the process answers",
            '200 {"status": "ok"} whenever the process serves requests; it does not '
            "look at the queue server (a liveness probe should not restart the service "
            "because Redis is away).",
            "The process is up",
        ),
        "/readyz": probe(
            "ready",
            "Readiness: the queue server answers",
            '200 {"status": "ready"} when the queue server answers a command now, with '
            '"warnings" when it would lose tasks at its memory limit (an evicting '
            "maxmemory-policy; the instance stays ready); 503 with a problem when it "
            "does not answer (take the instance out of rotation).",
            "The queue server answers",
        ),
    }


@functools.cache
def openapi_bytes() -> bytes:
    """The document as served: JSON with sorted keys (the committed file's form)."""
    return (json.dumps(openapi(), indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def worker_openapi() -> dict[str, Any]:
    """The contract of an HTTP push worker, the endpoint ``fairque dispatch`` POSTs to."""
    kinds = [DispatchJob, WorkerSuccess | WorkerFailure]
    (job, reply), components = msgspec.json.schema_components(kinds, ref_template=REF)
    operation = {
        "operationId": "run_job",
        "summary": "Run one job and answer with its result message",
        "description": (
            "The URL is the one configured in dispatch.endpoints[].url. The job comes as "
            "MessagePack (application/msgpack); answer 200 with a result message in "
            "MessagePack or JSON. A failure message's should_retry decides whether the "
            "task is retried. A 5xx answer, a connection error or no answer within "
            "timeout_seconds is a retryable failure; any other non-2xx answer fails the "
            "task for good. The same job may come again (at-least-once): task_id and "
            "attempt identify it."
        ),
        "requestBody": {"required": True, "content": _content(job, ("application/msgpack",))},
        "responses": {
            "200": {"description": "The result message", "content": _content(reply, BODY_TYPES)},
            "4XX": {"description": "The job is refused: the task fails without retry"},
            "5XX": {"description": "Trouble: the task is retried (with backoff)"},
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "fairque push worker",
            "version": "1",
            "description": "What an HTTP worker implements to receive jobs from fairque dispatch.",
        },
        "paths": {"/": {"post": operation}},
        "components": {"schemas": components},
    }


def worker_openapi_bytes() -> bytes:
    """``worker_openapi`` as committed in ``docs/worker-openapi.json``."""
    return (
        json.dumps(worker_openapi(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    ).encode()
