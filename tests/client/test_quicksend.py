"""The lean sender of the calls safe to send twice (pushes and the lease family:
fairque.client.quicksend): used only where it changes nothing but the speed, and a failed
connection falls back to the client's ordinary path."""

from __future__ import annotations

import types
from typing import Any

import pytest
import redis
import redis.asyncio as aredis
from helpers.servers import ServerInfo
from helpers.support import unique_queue

from fairque import AsyncFairQueue, FairQueue, Task, TaskState
from fairque.client.quicksend import AsyncQuickSender, QuickSender

pytestmark = pytest.mark.server_kinds("valkey", "redis")


def plain_client(server: ServerInfo, **kwargs: Any) -> redis.Redis:
    return redis.Redis.from_url(server.url, **kwargs)


def spied(q: FairQueue) -> list[Any]:
    """The commands ``q``'s lean sender sends from now on (each its argument tuple)."""
    quick = q._quick
    assert quick is not None
    sent: list[Any] = []
    send = quick.send

    def spy(args: Any) -> Any:
        sent.append(args)
        return send(args)

    quick.send = spy  # type: ignore[method-assign]
    return sent


def test_a_plain_client_pushes_through_the_lean_sender(server: ServerInfo) -> None:
    client = plain_client(server)
    q = FairQueue(client, queue=unique_queue("qs"))
    sent = spied(q)
    t = q.enqueue("a", {"x": 1}, user_id="u")
    pushed = q.push_many([Task(user_id="u", name="b"), Task(user_id="v", name="b")])
    one = q.push(Task(user_id="w", name="c"))
    assert [args[0] for args in sent] == ["EVALSHA"] * 3
    assert pushed.created == [True, True]
    assert {x.task_id for x in q.list_tasks(user_id="u").tasks} == {t.task_id, pushed[0].task_id}
    assert q.get(str(one.task_id)) == one
    client.close()


@pytest.mark.parametrize("where", ["send_packed_command", "read_response"])
def test_a_lost_connection_falls_back_and_pushes_once(
    server: ServerInfo, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The connection fails before the command is sent, or after (the reply is lost):
    the ordinary path sends it again and the task is pushed once, reported created."""
    client = plain_client(server)
    q = FairQueue(client, queue=unique_queue("qs"))
    q.enqueue("a", None, user_id="u")  # the pool holds a connection now
    real = getattr(redis.Connection, where)
    failures = [where]

    def flaky(self: redis.Connection, *args: Any, **kwargs: Any) -> Any:
        answer = real(self, *args, **kwargs)  # the command reached the server
        if failures and where == "read_response":
            failures.pop()
            raise redis.ConnectionError("reply lost")
        return answer

    def flaky_send(self: redis.Connection, *args: Any, **kwargs: Any) -> Any:
        if failures:
            failures.pop()
            raise redis.ConnectionError("connection reset")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(redis.Connection, where, flaky if where == "read_response" else flaky_send)
    pushed = q.push_many([Task(user_id="u", name="a", task_id="t1")])
    assert not failures
    assert pushed.created == [True]
    monkeypatch.undo()
    assert q.stats().counters.get("pushed") == 2
    client.close()


def test_leases_and_completions_take_the_lean_sender(server: ServerInfo) -> None:
    client = plain_client(server)
    q = FairQueue(client, queue=unique_queue("qs"))
    q.push_many([Task(user_id=f"u{i}", name="a", task_id=f"t{i}") for i in range(4)])
    sent = spied(q)
    one = q.pop("w")
    batch = q.pop_batch(2, "w")
    assert one is not None
    acks, more = q.complete_and_pop([(one, 1), *((t, 2) for t in batch)], 1, "w")
    assert acks == [True] * 3
    assert [t.task_id for t in more] == ["t3"]
    scripts = {s.sha: name for name, s in q.ops.scripts.items()}
    assert [scripts[args[1]] for args in sent] == ["pop", "pop", "complete_and_pop"]
    client.close()


def test_a_lost_reply_of_a_worker_call_falls_back_and_counts_once(
    server: ServerInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reply of a completion-and-lease is lost after the server ran it: the ordinary
    path sends it again, and the resend answers the same leases and completes once."""
    client = plain_client(server)
    q = FairQueue(client, queue=unique_queue("qs"))
    q.push_many([Task(user_id="u", name="a", task_id=f"t{i}") for i in range(4)])
    first = q.pop("w")
    assert first is not None
    _, (held,) = q.complete_and_pop([(first, "ok")], 1, "w")  # the server holds the script
    real = redis.Connection.read_response
    failures = [1]

    def flaky(self: redis.Connection, *args: Any, **kwargs: Any) -> Any:
        answer = real(self, *args, **kwargs)  # the server ran it
        if failures:
            failures.pop()
            raise redis.ConnectionError("reply lost")
        return answer

    monkeypatch.setattr(redis.Connection, "read_response", flaky)
    acks, leased = q.complete_and_pop([(held, "ok")], 1, "w")
    monkeypatch.undo()
    assert not failures
    assert acks == [True]
    assert [t.task_id for t in leased] == ["t2"]
    counters = q.stats().counters
    assert (counters.get("completed"), counters.get("popped")) == (2, 3)
    assert q.pop("w") is not None  # t3: t2 was leased once
    assert q.pop("w") is None
    client.close()


def test_the_script_is_loaded_when_the_server_lost_it(server: ServerInfo) -> None:
    client = plain_client(server)
    q = FairQueue(client, queue=unique_queue("qs"))
    client.script_flush()
    t = q.enqueue("a", None, user_id="u")
    assert q.get(str(t.task_id)) is not None
    client.close()


def test_clients_that_need_the_ordinary_path_keep_it(
    server: ServerInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert QuickSender.for_client(plain_client(server, single_connection_client=True)) is None
    assert QuickSender.for_client(plain_client(server, encoding="latin-1")) is None

    class Traced(redis.Redis):
        pass

    assert QuickSender.for_client(Traced.from_url(server.url)) is None
    wrapped = redis.Redis.execute_command

    class Wrapper:  # what instrumentation puts in place of the method
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return wrapped(*args, **kwargs)  # type: ignore[no-untyped-call]

    monkeypatch.setattr(redis.Redis, "execute_command", Wrapper())
    assert not isinstance(redis.Redis.__dict__["execute_command"], types.FunctionType)
    assert QuickSender.for_client(plain_client(server)) is None


async def test_the_async_client_pushes_through_the_lean_sender(server: ServerInfo) -> None:
    client = aredis.Redis.from_url(server.url)
    q = AsyncFairQueue(client, queue=unique_queue("qs"))
    quick = q._quick
    assert quick is not None
    sent: list[Any] = []
    send = quick.send

    async def spy(args: Any) -> Any:
        sent.append(args[0])
        return await send(args)

    quick.send = spy  # type: ignore[method-assign]
    t = await q.enqueue("a", {"x": 1}, user_id="u")
    pushed = await q.push_many([Task(user_id="u", name="b")])
    one = await q.push(Task(user_id="w", name="c"))
    assert sent == ["EVALSHA"] * 3
    assert pushed.created == [True]
    assert await q.get(str(one.task_id)) == one
    assert await q.get(str(t.task_id)) is not None
    await client.script_flush()
    assert (await q.enqueue("a", None, user_id="u")).state is TaskState.QUEUED
    await client.aclose()


async def test_the_async_sender_falls_back_when_the_reply_is_lost(
    server: ServerInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = aredis.Redis.from_url(server.url)
    q = AsyncFairQueue(client, queue=unique_queue("qs"))
    await q.push_many([Task(user_id="u", name="a")])  # the server holds the script
    real = aredis.Connection.read_response
    failures = [1]

    async def flaky(self: aredis.Connection, *args: Any, **kwargs: Any) -> Any:
        answer = await real(self, *args, **kwargs)
        if failures:
            failures.pop()
            raise redis.ConnectionError("reply lost")
        return answer

    monkeypatch.setattr(aredis.Connection, "read_response", flaky)
    pushed = await q.push_many([Task(user_id="u", name="a", task_id="t1")])
    monkeypatch.undo()
    assert not failures
    assert pushed.created == [True]
    assert (await q.stats()).counters.get("pushed") == 2
    assert (
        AsyncQuickSender.for_client(aredis.Redis.from_url(server.url, encoding="latin-1")) is None
    )
    await client.aclose()
