"""Aggregates the guards need, written for speed on a few hundred floats."""

from __future__ import annotations

import math
import operator
from collections.abc import Collection
from itertools import repeat


def pstdev(values: Collection[float]) -> float:
    """Population standard deviation; two passes of ``math.fsum`` keep it exact enough.

    ``statistics.pstdev`` is exact but about six times slower on 200 floats, and this runs on
    every cycle.
    """
    n = len(values)
    if n == 0:
        return 0.0
    mean = math.fsum(values) / n
    # The same terms as (x - mean) * (x - mean) for each x, built by C-level maps.
    deviations = list(map(operator.sub, values, repeat(mean, n)))
    return math.sqrt(math.fsum(map(operator.mul, deviations, deviations)) / n)


def median(values: Collection[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2
