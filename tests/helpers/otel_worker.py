"""A worker process's handler and OpenTelemetry SDK (imported with ``--import``): its
finished spans are written, one JSON object per line, to the file ``SPANS_FILE`` names."""

from __future__ import annotations

import os
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from fairque import Context, task


def _line(span: ReadableSpan) -> str:
    return str(span.to_json(indent=None)) + "\n"


_provider = TracerProvider()
_provider.add_span_processor(
    SimpleSpanProcessor(
        ConsoleSpanExporter(out=open(os.environ["SPANS_FILE"], "a"), formatter=_line)  # noqa: SIM115
    )
)
trace.set_tracer_provider(_provider)


@task(name="traced")
def traced(ctx: Context, payload: Any) -> str:
    """Answer the trace id of the span current in the handler."""
    trace_id: int = trace.get_current_span().get_span_context().trace_id
    return format(trace_id, "032x")
