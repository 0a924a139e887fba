"""Fairness figures of the dashboard: weighted max-min shares, Jain's index, J_norm.

``J = (Σx)² / (n·Σx²)``. The demand-normalised ``J_norm`` (DESIGN §9, as in
``benchmarks/peers/metrics.py``) divides each active user's service in a window by its
weighted max-min fair share of the window's capacity given its demand, then applies
Jain's formula: 1.0 means every user got its fair share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100), linear between closest ranks; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def jain(values: Sequence[float]) -> float | None:
    """Jain's fairness index of ``values`` (1.0 when all are equal); None when empty."""
    if not values:
        return None
    total = sum(values)
    squares = sum(v * v for v in values)
    if squares == 0:
        return 1.0
    return total * total / (len(values) * squares)


def weighted_shares(
    capacity: float, demands: Sequence[float], weights: Sequence[float]
) -> list[float]:
    """Weighted max-min fair allocation of ``capacity`` (water filling), O(n log n).

    Each user gets capacity in proportion to its weight, never more than its demand;
    what a satisfied user leaves is shared among the others by weight. Users are taken
    by demand per weight: while the smallest fits under the current water level it is
    satisfied, and the rest share what remains at one level.
    """
    shares = [0.0] * len(demands)
    order = sorted(
        (i for i in range(len(demands)) if demands[i] > 0), key=lambda i: demands[i] / weights[i]
    )
    remaining = float(capacity)
    total_weight = sum(weights[i] for i in order)
    for rank, i in enumerate(order):
        level = remaining / total_weight if total_weight > 0 else 0.0
        if demands[i] <= level * weights[i]:
            shares[i] = float(demands[i])
            remaining -= shares[i]
            total_weight -= weights[i]
            continue
        for k in order[rank:]:
            shares[k] = level * weights[k]
        break
    return shares


def jain_norm(
    served: Sequence[float],
    demands: Sequence[float],
    weights: Sequence[float],
    shares: Sequence[float] | None = None,
) -> float | None:
    """J over ``served / fair share`` of the users with demand; None without two of them.

    ``shares``: the ``weighted_shares`` of these figures when already computed.
    """
    capacity = float(sum(served))
    if shares is None:
        shares = weighted_shares(capacity, demands, weights)
    ratios = [s / f for s, f in zip(served, shares, strict=True) if f > 0]
    if len(ratios) < 2 or capacity <= 0:
        return None
    return jain(ratios)


def histogram_quantile(
    bounds: Sequence[float], counts: Sequence[int], q: float
) -> tuple[float, bool] | None:
    """The ``q``-quantile (0..1) of a bucketed histogram, as Prometheus estimates it.

    ``counts[i]`` counts the values in bucket i (at most ``bounds[i]``, above
    ``bounds[i - 1]``), the last entry those above every bound. Linear interpolation
    inside the bucket; a quantile in the last bucket answers its lower bound and True
    ("more than"). None without values.
    """
    total = sum(counts)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for i, n in enumerate(counts):
        if seen + n >= rank and n > 0:
            if i >= len(bounds):
                return float(bounds[-1]), True
            low = float(bounds[i - 1]) if i > 0 else 0.0
            return low + (float(bounds[i]) - low) * (rank - seen) / n, False
        seen += n
    return float(bounds[-1]), True
