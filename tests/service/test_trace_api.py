"""The HTTP API's trace context: a ``traceparent`` header is answered back, the tasks a
push creates keep it (no tracer in this server), a leased task shows it; a malformed
one is ignored."""

from __future__ import annotations

from service.harness import Api

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_push_keeps_the_trace_context_it_was_given(api: Api) -> None:
    pushed = api.call("POST", "/tasks", {"name": "n", "user_id": "u"},
                      headers={"traceparent": PARENT})  # fmt: skip
    assert pushed.status_code == 201, pushed.text
    assert pushed.headers["traceparent"] == PARENT
    task = api.data(pushed)
    assert task["traceparent"] == PARENT
    [leased] = api.lease(1)
    assert leased["traceparent"] == PARENT
    plain = api.call("POST", "/tasks", {"name": "n", "user_id": "u"},
                     headers={"traceparent": "garbage"})  # fmt: skip
    assert plain.status_code == 201
    assert "traceparent" not in plain.headers
    assert api.data(plain)["traceparent"] is None
