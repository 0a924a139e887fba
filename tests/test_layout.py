"""The package layout: a producer imports the producer API and nothing else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import fairque

WORKER_SIDE = (
    "fairque.worker",
    "fairque.config",
    "fairque.cli",
    "fairque.client.aio",
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
    assert "fairque.client.queue" in loaded
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
    from fairque.core.taskhash import FIELDS

    page = Path(__file__).parent.parent / "docs" / "architecture.md"
    rows = []
    for line in page.read_text().splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 4 and not cells[1].startswith("---"):
            rows.append(tuple(cells[:3]))
    assert rows[0] == ("Task attribute", "hash field", "push slot")
    assert rows[1:] == [(f.attr or "-", f.hash, f.push or "-") for f in FIELDS]


def _module_imports(path: Path, package: Path) -> set[str]:
    """The fairque modules ``path`` imports, at its top or inside its functions (not
    those imported only for type checking)."""
    import ast

    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for item in ast.walk(node):
            if isinstance(item, ast.Import):
                found |= {a.name for a in item.names}
            elif isinstance(item, ast.ImportFrom) and item.module:
                # ``from fairque.cli import admin`` imports the module fairque.cli.admin
                subs = {f"{item.module}.{a.name}" for a in item.names}
                modules = {s for s in subs if _module_path(s, package) is not None}
                found |= modules or {item.module}
    return {m for m in found if m.startswith("fairque")}


def _module_path(name: str, package: Path) -> Path | None:
    base = package.parent.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def test_no_import_cycles() -> None:
    """No two fairque modules import each other, directly or through others."""
    package = Path(fairque.__file__).parent
    graph: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        graph[name] = {m for m in _module_imports(path, package) if m != name}
    cycles = []
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            node = todo.pop()
            if node == start:
                cycles.append(start)
                break
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
    assert not cycles, sorted(cycles)


def test_no_module_is_over_500_lines() -> None:
    """Small modules, one owner each: a module that grows past 500 lines is split."""
    package = Path(fairque.__file__).parent
    sizes = {
        str(path.relative_to(package)): len(path.read_text().splitlines())
        for path in package.rglob("*.py")
    }
    assert {name: n for name, n in sizes.items() if n > 500} == {}


def test_each_include_inside_a_block_has_its_recorded_figure() -> None:
    """An include below a line of code (made only on the path that takes its branch)
    is in docs/benchmarks.md's table of what each would cost at the top of its file
    (``benchmarks/block_includes.py``); every other include sits at the top."""
    import importlib.util

    root = Path(__file__).parent.parent
    spec = importlib.util.spec_from_file_location(
        "block_includes", root / "benchmarks" / "block_includes.py"
    )
    assert spec is not None
    assert spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    block_includes = tool.block_includes
    page = (root / "docs" / "benchmarks.md").read_text()
    section = page[page.index("### Why some includes are made only on the path") :]
    rows = set()
    for line in section.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) > 2 and cells[0].endswith(".lua"):
            rows.add((cells[0], cells[1]))
    found = {(file, name) for file, _, name in block_includes()}
    assert found, "no include inside a block found: the finder is broken"
    assert found == rows, (sorted(found - rows), sorted(rows - found))


def test_no_object_changes_its_class_at_run_time() -> None:
    """A client is one class whatever its queue's shards: a resize swaps the placement
    it routes through (``fairque.client.shards.placement``), never its class."""
    package = Path(fairque.__file__).parent
    swaps = [
        f"{path.relative_to(package)}:{n}"
        for path in package.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if ".__class__ =" in line
    ]
    assert swaps == []


#: What the floors above the clients (the command line, the HTTP service, the worker)
#: may take from the engine: limits, option models and value types. Never a key, a hash
#: field, a script or an operation: those they reach through the clients' methods. A new
#: need is a choice to make here, in view, not an import that slips in.
ENGINE_FOR_UPPER_FLOORS: dict[str, set[str]] = {
    "fairque.core.options": {"QueueOptions"},
    "fairque.core.checks": {
        "MAX_BATCH",
        "MAX_COST",
        "MAX_TASK_ID",
        "check_pop",
        "check_user_list",
        "identifier_problem",
    },
    "fairque.core.shards": {"MAX_SHARDS"},
    "fairque.core.keys": {"validate_queue_name"},
    "fairque.core.records": {"EncodedResult", "request_id"},
}
UPPER_FLOORS = ("fairque.cli", "fairque.service", "fairque.worker")
#: what a module of the engine may not import: it builds calls and parses replies, and
#: the clients send them (``redis.crc``, the slot function, is plain arithmetic)
IO_MODULES = ("redis", "asyncio", "socket", "subprocess", "threading", "httpx")


def _imports_from(path: Path) -> list[tuple[str, set[str]]]:
    """Every ``import``/``from ... import`` of ``path``: (module, names), at any depth."""
    import ast

    found: list[tuple[str, set[str]]] = []
    for item in ast.walk(ast.parse(path.read_text())):
        if isinstance(item, ast.Import):
            found += [(a.name, set()) for a in item.names]
        elif isinstance(item, ast.ImportFrom) and item.module and not item.level:
            found.append((item.module, {a.name for a in item.names}))
    return found


def _modules(package: Path, prefix: str) -> dict[str, Path]:
    out = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name == prefix or name.startswith(prefix + "."):
            out[name] = path
    return out


def test_the_upper_floors_take_from_the_engine_only_what_the_table_allows() -> None:
    package = Path(fairque.__file__).parent
    wrong = []
    for floor in UPPER_FLOORS:
        for name, path in _modules(package, floor).items():
            for module, names in _imports_from(path):
                if not module.startswith("fairque.core"):
                    continue
                allowed = ENGINE_FOR_UPPER_FLOORS.get(module, set())
                if not names or not names <= allowed:
                    wrong.append(f"{name}: {module} {sorted(names - allowed) or '(module)'}")
    assert wrong == []


def test_the_engine_does_no_io() -> None:
    package = Path(fairque.__file__).parent
    wrong = [
        f"{name}: {module}"
        for name, path in _modules(package, "fairque.core").items()
        for module, _ in _imports_from(path)
        if module != "redis.crc"
        and (
            any(module == io or module.startswith(io + ".") for io in IO_MODULES)
            or module.startswith(("fairque.client", "fairque.common"))
        )
    ]
    assert wrong == []


def test_the_table_of_allowed_imports_is_all_in_use() -> None:
    """An entry nothing needs any more is taken out of ``ENGINE_FOR_UPPER_FLOORS``."""
    package = Path(fairque.__file__).parent
    used: dict[str, set[str]] = {}
    for floor in UPPER_FLOORS:
        for path in _modules(package, floor).values():
            for module, names in _imports_from(path):
                used.setdefault(module, set()).update(names)
    assert {m: names - used.get(m, set()) for m, names in ENGINE_FOR_UPPER_FLOORS.items()} == {
        m: set() for m in ENGINE_FOR_UPPER_FLOORS
    }
