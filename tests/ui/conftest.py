"""Fixtures of the dashboard tests: a live server and one headless Chromium per module.

The browser is Debian's ``chromium`` driven by Playwright through ``executable_path``
(Playwright's own browser downloads are not used). Without it the browser tests skip,
or fail when ``CI`` is set (``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.servers import ServerInfo, unavailable
from helpers.support import unique_queue
from service.harness import LiveServer

from fairque import FairQueue
from fairque.service.settings import ServerSettings, TokenSettings

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKENS = {"viewer": "viewer-token-0123456789abcdef", "admin": "admin-token-0123456789abcdef"}


def chromium_path() -> str | None:
    """Debian's Chromium (``FAIRQUE_CHROMIUM`` overrides), or None."""
    found = os.environ.get("FAIRQUE_CHROMIUM") or shutil.which("chromium")
    return found or (None if not os.path.exists("/usr/bin/chromium") else "/usr/bin/chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per test module.

    Not per session: Playwright's sync API runs an event loop in this thread while it
    is open, and the suite's asyncio tests need the thread's loop free.
    """
    path = chromium_path()
    if path is None:
        unavailable("chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def open_ui(server: ServerInfo) -> Iterator[tuple[LiveServer, FairQueue]]:
    """The service without tokens (loopback mode: the dashboard is open) and its queue."""
    live = LiveServer(server.url, [unique_queue("ui"), unique_queue("ui")])
    q = FairQueue.from_url(server.url, live.service.names[0])
    yield live, q
    q.close()
    live.stop()


@pytest.fixture
def secured_ui(server: ServerInfo) -> Iterator[tuple[LiveServer, FairQueue]]:
    """The service with a viewer and an admin token, and its queue."""
    tokens = [
        TokenSettings(name=role, role=role, token=token)  # type: ignore[arg-type]
        for role, token in TOKENS.items()
    ]
    live = LiveServer(server.url, [unique_queue("ui")], ServerSettings(tokens=tokens))
    q = FairQueue.from_url(server.url, live.service.names[0])
    yield live, q
    q.close()
    live.stop()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context and page; fails the test on any dialog or page error."""
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    p = context.new_page()
    p.set_default_timeout(15_000)
    events: list[str] = []

    def on_dialog(dialog: Any) -> None:
        events.append(f"dialog: {dialog.message}")
        dialog.dismiss()

    p.on("dialog", on_dialog)
    p.on("pageerror", lambda e: events.append(f"pageerror: {e}"))
    p.events = events
    yield p
    context.close()
    assert events == [], events
