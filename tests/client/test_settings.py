"""The queue's settings (``fairque.core.meta``) are set and cleared by their features.

A lease reads the meta hash once to know which stages it needs; a feature turned off
must take its mark away (and what it kept), so a queue's mode is its settings now, not
its history, and turning the feature on again starts from the truth.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from helpers.servers import SyncClient
from helpers.support import MakeQueue

from fairque import QuotaExceeded, Task
from fairque.core.keys import QueueKeys
from fairque.core.meta import META
from fairque.core.scripts import LUA_DIR, ScriptLoadError, load_script

pytestmark = pytest.mark.one_shard("reads one shard's keys")


def meta(client: SyncClient, q: Any) -> dict[str, str]:
    raw: dict[bytes, bytes] = client.hgetall(QueueKeys(q.queue).meta)  # type: ignore[assignment]
    return {k.decode(): v.decode() for k, v in raw.items()}


def test_the_last_group_or_share_gone_makes_the_ring_plain_again(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    keys = QueueKeys(q.queue)
    q.set_user_limits("b", weight=3)
    q.push_many(Task(user_id=u, name="n") for u in ("a", "b", "c") for _ in range(3))
    q.set_user_limits("a", group="g")
    q.set_user_limits("c", floor=0.2)
    counted = meta(redis_client, q)
    assert counted["counted"] == "1"
    assert counted["weights"] == str(1 + 3 + 1)  # the group's 1, b's 3, c's 1
    q.set_user_limits("a", group="")
    assert meta(redis_client, q)["counted"] == "1"  # c's share is left
    q.set_user_limits("c", floor=0)
    plain = meta(redis_client, q)
    assert "counted" not in plain
    assert "weights" not in plain
    for user in ("a", "b", "c"):  # what each member of the ring added is taken back
        assert redis_client.hget(keys.tenant(user), "counted") is None
    assert redis_client.hget(keys.group("g"), "counted") is None
    # a resend of the last change finds the ring plain and leaves it so
    q.set_user_limits("c", floor=0)
    assert meta(redis_client, q) == plain
    # turned on again, the ring is counted from what it holds now
    q.set_user_limits("a", group="g")
    assert meta(redis_client, q)["weights"] == str(1 + 3 + 1)
    served = [t.user_id for t in q.pop_batch(9, "w")]
    assert sorted(served) == ["a"] * 3 + ["b"] * 3 + ["c"] * 3


def test_the_last_group_cap_gone_clears_its_mark(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    q.set_user_limits("a", group="g")
    q.push_many(Task(user_id="a", name="n") for _ in range(4))
    q.set_group_limits("g", max_in_flight=1)
    q.set_group_limits("h", max_in_flight=2)
    assert meta(redis_client, q)["group_caps"] == "1"
    held = q.pop_batch(4, "w")
    assert len(held) == 1  # the group's cap
    q.set_group_limits("g", max_in_flight=0)
    assert meta(redis_client, q)["group_caps"] == "1"  # h's is left
    q.set_group_limits("h", max_in_flight=0)
    assert "group_caps" not in meta(redis_client, q)
    assert len(q.pop_batch(4, "w")) == 3  # no cap: the rest
    assert q.complete(held[0])  # a lease taken under the cap frees its slot as it ends
    assert redis_client.zcard(QueueKeys(q.queue).group_held("g")) == 0


def test_the_last_group_quota_gone_stops_keeping_group_backlogs(
    make_queue: MakeQueue, redis_client: SyncClient
) -> None:
    q = make_queue()
    keys = QueueKeys(q.queue)
    for user in ("a", "b"):
        q.set_user_limits(user, group="g")
    q.push_many(Task(user_id=u, name="n") for u in ("a", "b") for _ in range(2))
    q.set_group_limits("g", max_queued=10)
    q.set_group_limits("h", max_queued=5)
    q.set_group_limits("h", max_queued=6)  # a new value: still one quota of h's
    kept = meta(redis_client, q)
    assert (kept["group_backlogs"], kept["group_quotas"]) == ("1", "2")
    assert redis_client.hget(keys.group("g"), "backlog") == b"4"
    q.set_group_limits("g", max_queued=0)
    assert meta(redis_client, q)["group_quotas"] == "1"
    q.set_group_limits("h", max_queued=0)
    q.set_group_limits("h", max_queued=0)  # a resend: nothing more taken away
    gone = meta(redis_client, q)
    assert "group_backlogs" not in gone
    assert "group_quotas" not in gone
    assert redis_client.hget(keys.group("g"), "backlog") is None
    assert redis_client.hget(keys.backlog, "\0groups") is None
    # pushes meanwhile are not counted for the group; a quota set again counts them all
    q.push_many(Task(user_id="a", name="n") for _ in range(3))
    q.set_group_limits("g", max_queued=8)
    assert redis_client.hget(keys.group("g"), "backlog") == b"7"
    q.push(Task(user_id="b", name="n"))
    with pytest.raises(QuotaExceeded):
        q.push(Task(user_id="b", name="n"))


def test_the_marks_are_set_and_cleared_by_the_scripts_but_costly() -> None:
    """Each feature mark of the meta table is written by a script and taken away by
    one; 'costly' is the one mark still kept once set (its table entry says why)."""
    sources = "\n".join(p.read_text() for p in LUA_DIR.rglob("*.lua"))
    cleared: set[str] = set()
    for args in re.findall(r"'HDEL', K\.meta((?:\s*,\s*'[^']*')+)", sources):
        cleared.update(re.findall(r"'([^']*)'", args))
    marks = {"costly", "counted", "group_caps", "group_backlogs"}
    assert marks <= {name for name, field in META.items() if field.kind == "setting"}
    for mark in sorted(marks):
        assert f"K.meta, '{mark}'" in sources, f"no script sets {mark}"
    assert marks - cleared == {"costly"}
    assert "clearing it needs" in META["costly"].meaning


def test_a_script_naming_an_undeclared_meta_field_is_refused(tmp_path: Path) -> None:
    (tmp_path / "includes").mkdir()
    (tmp_path / "s.lua").write_text(
        "#!lua flags=allow-oom\n--[[\ns: reads a field nobody declared.\n\nReply: it.\n]]\n"
        "local K = {prefix = KEYS[1], meta = KEYS[2]}\n"
        "return redis.call('HMGET', K.meta, 'fair', 'bogus')\n"
    )
    with pytest.raises(ScriptLoadError, match="does not declare: bogus"):
        load_script(tmp_path / "s.lua")
