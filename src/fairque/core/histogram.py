"""The buckets of the wait-time and run-time histograms the scripts keep."""

from __future__ import annotations

#: Buckets per doubling of the wait-time and run-time histograms: each bound is
#: 2^(1/4) (about 1.19) times the one before, so a percentile read from the buckets
#: is within 19 % of the true one at any scale the bounds cover.
HISTOGRAM_STEPS_PER_DOUBLING = 4
#: Upper bounds (seconds) of the histograms' buckets, 1 ms to 2^22 ms (70 minutes); a
#: last bucket (+Inf) takes the rest. The scripts find a value's bucket from the same
#: formula (``lua/includes/observe.lua``).
HISTOGRAM_BOUNDS_SECONDS: tuple[float, ...] = tuple(
    2 ** (i / HISTOGRAM_STEPS_PER_DOUBLING) / 1000 for i in range(89)
)
