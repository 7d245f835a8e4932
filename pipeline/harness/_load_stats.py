"""The figures of a load or soak run: latency percentiles and climbing trends.

A soak fails when memory or latency keeps climbing. The rule, per series:
with at least :data:`MIN_TREND_SAMPLES` samples, fit a least-squares line
through the second half; the series climbs when that slope, extrapolated over
the whole run, adds more than ``threshold`` (a fraction: 0.25 = 25 %) to the
median of the first half, and the second half's median is above the first's.
A restarted actor's memory is judged from its restart on (its pid changes).

Example::

    LatencyStats.of([0.05, 0.06, 0.2]).p99_ms
    detect_climb(times, rss, threshold=0.25)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

MIN_TREND_SAMPLES = 6

MEMORY_GROWTH_THRESHOLD = 0.25

LATENCY_GROWTH_THRESHOLD = 0.5


class HarnessModel(BaseModel):
    """camelCase in JSON, like every other OLLM output."""

    # built when first used: the thin client of the service imports them with the protocol
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, defer_build=True)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between ranks.

    >>> percentile([1, 2, 3, 4], 50)
    2.5
    """
    if not values:
        return 0.0
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0-100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class LatencyStats(HarnessModel):
    """Turn latency in milliseconds."""

    count: int = 0
    mean_ms: float = 0.0
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    p99_ms: float = 0.0
    max_ms: float = 0.0

    @classmethod
    def of(cls, values_ms: Sequence[float]) -> LatencyStats:
        """The statistics of ``values_ms`` (all zero when empty)."""
        if not values_ms:
            return cls()
        return cls(
            count=len(values_ms),
            mean_ms=round(statistics.fmean(values_ms), 3),
            p50_ms=round(percentile(values_ms, 50), 3),
            p95_ms=round(percentile(values_ms, 95), 3),
            p99_ms=round(percentile(values_ms, 99), 3),
            max_ms=round(max(values_ms), 3),
        )


class Trend(HarnessModel):
    """Whether one sampled series keeps climbing (see the module's rule)."""

    series: str
    samples: int
    first_half_median: float
    second_half_median: float
    slope_per_s: float
    projected_growth: float
    threshold: float
    climbing: bool


def _slope(times: Sequence[float], values: Sequence[float]) -> float:
    mean_t = statistics.fmean(times)
    mean_v = statistics.fmean(values)
    spread = sum((t - mean_t) ** 2 for t in times)
    if spread == 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in zip(times, values, strict=True)) / spread


def detect_climb(
    series: str, times: Sequence[float], values: Sequence[float], threshold: float
) -> Trend | None:
    """The trend of ``values`` over ``times``; None with fewer than MIN_TREND_SAMPLES points."""
    if len(values) != len(times):
        raise ValueError("times and values must have the same length")
    if len(values) < MIN_TREND_SAMPLES:
        return None
    half = len(values) // 2
    first = statistics.median(values[:half])
    second = statistics.median(values[half:])
    slope = _slope(times[half:], values[half:])
    projected = slope * (times[-1] - times[0])
    climbing = slope > 0 and second > first and projected > threshold * abs(first)
    return Trend(
        series=series,
        samples=len(values),
        first_half_median=round(first, 3),
        second_half_median=round(second, 3),
        slope_per_s=round(slope, 6),
        projected_growth=round(projected, 3),
        threshold=threshold,
        climbing=climbing,
    )
