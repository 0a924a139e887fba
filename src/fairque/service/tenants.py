"""The endpoints about how a queue shares its workers: its fairness mode and what each
user was served (``/fairness``, ``/tenants``)."""

from __future__ import annotations

from fairque.models import TenantReport, TenantService
from fairque.service.convert import iso
from fairque.service.handlers import Ctx, Reply, query_int
from fairque.service.wire import (
    FairnessIn,
    FairnessOut,
    TenantOut,
    TenantsOut,
)


async def get_fairness(ctx: Ctx) -> Reply:
    """GET /fairness."""
    mode = await ctx.q.fairness()
    lead = await ctx.q.max_lead()
    return Reply(
        200, FairnessOut(queue=ctx.q.queue, mode=mode, previous=mode, max_lead_seconds=lead)
    )


async def set_fairness(ctx: Ctx) -> Reply:
    """PUT /fairness: a replay answers the same mode (previous = mode then)."""
    body: FairnessIn = ctx.body
    previous = await ctx.q.set_fairness(body.mode, max_lead_seconds=body.max_lead_seconds)
    lead = await ctx.q.max_lead()
    out = FairnessOut(queue=ctx.q.queue, mode=body.mode, previous=previous, max_lead_seconds=lead)
    return Reply(200, out)


def tenant_out(report: TenantReport, tenant: TenantService, weights: int) -> TenantOut:
    """One user's row of a tenants report as the API shows it (``weights``: the sum of
    the named users' weights)."""
    wait = tenant.wait_time
    return TenantOut(
        user_id=tenant.user_id,
        weight=tenant.weight,
        started=tenant.started,
        finished=tenant.finished,
        failed=tenant.failed,
        busy_seconds=tenant.busy_seconds,
        share=report.share(tenant),
        fair_share=tenant.weight / weights if tenant.user_id and weights else 0.0,
        mean_wait_seconds=wait.sum / wait.count if wait.count else None,
        last_lease=iso(tenant.last_lease),
        group=tenant.group,
        floor=tenant.floor,
        ceiling=tenant.ceiling,
    )


async def list_tenants(ctx: Ctx) -> Reply:
    """GET /tenants: what the most recently leased users were served."""
    limit = query_int(ctx, "limit", 20, 1, 1000)
    report = await ctx.q.tenants(limit)
    weights = sum(t.weight for t in report.tenants)
    return Reply(
        200,
        TenantsOut(
            queue=report.queue,
            fairness=report.fairness,
            busy_seconds=report.busy_seconds,
            users_known=report.users_known,
            tenants=[tenant_out(report, t, weights) for t in report.tenants],
            others=tenant_out(report, report.others, weights),
        ),
    )
