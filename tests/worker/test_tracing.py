"""OpenTelemetry (``fairque.tracing``) with the real SDK: a task pushed inside a span is
processed in a span of the same trace, in another process, linked to the producer's."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.servers import ServerInfo
from helpers.support import TESTS, unique_queue, worker_env
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fairque import FairQueue, Task, tracing

pytestmark = pytest.mark.server_kinds("valkey", "cluster")


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """fairque's spans in this process, kept in memory (the SDK's own exporter)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        tracing.set_tracer_provider(None)
        provider.shutdown()


def test_a_task_is_processed_in_its_producer_s_trace_in_another_process(
    server: ServerInfo, spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    queue = unique_queue("otel")
    q = FairQueue.from_url(server.url, queue, cluster=server.cluster)
    try:
        app = tracing._tracer()
        with app.start_as_current_span("request"):
            one = q.enqueue("traced", None, user_id="alice")
            batch = q.push_many([Task(user_id="bob", name="traced") for _ in range(3)])
        [request] = [s for s in spans.get_finished_spans() if s.name == "request"]
        sends = [s for s in spans.get_finished_spans() if s.name == f"send {queue}"]
        assert len(sends) == 2
        trace_id = request.context.trace_id
        assert {s.context.trace_id for s in sends} == {trace_id}
        assert dict(sends[0].attributes or {}) == {
            "messaging.system": "fairque", "messaging.destination.name": queue,
            "messaging.operation.type": "send", "messaging.operation.name": "send",
            "fairque.tenant": "alice",
        }  # fmt: skip
        assert (sends[1].attributes or {})["messaging.batch.message_count"] == 3
        for task in [one, *batch]:
            assert task.trace_context is not None
            assert task.trace_context.split("-")[1] == format(trace_id, "032x")
        stored = q.get(one.task_id or "")
        assert stored is not None
        assert stored.trace_context == one.trace_context
        spans_file = tmp_path / "spans.jsonl"
        env = worker_env(server, SPANS_FILE=str(spans_file))
        done = subprocess.run(
            [sys.executable, "-m", "fairque", "--queue", queue, "worker", "--burst",
             "--import", "helpers.otel_worker"],
            env=env, cwd=TESTS, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        for task in [one, *batch]:  # each handler ran inside a span of the trace
            assert q.result(task.task_id or "", timeout=5) == format(trace_id, "032x")
        worker_spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
        processed = [s for s in worker_spans if s["name"] == f"process {queue}"]
        assert len(processed) == 4
        senders = {format(s.context.span_id, "#018x") for s in sends}
        for span in processed:
            assert span["kind"] == "SpanKind.CONSUMER"
            assert span["context"]["trace_id"] == format(trace_id, "#034x")
            assert span["parent_id"] in senders  # continues the push's span
            assert [link["context"]["span_id"] for link in span["links"]] == [span["parent_id"]]
            attributes: dict[str, Any] = span["attributes"]
            assert attributes["messaging.system"] == "fairque"
            assert attributes["messaging.destination.name"] == queue
            assert attributes["fairque.task.state"] == "FINISHED"
            assert [event["name"] for event in span["events"]] == ["settle"]
    finally:
        q.close()


def test_without_a_tracer_nothing_is_stored(server: ServerInfo) -> None:
    """Tracing off (no provider): a push stores no trace context, and a malformed one
    given with a task is refused."""
    q = FairQueue.from_url(server.url, unique_queue("otel"), cluster=server.cluster)
    try:
        assert tracing._tracer() is None
        assert q.enqueue("n", None, user_id="u").trace_context is None
        with pytest.raises(Exception, match="traceparent"):
            Task(user_id="u", name="n", trace_context="not-a-context")
    finally:
        q.close()
