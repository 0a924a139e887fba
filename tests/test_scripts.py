"""The Lua loader: includes, cycles, declared keys, and the contract of every script."""

from __future__ import annotations

from pathlib import Path

import pytest

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


@pytest.mark.parametrize("header", ["--[[ no keys ]]", "--[[\nKEYS[1] a\nKEYS[3] c\n]]"])
def test_key_declarations_must_be_complete(header: str) -> None:
    with pytest.raises(ScriptLoadError, match="KEYS"):
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
        assert path.read_text().count("local function") == 1, path.name
