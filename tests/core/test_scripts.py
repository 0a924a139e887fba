"""The Lua loader: includes, cycles, declared keys, and the contract of every script."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest
from helpers.servers import SyncClient

from fairque.client.aio import AsyncFairQueue
from fairque.client.queue import FairQueue
from fairque.core import ops as ops_module
from fairque.core.keys import QueueKeys
from fairque.core.scripts import (
    KEY_INCLUDE,
    LUA_DIR,
    ScriptLoadError,
    declared_keys,
    load_all,
    load_script,
)

HEADER = (
    "#!lua flags=allow-oom\n--[[\nx\n]]\n"
    "local K = {prefix = KEYS[1], other = KEYS[2]}\nredis.call('GET', K.other)\n"
)


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


def keyed_script(tmp: Path, declared: str, body: str, **includes: str) -> Path:
    """A script declaring ``declared`` (comma-separated), binding them to K, then ``body``."""
    names = declared.split(",")
    binding = ", ".join(f"{name} = KEYS[{n}]" for n, name in enumerate(names, 1))
    for name, text in includes.items():
        write(tmp, f"includes/{name}.lua", text)
    return write(tmp, "s.lua", f"#!lua\n--[[\nx\n]]\nlocal K = {{{binding}}}\n{body}")


RING_JOIN = (
    "local function ring_join(K, user)\n"
    "  if redis.call('SISMEMBER', K.capped, user) == 0 then\n"
    "    redis.call('ZADD', K.ring, 1, user)\n"
    "  end\n"
    "end\n"
)


def test_keys_used_through_includes_must_be_declared(tmp_path: Path) -> None:
    body = "-- @include ring_join\nring_join(K, ARGV[1])\n"
    path = keyed_script(tmp_path, "prefix,ring", body, ring_join=RING_JOIN)
    with pytest.raises(
        ScriptLoadError, match=r"s\.lua: uses keys its binding does not declare: capped"
    ):
        load_script(path)
    script = load_script(keyed_script(tmp_path, "prefix,ring,capped", body))
    assert script.key_names == ("prefix", "ring", "capped")


def test_declared_keys_must_be_used(tmp_path: Path) -> None:
    # a key named only in a comment is not used
    path = keyed_script(
        tmp_path, "prefix,ring,wake", "-- K.wake\nreturn redis.call('ZCARD', K.ring)\n"
    )
    with pytest.raises(ScriptLoadError, match="declares keys it never uses: wake"):
        load_script(path)


def test_the_prefix_may_go_unused(tmp_path: Path) -> None:
    """Every header starts with the prefix, also where no key is derived from it."""
    assert load_script(keyed_script(tmp_path, "prefix,wake", "return redis.call('LLEN', K.wake)\n"))


@pytest.mark.parametrize(
    "binding",
    [
        "",
        "local K = {ring = KEYS[2], prefix = KEYS[1]}\n",
        "local K = {ring = KEYS[1], prefix = KEYS[2]}\n",
        "local K = {prefix = KEYS[1], ring = KEYS[3]}\n",
        "local K = {prefix = KEYS[1], ring = KEYS[2] .. 'x'}\n",
        "local K = {prefix = KEYS[1], ring = KEYS[2]}\n" * 2,
        "-- local K = {prefix = KEYS[1], ring = KEYS[2]}\n",
    ],
)
def test_the_binding_declares_the_keys_in_order(tmp_path: Path, binding: str) -> None:
    header = "#!lua\n--[[\nx\n]]\n"
    path = write(tmp_path, "s.lua", header + binding + "return redis.call('ZCARD', K.ring)\n")
    with pytest.raises(ScriptLoadError, match=re.escape("local K = {prefix = KEYS[1], <name>")):
        load_script(path)


def test_the_binding_names_each_key_once(tmp_path: Path) -> None:
    body = "local K = {prefix = KEYS[1], ring = KEYS[2], ring = KEYS[3]}\nreturn K.ring\n"
    with pytest.raises(ScriptLoadError, match="names a key twice"):
        load_script(write(tmp_path, "s.lua", "#!lua\n--[[\nx\n]]\n" + body))


def test_a_binding_may_span_lines(tmp_path: Path) -> None:
    header = "#!lua\n--[[\nx\n]]\n"
    body = "local K = {prefix = KEYS[1],\n  ring = KEYS[2]}\nreturn redis.call('ZCARD', K.ring)\n"
    assert load_script(write(tmp_path, "s.lua", header + body)).key_names == ("prefix", "ring")


@pytest.mark.parametrize(
    ("body", "include", "message"),
    [
        ("return redis.call('GET', KEYS[2])\n", "", "the script reads KEYS outside the key table"),
        ("-- @include x\nreturn x()\n", "return KEYS[1]", "includes/x.lua reads KEYS outside"),
        ("return redis.call('GET', K[ARGV[1]])\n", "", "the script indexes K with an expression"),
        (
            "-- @include x\nreturn x(K, '1')\n",
            "return redis.call('GET', K.prefix .. 'task:' .. id)",
            r"includes/x\.lua builds a key from K\.prefix: only includes/keys\.lua may",
        ),
        (
            "local p = ARGV[1]\nreturn redis.call('ZCARD', p .. 'ring')\n",
            "",
            "the script builds key 'ring' by concatenation",
        ),
        (
            "-- @include x\nreturn x(K, '1')\n",
            'local p = ARGV[1]\nreturn redis.call("ZCARD", p .. "held:" .. id)',
            "includes/x.lua builds key 'held:' by concatenation",
        ),
    ],
)
def test_keys_come_only_from_the_key_table_and_the_key_include(
    tmp_path: Path, body: str, include: str, message: str
) -> None:
    x = f"local function x(K, id)\n  {include}\nend\n"
    path = keyed_script(tmp_path, "prefix,wake", "redis.call('LLEN', K.wake)\n" + body, x=x)
    with pytest.raises(ScriptLoadError, match=message):
        load_script(path)


def test_the_key_include_derives_keys_from_the_prefix(tmp_path: Path) -> None:
    keys_lua = "local function task_key(K, id) return K.prefix .. 'task:' .. id end\n"
    body = f"-- @include {KEY_INCLUDE}\nreturn redis.call('HGETALL', task_key(K, ARGV[1]))\n"
    assert load_script(keyed_script(tmp_path, "prefix", body, **{KEY_INCLUDE: keys_lua}))


def test_the_server_runs_keys_by_number_and_builders_inlined(tmp_path: Path) -> None:
    keys_lua = "local function task_key(K, id) return K.prefix .. 'task:' .. id end\n"
    body = (
        f"-- @include {KEY_INCLUDE}\n"
        "return {K.ring, 'K.ring', task_key(K, ARGV[1] or task_key(K, 'x'))}\n"
    )
    script = load_script(keyed_script(tmp_path, "prefix,ring", body, **{KEY_INCLUDE: keys_lua}))
    assert "local K = KEYS\n" in script.source
    assert (
        "return {K[2], 'K.ring', (K[1] .. 'task:' .. (ARGV[1] or (K[1] .. 'task:' .. ('x'))))}"
        in (script.source)
    )
    assert "task_key" not in script.source
    assert "K.prefix" not in script.source


def test_the_key_include_holds_builders_only(tmp_path: Path) -> None:
    keys_lua = "local function task_key(K, id)\n  return K.prefix .. 'task:' .. id\nend\n"
    body = f"-- @include {KEY_INCLUDE}\nreturn task_key(K, ARGV[1])\n"
    path = keyed_script(tmp_path, "prefix", body, **{KEY_INCLUDE: keys_lua})
    with pytest.raises(
        ScriptLoadError, match=r"every function must read: local function <name>_key"
    ):
        load_script(path)


def test_a_builder_is_only_called(tmp_path: Path) -> None:
    keys_lua = "local function task_key(K, id) return K.prefix .. 'task:' .. id end\n"
    body = f"-- @include {KEY_INCLUDE}\nlocal build = task_key\nreturn build(K, ARGV[1])\n"
    path = keyed_script(tmp_path, "prefix", body, **{KEY_INCLUDE: keys_lua})
    with pytest.raises(ScriptLoadError, match=r"use task_key only as a call task_key\(K, <id>\)"):
        load_script(path)


def test_compiled_key_builders_build_the_keys_of_keys_py(
    tmp_path: Path, redis_client: SyncClient
) -> None:
    """The builders of keys.lua, as the server runs them, give the keys keys.py gives."""
    text = (LUA_DIR / "includes" / f"{KEY_INCLUDE}.lua").read_text()
    names = re.findall(r"^local function (\w+)_key\(", text, re.MULTILINE)
    calls = ", ".join(f"{name}_key(K, ARGV[1])" for name in names)
    body = f"-- @include {KEY_INCLUDE}\nreturn {{K.wake, {calls}}}\n"
    script = load_script(keyed_script(tmp_path, "prefix,wake", body), LUA_DIR / "includes")
    keys = QueueKeys("compiled")
    reply = redis_client.eval(script.source, 2, keys.prefix, keys.wake, "a{b}c")
    expected = [keys.wake, *(getattr(keys, name)("a{b}c") for name in names)]
    assert [k.decode() if isinstance(k, bytes) else k for k in reply] == expected


def test_lua_key_builders_match_keys_py() -> None:
    """``includes/keys.lua`` builds the per-task and per-user keys exactly as keys.py does."""
    text = (LUA_DIR / "includes" / f"{KEY_INCLUDE}.lua").read_text()
    builder = re.compile(
        r"^local function (\w+)_key\(K, (\w+)\) return K\.prefix \.\. '([^']+)' \.\. \2 end$"
    )
    functions = [line for line in text.splitlines() if line.startswith("local function")]
    keys = QueueKeys("q")
    built = set()
    for line in functions:
        match = builder.match(line)
        assert match, line
        name, suffix = match.group(1), match.group(3)
        assert getattr(keys, name)("ID") == keys.prefix + suffix + "ID", name
        built.add(name)
    derived = {
        name
        for name, attr in vars(QueueKeys).items()
        if not name.startswith("_") and inspect.isfunction(attr)
    }
    # workflow values (xcom) are read and written by the clients only
    assert built == derived - {"xcom"}


def test_every_declared_key_is_described_once_in_the_key_table() -> None:
    """A script's binding names its keys; what each holds is said once, by its
    ``QueueKeys`` attribute."""
    for name, script in load_all().items():
        for key in script.key_names[1:]:
            attr = vars(QueueKeys).get(key)
            assert isinstance(attr, property), (name, key)
            assert attr.__doc__, (name, key)


@pytest.mark.parametrize(
    "source",
    [
        "--[[ no keys ]]",
        "local K = {prefix = KEYS[1], c = KEYS[3]}",
        "local K = {prefix = KEYS[1], a = KEYS[2], a = KEYS[3]}",
    ],
)
def test_key_declarations_must_be_complete(source: str) -> None:
    with pytest.raises(ScriptLoadError, match=r"KEYS|twice"):
        declared_keys(source)


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
        assert header.split("\n", 1)[1].startswith("--[[\n"), name
        assert script.key_names[0] == "prefix", name
        assert "Reply" in header, name
        assert "@include" not in script.source, name
        # every ARGV the body reads is documented in the header
        body = raw.split("]]", 1)[1]
        for n in set(re.findall(r"ARGV\[(\d+)\]", body)):
            assert f"ARGV[{n}]" in header, (name, n)
    for path in (LUA_DIR / "includes").glob("*.lua"):
        # one local function per include; keys.lua, the key builders, holds one per
        # derived key (test_lua_key_builders_match_keys_py)
        if path.stem != "keys":
            assert path.read_text().count("local function") == 1, path.name


#: the scripts that add work: a server at its memory limit refuses them before they run
GROWING = {"push", "push_one", "fire_schedule", "add_schedule"}


def test_only_the_scripts_that_add_work_are_refused_at_the_memory_limit() -> None:
    scripts = load_all()
    assert {name for name, script in scripts.items() if script.grows} == GROWING
    for name, script in scripts.items():
        first = script.source.split("\n", 1)[0]
        assert first == ("#!lua" if name in GROWING else "#!lua flags=allow-oom"), name


@pytest.mark.parametrize("first", ["--[[", "#!lua flags=no-writes", "#!lua  flags=allow-oom"])
def test_a_script_must_say_how_it_meets_a_full_server(tmp_path: Path, first: str) -> None:
    path = write(tmp_path, "s.lua", first + "\n" + HEADER.split("\n", 1)[1])
    with pytest.raises(ScriptLoadError, match=r"s\.lua: the first line must be"):
        load_script(path)


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
    package = Path(ops_module.__file__).parent
    tree = ast.Module(
        body=[n for f in sorted(package.glob("*.py")) for n in ast.parse(f.read_text()).body],
        type_ignores=[],
    )
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for call in ast.walk(node):
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "_call"
                    and isinstance(call.args[0], ast.Constant)
                ):
                    builders.setdefault(str(call.args[0].value), set()).add(node.name)
    # push, push_many and enqueue each build a push; fail and the undecodable path share
    # a helper; push_one is the fast path of push (one plain task), built by one helper
    shared = {
        "push": {"push", "push_many", "enqueue"},
        "push_one": {"_push_one"},
        "fail": {"_fail_call"},
    }
    fast_paths = {"push_one": "push"}
    # the client method a script serves when its name is not one: a sharded queue's
    # shard list is created by ``open``, its shards' states are read by its lease path
    client_method = {"create_shards": "open", "shard_state": "pop", "lift_floor": "pop"}
    assert set(builders) == set(load_all())
    for name, functions in builders.items():
        assert functions == shared.get(name, {name}), name
        transition = fast_paths.get(name, name)
        assert hasattr(ops_module.Operations, transition), name
        method = client_method.get(name, transition)
        assert hasattr(FairQueue, method), name
        assert hasattr(AsyncFairQueue, method), name
