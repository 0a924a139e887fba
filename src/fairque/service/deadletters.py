"""The endpoints that retry or delete dead letters in bulk (``/dead-letters/retry``,
``/dead-letters/delete``): FAILED or CANCELED tasks (and FINISHED ones, to delete)
chosen by a filter, counted first with a dry run."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, Struct

from fairque.service.convert import engine_errors
from fairque.service.handlers import Ctx, Reply
from fairque.service.wire import (
    Identifier,
)

Age = Annotated[float, Meta(ge=0, le=315_360_000)]


class _Filter(Struct, forbid_unknown_fields=True, kw_only=True):
    name: Identifier | None = None
    user_id: Identifier | None = None
    error: Annotated[str, Meta(min_length=1, max_length=1000)] | None = None
    older_than_seconds: Age | None = None
    newer_than_seconds: Age | None = None
    dry_run: bool = False


class DeadLettersIn(_Filter, forbid_unknown_fields=True, kw_only=True):
    """Which dead letters: every task in ``state`` that matches each filter given (the
    task's name, its tenant, a text its error holds, seconds since it ended); with
    ``dry_run``, only count them."""

    state: Literal["FAILED", "CANCELED"] = "FAILED"


class DeleteDeadLettersIn(_Filter, forbid_unknown_fields=True, kw_only=True):
    """Which tasks to delete: as for a retry, FINISHED records too (to make room)."""

    state: Literal["FAILED", "CANCELED", "FINISHED"] = "FAILED"


class DeadLettersOut(Struct):
    """How many tasks matched (a dry run) or were moved."""

    count: int
    dry_run: bool


async def _bulk(ctx: Ctx, retry: bool) -> Reply:
    body: DeadLettersIn | DeleteDeadLettersIn = ctx.body
    action = ctx.q.bulk_retry if retry else ctx.q.bulk_delete
    with engine_errors():
        count = await action(
            state=body.state, name=body.name, user_id=body.user_id, error=body.error,
            older_than=body.older_than_seconds, newer_than=body.newer_than_seconds,
            dry_run=body.dry_run,
        )  # fmt: skip
    return Reply(200, DeadLettersOut(count, body.dry_run))


async def retry_dead_letters(ctx: Ctx) -> Reply:
    """POST /dead-letters/retry: queue every matching task again, with a fresh budget."""
    return await _bulk(ctx, retry=True)


async def delete_dead_letters(ctx: Ctx) -> Reply:
    """POST /dead-letters/delete: delete every matching task now."""
    return await _bulk(ctx, retry=False)
