"""The OpenAPI document: committed file = served document, valid, and the live API
conforms to it (schemathesis, a bounded number of examples per operation)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import schemathesis
from hypothesis import HealthCheck, given, reject, settings
from openapi_spec_validator import validate
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from fairque.service.media import BODY_TYPES, MSGPACK_TYPES
from fairque.service.spec import openapi_bytes
from service.harness import Api, LiveServer

DOC = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
WORKER_DOC = DOC.with_name("worker-openapi.json")
EXAMPLES = 12


@schemathesis.serializer(*MSGPACK_TYPES)
def _pack(ctx: Any, value: Any) -> bytes:
    try:
        return msgspec.msgpack.encode(value)
    except OverflowError:  # an integer MessagePack cannot carry: no request to make
        reject()


@schemathesis.deserializer(*MSGPACK_TYPES)
def _unpack(ctx: Any, response: Any) -> Any:
    return msgspec.msgpack.decode(response.content)


def test_committed_document_is_the_served_one(api: Api) -> None:
    served = api.call("GET", "/openapi.json")
    assert served.status_code == 200
    assert DOC.read_bytes() == served.content == openapi_bytes(), (
        "docs/openapi.json is stale: regenerate it with "
        "python -c 'from fairque.service.spec import openapi_bytes; "
        'open("docs/openapi.json", "wb").write(openapi_bytes())\''
    )


def test_document_is_valid_and_declares_both_encodings() -> None:
    doc = json.loads(DOC.read_text())
    validate(doc)
    validate(json.loads(WORKER_DOC.read_text()))
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            bodies = [op.get("requestBody", {"content": dict.fromkeys(BODY_TYPES)})]
            bodies += list(op["responses"].values())
            for body in bodies:
                types = set(body["content"])
                assert set(MSGPACK_TYPES) <= types, (path, method)
                assert types & {"application/json", "application/problem+json"}, (path, method)


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
def test_live_api_conforms(live: LiveServer) -> None:
    schema = schemathesis.openapi.from_url(live.base + "/openapi.json")
    queue = live.service.names[0]
    checks = (
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
    )
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()  # type: ignore[union-attr]

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
            suppress_health_check=list(HealthCheck),
        )  # fmt: skip
        def run(case: Any) -> None:
            if "queue" in (case.path_parameters or {}):
                case.path_parameters["queue"] = queue
            # keep waits short: the generator likes the maximum
            if isinstance(case.body, dict) and "wait_seconds" in case.body:
                case.body["wait_seconds"] = 0
            if case.query and "wait_seconds" in case.query:
                case.query["wait_seconds"] = 0
            response = case.call(timeout=30)
            case.validate_response(response, checks=checks)

        try:
            run()
        except Exception as exc:
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)
