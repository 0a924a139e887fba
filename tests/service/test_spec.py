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
from hypothesis.errors import Unsatisfiable
from openapi_spec_validator import validate
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from fairque.errors import FairqueError
from fairque.service.convert import task_from_wire
from fairque.service.handlers import MAX_RESULT_WAIT
from fairque.service.media import BODY_TYPES, MSGPACK_TYPES, ProblemError
from fairque.service.schedules import ScheduleIn, schedule_from_wire
from fairque.service.spec import openapi_bytes
from fairque.service.wire import (
    TaskIn,
)
from service.harness import Api, LiveServer

DOC = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
WORKER_DOC = DOC.with_name("worker-openapi.json")
EXAMPLES = 25
#: the longest wait a lease body may ask for (wire.py) and a result query's
MAX_LEASE_WAIT = 20.0


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
            if op.get("tags") == ["probes"]:
                continue  # /healthz and /readyz answer JSON alone, for any prober
            bodies = [op.get("requestBody", {"content": dict.fromkeys(BODY_TYPES)})]
            bodies += list(op["responses"].values())
            for body in bodies:
                types = set(body["content"])
                assert set(MSGPACK_TYPES) <= types, (path, method)
                assert types & {"application/json", "application/problem+json"}, (path, method)


def _positive(value: Any, limit: float) -> bool:
    """A number above 0 and at most ``limit`` (as JSON or as query text): a wait the
    server would honour. One above the limit is left alone: in the negative mode it is
    the broken value, and the server refuses it without waiting."""
    try:
        return not isinstance(value, bool) and 0 < float(value) <= limit
    except (TypeError, ValueError):
        return False


def _stated_in_words(case: Any) -> bool:
    """Whether ``case`` breaks a rule the document states in words only, which JSON
    Schema cannot carry: GET /tasks takes only a cursor it gave; a schedule's
    cron expression, time zone and start are checked as the engine reads them; a
    task's times are ISO 8601 and at most 10 years ahead, its upstreams exist."""
    query, body = case.query or {}, case.body
    if case.method == "GET" and case.operation.path.endswith("/tasks"):
        return bool(query.get("cursor"))  # a cursor is one the server gave
    if not isinstance(body, dict):
        return False
    if case.operation.path.endswith("/limits"):  # a floor below its ceiling
        floor, ceiling = body.get("floor"), body.get("ceiling")
        return isinstance(floor, float) and isinstance(ceiling, float) and floor >= ceiling
    if "/schedules" in case.operation.path:
        named = (case.path_parameters or {}).get("schedule_id")
        if named is not None and body.get("schedule_id") not in (None, named):
            return True  # a PUT's body names the schedule of its path, or none
        try:
            item = msgspec.convert(body, ScheduleIn)
            schedule_from_wire(item, "s")
        except (msgspec.ValidationError, FairqueError, ProblemError):
            return True
        return False
    items = body.get("tasks", [body]) if case.operation.path.endswith("/tasks") else []
    try:
        for item in items:
            if isinstance(item, dict):
                if item.get("depends_on"):  # upstreams that exist, or come first in the batch
                    return True
                task_from_wire(msgspec.convert(item, TaskIn))
    except (msgspec.ValidationError, FairqueError, ProblemError):
        return True
    return False


@pytest.mark.parametrize("server", ["valkey"], indirect=True)
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
# (every operation of the document, 25 examples each: past the suite's 120 s on a busy
# machine, where a timeout inside a generation step reads as inconsistent generation)
@pytest.mark.timeout(600)
def test_live_api_conforms(live: LiveServer, mode: GenerationMode) -> None:
    """Valid requests are answered as the document says; requests the document rules
    out are refused (a 413 for a body over the limit counts as refused)."""
    schema = schemathesis.openapi.from_url(live.base + "/openapi.json")
    queue = live.service.names[0]
    checks = [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
        unsupported_method,
    ]
    checks.append(
        positive_data_acceptance if mode is GenerationMode.POSITIVE else negative_data_rejection
    )
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()  # type: ignore[union-attr]

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
            suppress_health_check=list(HealthCheck),
        )  # fmt: skip
        def run(case: Any) -> None:
            if "queue" in (case.path_parameters or {}):
                case.path_parameters["queue"] = queue
            # keep waits short: the generator likes the maximum
            # (a value the negative mode broke stays broken)
            for where, limit in ((case.body, MAX_LEASE_WAIT), (case.query, MAX_RESULT_WAIT)):
                if isinstance(where, dict) and _positive(where.get("wait_seconds"), limit):
                    where["wait_seconds"] = 0
            if mode is GenerationMode.POSITIVE and _stated_in_words(case):
                reject()
            response = case.call(timeout=30)
            if mode is GenerationMode.NEGATIVE and response.status_code == 413:
                return
            case.validate_response(response, checks=checks)

        try:
            run()
        except Unsatisfiable:  # nothing to break (no parameter and no body)
            continue
        except Exception as exc:
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)


def test_every_problem_type_the_code_answers_is_listed() -> None:
    """The document's ``x-problem-types`` (and the reference page made from it) names
    each problem kind the service can answer, and lists no kind the code never uses."""
    import re
    from pathlib import Path

    from fairque.service.media import PROBLEM_TYPES

    src = Path(__file__).resolve().parents[2] / "src" / "fairque" / "service"
    text = "\n".join(p.read_text() for p in src.rglob("*.py"))
    # a problem is made as (status, "kind", "Title", ...)
    used = set(re.findall(r"\b\d{3},\s*\"([a-z]+(?:-[a-z]+)*)\",\s*\"[A-Z]", text))
    used |= set(re.findall(r"\d{3}: \"([a-z]+(?:-[a-z]+)*)\"", text))  # the framework's map
    used.add("http-error")
    assert used - set(PROBLEM_TYPES) == set()
    assert set(PROBLEM_TYPES) - used == set()
    doc = json.loads(DOC.read_text())
    assert len(doc["x-problem-types"]) == len(PROBLEM_TYPES)


def test_the_reference_page_lists_fields_and_problem_types() -> None:
    """The HTTP reference (made from the committed document when the site is built)
    shows each endpoint's parameters, body fields and answers, and the problem types."""
    import importlib.util
    from pathlib import Path

    ext = Path(__file__).resolve().parents[2] / "docs" / "_ext" / "fairque_reference.py"
    spec = importlib.util.spec_from_file_location("fairque_reference", ext)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = module.http_markdown(DOC)
    assert "### POST `/v1/queues/{queue}/leases`" in page
    # the summary table leaves the queue's head out of its paths, so it fits the page
    assert "| POST | `…/leases` |" in page
    assert max(len(row.split("|")[2]) for row in page.splitlines() if row.startswith("| GET")) < 48
    assert "| `wait_seconds` | number 0..20 |" in page  # a body field with its limits
    assert "| `state` | query |" in page  # a query parameter
    assert "## Problem types" in page
    assert "`urn:fairque:problem:lease-lost` | 409" in page


def test_task_fields_are_described_and_attempts_is_marked_deprecated() -> None:
    doc = json.loads(DOC.read_bytes())
    fields = doc["components"]["schemas"]["TaskOut"]["properties"]
    assert all(field.get("description") for field in fields.values()), [
        name for name, field in fields.items() if not field.get("description")
    ]
    assert fields["attempts"]["deprecated"] is True
    assert not fields["retry_count"].get("deprecated")
