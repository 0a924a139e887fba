"""``fairque token create``: a token shown once and an entry that holds its digest, which
a live ``serve`` takes as it is."""

from __future__ import annotations

import hashlib

import pytest
import yaml
from helpers.servers import ServerInfo
from helpers.support import unique_queue
from service.harness import Api, LiveServer
from typer.testing import CliRunner

from fairque.cli import app
from fairque.service.settings import ServerSettings, TokenSettings


def test_a_made_token_is_served_with_its_scope(server: ServerInfo) -> None:
    made = CliRunner().invoke(
        app,
        ["token", "create", "acme", "--role", "producer", "--tenant", "acme",
         "--queue", "orders-*", "--expires", "2999-01-01T00:00:00+01:00"],
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    token, *entry_lines = made.stdout.splitlines()
    assert token.startswith("fq_")
    assert len(token) >= 40
    [entry] = yaml.safe_load("\n".join(entry_lines))
    assert token not in made.stdout.split("\n", 1)[1]  # the entry holds only its digest
    assert entry["sha256"] == hashlib.sha256(token.encode()).hexdigest()
    assert (entry["tenants"], entry["queues"]) == (["acme"], ["orders-*"])
    settings = ServerSettings(tokens=[TokenSettings.model_validate(entry)])

    queue = unique_queue("orders")
    live = LiveServer(server.url, [queue], settings)
    try:
        api = Api(live.base, queue, token)
        pushed = api.ok("POST", "/tasks", {"name": "job"}, status=201)
        assert pushed["user_id"] == "acme"
        assert api.call("POST", "/tasks", {"name": "job", "user_id": "x"}).status_code == 403
        assert Api(live.base, queue, token[:-1] + "x").call("GET", "/tasks").status_code == 401
    finally:
        live.stop()

    again = CliRunner().invoke(app, ["token", "create", "acme"])
    assert again.stdout.splitlines()[0] != token  # a new secret each time


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--role", "admin", "--tenant", "acme"], "an admin token acts on whole queues"),
        (["--role", "boss"], "role: Input should be"),
        (["--expires", "2027-01-01T00:00:00"], "must say its time zone"),
        (["--role", "worker", "--tenant", "a-*"], "must be names, not patterns"),
        (["--queue", "has space"], "braces or whitespace"),
    ],
)
def test_a_token_that_could_not_be_served_is_not_made(args: list[str], says: str) -> None:
    refused = CliRunner().invoke(app, ["token", "create", "t", *args])
    assert refused.exit_code == 2
    assert refused.stdout == ""  # no token is shown for an entry the server would refuse
    assert says in refused.stderr
