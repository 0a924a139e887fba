"""Fixtures of the HTTP service tests: a live server per test, on each server kind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers.servers import ServerInfo
from helpers.support import unique_queue

from service.harness import Api, LiveServer


@pytest.fixture
def live(server: ServerInfo) -> Iterator[LiveServer]:
    """The API on a free port, serving two fresh queues on ``server``."""
    running = LiveServer(server.url, [unique_queue("http"), unique_queue("http")])
    yield running
    running.stop()


@pytest.fixture
def api(live: LiveServer) -> Iterator[Api]:
    """A client for the first queue of ``live``."""
    client = Api(live.base, live.service.names[0])
    yield client
    client.close()
