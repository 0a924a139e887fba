"""The endpoints that set a tenant's and a group's limits (``/users/{user_id}/limits``,
``/groups/{group_id}/limits``) and their bodies."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Struct

from fairque.service.handlers import Ctx, Reply
from fairque.service.wire import (
    Identifier,
)

Weight = Annotated[int, Meta(ge=1, le=1000)]


class LimitsIn(Struct, forbid_unknown_fields=True, kw_only=True):
    """A user's weight (its share against weight 1), in-flight cap (null: no cap),
    backlog quota (its tasks queued, scheduled or deferred; null: the queue's default),
    group (null: none; a group's weight is shared over its tenants in time mode), floor
    (the least part of the worker time it holds while it has work; null: none),
    ceiling (the most while others wait; null: none; above the floor) and byte quota
    (the bytes its tasks hold, payloads and kept results; null: the queue's default)."""

    weight: Weight = 1
    max_in_flight: Annotated[int, Meta(ge=1, le=1_000_000)] | None = None
    max_queued: Annotated[int, Meta(ge=1, le=1_000_000_000)] | None = None
    group: Identifier | None = None
    floor: Annotated[float, Meta(gt=0, lt=1)] | None = None
    ceiling: Annotated[float, Meta(gt=0, lt=1)] | None = None
    max_bytes: Annotated[int, Meta(ge=1, le=1 << 40)] | None = None


class LimitsOut(Struct):
    """The limits now in force for a user."""

    user_id: str
    weight: int
    max_in_flight: int | None
    max_queued: int | None
    group: str | None
    floor: float | None
    ceiling: float | None
    max_bytes: int | None


class GroupLimitsIn(Struct, forbid_unknown_fields=True, kw_only=True):
    """A group's weight (its tenants' share together, against a group of weight 1),
    floor and ceiling (of the worker time its tenants hold together; null: none; the
    ceiling above the floor), in-flight cap (slots its tenants' leases hold at once;
    null: no cap) and backlog quota (its tenants' tasks queued, scheduled or deferred
    together; null: none)."""

    weight: Weight = 1
    floor: Annotated[float, Meta(gt=0, lt=1)] | None = None
    ceiling: Annotated[float, Meta(gt=0, lt=1)] | None = None
    max_in_flight: Annotated[int, Meta(ge=1, le=1_000_000)] | None = None
    max_queued: Annotated[int, Meta(ge=1, le=1_000_000_000)] | None = None


class GroupLimitsOut(Struct):
    """The limits now in force for a group."""

    group_id: str
    weight: int
    floor: float | None
    ceiling: float | None
    max_in_flight: int | None
    max_queued: int | None


async def set_limits(ctx: Ctx) -> Reply:
    """PUT /users/{user_id}/limits: a PUT replaces every limit (one left out or null is
    removed, the group too)."""
    body: LimitsIn = ctx.body
    user_id = ctx.path["user_id"]
    await ctx.q.set_user_limits(
        user_id,
        weight=body.weight,
        max_in_flight=body.max_in_flight or 0,
        max_queued=body.max_queued or 0,
        group=body.group or "",
        floor=body.floor or 0.0,
        ceiling=body.ceiling or 1.0,
        max_bytes=body.max_bytes or 0,
    )
    limits = LimitsOut(
        user_id, body.weight, body.max_in_flight, body.max_queued, body.group, body.floor,
        body.ceiling, body.max_bytes,
    )  # fmt: skip
    return Reply(200, limits)


async def set_group_limits(ctx: Ctx) -> Reply:
    """PUT /groups/{group_id}/limits: a PUT replaces every limit of the group."""
    body: GroupLimitsIn = ctx.body
    group_id = ctx.path["group_id"]
    await ctx.q.set_group_limits(
        group_id, weight=body.weight, floor=body.floor or 0.0, ceiling=body.ceiling or 1.0,
        max_in_flight=body.max_in_flight or 0, max_queued=body.max_queued or 0,
    )  # fmt: skip
    limits = GroupLimitsOut(
        group_id, body.weight, body.floor, body.ceiling, body.max_in_flight, body.max_queued
    )
    return Reply(200, limits)
