"""Every HTTP route the documentation names is one the service serves.

A page names a route as ``METHOD /v1/queues/{queue}/...`` (the whole path), ``METHOD
.../tail`` or ``METHOD …/tail`` (the tail of a queue's path), or ``METHOD /tail`` in
running text about one queue (``POST /tasks``). Each is looked up in the OpenAPI
document a live ``fairque serve`` answers (placeholders match whatever they are
called); a route the document leaves out (``GET /metrics``) is asked for and must not be
404 or 405.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from helpers.servers import ServerInfo

from service.harness import Api, LiveServer

pytestmark = pytest.mark.server_kinds("valkey")  # the route table is the same on every kind

ROOT = Path(__file__).resolve().parents[2]
METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH")
#: ``METHOD path`` in running text or code: the path starts with "/", "..." or "…"
MENTION = re.compile(r"\b(GET|POST|PUT|DELETE|PATCH) +((?:\.\.\.|…)?/[^\s`)\"',;]*)")


def pages() -> list[Path]:
    """The README, every documentation page, and the examples' READMEs."""
    docs = [p for p in sorted((ROOT / "docs").rglob("*.md")) if "_build" not in p.parts]
    return [ROOT / "README.md", *docs, *sorted((ROOT / "examples").glob("*/README.md"))]


def mentions(text: str) -> list[tuple[str, str]]:
    """Each ``(method, path)`` a page names, its trailing full stop dropped."""
    return [(m[1], m[2].rstrip(".:")) for m in MENTION.finditer(text)]


def _shape(path: str) -> str:
    """A path with each ``{placeholder}`` made alike."""
    return re.sub(r"\{[^}/]*\}", "{}", path)


def served(spec: dict[str, Any], method: str, path: str) -> bool:
    """Whether ``spec`` has ``method`` on ``path``: the whole path, or a route of one
    queue ending in ``path``'s tail (an elided or relative path)."""
    routes = {
        (verb.upper(), _shape(route))
        for route, operations in spec["paths"].items()
        for verb in operations
    }
    shape = _shape(path.removeprefix("...").removeprefix("…"))
    if (method, shape) in routes:
        return True
    if path.startswith("/v1/") or shape in {"/healthz", "/readyz"}:
        return False  # a whole path: no tail match
    return any(verb == method and route.endswith(shape) for verb, route in routes)


def test_mentions_are_found() -> None:
    found = mentions(
        "`DELETE /v1/queues/{queue}/tasks/{id}`, `PUT .../fairness`, `GET …/stats`, and "
        "`POST /tasks`. Not a route: POSTING /x, GET it."
    )
    assert found == [
        ("DELETE", "/v1/queues/{queue}/tasks/{id}"),
        ("PUT", ".../fairness"),
        ("GET", "…/stats"),
        ("POST", "/tasks"),
    ]
    routes: dict[str, Any] = {
        "paths": {"/v1/queues/{queue}/tasks/{task_id}": {"delete": {}, "get": {}}}
    }
    assert served(routes, "DELETE", "/v1/queues/{q}/tasks/{id}")
    assert served(routes, "GET", ".../tasks/{id}")
    assert not served(routes, "POST", "/v1/queues/{queue}/tasks/{id}/cancel")
    assert not served(routes, "POST", ".../tasks/{id}/cancel")
    assert not served(routes, "DELETE", "/v1/tasks/{id}")  # a whole path is whole


def test_every_documented_route_is_served(server: ServerInfo) -> None:
    live = LiveServer(server.url, [])
    api = Api(live.base, "none")
    try:
        spec = api.ok("GET", "/openapi.json")
        named = [(page, m) for page in pages() for m in mentions(page.read_text())]
        assert len(named) >= 15, named  # the pages name routes; the pattern finds them
        missing = []
        for page, (method, path) in named:
            if served(spec, method, path):
                continue
            if "{" not in path and path.startswith("/") and not path.startswith("/v1/"):
                status = api.http.request(method, path).status_code
                if status not in (404, 405):  # served outside the API's document
                    continue
            missing.append(f"{page.relative_to(ROOT)}: {method} {path}")
        assert missing == []
    finally:
        api.close()
        live.stop()
