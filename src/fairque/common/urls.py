"""Redis URLs: checked before connecting, never shown with their secrets.

``redact_url`` hides the password of one URL; ``redact_text`` hides every URL's
password in a message, plus every secret this process was told about
(``remember_secrets``), so a password that reaches a message in another form
(percent-decoded, or quoted by a library) is hidden too. ``check_url`` rejects a
malformed URL with a ``ConfigError`` before any connection is tried, and
``url_errors`` turns the server's answer to a bad URL (a database index it does not
have, a non-zero database on a cluster) into the same ``ConfigError``.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Iterable, Iterator
from urllib.parse import unquote, urlsplit

import redis
from redis.connection import ConnectionPool
from redis.exceptions import RedisClusterException, ResponseError

from fairque.errors import ConfigError, FairqueError

SCHEMES = ("redis", "rediss", "unix")
#: Valkey's own names for the same schemes (what ``valkey-server`` tools print)
ALIASES = {"valkey": "redis", "valkeys": "rediss"}
MASK = "***"
#: A remembered secret shorter than this is only hidden inside URLs: replacing every
#: occurrence of a one- or two-character string would garble the message instead.
MIN_SECRET_LENGTH = 4

# query parameters whose value is a credential (``?password=...``, ``ssl_password``...)
_SECRET_PARAM = re.compile(r"(?i)([?&;][^=&#;]*(?:pass|secret|token|auth)[^=&#;]*=)([^&#;]*)")
# a URL inside free text: scheme, then everything up to whitespace or a quote
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")
_SECRETS: set[str] = set()


def redact_url(url: str) -> str:
    """``url`` with its password (and any credential query parameter) replaced by ``***``.

    Works for ``redis://``, ``rediss://`` and ``unix://`` URLs, the ``user:pass@``
    and ``:pass@`` forms, cluster URLs listing several hosts, and URLs that do not
    parse (a password with an unescaped ``/`` or ``#``): everything between the
    scheme and the last ``@`` before the query is credentials. A user name alone
    (``redis://alice@host``) is kept.
    """
    parts = _split_url(url)
    if parts is None:
        return url
    scheme, head, qmark, query, user, password = parts
    if password is not None:
        head = f"{user}:{MASK}{head[head.rfind('@') :]}"
    if qmark:
        query = _SECRET_PARAM.sub(lambda m: m.group(1) + MASK, "?" + query)[1:]
    return f"{scheme}://{head}{qmark}{query}"


def _split_url(url: str) -> tuple[str, str, str, str, str, str | None] | None:
    """(scheme, hosts part, '?' or '', query, user, password or None); None: no scheme.

    Everything between the scheme and the last ``@`` before the query is credentials.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return None
    head, qmark, query = rest.partition("?")
    user, password = "", None
    at = head.rfind("@")
    if at >= 0:
        user, colon, secret = head[:at].partition(":")
        password = secret if colon else None
    return scheme, head, qmark, query, user, password


def url_secrets(url: str) -> set[str]:
    """The credentials in ``url``, as written and percent-decoded (empty: none)."""
    found: set[str] = set()
    parts = _split_url(url)
    if parts is None:
        return found
    _scheme, _head, _qmark, query, _user, password = parts
    if password:
        found.update({password, unquote(password)})
    for match in _SECRET_PARAM.finditer("?" + query):
        if match.group(2):
            found.update({match.group(2), unquote(match.group(2))})
    return found


def remember_secrets(*urls: str | None) -> None:
    """Hide the credentials of ``urls`` in everything ``redact_text`` cleans from now on."""
    for url in urls:
        if url:
            _SECRETS.update(url_secrets(url))


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every URL redacted and every known secret replaced by ``***``."""
    # every log line passes here: a text with no "://" holds no URL, skip the pattern
    cleaned = _URL_IN_TEXT.sub(_redact_match, text) if "://" in text else text
    # longest first, so a secret containing another is replaced whole
    for secret in sorted({*_SECRETS, *secrets}, key=len, reverse=True) if secrets else _known():
        if len(secret) >= MIN_SECRET_LENGTH and secret in cleaned:
            cleaned = cleaned.replace(secret, MASK)
    return cleaned


def _redact_match(match: re.Match[str]) -> str:
    return redact_url(match.group(0))


_known_cache: tuple[frozenset[str], list[str]] = (frozenset(), [])


def _known() -> list[str]:
    """The remembered secrets, longest first (sorted again only when they changed)."""
    global _known_cache
    if _known_cache[0] != _SECRETS:
        _known_cache = (frozenset(_SECRETS), sorted(_SECRETS, key=len, reverse=True))
    return _known_cache[1]


def plain_scheme(url: str) -> str:
    """``url`` with a ``valkey://`` or ``valkeys://`` scheme written as ``redis://`` or
    ``rediss://`` (the same protocol); any other URL unchanged."""
    scheme, sep, rest = url.partition("://")
    plain = ALIASES.get(scheme.lower()) if sep else None
    return f"{plain}://{rest}" if plain else url


def check_url(url: str) -> str:
    """Reject a malformed Redis URL before connecting; returns it with a Valkey scheme
    written as the Redis one (``valkey://`` is ``redis://``, see ``plain_scheme``).

    Checked without any I/O: the scheme, what redis-py can parse (port, query
    values), the database (a non-negative integer in the path or ``?db=``; redis-py
    would silently use 0 for ``/abc``), the socket path of ``unix://`` URLs and that
    every query parameter is one redis-py's connections accept. Whether the server
    has that database is its own answer: see ``url_errors``.

    Raises:
        ConfigError: the URL is invalid; the message shows it redacted.
    """
    if not isinstance(url, str) or not url.strip():
        raise ConfigError("the Redis URL is empty")
    url = plain_scheme(url)
    shown = redact_url(url)
    scheme = url.partition("://")[0] if "://" in url else ""
    if scheme not in SCHEMES:
        raise ConfigError(
            f"Redis URL {shown} must start with redis://, rediss://, unix:// "
            "(or valkey://, valkeys://)"
        )
    try:
        parts = urlsplit(url)
        kwargs = redis.connection.parse_url(url)  # type: ignore[no-untyped-call]
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"invalid Redis URL {shown}: {redact_text(str(exc))}") from None
    if scheme == "unix":
        if not kwargs.get("path"):
            raise ConfigError(f"Redis URL {shown} names no socket path (unix:///path/to/sock)")
    else:
        if port == 0:
            raise ConfigError(f"invalid Redis URL {shown}: port 0")
        db_path = unquote(parts.path).strip("/")
        if db_path and not db_path.isdigit():
            raise ConfigError(
                f"invalid Redis URL {shown}: the database must be a non-negative integer, "
                f"got {redact_text(db_path)!r}"
            )
    db = kwargs.get("db", 0)
    if not isinstance(db, int) or db < 0:
        raise ConfigError(f"invalid Redis URL {shown}: the database must be a non-negative integer")
    pool = ConnectionPool.from_url(url)
    try:
        pool.make_connection()  # builds the connection object only; nothing is sent
    except TypeError as exc:
        unknown = re.search(r"keyword argument '([^']+)'", str(exc))
        what = f"unknown parameter {unknown.group(1)!r}" if unknown else redact_text(str(exc))
        raise ConfigError(f"invalid Redis URL {shown}: {what}") from None
    except ValueError as exc:
        raise ConfigError(f"invalid Redis URL {shown}: {redact_text(str(exc))}") from None
    finally:
        pool.disconnect()
    return url


def explain(exc: BaseException, url: str) -> ConfigError | None:
    """The ``ConfigError`` a server's or redis-py's answer to a bad URL stands for.

    None when ``exc`` says nothing about the URL (a refused connection, say).
    """
    shown = redact_url(url)
    message = str(exc)
    if isinstance(exc, ResponseError) and "DB index is out of range" in message:
        try:
            db = redis.connection.parse_url(url).get("db")  # type: ignore[no-untyped-call]
        except ValueError:  # pragma: no cover - check_url let it through
            db = None
        return ConfigError(
            f"Redis URL {shown}: the server has no database {db} "
            "(the databases setting of the server limits the index)"
        )
    cluster_db = "SELECT is not allowed in cluster mode" in message  # the probe's SELECT
    if cluster_db or (isinstance(exc, RedisClusterException) and "db" in message):
        return ConfigError(f"Redis URL {shown}: a cluster has database 0 only")
    if isinstance(exc, ValueError) and not isinstance(exc, FairqueError):
        return ConfigError(f"invalid Redis URL {shown}: {redact_text(message)}")
    return None


@contextlib.contextmanager
def url_errors(url: str) -> Iterator[None]:
    """Turn the answers to a bad URL raised inside the block into ``ConfigError``."""
    try:
        yield
    except (ResponseError, RedisClusterException, ValueError) as exc:
        err = explain(exc, url)
        if err is None:
            raise
        raise err from None


class RedactingFormatter(logging.Formatter):
    """A log formatter whose lines (tracebacks included) pass through ``redact_text``.

    The default time stamp is formatted once per second (a worker writes two lines
    per task, thousands a second), then given its milliseconds.
    """

    _second: tuple[int, str] = (-1, "")

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        msec_format = self.default_msec_format
        if datefmt or not msec_format:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        if self._second[0] != second:
            stamp = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = (second, stamp)
        return msec_format % (self._second[1], record.msecs)
