"""Small statistics helpers: percentiles by nearest rank."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], pct: float) -> float | None:
    """The pct-th percentile (nearest rank) of values; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def ms(value_s: float | None) -> float | None:
    """Seconds to milliseconds, rounded for reports; None stays None."""
    return None if value_s is None else round(value_s * 1000, 3)
