"""The ASGI app of ``fairque serve``: Litestar routes over the route table.

Litestar routes each request, runs the role guards (``_guard``: a bearer token with one
of the route's roles, 401/403) and answers errors raised outside a handler as problems
(``_framework_error``). ``Service.handle`` does the rest of a request: content
negotiation, the body (its size limit, media type and validation), the operation and
the answer. Kept by hand, each for a need Litestar 2.25 does not meet:

- negotiation: answers in JSON or any of three MessagePack media types by ``Accept``,
  problems included (Litestar knows one MessagePack type and fixes each handler's);
- the body limit: the queue's ``max_payload_bytes`` plus a margin, per queue (Litestar's
  ``request_max_body_size`` is one number per app or handler);
- problem details in MessagePack when asked (its ProblemDetailsPlugin answers JSON);
- the OpenAPI document, built from the route table and the same wire structs the
  handlers decode with (``fairque.service.spec``), with every media type and the
  problem answers of each status.

Any error becomes a problem-details answer; nothing escapes as a 500 unless it is a
bug, and even then the answer is a problem object.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar, Request, Response, route
from litestar.enums import HttpMethod
from redis.exceptions import RedisError

from fairque.client.aio import AsyncFairQueue
from fairque.core.keys import validate_queue_name
from fairque.errors import ConfigError, FairqueError
from fairque.service import audit, handlers, pull
from fairque.service.auth import READERS, Tokens, guard, scope_of, token_name
from fairque.service.convert import engine_errors, invalid
from fairque.service.media import (
    ProblemError,
    body_media,
    decode,
    encode,
    negotiate,
    problem_type,
)
from fairque.service.outage import CURRENT, REQUEST, Outage, RequestMark
from fairque.service.problems import framework_error, problem_response
from fairque.service.pullers import Pullers
from fairque.service.routes import ROUTES, Route
from fairque.service.scope import EVERYTHING, Scope, is_pattern, matches
from fairque.service.settings import ServerSettings
from fairque.service.ui.routes import Ui
from fairque.tracing import valid_traceparent

log = logging.getLogger("fairque.service")


#: queue clients a server keeps at most (one per queue asked for; each is small)
MAX_QUEUES = 1000
#: how long a listing of the served queues is reused (seconds)
LIST_SECONDS = 2.0


class Service:
    """The queues served and the settings every request reads.

    ``queues`` selects what is served: names, and patterns (``fnmatch``: a name with
    ``*``, ``?`` or ``[``); empty, every queue. A request may name any queue the
    selection admits (a push creates it); the listing (``GET /v1/queues``, the
    dashboard, ``/metrics``) is the named queues and those of the server's registry
    the selection admits.
    """

    def __init__(
        self,
        url: str,
        queues: Sequence[str],
        settings: ServerSettings,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.url = url
        self.explicit: list[str] = []
        self.patterns: list[str] = []
        for name in queues:
            if is_pattern(name):
                validate_queue_name(name)  # no braces or spaces in a pattern either
                self.patterns.append(name)
            else:
                self.explicit.append(validate_queue_name(name))
        self.settings = settings
        self.options = options or {}
        self.tokens = Tokens.of(settings)
        self.pullers = Pullers(settings.pull_worker_ttl_seconds)
        #: a client per queue asked for, all on the first one's connections
        self.queues: dict[str, AsyncFairQueue] = {}
        self._first: AsyncFairQueue | None = None
        #: the served queues as last listed (``listed``), for pages rendered in between
        self.names: list[str] = list(self.explicit)
        self._listed_at = float("-inf")
        self._connecting = asyncio.Lock()
        #: whether this service's queue server answers (see ``fairque.service.outage``)
        self.outage = Outage()

    @property
    def selection(self) -> str:
        """What is served, in words."""
        if not self.explicit and not self.patterns:
            return "every queue"
        return "queues " + ", ".join([*self.explicit, *self.patterns])

    def serves(self, name: str) -> bool:
        """Whether the selection admits queue ``name``."""
        return not (self.explicit or self.patterns) or matches(
            name, [*self.explicit, *self.patterns]
        )

    async def start(self) -> None:
        """Connect now if the queue server answers; else on the first request (a
        server away at start-up is a 503 per request, not a failed start)."""
        with contextlib.suppress(RedisError, ProblemError):
            q = await self.connect()
            await self.listed()
            report = await q.memory_report()
            if report is not None:
                report.log_to(log)

    async def connect(self) -> AsyncFairQueue:
        """The first queue client, whose connections every other one shares (the
        cluster probe runs once)."""
        async with self._connecting:
            if self._first is None:
                name = self.explicit[0] if self.explicit else "default"
                self._first = await asyncio.to_thread(
                    AsyncFairQueue.from_url, self.url, name, **self.options
                )
            return self._first

    async def stop(self) -> None:
        """Close the shared client."""
        if self._first is not None:
            await self._first.close()
        self._first = None
        self.queues.clear()

    async def _client(self, name: str) -> AsyncFairQueue:
        q = self.queues.get(name)
        if q is None:
            with engine_errors():
                first = await self.connect()
            q = (
                first
                if first.queue == name
                else await AsyncFairQueue.open(first.client, name, **self.options)
            )
            if len(self.queues) < MAX_QUEUES or name in self.names:
                self.queues[name] = q
        return q

    async def queue(self, name: str, scope: Scope = EVERYTHING) -> AsyncFairQueue:
        """A served queue's client, or ``ProblemError`` 404 (503 while unreachable).

        A queue out of the token's ``scope`` answers as one this server does not serve."""
        try:
            validate_queue_name(name)
        except ConfigError as exc:  # a queue that cannot exist is not served
            raise ProblemError(404, "queue-not-found", "Not Found", str(exc)) from None
        if not scope.allows_queue(name):
            raise ProblemError(
                404, "queue-not-found", "Not Found",
                f"this token may not use a queue named {name!r} (it may use: "
                f"{', '.join(scope.queues or ())})",
            )  # fmt: skip
        if not self.serves(name):
            served = ", ".join(self.visible(self.names, scope)) or "none yet"
            raise ProblemError(
                404, "queue-not-found", "Not Found",
                f"this server does not serve a queue named {name!r} "
                f"(it serves {self.selection}; listed now: {served})",
            )  # fmt: skip
        return await self._client(name)

    @staticmethod
    def visible(names: Sequence[str], scope: Scope) -> list[str]:
        """The queues of ``names`` a token of ``scope`` may see."""
        return [name for name in names if scope.allows_queue(name)]

    async def listed(self) -> list[str]:
        """The served queues now: the named ones and those the server's registry
        holds that the selection admits (read at most every ``LIST_SECONDS``)."""
        now = time.monotonic()
        if now - self._listed_at >= LIST_SECONDS:
            with engine_errors():
                first = await self.connect()
                known = await first.queues()
            self.names = sorted({*self.explicit, *(n for n in known if self.serves(n))})
            self._listed_at = now
        return self.names

    async def reclaiming(self) -> None:
        """Take back expired leases of every listed queue each
        ``server.reclaim_interval_seconds``, so that a dead worker's task leaves STARTED
        (for another attempt) even while nobody asks for a lease. Until cancelled."""
        interval = self.settings.reclaim_interval_seconds
        CURRENT.set(self.outage)  # this task's context: its reads count for this service
        while interval:
            await asyncio.sleep(interval)
            try:
                for q in (await self.served()).values():
                    await q.reclaim()
            except (RedisError, FairqueError, ProblemError) as exc:
                log.debug("reclaim: %s", exc)

    async def served(self) -> dict[str, AsyncFairQueue]:
        """Every listed queue with its client."""
        return {name: await self._client(name) for name in await self.listed()}

    def body_limit(self, q: AsyncFairQueue | None) -> int:
        """The largest body accepted: ``server.max_body_bytes``, or the queue's payload
        limit plus ``server.body_margin_bytes`` when that is more."""
        payload = q.options.max_payload_bytes if q is not None else 1_048_576
        return max(self.settings.max_body_bytes, payload + self.settings.body_margin_bytes)

    async def read_body(self, request: Request[Any, Any, Any], limit: int) -> bytes:
        """The request body, or ``ProblemError`` 413 past ``limit`` bytes."""
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise _too_large(limit)
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
        return b"".join(chunks)

    async def handle(self, spec: Route, request: Request[Any, Any, Any]) -> Response[bytes]:
        """Run one request through ``spec``'s operation."""
        accept = request.headers.get("accept")
        try:
            media = negotiate(accept)
            unknown = sorted(set(request.query_params) - spec.query_names)
            if unknown:
                known = ", ".join(sorted(spec.query_names)) or "none"
                raise invalid(unknown[0], f"unknown query parameter (known: {known})")
            scope = scope_of(request)
            q = await self.queue(request.path_params["queue"], scope) if spec.has_queue else None
            listing = spec.operation is handlers.list_queues
            ctx = handlers.Ctx(
                names=self.visible(await self.listed(), scope) if listing else [],
                path=request.path_params,
                query=request.query_params,
                queue=q,
                peer=request.client.host if request.client is not None else "",
                pullers=self.pullers,
                traceparent=valid_traceparent(request.headers.get("traceparent")),
                scope=scope,
            )
            if spec.body is not None:
                kind = body_media(request.headers.get("content-type"))
                raw = await self.read_body(request, self.body_limit(q))
                if spec.operation is handlers.push:
                    ctx.body = handlers.decode_push(raw, kind)
                else:
                    ctx.body = decode(raw, kind, spec.body)
            with engine_errors():
                if spec.operation in WAITING:
                    reply = await _watching(request, ctx, spec.operation)
                else:
                    reply = await spec.operation(ctx)
            headers = reply.headers
            if ctx.traceparent is not None:  # the trace context it was given, answered
                headers = {**headers, "traceparent": ctx.traceparent}
            if spec.audited:
                _audit(spec, request, reply.status, reply.value)
            return Response(
                encode(reply.value, media), status_code=reply.status, media_type=media,
                headers=headers,
            )  # fmt: skip
        except ProblemError as exc:
            if spec.audited or exc.problem.status == 403:
                _audit(spec, request, exc.problem.status, None, exc.tenant)
            return problem_response(exc, accept)


def _audit(
    spec: Route, request: Request[Any, Any, Any], status: int, value: Any, tenant: Any = None
) -> None:
    """The audit line of a change, or of a refusal (``fairque.service.audit``)."""
    path = request.path_params
    audit.record(
        spec.operation_id, token=token_name(request), status=status,
        peer=request.client.host if request.client is not None else "",
        queue=path.get("queue"), tenant=path.get("user_id") or getattr(value, "user_id", tenant),
        task=path.get("task_id"),
    )  # fmt: skip


#: the operations that may wait long (a long poll, a result wait): they watch for the
#: client hanging up, so that nothing is leased or consumed for nobody
WAITING = frozenset({pull.lease, handlers.get_result})


async def _watching(
    request: Request[Any, Any, Any], ctx: handlers.Ctx, operation: handlers.Operation
) -> handlers.Reply:
    """Run ``operation`` while reading the connection's next ASGI message: the body has
    been read, so that message is the client's disconnect, which sets ``ctx.left``."""

    async def watch() -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                ctx.left.set()
                return

    watcher = asyncio.ensure_future(watch())
    try:
        return await operation(ctx)
    finally:
        watcher.cancel()


def _too_large(limit: int) -> ProblemError:
    return ProblemError(
        413, "body-too-large", "Content Too Large",
        f"request bodies are limited to {limit} bytes (server.max_body_bytes; a larger "
        "batch goes in several requests)",
    )  # fmt: skip


def _litestar_path(path: str) -> str:
    """A route table path with Litestar's typed parameters."""
    for name in ("queue", "task_id", "user_id", "group_id", "schedule_id", "constraint_id"):
        path = path.replace("{" + name + "}", "{" + name + ":str}")
    return path


def _endpoint(service: Service, spec: Route) -> Any:
    async def endpoint(request: Request[Any, Any, Any]) -> Response[bytes]:
        return await service.handle(spec, request)

    endpoint.__name__ = spec.operation_id
    return route(
        _litestar_path(spec.path), http_method=[HttpMethod(spec.method)],
        name=spec.operation_id, status_code=200,
        guards=[guard(service.tokens, spec.roles, spec.per_tenant, spec.operation_id)],
    )(endpoint)  # fmt: skip


def _options_endpoints() -> list[Any]:
    """``OPTIONS`` of each path: 204 with every method the route table gives it.

    Litestar answers ``OPTIONS`` itself, but a path whose methods are separate handlers
    gets the ``Allow`` of one of them only.
    """
    methods: dict[str, list[str]] = {}
    for spec in ROUTES:
        methods.setdefault(spec.path, []).append(spec.method)
    return [
        route(_litestar_path(path), http_method=[HttpMethod.OPTIONS], name=f"options {path}")(
            _options(", ".join([*sorted(names), "OPTIONS"]))
        )
        for path, names in methods.items()
    ]


def _options(allow: str) -> Any:
    async def options() -> Response[bytes]:
        return Response(b"", status_code=204, headers={"Allow": allow})

    return options


def _metrics_endpoint(service: Service) -> Any:
    """``GET /metrics``: readers' tokens when tokens are configured."""
    from fairque.service import metrics

    async def metrics_text(request: Request[Any, Any, Any]) -> Response[bytes]:
        media = metrics.media_type(request.headers.get("accept"))
        try:
            scope = scope_of(request)
            with engine_errors():
                queues = {
                    name: q for name, q in (await service.served()).items()
                    if scope.allows_queue(name)
                }  # fmt: skip
                body = await metrics.scrape(
                    queues,
                    buckets=service.settings.metrics_buckets,
                    media=media,
                    tenants=service.settings.metrics_tenants,
                )
        except ProblemError as exc:
            if exc.problem.type != problem_type("unavailable"):
                return problem_response(exc, request.headers.get("accept"))
            # the queue server is out: the scrape succeeds and says so
            body = metrics.exposition([metrics.up_family(False)], media)
        return Response(body, headers={"Content-Type": media})

    return metrics_text


def create_app(service: Service) -> Litestar:
    """The ASGI app serving ``service``'s queues, ``/openapi.json``, ``/healthz``
    (liveness), ``/readyz`` (readiness: the queue server answers), ``/metrics`` and the
    dashboard under ``/ui``."""
    from fairque.service.spec import openapi_bytes

    spec_bytes = openapi_bytes()

    async def openapi_json() -> Response[bytes]:
        return Response(spec_bytes, media_type="application/json")

    async def healthz() -> Response[bytes]:
        return Response(b'{"status":"ok"}', media_type="application/json")

    async def readyz(request: Request[Any, Any, Any]) -> Response[bytes]:
        try:
            with engine_errors():
                q = await service.connect()
                await q.server_time_ms()
                report = await q.memory_report()
        except ProblemError as exc:
            return problem_response(exc, None)
        # a server that would drop tasks is named, but the instance stays in rotation
        warnings = report.warnings() if report is not None else []
        body = {"status": "ready", **({"warnings": warnings} if warnings else {})}
        return Response(json.dumps(body).encode(), media_type="application/json")

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        await service.start()
        reclaimer = asyncio.ensure_future(service.reclaiming())
        try:
            yield
        finally:
            reclaimer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reclaimer
            await service.stop()

    # each path's OPTIONS first: Litestar makes its own for a path that has none yet
    handlers_ = [*_options_endpoints(), *(_endpoint(service, spec) for spec in ROUTES)]
    handlers_.append(route("/openapi.json", http_method=["GET"])(openapi_json))
    handlers_.append(route("/healthz", http_method=["GET"])(healthz))
    handlers_.append(route("/readyz", http_method=["GET"])(readyz))
    handlers_.append(
        route(
            "/metrics",
            http_method=["GET"],
            guards=[guard(service.tokens, READERS, action="metrics")],
        )(_metrics_endpoint(service))
    )
    ui = Ui(service)
    handlers_.extend(ui.handlers())

    async def tracked(request: Request[Any, Any, Any]) -> None:
        CURRENT.set(service.outage)  # the request's context: its outcome is this service's
        REQUEST.set(RequestMark())

    return Litestar(
        before_request=tracked,
        route_handlers=handlers_,
        openapi_config=None,
        lifespan=[lifespan, ui.lifespan],
        exception_handlers={Exception: framework_error},
        # the service logs through its own loggers (``_framework_error``); Litestar's
        # default config would start a queue-listener thread per app, never stopped
        logging_config=None,
        debug=False,
    )
