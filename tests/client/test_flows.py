"""The control flows both clients share, and the two drivers that run them.

The flows themselves run against real servers in the behavioural suite (``result``,
``purge``, ``cleanup_dependencies``, ``wait_and_pop`` for both clients); these tests
pin the drivers' contract with plain functions standing in for the transport.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Sequence
from typing import Any

import pytest

import fairque.client.aio
from fairque.client.base import Flow, run_flow, run_flow_async
from fairque.core.records import Call
from fairque.errors import LeaseLost


def call(name: str) -> Call[Any]:
    return Call(None, (), (name,), lambda r: r)


def sample_flow(log: list[str]) -> Flow[str]:
    first = yield call("one")
    log.append(f"got {first}")
    answers = yield (call("two"), call("three"))
    log.append(f"got {answers}")
    try:
        yield call("boom")
    except LeaseLost as exc:
        log.append(f"caught {exc}")
    return "done"


def run(c: Call[Any]) -> Any:
    if c.args[0] == "boom":
        raise LeaseLost("lost")
    return c.args[0].upper()


def run_pipeline(calls: Sequence[Call[Any]]) -> list[Any]:
    return [f"piped {c.args[0]}" for c in calls]


async def arun(c: Call[Any]) -> Any:
    return run(c)


async def arun_pipeline(calls: Sequence[Call[Any]]) -> list[Any]:
    return run_pipeline(calls)


EXPECTED = ["got ONE", "got ['piped two', 'piped three']", "caught lost"]


def test_sync_driver_sends_answers_pipelines_and_errors_into_the_flow() -> None:
    log: list[str] = []
    assert run_flow(sample_flow(log), run, run_pipeline) == "done"
    assert log == EXPECTED


async def test_async_driver_does_the_same() -> None:
    log: list[str] = []
    assert await run_flow_async(sample_flow(log), arun, arun_pipeline) == "done"
    assert log == EXPECTED


def failing_flow() -> Flow[None]:
    yield call("boom")


def test_an_error_the_flow_does_not_catch_reaches_the_caller() -> None:
    with pytest.raises(LeaseLost, match="lost"):
        run_flow(failing_flow(), run, run_pipeline)


async def test_an_error_the_flow_does_not_catch_reaches_the_async_caller() -> None:
    with pytest.raises(LeaseLost, match="lost"):
        await run_flow_async(failing_flow(), arun, arun_pipeline)


def test_the_async_client_does_not_import_the_sync_one() -> None:
    tree = ast.parse(inspect.getsource(fairque.client.aio))
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "fairque.client.queue" not in imported


def test_a_pipeline_reply_that_is_a_lost_connection_is_raised(make_queue: Any) -> None:
    """A cluster pipeline answers a command whose node went away with the error in its
    place (``raise_on_error=False``): the flow raises it, as one command would, rather
    than parse it as a reply."""
    import redis

    q = make_queue()
    flow = q._pipeline((q.ops.wait_for_work(0.01), q.ops.wake(1)))
    assert isinstance(next(flow), tuple)
    lost = redis.ConnectionError("Connection closed by server.")
    with pytest.raises(redis.ConnectionError, match="closed by server"):
        flow.send([True, lost])
