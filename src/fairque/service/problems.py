"""Problem-details answers: from a ``ProblemError``, and for errors raised before a
route's handler runs (no such path, a method not allowed, a guard's refusal)."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException
from redis.exceptions import RedisError

from fairque.service.convert import engine_errors
from fairque.service.media import ProblemError, encode, problem_media

log = logging.getLogger("fairque.service")


def problem_response(exc: ProblemError, accept: str | None) -> Response[bytes]:
    """A problem-details answer in JSON, or MessagePack when the client asked for it."""
    media = problem_media(accept)
    return Response(
        encode(exc.problem, media),
        status_code=exc.problem.status,
        media_type=media,
        headers=exc.headers,
    )


def framework_error(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    """Errors raised before a route runs (no such path, method not allowed, a guard's
    refusal) as problems."""
    if isinstance(exc, ProblemError):
        problem = exc
    elif isinstance(exc, HTTPException):
        status = exc.status_code
        kind = {404: "not-found", 405: "method-not-allowed"}.get(status, "http-error")
        title = {404: "Not Found", 405: "Method Not Allowed"}.get(status, "Error")
        headers = dict(exc.headers or {})
        detail = str(exc.detail)
        if status == 404 and not request.url.path.startswith(("/v1/queues/", "/ui")):
            detail = (
                f"no route {request.url.path}: the API's routes live under "
                "/v1/queues/{queue}/ (GET /v1/queues lists the queues; /openapi.json "
                "describes every route)"
            )
        problem = ProblemError(status, kind, title, detail, headers=headers)
    elif isinstance(exc, RedisError):
        try:
            with engine_errors():
                raise exc
        except ProblemError as mapped:
            problem = mapped
    else:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        problem = ProblemError(500, "internal", "Internal Server Error", "unexpected error")
    return problem_response(problem, request.headers.get("accept"))
