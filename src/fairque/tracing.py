"""OpenTelemetry spans by the messaging conventions (the ``fairque[otel]`` extra).

A push runs inside a producer span (``send <queue>``) and stores that span's W3C
``traceparent`` with each task it creates (``Task.trace_context``); a worker runs each
handler inside a consumer span (``process <queue>``) that continues the task's trace
and links to the producer's span, and ends it when the outcome is settled (the event
``settle`` holds the state the queue recorded). Attributes: ``messaging.system``
(``fairque``), ``messaging.destination.name`` (the queue), ``messaging.operation.type``
and ``.name``, ``messaging.message.id`` (the task id), ``messaging.batch.message_count``
(a batch) and ``fairque.tenant`` (the user id).

Spans are made only where the OpenTelemetry API is installed and a tracer provider is
set (an SDK's): otherwise each entry point costs one check and makes nothing, and
without the extra installed, one check of a module global.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from fairque.core.checks import TRACEPARENT

try:
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # pragma: no cover - the extra is part of the test environment
    trace = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from fairque.models import Task

SYSTEM = "fairque"
#: the traceparent a push running now stores with the tasks it creates
_PUSHING: ContextVar[str | None] = ContextVar("fairque_pushing", default=None)
_PROPAGATOR = TraceContextTextMapPropagator() if trace is not None else None
#: the tracer provider fairque's spans come from (None: the global one), and the global
#: one as last looked up (None: it makes no spans) with when (monotonic seconds)
_PROVIDER: Any = None
_GLOBAL: Any = None
_SEEN_AT = -math.inf


def set_tracer_provider(provider: Any) -> None:
    """Make fairque's spans with ``provider`` (an SDK ``TracerProvider``) rather than
    OpenTelemetry's global one; None goes back to the global one."""
    global _PROVIDER
    _PROVIDER = provider


def _tracer() -> Any:
    """fairque's tracer, or None when no tracer provider is set (or no API installed).

    OpenTelemetry's global provider is looked up at most once a second (a look-up
    reads the environment: about 2 us, on every push), so a provider set while pushes
    run is in use within a second; ``set_tracer_provider`` takes effect at once."""
    global _GLOBAL, _SEEN_AT
    if trace is None:
        return None
    provider = _PROVIDER
    if provider is None:
        now = time.monotonic()
        if now - _SEEN_AT >= 1.0:
            _GLOBAL, _SEEN_AT = _real(trace.get_tracer_provider()), now
        provider = _GLOBAL
        if provider is None:
            return None
    return provider.get_tracer("fairque")


def _real(provider: Any) -> Any:
    """``provider``, unless it makes no spans (the API's default or no-op one)."""
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider


def pushing_trace() -> str | None:
    """The traceparent the push running now gives its new tasks (None: none)."""
    return _PUSHING.get()


def running_trace() -> str | None:
    """The traceparent of the span current now (a handler's ``process`` span), or None
    when tracing is off."""
    if _tracer() is None:
        return None
    span = trace.get_current_span()
    return traceparent_of(span) if span.get_span_context().is_valid else None


def valid_traceparent(value: str | None) -> str | None:
    """``value`` if it is a W3C traceparent fairque can store, else None."""
    return value if value is not None and TRACEPARENT.fullmatch(value) else None


def sending(
    queue: str, count: int, user_id: str | None, parent: str | None = None
) -> contextlib.AbstractContextManager[Any]:
    """Run a push of ``count`` tasks (of ``user_id``, when it is one task) inside a
    producer span; the tasks it creates store the span's context. ``parent``: a
    traceparent received with the push (an HTTP request's) that the span continues,
    or, without a tracer, that the tasks store as it is. Tracing off and no parent, or
    a push inside another's span: nothing at all."""
    if _PUSHING.get() is not None:
        return _NOTHING  # inside a push's span already (the HTTP service's): one span
    tracer = _tracer()
    if tracer is None:
        return _NOTHING if parent is None else _pushing(valid_traceparent(parent))
    return _sending(tracer, queue, count, user_id, parent)


_NOTHING = contextlib.nullcontext()


@contextlib.contextmanager
def _pushing(traceparent: str | None) -> Iterator[None]:
    token = _PUSHING.set(traceparent)
    try:
        yield
    finally:
        _PUSHING.reset(token)


@contextlib.contextmanager
def _sending(
    tracer: Any, queue: str, count: int, user_id: str | None, parent: str | None
) -> Iterator[None]:
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM, "messaging.destination.name": queue,
        "messaging.operation.type": "send", "messaging.operation.name": "send",
    }  # fmt: skip
    if count != 1:
        attributes["messaging.batch.message_count"] = count
    elif user_id is not None:
        attributes["fairque.tenant"] = user_id
    with tracer.start_as_current_span(
        f"send {queue}", context=_extract(parent), kind=trace.SpanKind.PRODUCER,
        attributes=attributes,
    ) as span, _pushing(traceparent_of(span)):  # fmt: skip
        yield


def traceparent_of(span: Any) -> str | None:
    """The W3C traceparent of ``span``."""
    carrier: dict[str, str] = {}
    assert _PROPAGATOR is not None
    _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent")


def _extract(traceparent: str | None) -> Any:
    if _PROPAGATOR is None or valid_traceparent(traceparent) is None:
        return None
    return _PROPAGATOR.extract({"traceparent": traceparent or ""})


def processing(queue: str, task: Task) -> Any:
    """A consumer span for a run of ``task`` (None: tracing off), in the task's trace
    and linked to the span that pushed it; end it with ``settled``."""
    tracer = _tracer()
    if tracer is None:
        return None
    context = _extract(task.trace_context)
    links = []
    if context is not None:
        links.append(trace.Link(trace.get_current_span(context).get_span_context()))
    attributes = {
        "messaging.system": SYSTEM, "messaging.destination.name": queue,
        "messaging.operation.type": "process", "messaging.operation.name": "process",
        "messaging.message.id": task.task_id or "", "fairque.tenant": task.user_id,
        "fairque.task.name": task.name, "fairque.task.attempt": task.retry_count + 1,
    }  # fmt: skip
    return tracer.start_span(
        f"process {queue}", context=context, kind=trace.SpanKind.CONSUMER, links=links,
        attributes=attributes,
    )  # fmt: skip


def current(span: Any) -> contextlib.AbstractContextManager[Any]:
    """Make ``span`` the current span (nothing when it is None); it is not ended."""
    if span is None:
        return contextlib.nullcontext()
    return trace.use_span(span, end_on_exit=False)


def settled(span: Any, outcome: str) -> None:
    """End a ``processing`` span: the queue recorded ``outcome`` (a state, or why not)."""
    span.add_event("settle", {"fairque.task.state": outcome})
    span.set_attribute("fairque.task.state", outcome)
    span.end()
