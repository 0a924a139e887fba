"""The worker's connection to its server: outage detection, backoff and concise logging.

While the server is unreachable a worker must neither spin nor flood its log: every
failed call asks ``Link.failed`` how long to wait (capped exponential backoff with
jitter), and the link logs one line when the connection is lost, a reminder every
``remind_every`` seconds, and one line when it is back. No traceback, and no URL
credentials, ever reach the log from here.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from redis.exceptions import (
    ClusterDownError,
    ClusterError,
    ConnectionError,
    SlotNotCoveredError,
    TimeoutError,
    TryAgainError,
)

from fairque.common.urls import redact_text

T = TypeVar("T")

#: Errors that mean "the server could not be reached or is not serving right now";
#: the call may be sent again. ``BusyLoadingError`` (a server loading its data after a
#: restart) and ``AuthenticationError`` are ``ConnectionError`` subclasses; a cluster
#: client raises ``ClusterError`` when its retries ran out while nodes were away.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionError,
    TimeoutError,
    ClusterDownError,
    ClusterError,
    SlotNotCoveredError,
    TryAgainError,
)


def describe(exc: BaseException, limit: int = 200) -> str:
    """One line naming an error: its type and its (redacted, shortened) message."""
    message = " ".join(redact_text(str(exc)).split())
    if len(message) > limit:
        message = message[: limit - 3] + "..."
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


class Link:
    """Tracks whether the server is reachable and paces the calls that find it is not.

    Args:
        name: how log lines name the owner (``worker w1``).
        logger: where the lines go.
        base: the first backoff delay in seconds.
        cap: the longest backoff delay in seconds.
        remind_every: seconds between "still no connection" reminders.
        clock: a monotonic clock (tests may replace it).
    """

    def __init__(
        self,
        name: str,
        logger: logging.Logger,
        *,
        base: float = 0.05,
        cap: float = 5.0,
        remind_every: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.log = logger
        self.base = base
        self.cap = cap
        self.remind_every = remind_every
        self.clock = clock
        self.down_since: float | None = None
        self.failures = 0
        self._reminded = 0.0
        self._last_error = ""

    @property
    def down(self) -> bool:
        """True from the first failed call until a call succeeds again."""
        return self.down_since is not None

    def failed(self, exc: BaseException, *, first: str | None = None) -> float:
        """Record a call that could not reach the server; returns the seconds to wait.

        Args:
            exc: the connection error.
            first: the line to log if this failure starts an outage (default: "lost
                the connection to the server").
        """
        now = self.clock()
        self._last_error = describe(exc)
        if self.down_since is None:
            self.down_since = self._reminded = now
            self.log.warning(
                "%s: %s (%s); reconnecting with backoff",
                self.name, first or "lost the connection to the server", self._last_error,
            )  # fmt: skip
        elif now - self._reminded >= self.remind_every:
            self._reminded = now
            self.log.warning(
                "%s: still no connection to the server after %.0fs (%s)",
                self.name, now - self.down_since, self._last_error,
            )  # fmt: skip
        self.failures += 1
        return self.delay()

    def delay(self) -> float:
        """The current backoff: ``base * 2**(failures - 1)``, capped, with jitter (50-100 %)."""
        step = min(self.cap, self.base * 2 ** min(max(self.failures - 1, 0), 30))
        return random.uniform(step / 2, step)

    def ok(self) -> None:
        """Record a call that reached the server; logs the end of an outage."""
        self.failures = 0
        if self.down_since is None:
            return
        self.log.warning(
            "%s: connection to the server is back after %.1fs",
            self.name, self.clock() - self.down_since,
        )  # fmt: skip
        self.down_since = None


class ErrorLog:
    """Logs unexpected errors of a repeating call: a traceback once, then one line each.

    A failure that repeats every second must not print its traceback every second;
    a different error, or the same one after ``quiet_for`` seconds, gets its traceback.
    """

    def __init__(
        self,
        logger: logging.Logger,
        quiet_for: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = logger
        self.quiet_for = quiet_for
        self.clock = clock
        self._seen: dict[str, float] = {}

    def error(self, message: str, exc: BaseException) -> None:
        """Log ``message`` for ``exc``: with its traceback unless it was just shown."""
        key = f"{message}|{type(exc).__name__}|{exc}"
        now = self.clock()
        shown = self._seen.get(key)
        if shown is not None and now - shown < self.quiet_for:
            self.log.error("%s (%s; again)", message, describe(exc))
            return
        if len(self._seen) > 100:
            self._seen.clear()
        self._seen[key] = now
        self.log.error("%s (%s)", message, describe(exc), exc_info=exc)


def wait_for_probe(
    probe: Callable[[], T], link: Link, wait_seconds: float, first: str = "waiting for the server"
) -> T:
    """``probe()``, retried with the link's backoff while the server is unreachable,
    for ``wait_seconds`` (then its connection error is raised). The last pause is cut
    to the deadline, where one more try comes: the wait lasts the whole time given.
    ``first`` is the line logged when waiting starts."""
    deadline = link.clock() + wait_seconds
    while True:
        try:
            value = probe()
        except CONNECTION_ERRORS as exc:
            pause = link.failed(exc, first=first)
            remaining = deadline - link.clock()
            if remaining <= 0:
                raise
            time.sleep(min(pause, remaining))
        else:
            link.ok()
            return value
