"""What each include inside a block saves: what making its functions costs each run.

A script makes every function it defines on each run, so an include whose function only
a rare path calls (a resend, a reclaim, a group's cap) is inlined inside that path's
block instead of at the top of its file. This finds every such include and measures,
with callgrind on a private Valkey (no task, no random id), the instructions one
``EVAL`` spends making the include's functions and those of the includes it pulls in
(``keys`` aside): an upper bound of what it would add to every call of the scripts that
use it, were it at the top. Each figure is the mean over ``--runs`` calls against the
same count of calls that make nothing, measured back to back (the Lua collector's
steps fall unevenly on single calls). Prints one line per include, then one JSON
document. A test holds ``docs/benchmarks.md``'s table to the includes this finds.

Usage::

    uv run python benchmarks/block_includes.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
LUA = ROOT / "src" / "fairque" / "core" / "lua"
#: the phases reported per include (a task's life, one and 100 per call, and its parts)
PHASES = ("pop1", "complete", "complete_and_pop1", "flow1", "life1", "life100")


def block_includes(lua_dir: Path = LUA) -> list[tuple[str, int, str]]:
    """Each include below a line of code of its file: (file, line number, include)."""
    found = []
    for path in sorted([*lua_dir.glob("*.lua"), *lua_dir.glob("includes/*.lua")]):
        code, in_header = False, False
        for number, line in enumerate(path.read_text().splitlines(), 1):
            text = line.strip()
            if in_header:
                in_header = "]]" not in text
                continue
            if text.startswith("--[["):
                in_header = "]]" not in text
                continue
            if line.startswith("-- @include "):
                if code:
                    found.append((str(path.relative_to(lua_dir)), number, line.split()[-1]))
                continue
            if text and not text.startswith(("--", "#!")):
                code = True
    return found


def move_to_top(path: Path, number: int) -> None:
    """Move the include on line ``number`` of ``path`` after the file's first includes."""
    lines = path.read_text().splitlines(keepends=True)
    line = lines.pop(number - 1)
    first = next(i for i, text in enumerate(lines) if text.startswith("-- @include "))
    lines.insert(first, line)
    path.write_text("".join(lines))


def making_cost(names: list[str], runs: int = 400) -> dict[str, float]:
    """Instructions one EVAL spends making each include's functions (``keys`` aside)."""
    from script_instructions import Counted

    from fairque.core.scripts import resolve_includes

    def script(include: str | None) -> str:
        head = "-- @include keys\n" + (f"-- @include {include}\n" if include else "")
        return resolve_includes(head + "return 1\n", LUA / "includes")

    with tempfile.TemporaryDirectory() as out:
        server = Counted(out)
        client = redis.Redis(port=server.port)
        try:

            def per_eval(source: str) -> float:
                sha = client.script_load(source)
                server.since_last()
                for _ in range(runs):
                    client.evalsha(sha, 0)
                return server.since_last() / runs

            plain = script(None)
            per_eval(plain)  # (loads the engine's first scripts)
            return {name: round(per_eval(script(name)) - per_eval(plain)) for name in names}
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=400)
    args = parser.parse_args()
    found = block_includes()
    costs = making_cost(sorted({name for _, _, name in found}), args.runs)
    rows = []
    for rel, _, name in found:
        rows.append({"file": rel, "include": name, "instructions": costs[name]})
        print(rel, name, costs[name], flush=True)
    print(json.dumps({"includes": rows}))


if __name__ == "__main__":
    main()
