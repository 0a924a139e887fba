"""The buckets of the wait-time and run-time histograms in the stats hash."""

from __future__ import annotations

#: Buckets per doubling of the wait-time and run-time histograms: each bound is
#: 2^(1/4) (about 1.19) times the one before, so a percentile read from the buckets
#: is within 19 % of the true one at any scale the bounds cover.
HISTOGRAM_STEPS_PER_DOUBLING = 4
#: Upper bounds (seconds) of the histograms' buckets, 1 ms to 2^22 ms (70 minutes); a
#: last bucket (+Inf) takes the rest. A process finds a value's bucket by one logarithm
#: (``fairque.core.tally.bucket_of``).
HISTOGRAM_BOUNDS_SECONDS: tuple[float, ...] = tuple(
    2 ** (i / HISTOGRAM_STEPS_PER_DOUBLING) / 1000 for i in range(89)
)
