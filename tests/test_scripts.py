"""The Lua loader: includes, cycles, declared keys, and the contract of every script."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from fairque import ops as ops_module
from fairque.aio import AsyncFairQueue
from fairque.keys import QueueKeys
from fairque.queue import FairQueue
from fairque.scripts import LUA_DIR, ScriptLoadError, declared_keys, load_all, load_script

HEADER = "--[[\nx\nKEYS[1] prefix\nKEYS[2] other\n]]\n"


def write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_includes_are_inlined_once_and_nested(tmp_path: Path) -> None:
    write(tmp_path, "includes/a.lua", "-- @include b\nlocal function a() return b() end\n")
    write(tmp_path, "includes/b.lua", "local function b() return 1 end\n")
    script = load_script(
        write(tmp_path, "s.lua", HEADER + "-- @include a\n-- @include b\nreturn a()\n")
    )
    assert script.source.count("local function b()") == 1
    assert script.source.index("function b") < script.source.index("function a")
    assert script.key_names == ("prefix", "other")
    assert script.num_keys == 2
    assert len(script.sha) == 40


def test_missing_include_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "s.lua", HEADER + "-- @include nowhere\n")
    with pytest.raises(ScriptLoadError, match=r"s\.lua: missing include 'nowhere'"):
        load_script(path)


def test_include_cycle_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "includes/a.lua", "-- @include b\n")
    write(tmp_path, "includes/b.lua", "-- @include a\n")
    path = write(tmp_path, "s.lua", HEADER + "-- @include a\n")
    with pytest.raises(ScriptLoadError, match="include cycle: a -> b -> a"):
        load_script(path)


@pytest.mark.parametrize(
    "header",
    ["--[[ no keys ]]", "--[[\nKEYS[1] a\nKEYS[3] c\n]]", "--[[\nKEYS[1] a\nKEYS[2] a\n]]"],
)
def test_key_declarations_must_be_complete(header: str) -> None:
    with pytest.raises(ScriptLoadError, match=r"KEYS|twice"):
        declared_keys(header)


def test_every_script_has_a_full_contract_header() -> None:
    scripts = load_all()
    assert set(scripts) >= {
        "push",
        "pop",
        "complete",
        "fail",
        "extend",
        "requeue",
        "cancel",
        "reclaim",
        "stats",
    }
    for name, script in scripts.items():
        raw = (LUA_DIR / f"{name}.lua").read_text()
        header = raw.split("]]", 1)[0]
        assert header.startswith("--[[\n"), name
        assert "KEYS[1] prefix" in header, name
        assert "Reply" in header, name
        assert "@include" not in script.source, name
        # every ARGV the body reads is documented in the header
        body = raw.split("]]", 1)[1]
        import re

        for n in set(re.findall(r"ARGV\[(\d+)\]", body)):
            assert f"ARGV[{n}]" in header, (name, n)
    for path in (LUA_DIR / "includes").glob("*.lua"):
        # one local function per include; keys.lua, the key builders, holds one per
        # derived key (test_lua_key_builders_match_keys_py)
        if path.stem != "keys":
            assert path.read_text().count("local function") == 1, path.name


def test_every_declared_key_is_a_queue_key() -> None:
    """The client fills KEYS by the names in each header: each must be a ``QueueKeys`` key."""
    keys = QueueKeys("q")
    for name, script in load_all().items():
        for key in script.key_names:
            value = getattr(keys, key, None)
            assert isinstance(value, str), (name, key)
            assert value.startswith(keys.prefix), (name, key)


def test_one_name_per_transition() -> None:
    """A script, the ops builder that calls it and the client methods share one name."""
    builders: dict[str, set[str]] = {}
    tree = ast.parse(inspect.getsource(ops_module))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for call in ast.walk(node):
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "_call"
                    and isinstance(call.args[0], ast.Constant)
                ):
                    builders.setdefault(call.args[0].value, set()).add(node.name)
    # push_many and enqueue both build a push; fail and the undecodable path share a helper
    shared = {"push": {"push_many", "enqueue"}, "fail": {"_fail_call"}}
    assert set(builders) == set(load_all())
    for name, functions in builders.items():
        assert functions == shared.get(name, {name}), name
        assert hasattr(ops_module.Operations, name if name != "push" else "push_many"), name
        assert hasattr(FairQueue, name), name
        assert hasattr(AsyncFairQueue, name), name
