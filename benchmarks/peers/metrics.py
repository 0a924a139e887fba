"""Statistics of the peers benchmark: percentiles, Jain's index and its demand-normalised form.

``J = (Σx)² / (n·Σx²)`` over the tasks each active tenant completed in a window. ``J_norm``
(DESIGN §9) first divides each tenant's completions by its max-min fair share of the window's
capacity given its pending demand, then applies Jain's formula: 1.0 means every tenant got
its max-min fair share.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation between closest ranks."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index of ``values`` (1.0 when all are equal)."""
    total = sum(values)
    squares = sum(v * v for v in values)
    if squares == 0:
        return 1.0
    return total * total / (len(values) * squares)


def max_min_shares(capacity: float, demands: Sequence[float]) -> list[float]:
    """Max-min fair allocation of ``capacity`` among ``demands`` (water filling)."""
    shares = [0.0] * len(demands)
    remaining = capacity
    order = sorted(range(len(demands)), key=lambda i: demands[i])
    for rank, i in enumerate(order):
        fair = remaining / (len(order) - rank)
        shares[i] = min(float(demands[i]), fair)
        remaining -= shares[i]
    return shares


@dataclass(frozen=True)
class Window:
    """Service in one window: completions and demand per active tenant."""

    start: float
    completions: dict[str, int]
    demand: dict[str, int]

    @property
    def jain(self) -> float:
        return jain([float(x) for x in self.completions.values()])

    @property
    def jain_norm(self) -> float:
        tenants = list(self.completions)
        capacity = float(sum(self.completions.values()))
        shares = max_min_shares(capacity, [float(self.demand[t]) for t in tenants])
        return jain([self.completions[t] / s for t, s in zip(tenants, shares, strict=True)])


def windows(
    tenant_of: Mapping[str, str],
    submitted: Mapping[str, float],
    done: Mapping[str, float],
    start: float,
    end: float,
    width: float = 1.0,
) -> list[Window]:
    """The windows ``[start + k·width, start + (k+1)·width)`` up to ``end``.

    A tenant is active in a window when it has demand there: tasks submitted before the
    window's end that were not done before its start. Windows in which nothing completed or
    fewer than two tenants were active are left out (fairness is undefined there).
    """
    subs: dict[str, list[float]] = {}
    dones: dict[str, list[float]] = {}
    for job, tenant in tenant_of.items():
        subs.setdefault(tenant, []).append(submitted[job])
        if job in done:
            dones.setdefault(tenant, []).append(done[job])
    for times in (*subs.values(), *dones.values()):
        times.sort()
    result = []
    count = max(1, math.ceil((end - start) / width))
    for k in range(count):
        a, b = start + k * width, start + (k + 1) * width
        completions: dict[str, int] = {}
        demand: dict[str, int] = {}
        for tenant, sub_times in subs.items():
            done_times = dones.get(tenant, [])
            done_before = bisect.bisect_left(done_times, a)
            wanted = bisect.bisect_left(sub_times, b) - done_before
            if wanted > 0:
                demand[tenant] = wanted
                completions[tenant] = bisect.bisect_left(done_times, b) - done_before
        if len(demand) >= 2 and sum(completions.values()) > 0:
            result.append(Window(a, completions, demand))
    return result


def summarize(values: Sequence[float], digits: int = 3) -> dict[str, float]:
    """p50, p99 and max of ``values``, rounded."""
    return {
        "p50": round(percentile(values, 50), digits),
        "p99": round(percentile(values, 99), digits),
        "max": round(max(values), digits),
    }
