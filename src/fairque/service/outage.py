"""Whether the queue server answers, as the service's own requests find it.

Without an access log, ``fairque serve`` would say nothing while every request is
answered 503: the first request that finds the server gone logs one warning, the
first that finds it back logs how long it was gone and how many requests it refused.
One tracker per service (``CURRENT``, set for each of its requests and its background
work): a process that runs services against several servers, as a test suite does,
keeps each outage to its own server, so another server's answers cannot end it.
"""

from __future__ import annotations

import logging
import threading
import time
from contextvars import ContextVar

from fairque.common.urls import redact_text

log = logging.getLogger("fairque.service")


class Outage:
    """The queue server's state as the last requests saw it (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: float | None = None
        self._refused = 0

    @property
    def down(self) -> bool:
        """True from a request that could not reach the server to one that could."""
        return self._since is not None

    def failed(self, exc: BaseException) -> None:
        """A request, or the service's background work, could not reach the server (logs
        once per outage; the line that ends it counts requests, each once however many
        of its reads failed)."""
        request = REQUEST.get()
        with self._lock:
            if request is not None and not request.counted:
                request.counted = True
                self._refused += 1
            if self._since is not None:
                return
            self._since = time.monotonic()
        log.warning(
            "the queue server is unavailable (%s): requests are answered 503 until it is back",
            redact_text(str(exc)) or type(exc).__name__,
        )

    def answered(self) -> None:
        """A request reached the server (logs the end of an outage)."""
        if self._since is None:  # the usual case: one attribute read, no lock
            return
        with self._lock:
            if self._since is None:
                return
            gone, refused = time.monotonic() - self._since, self._refused
            self._since, self._refused = None, 0
        log.warning(
            "the queue server is back after %.1f s (%d request%s answered 503 meanwhile)",
            gone, refused, "" if refused == 1 else "s",
        )  # fmt: skip


#: the tracker of code that runs outside any service (the default of ``CURRENT``)
OUTAGE = Outage()
#: the tracker ``engine_errors`` tells of each outcome: the running service's
CURRENT: ContextVar[Outage] = ContextVar("fairque_outage", default=OUTAGE)


class RequestMark:
    """One request's mark: whether an outage has counted it yet."""

    __slots__ = ("counted",)

    def __init__(self) -> None:
        self.counted = False


#: the running request's mark (None: background work, such as reclaiming, not counted)
REQUEST: ContextVar[RequestMark | None] = ContextVar("fairque_request", default=None)
