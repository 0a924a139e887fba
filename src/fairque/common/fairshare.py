"""Fair shares: Jain's index, weighted max-min (water filling) and the demand-normalised
``J_norm`` (DESIGN §9). One definition for the models, the dashboard and the CLI.

``J = (Σx)² / (n·Σx²)``. ``J_norm`` divides each user's service by its weighted max-min
fair share of the service given its demand, then applies Jain's formula: 1.0 means every
user got its fair share; a user that asked for less than an equal split is satisfied by
what it asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["jain", "jain_norm", "weighted_shares"]


def jain(values: Sequence[float]) -> float | None:
    """Jain's fairness index of ``values`` (1.0 when all are equal); None when empty or
    all zero (nothing was served: no figure, rather than a perfect one)."""
    if not values:
        return None
    total = sum(values)
    squares = sum(v * v for v in values)
    if squares == 0:
        return None
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
