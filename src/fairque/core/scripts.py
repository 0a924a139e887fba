"""Load the Lua scripts in ``lua/``, inline their includes and check their contracts.

A script file starts with a header comment that says what it does and documents every
``ARGV[i]`` it reads and its reply.  A line ``-- @include name`` is replaced by
``lua/includes/name.lua`` (each include at most once per script, includes may include
others, cycles are an error).

The body's one binding of ``KEYS`` is the one list of the fixed keys a script touches,
each a ``QueueKeys`` attribute (which says what the key holds), the prefix first::

    local K = {prefix = KEYS[1], ring = KEYS[2], leases = KEYS[3]}

The client fills ``KEYS`` from those names.  The script reads them only as
``K.<name>``; includes take ``K`` as a parameter.  Per-task and per-user keys are built
from ``K.prefix`` by ``lua/includes/keys.lua`` alone, one builder per key
(``task_key(K, id)``).  The loader checks this on the inlined source:
every ``K.<name>`` is declared, every declared key but the prefix is used, ``KEYS`` is
read only by the binding, and no file but ``keys.lua`` touches ``K.prefix`` or appends
a key suffix to anything.

The first line says how the script meets a server at its memory limit (Redis 7 and
Valkey script flags): ``#!lua flags=allow-oom`` for a script that moves existing work
along, reads, or changes bounded settings, so workers drain a full server and memory
comes back; plain ``#!lua`` for one that adds work (a push, a schedule, a firing), which
the server then refuses before it runs, so nothing partial is written.

The source is plain Lua; the server runs it compiled by two rewrites that keep its
meaning and take the names' cost out of every call (``compile_keys``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

from fairque.core.keys import QueueKeys
from fairque.core.meta import META
from fairque.errors import FairqueError

LUA_DIR = Path(__file__).parent / "lua"
#: The include that builds per-task and per-user keys from the prefix.
KEY_INCLUDE = "keys"
_INCLUDE = re.compile(r"^--\s*@include\s+([\w-]+)\s*$", re.MULTILINE)
#: the first line of every script: its flags for a server at its memory limit
_SHEBANG = re.compile(r"\A#!lua(?: flags=(allow-oom))?\n")
_KEY_DECL = re.compile(r"^(\w+) = KEYS\[(\d+)\]$")
# a Lua string literal or comment: the rewrites below leave these alone
_STRING = r"'(?:\\.|[^'\\\n])*'" + r'|"(?:\\.|[^"\\\n])*"'
_COMMENT_RE = r"--\[(?P<eq>=*)\[.*?\](?P=eq)\]|--[^\n]*"
_COMMENT = re.compile(f"(?P<string>{_STRING})|{_COMMENT_RE}", re.DOTALL)
_BINDING = re.compile(r"^local K = \{([^{}]*)\}", re.MULTILINE)
_KEY_USE = re.compile(r"\bK\.(\w+)")
#: a command on the meta hash and the quoted literals that follow it
_META_USE = re.compile(
    r"redis\.p?call\('(?P<cmd>\w+)',\s*K\.meta\s*,\s*(?P<args>(?:'[^']*'\s*,\s*)*'[^']*')"
)
#: commands whose quoted arguments after the key are (field, value) pairs
_PAIRS = frozenset({"HSET", "HSETNX", "HINCRBY", "HINCRBYFLOAT"})
# a builder's argument: anything but parentheses, or one level of them
_ARGUMENT = r"(?:[^()'\"]|" + _STRING + r"|\([^()]*\))*"
_BUILDER = re.compile(
    r"^local function (\w+_key)\(K, (\w+)\) return K\.prefix \.\. '([^'\\]*)' \.\. \2 end$",
    re.MULTILINE,
)


class ScriptLoadError(FairqueError):
    """A Lua script or one of its includes is missing or malformed."""


@dataclass(frozen=True)
class Script:
    """A ready-to-run script: its full source, SHA1 and declared key count.

    ``grows`` is true for a script that adds work (its first line is plain ``#!lua``):
    the server refuses it at its memory limit, before it runs.
    """

    name: str
    source: str
    sha: str
    key_names: tuple[str, ...]
    grows: bool = False

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


def memory_class(source: str) -> bool:
    """Whether a script adds work (``#!lua``) rather than moving it along
    (``#!lua flags=allow-oom``), from its first line.

    Raises:
        ScriptLoadError: the first line is neither.
    """
    match = _SHEBANG.match(source)
    if match is None:
        raise ScriptLoadError(
            "the first line must be '#!lua flags=allow-oom' (runs at the memory limit:"
            " moves existing work along) or '#!lua' (adds work: refused at the limit)"
        )
    return match.group(1) is None


def declared_keys(source: str) -> tuple[str, ...]:
    """The names the script's binding ``local K = {prefix = KEYS[1], ...}`` gives its
    keys, in order.

    Each name is a ``QueueKeys`` attribute: the client fills ``KEYS`` from it.

    Raises:
        ScriptLoadError: there is not exactly one binding, or it does not bind
            ``KEYS[1]`` .. ``KEYS[n]`` in order (the prefix first), or repeats a name.
    """
    bindings = _BINDING.findall(_code(source))
    entries = [_KEY_DECL.match(e) for e in _entries(bindings[0])] if len(bindings) == 1 else []
    declared = [(int(m[2]), m[1]) for m in entries if m is not None]
    numbers = [n for n, _ in declared]
    if (
        not declared
        or len(declared) != len(entries)
        or numbers != list(range(1, len(numbers) + 1))
        or declared[0][1] != "prefix"
    ):
        raise ScriptLoadError(
            "the body must bind its keys once, in order, the prefix first:"
            " local K = {prefix = KEYS[1], <name> = KEYS[2], ...}"
        )
    names = tuple(name for _, name in declared)
    if len(set(names)) != len(names):
        raise ScriptLoadError(f"the binding names a key twice: {', '.join(names)}")
    return names


@lru_cache(maxsize=256)
def _code(text: str) -> str:
    """Lua source without its comments (string literals kept)."""
    return _COMMENT.sub(lambda m: m["string"] or "", text)


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


@lru_cache(maxsize=256)
def _keys_used(where: str, code: str) -> frozenset[str]:
    """The key names one file's ``code`` (comments removed) reads from K.

    Raises:
        ScriptLoadError: it reads KEYS, indexes K with an expression, or (unless it is
            the key include) derives a key from the prefix.
    """
    if re.search(r"\bKEYS\b", code):
        raise ScriptLoadError(f"{where} reads KEYS outside the key table: use K.<name>")
    if re.search(r"\bK\s*\[", code):
        raise ScriptLoadError(f"{where} indexes K with an expression: name the key (K.ring)")
    if where != f"includes/{KEY_INCLUDE}.lua":
        if re.search(r"\bK\.prefix\b", code):
            raise ScriptLoadError(
                f"{where} builds a key from K.prefix: only includes/{KEY_INCLUDE}.lua may"
            )
        match = _suffix_concatenation().search(code)
        if match:
            raise ScriptLoadError(
                f"{where} builds key {match.group(2)!r} by concatenation: fixed keys come"
                f" in KEYS (K.<name>), derived ones from includes/{KEY_INCLUDE}.lua"
            )
    return frozenset(_KEY_USE.findall(code))


@cache
def _suffix_concatenation() -> re.Pattern[str]:
    """Matches ``.. '<suffix>'`` for every key suffix of ``keys.py``."""
    suffixes = "|".join(map(re.escape, sorted(_key_suffixes())))
    return re.compile(r"\.\.\s*(['\"])(" + suffixes + r")\1")


def check_keys(body: str, includes: dict[str, str], declared: tuple[str, ...]) -> None:
    """Check that a script touches exactly the fixed keys its binding declares.

    Args:
        body: the script file (header included).
        includes: the text of every include it pulls in, by name.
        declared: the key names its binding declares, in order (``declared_keys``).

    Raises:
        ScriptLoadError: a key is used but not declared (or declared but never used),
            ``KEYS`` is read outside the binding, or a key is built from the prefix
            outside ``includes/keys.lua``.
    """
    code = _code(body)
    used = set(_keys_used("the script", _BINDING.sub("", code)))
    for name, text in includes.items():
        used.update(_keys_used(f"includes/{name}.lua", _code(text)))
    undeclared = sorted(used - set(declared))
    if undeclared:
        raise ScriptLoadError(f"uses keys its binding does not declare: {', '.join(undeclared)}")
    unused = [name for name in declared if name not in used and name != "prefix"]
    if unused:
        raise ScriptLoadError(f"declares keys it never uses: {', '.join(unused)}")


def check_meta(body: str, includes: dict[str, str]) -> None:
    """Check that every field a script names in the meta hash is declared in
    ``fairque.core.meta.META`` (a field built at run time is not seen here).

    Raises:
        ScriptLoadError: a field is not declared.
    """
    unknown: set[str] = set()
    for text in (body, *includes.values()):
        for match in _META_USE.finditer(_code(text)):
            literals = re.findall(r"'([^']*)'", match["args"])
            fields = literals[::2] if match["cmd"] in _PAIRS else literals
            unknown.update(name for name in fields if name not in META)
    if unknown:
        raise ScriptLoadError(
            f"names meta fields fairque.core.meta does not declare: {', '.join(sorted(unknown))}"
        )


def key_builders(text: str) -> dict[str, str]:
    """The builders ``includes/keys.lua`` defines: name -> key suffix.

    Raises:
        ScriptLoadError: a function of the file is not a one-line builder
            ``local function <name>_key(K, id) return K.prefix .. '<suffix>' .. id end``.
    """
    builders = {m[1]: m[3] for m in _BUILDER.finditer(text)}
    if len(builders) != _code(text).count("local function"):
        raise ScriptLoadError(
            f"includes/{KEY_INCLUDE}.lua: every function must read: local function"
            " <name>_key(K, id) return K.prefix .. '<suffix>' .. id end"
        )
    return builders


def compile_keys(source: str, key_names: tuple[str, ...], builders: dict[str, str]) -> str:
    """The inlined ``source`` as the server runs it, with the same meaning.

    Naming keys costs nothing per call after two rewrites (measured with callgrind, a
    key table built per call and a function call per derived key cost up to 16 % more
    instructions per ``complete``):

    - the binding ``local K = {prefix = KEYS[1], ...}`` becomes ``local K = KEYS`` and
      every ``K.<name>`` becomes ``K[<i>]`` by the header's numbering;
    - every ``<name>_key(K, <arg>)`` call of a builder of ``includes/keys.lua`` becomes
      ``(K[1] .. '<suffix>' .. (<arg>))``, and the builders' definitions go.

    Raises:
        ScriptLoadError: a builder is used other than as ``<name>_key(K, <arg>)`` (with
            at most one level of parentheses inside ``<arg>``).
    """
    index = {name: n for n, name in enumerate(key_names, 1)}
    names = "|".join(map(re.escape, builders)) or "(?!)"
    token = re.compile(
        f"{_STRING}|{_COMMENT_RE}|\\b(?P<call>{names})\\(K,\\s*(?P<arg>{_ARGUMENT})\\)"
        f"|\\b(?P<stray>{names})\\b|\\bK\\.(?P<key>\\w+)",
        re.DOTALL,
    )

    def resolve(match: re.Match[str]) -> str:
        if match["call"]:
            arg = token.sub(resolve, match["arg"]).strip()
            return f"(K[{index['prefix']}] .. '{builders[match['call']]}' .. ({arg}))"
        if match["stray"]:
            name = match["stray"]
            raise ScriptLoadError(f"use {name} only as a call {name}(K, <id>)")
        return f"K[{index[match['key']]}]" if match["key"] else match[0]

    return token.sub(resolve, _BINDING.sub("local K = KEYS", _BUILDER.sub("", source), count=1))


def load_script(path: Path, include_dir: Path | None = None) -> Script:
    """Load one script file, resolving includes relative to ``include_dir``.

    Raises:
        ScriptLoadError: an include is missing or cyclic, or the script's keys break
            the contract (see ``check_keys``), or it names an undeclared meta field.
    """
    raw = path.read_text()
    try:
        grows = memory_class(raw)
        key_names = declared_keys(raw)
        source, includes = _inline(raw, include_dir or path.parent / "includes")
        check_keys(raw, includes, key_names)
        check_meta(raw, includes)
        builders = key_builders(includes[KEY_INCLUDE]) if KEY_INCLUDE in includes else {}
        source = compile_keys(source, key_names, builders)
    except ScriptLoadError as exc:
        raise ScriptLoadError(f"{path.name}: {exc}") from None
    sha = hashlib.sha1(source.encode()).hexdigest()
    return Script(name=path.stem, source=source, sha=sha, key_names=key_names, grows=grows)


@cache
def load_all(directory: Path = LUA_DIR) -> dict[str, Script]:
    """Every script in ``directory`` by name (cached)."""
    return {p.stem: load_script(p) for p in sorted(directory.glob("*.lua"))}
