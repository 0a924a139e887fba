"""The HTTP API's trace context: a ``traceparent`` header is answered back, the tasks a
push creates keep it (no tracer in this server), a leased task shows it; a malformed
one is ignored."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fairque import tracing
from service.harness import Api

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_push_keeps_the_trace_context_it_was_given(api: Api) -> None:
    pushed = api.call("POST", "/tasks", {"name": "n", "user_id": "u"},
                      headers={"traceparent": PARENT})  # fmt: skip
    assert pushed.status_code == 201, pushed.text
    assert pushed.headers["traceparent"] == PARENT
    task = api.data(pushed)
    assert task["traceparent"] == PARENT
    [leased] = api.lease(1)
    assert leased["traceparent"] == PARENT
    plain = api.call("POST", "/tasks", {"name": "n", "user_id": "u"},
                     headers={"traceparent": "garbage"})  # fmt: skip
    assert plain.status_code == 201
    assert "traceparent" not in plain.headers
    assert api.data(plain)["traceparent"] is None


def test_with_a_tracer_a_push_is_one_span_in_the_request_s_trace(api: Api) -> None:
    """The service continues the request's trace with one producer span (the client's
    push inside it makes none of its own); the task stores that span's context."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.set_tracer_provider(provider)
    try:
        pushed = api.call("POST", "/tasks", {"name": "n", "user_id": "u"},
                          headers={"traceparent": PARENT})  # fmt: skip
        assert pushed.status_code == 201, pushed.text
    finally:
        tracing.set_tracer_provider(None)
        provider.shutdown()
    [send] = exporter.get_finished_spans()
    assert send.name == f"send {api.queue}"
    assert send.parent is not None
    assert format(send.parent.span_id, "016x") == PARENT.split("-")[2]
    assert format(send.context.trace_id, "032x") == PARENT.split("-")[1]
    stored = api.data(pushed)["traceparent"]
    assert stored.split("-")[1:3] == [PARENT.split("-")[1], format(send.context.span_id, "016x")]
