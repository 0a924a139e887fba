"""The service commands: ``fairque serve`` and ``fairque dispatch``."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the service commands to ``app``."""
