"""Load the Lua scripts in ``lua/``, inline their includes and check their contracts.

A script file starts with a header comment that documents every ``KEYS[i]`` and
``ARGV[i]`` it uses; the client fills ``KEYS`` from the names it declares.  A line
``-- @include name`` is replaced by ``lua/includes/name.lua`` (each include at most once
per script, includes may include others, cycles are an error).

The header is the one list of the fixed keys a script touches.  The body binds them,
in header order, to one key table::

    local K = {prefix = KEYS[1], ring = KEYS[2], leases = KEYS[3]}

and reads them only as ``K.<name>``; includes take ``K`` as a parameter.  Per-task and
per-user keys are built from ``K.prefix`` by ``lua/includes/keys.lua`` alone.  The
loader checks this on the inlined source: every ``K.<name>`` is declared, every
declared key but the prefix is used, ``KEYS`` is read only by the binding, and no file
but ``keys.lua`` touches ``K.prefix`` or appends a key suffix to anything.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from fairque.errors import FairqueError
from fairque.keys import QueueKeys

LUA_DIR = Path(__file__).parent / "lua"
#: The include that builds per-task and per-user keys from the prefix.
KEY_INCLUDE = "keys"
_INCLUDE = re.compile(r"^--\s*@include\s+([\w-]+)\s*$", re.MULTILINE)
_KEY_DECL = re.compile(r"^KEYS\[(\d+)\][ \t]+(\w+)", re.MULTILINE)
# strings are kept (a '--' inside one is no comment); long and line comments go
_COMMENT = re.compile(
    r"""('(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")|--\[(=*)\[.*?\]\2\]|--[^\n]*""", re.DOTALL
)
_BINDING = re.compile(r"^local K = \{([^{}]*)\}", re.MULTILINE)
_KEY_USE = re.compile(r"\bK\.(\w+)")


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
    return _inline(source, include_dir, _stack)[0]


def _inline(
    source: str, include_dir: Path, _stack: tuple[str, ...] = ()
) -> tuple[str, dict[str, str]]:
    """``source`` with its includes inlined, and the text of each include by name."""
    seen: dict[str, str] = {}

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
            raw = path.read_text()
            body = expand(raw, (*stack, name))
            seen[name] = raw
            return body

        return _INCLUDE.sub(repl, text)

    return expand(source, _stack), seen


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


def _code(text: str) -> str:
    """Lua source without its comments (string literals kept)."""
    return _COMMENT.sub(lambda m: m.group(1) or "", text)


@cache
def _key_suffixes() -> frozenset[str]:
    """What ``keys.py`` appends to the prefix: fixed keys whole, derived keys up to the id."""
    keys = QueueKeys("q")
    suffixes: set[str] = set()
    for name, attr in vars(QueueKeys).items():
        if name.startswith("_") or name == "prefix":
            continue
        if isinstance(attr, property):
            suffixes.add(getattr(keys, name).removeprefix(keys.prefix))
        elif callable(attr):
            suffixes.add(getattr(keys, name)("").removeprefix(keys.prefix))
    return frozenset(suffixes)


def _entries(table: str) -> list[str]:
    """The entries of a Lua table constructor, whitespace normalised."""
    return [" ".join(entry.split()) for entry in table.split(",")]


def check_keys(body: str, includes: dict[str, str], declared: tuple[str, ...]) -> None:
    """Check that a script touches exactly the fixed keys its header declares.

    Args:
        body: the script file (header included).
        includes: the text of every include it pulls in, by name.
        declared: the key names its header declares, in order.

    Raises:
        ScriptLoadError: the binding does not match the header, a key is used but not
            declared (or declared but never used), ``KEYS`` is read outside the
            binding, or a key is built from the prefix outside ``includes/keys.lua``.
    """
    code = _code(body)
    bindings = _BINDING.findall(code)
    expected = [f"{name} = KEYS[{n}]" for n, name in enumerate(declared, 1)]
    if len(bindings) != 1 or _entries(bindings[0]) != expected:
        raise ScriptLoadError(
            "the body must bind the header's keys once, in order:"
            f" local K = {{{', '.join(expected)}}}"
        )
    files = {"the script": _BINDING.sub("", code)}
    files.update({f"includes/{name}.lua": _code(text) for name, text in includes.items()})
    suffix = re.compile(
        r"\.\.\s*(['\"])(" + "|".join(map(re.escape, sorted(_key_suffixes()))) + r")\1"
    )
    used: set[str] = set()
    for where, text in files.items():
        if re.search(r"\bKEYS\b", text):
            raise ScriptLoadError(f"{where} reads KEYS outside the key table: use K.<name>")
        if re.search(r"\bK\s*\[", text):
            raise ScriptLoadError(f"{where} indexes K with an expression: name the key (K.ring)")
        if where != f"includes/{KEY_INCLUDE}.lua":
            if re.search(r"\bK\.prefix\b", text):
                raise ScriptLoadError(
                    f"{where} builds a key from K.prefix: only includes/{KEY_INCLUDE}.lua may"
                )
            match = suffix.search(text)
            if match:
                raise ScriptLoadError(
                    f"{where} builds key {match.group(2)!r} by concatenation: fixed keys come"
                    f" in KEYS (K.<name>), derived ones from includes/{KEY_INCLUDE}.lua"
                )
        used.update(_KEY_USE.findall(text))
    undeclared = sorted(used - set(declared))
    if undeclared:
        raise ScriptLoadError(f"uses keys its header does not declare: {', '.join(undeclared)}")
    unused = [name for name in declared if name not in used and name != "prefix"]
    if unused:
        raise ScriptLoadError(f"declares keys it never uses: {', '.join(unused)}")


def load_script(path: Path, include_dir: Path | None = None) -> Script:
    """Load one script file, resolving includes relative to ``include_dir``.

    Raises:
        ScriptLoadError: an include is missing or cyclic, or the script's keys break
            the contract (see ``check_keys``).
    """
    raw = path.read_text()
    try:
        key_names = declared_keys(raw)
        source, includes = _inline(raw, include_dir or path.parent / "includes")
        check_keys(raw, includes, key_names)
    except ScriptLoadError as exc:
        raise ScriptLoadError(f"{path.name}: {exc}") from None
    sha = hashlib.sha1(source.encode()).hexdigest()
    return Script(name=path.stem, source=source, sha=sha, key_names=key_names)


@cache
def load_all(directory: Path = LUA_DIR) -> dict[str, Script]:
    """Every script in ``directory`` by name (cached)."""
    return {p.stem: load_script(p) for p in sorted(directory.glob("*.lua"))}
