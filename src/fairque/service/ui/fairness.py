"""Fairness figures of the dashboard: weighted max-min shares, Jain's index, J_norm.

``J = (Σx)² / (n·Σx²)``. The demand-normalised ``J_norm`` (DESIGN §9, as in
``benchmarks/peers/metrics.py``) divides each active user's service in a window by its
weighted max-min fair share of the window's capacity given its demand, then applies
Jain's formula: 1.0 means every user got its fair share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fairque.common.fairshare import jain, jain_norm, weighted_shares

__all__ = ["histogram_quantile", "jain", "jain_norm", "percentile", "weighted_shares"]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100), linear between closest ranks; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


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
