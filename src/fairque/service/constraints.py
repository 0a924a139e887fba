"""The constraint endpoints under ``/v1/queues/{queue}/constraints``: their bodies and
operations. Each operation calls ``AsyncFairQueue``'s constraint methods; the route
table (``fairque.service.routes``) says who may call them (readers list, admins change)."""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta, Struct

from fairque.constraints.model import Constraint, ConstraintInfo
from fairque.errors import ConstraintNotFound
from fairque.service.convert import engine_errors
from fairque.service.handlers import Ctx, Reply
from fairque.service.media import ProblemError
from fairque.service.wire import (
    Identifier,
)

#: a value a payload field is matched against
Scalar = str | int | float | bool | None

Limit = Annotated[int, Meta(ge=1, le=1_000_000)]


class ConstraintIn(Struct, forbid_unknown_fields=True, kw_only=True):
    """A constraint: which tasks it matches and how it limits them (the id is the path's)."""

    name: Annotated[str, Meta(min_length=1, max_length=256)] = "*"
    #: field -> the value it must have (a JSON scalar), or a non-empty list of values
    payload: dict[str, Scalar | Annotated[list[Scalar], Meta(min_length=1)]] = {}
    users: list[Identifier] = []
    rate: Limit | None = None
    per: Annotated[float, Meta(ge=0.001, le=86_400)] = 1.0
    burst: Limit = 1
    concurrency: Limit | None = None
    per_user: bool = False


class BucketOut(Struct):
    """One bucket's use: unexpired leases and parked tasks."""

    running: int
    parked: int


class ConstraintOut(Struct, kw_only=True):
    """A constraint and its use (``buckets``: the id, or ``<id>:<user>`` per user)."""

    constraint_id: str
    queue: str
    name: str
    payload: dict[str, Any]
    users: list[str]
    rate: int | None
    per: float
    burst: int
    concurrency: int | None
    per_user: bool
    running: int
    parked: int
    buckets: dict[str, BucketOut]


class ConstraintsOut(Struct):
    """The queue's constraints, by id."""

    constraints: list[ConstraintOut]


class ConstraintRemoved(Struct):
    """A constraint removed (its parked tasks went back to their lanes)."""

    constraint_id: str
    removed: bool


def constraint_out(info: ConstraintInfo, queue: str) -> ConstraintOut:
    c = info.constraint
    return ConstraintOut(
        constraint_id=c.id, queue=queue, name=c.name, payload=dict(c.payload),
        users=list(c.users), rate=c.rate, per=c.per, burst=c.burst,
        concurrency=c.concurrency, per_user=c.per_user, running=info.running,
        parked=info.parked,
        buckets={b: BucketOut(r, p) for b, (r, p) in info.buckets.items()},
    )  # fmt: skip


def _not_found(ctx: Ctx) -> ProblemError:
    cid = ctx.path["constraint_id"]
    return ProblemError(
        404, "constraint-not-found", "Not Found", f"no constraint {cid} in {ctx.q.queue}"
    )


async def list_constraints(ctx: Ctx) -> Reply:
    """GET /constraints."""
    with engine_errors():
        found = await ctx.q.constraints()
    return Reply(200, ConstraintsOut([constraint_out(i, ctx.q.queue) for i in found]))


async def get_constraint(ctx: Ctx) -> Reply:
    """GET /constraints/{constraint_id}."""
    with engine_errors():
        try:
            info = await ctx.q.constraint(ctx.path["constraint_id"])
        except ConstraintNotFound:
            raise _not_found(ctx) from None
    return Reply(200, constraint_out(info, ctx.q.queue))


async def put_constraint(ctx: Ctx) -> Reply:
    """PUT /constraints/{constraint_id}: define it, or replace its definition."""
    body: ConstraintIn = ctx.body
    with engine_errors():
        constraint = Constraint(
            id=ctx.path["constraint_id"], name=body.name, payload=body.payload,
            users=tuple(body.users), rate=body.rate, per=body.per, burst=body.burst,
            concurrency=body.concurrency, per_user=body.per_user,
        )  # fmt: skip
        await ctx.q.define_constraint(constraint)
        info = await ctx.q.constraint(constraint.id)
    return Reply(200, constraint_out(info, ctx.q.queue))


async def remove_constraint(ctx: Ctx) -> Reply:
    """DELETE /constraints/{constraint_id}."""
    with engine_errors():
        removed = await ctx.q.remove_constraint(ctx.path["constraint_id"])
    if not removed:
        raise _not_found(ctx)
    return Reply(200, ConstraintRemoved(ctx.path["constraint_id"], True))
