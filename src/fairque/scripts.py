"""Load the Lua scripts in ``lua/``, inline their includes and check their contracts.

A script file starts with a header comment that documents every ``KEYS[i]`` and
``ARGV[i]`` it uses; the loader reads the number of declared keys from it so a call
with the wrong key count fails before it reaches the server.  A line
``-- @include name`` is replaced by ``lua/includes/name.lua`` (each include at most once
per script, includes may include others, cycles are an error).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from fairque.errors import FairqueError

LUA_DIR = Path(__file__).parent / "lua"
_INCLUDE = re.compile(r"^--\s*@include\s+([\w-]+)\s*$", re.MULTILINE)
_KEY_DECL = re.compile(r"^KEYS\[(\d+)\][ \t]+(\w+)", re.MULTILINE)


class ScriptLoadError(FairqueError):
    """A Lua script or one of its includes is missing or malformed."""


@dataclass(frozen=True)
class Script:
    """A ready-to-run script: its full source, SHA1 and declared key count."""

    name: str
    source: str
    sha: str
    key_names: tuple[str, ...]

    @property
    def num_keys(self) -> int:
        """How many KEYS the script takes."""
        return len(self.key_names)


def resolve_includes(source: str, include_dir: Path, _stack: tuple[str, ...] = ()) -> str:
    """Return ``source`` with every ``-- @include`` replaced by the included file.

    Raises:
        ScriptLoadError: an include is missing or includes itself through a cycle.
    """
    seen: set[str] = set()

    def expand(text: str, stack: tuple[str, ...]) -> str:
        def repl(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in stack:
                raise ScriptLoadError(f"include cycle: {' -> '.join((*stack, name))}")
            if name in seen:
                return ""
            path = include_dir / f"{name}.lua"
            if not path.is_file():
                raise ScriptLoadError(f"missing include {name!r} (looked for {path})")
            body = expand(path.read_text(), (*stack, name))
            seen.add(name)
            return body

        return _INCLUDE.sub(repl, text)

    return expand(source, _stack)


def declared_keys(source: str) -> tuple[str, ...]:
    """The names of the ``KEYS[i] <name>`` entries a script's header declares, in order.

    Each name is a ``QueueKeys`` attribute: the client fills ``KEYS`` from it.

    Raises:
        ScriptLoadError: the header declares no keys, skips a number or repeats a name.
    """
    header = source.split("]]", 1)[0]
    declared = [(int(n), name) for n, name in _KEY_DECL.findall(header)]
    numbers = [n for n, _ in declared]
    if not numbers or numbers != list(range(1, len(numbers) + 1)):
        raise ScriptLoadError("the header must declare KEYS[1] <name> .. KEYS[n] <name> in order")
    names = tuple(name for _, name in declared)
    if len(set(names)) != len(names):
        raise ScriptLoadError(f"the header declares a key twice: {', '.join(names)}")
    return names


def load_script(path: Path, include_dir: Path | None = None) -> Script:
    """Load one script file, resolving includes relative to ``include_dir``."""
    raw = path.read_text()
    try:
        key_names = declared_keys(raw)
        source = resolve_includes(raw, include_dir or path.parent / "includes")
    except ScriptLoadError as exc:
        raise ScriptLoadError(f"{path.name}: {exc}") from None
    sha = hashlib.sha1(source.encode()).hexdigest()
    return Script(name=path.stem, source=source, sha=sha, key_names=key_names)


@cache
def load_all(directory: Path = LUA_DIR) -> dict[str, Script]:
    """Every script in ``directory`` by name (cached)."""
    return {p.stem: load_script(p) for p in sorted(directory.glob("*.lua"))}
