"""Every script reads only the globals the server gives it, and writes none.

The server refuses a script that writes a global, and fails a call that reads a global
it does not have, but only when that line runs. A helper function that a script defines
only on some path (to spare the others the cost of making it) and uses on another is
such a read, on a path the other tests may never take. The Lua 5.1 compiler names every
global a script reads or writes (``luac5.1 -l``), whatever path it sits on; this checks
the scripts as the server receives them. ``.ci/run`` installs ``luac5.1`` (Debian's
``lua5.1``); elsewhere the test is skipped without it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fairque.core.scripts import load_all

#: What the server's Lua offers a script (Redis and Valkey: the base and standard
#: libraries it loads, and its own modules).
SERVER_GLOBALS = frozenset(
    {
        "redis", "cjson", "cmsgpack", "bit", "struct", "KEYS", "ARGV", "math", "string",
        "table", "tonumber", "tostring", "type", "pairs", "ipairs", "next", "select",
        "unpack", "error", "assert", "pcall", "rawget", "rawset", "setmetatable",
        "getmetatable",
    }
)  # fmt: skip
_GLOBAL = re.compile(r"\b(GETGLOBAL|SETGLOBAL)\b.*;\s*(\S+)\s*$")

LUAC = shutil.which("luac5.1") or shutil.which("luac")

pytestmark = pytest.mark.skipif(
    LUAC is None and not os.environ.get("CI"),
    reason="luac5.1 is not installed (apt-get install lua5.1)",
)


def globals_of(source: str, tmp: Path) -> dict[str, set[str]]:
    """The globals ``source`` reads and writes, by opcode, from the compiler's listing."""
    assert LUAC is not None, "luac5.1 is needed: apt-get install lua5.1"
    path = tmp / "script.lua"
    path.write_text(source)
    listing = subprocess.run(
        [LUAC, "-p", "-l", str(path)], capture_output=True, text=True, check=True
    ).stdout
    found: dict[str, set[str]] = {"GETGLOBAL": set(), "SETGLOBAL": set()}
    for line in listing.splitlines():
        match = _GLOBAL.search(line)
        if match:
            found[match.group(1)].add(match.group(2))
    return found


@pytest.mark.parametrize("name", sorted(load_all()))
def test_script_uses_only_the_servers_globals(name: str, tmp_path: Path) -> None:
    found = globals_of(load_all()[name].source, tmp_path)
    assert found["SETGLOBAL"] == set(), f"{name} writes globals"
    assert found["GETGLOBAL"] - SERVER_GLOBALS == set(), f"{name} reads undefined names"


def test_the_check_sees_a_function_made_on_another_path(tmp_path: Path) -> None:
    source = (
        "local function outer()\n"
        "  if ARGV[1] == 'x' then\n"
        "    local function helper() return 1 end\n"
        "    return helper()\n"
        "  end\n"
        "  return helper()\n"
        "end\n"
        "leaked = outer()\n"
    )
    found = globals_of(source, tmp_path)
    assert found["GETGLOBAL"] - SERVER_GLOBALS == {"helper"}
    assert found["SETGLOBAL"] == {"leaked"}
