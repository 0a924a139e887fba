"""A real uvicorn serving the API on a free port, and a small HTTP client for it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any

import httpx
import msgspec
import pytest
import uvicorn

from fairque.cli.embedded import free_port
from fairque.service.app import Service, create_app
from fairque.service.settings import ServerSettings

MSGPACK = "application/msgpack"


class Uvicorn:
    """An ASGI app served by uvicorn on a free port, on a background thread."""

    def __init__(self, app: Any) -> None:
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", access_log=False, lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.base = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class LiveServer(Uvicorn):
    """``fairque serve``'s app in uvicorn on a background thread."""

    def __init__(
        self, url: str, queues: list[str], settings: ServerSettings | None = None, **options: Any
    ) -> None:
        self.service = Service(url, queues, settings or ServerSettings(), options)
        super().__init__(create_app(self.service))


class Api:
    """JSON or MessagePack requests against one queue of a live server."""

    def __init__(self, base: str, queue: str, token: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base, timeout=60, headers=headers)
        self.queue = queue
        self.prefix = f"/v1/queues/{queue}"

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        msgpack: bool = False,
        media: str = MSGPACK,
        **kwargs: Any,
    ) -> httpx.Response:
        """``path`` under the queue unless it starts with ``/v1`` or ``/openapi``."""
        url = (
            path
            if path.startswith(("/v1/", "/openapi", "/healthz", "/readyz"))
            else self.prefix + path
        )
        headers = dict(kwargs.pop("headers", {}))
        content = None
        if body is not None:
            if msgpack:
                content = msgspec.msgpack.encode(body)
                headers.setdefault("Content-Type", media)
            else:
                content = msgspec.json.encode(body)
                headers.setdefault("Content-Type", "application/json")
        if msgpack:
            headers.setdefault("Accept", media)
        return self.http.request(method, url, content=content, headers=headers, **kwargs)

    @staticmethod
    def data(response: httpx.Response) -> Any:
        """The decoded body (JSON or MessagePack by its Content-Type)."""
        if "msgpack" in response.headers.get("content-type", ""):
            return msgspec.msgpack.decode(response.content)
        return response.json()

    def ok(self, method: str, path: str, body: Any = None, status: int = 200, **kwargs: Any) -> Any:
        """Call and check the status; the decoded body."""
        response = self.call(method, path, body, **kwargs)
        assert response.status_code == status, (response.status_code, response.text)
        return self.data(response)

    def push(self, **task: Any) -> dict[str, Any]:
        task.setdefault("name", "job")
        task.setdefault("user_id", "alice")
        out: dict[str, Any] = self.ok("POST", "/tasks", task, status=201)
        return out

    def lease(self, n: int = 1, **body: Any) -> list[dict[str, Any]]:
        body.setdefault("worker_id", "w1")
        out: list[dict[str, Any]] = self.ok("POST", "/leases", {"max_tasks": n, **body})["tasks"]
        return out

    def close(self) -> None:
        self.http.close()


def node_missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (.ci/run installs it: npm ci in examples/node-worker, clients/node)")
    pytest.skip(reason)


def start_serve(
    url: str, queue: str, *extra: str, port: int | None = None
) -> tuple[subprocess.Popen[str], str]:
    """``fairque serve`` as a process, once it answers: (process, base URL)."""
    port = port or free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "fairque", "--url", url, "serve", queue, "--port", str(port),
         *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                return process, base
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            output = process.communicate()[0]
            pytest.fail(f"fairque serve did not start: {output}")
        time.sleep(0.1)
