"""The fault suite prints every scenario's figures at the end of the session."""

from __future__ import annotations

import pytest

from faults.chaos import SUMMARY


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One ``faults: ...`` line per scenario that ran, passed or failed."""
    if SUMMARY:
        terminalreporter.section("fault scenarios")
        for line in SUMMARY:
            terminalreporter.write_line(line)
