"""The package layout: a producer imports the producer API and nothing else."""

from __future__ import annotations

import subprocess
import sys

import pytest

import fairque

WORKER_SIDE = (
    "fairque.worker",
    "fairque.config",
    "fairque.cli",
    "fairque.aio",
    "yaml",
    "pydantic_settings",
    "typer",
    "rich",
)


def loaded_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return set(out.split())


def test_the_producer_api_loads_no_worker_config_or_cli() -> None:
    loaded = loaded_after("from fairque import FairQueue, Task, TaskState, ValidationError")
    assert "fairque.queue" in loaded
    assert not loaded & set(WORKER_SIDE), sorted(loaded & set(WORKER_SIDE))


def test_the_worker_api_loads_on_first_use() -> None:
    loaded = loaded_after("import fairque\nfairque.Worker")
    assert {"fairque.worker", "fairque.config"} <= loaded
    assert "fairque.cli" not in loaded


@pytest.mark.parametrize("name", sorted(fairque.__all__))
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(fairque, name) is not None
    assert name in dir(fairque)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        fairque.Nope  # noqa: B018


def test_the_architecture_page_shows_the_task_hash_table() -> None:
    """docs/architecture.md's field table is ``taskhash.FIELDS``, row for row."""
    from pathlib import Path

    from fairque.taskhash import FIELDS

    page = Path(__file__).parent.parent / "docs" / "architecture.md"
    rows = []
    for line in page.read_text().splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 4 and not cells[1].startswith("---"):
            rows.append(tuple(cells[:3]))
    assert rows[0] == ("Task attribute", "hash field", "push slot")
    assert rows[1:] == [(f.attr or "-", f.hash, f.push or "-") for f in FIELDS]
