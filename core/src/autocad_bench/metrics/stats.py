"""The statistics behind every number: pass@k, pass^k, clustered bootstrap, paired tests.

Everything here is a pure function of arrays. Intervals are 95% bootstrap intervals over
*tasks*, resampling whole clusters (task families) when instances share one, because
instances generated from one family are not independent draws: resampling them one by one
would make intervals too narrow. The resampling itself is :func:`scipy.stats.bootstrap`
(BCa, falling back to percentile where BCa is undefined) and the paired test is
:func:`scipy.stats.permutation_test` (sign flips per cluster, exact when there are few).

Each estimate is a ratio of cluster sums (total of per-task values over total tasks), which
is the plain mean over tasks when every cluster is resampled with its own size.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import stats as scipy_stats

CONFIDENCE = 0.95
RESAMPLES = 9999
SEED = 20261202
"""Fixed so that a report built twice from the same runs prints the same intervals."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(at least one of k trials passes) from c passes in n trials.

    ``1 - C(n-c, k) / C(n, k)`` (Chen et al., 2021). Raises ValueError unless 0 <= c <= n
    and 1 <= k <= n.
    """
    _check(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(all of k trials pass) from c passes in n trials (pass^k).

    ``C(c, k) / C(n, k)``. Raises ValueError unless 0 <= c <= n and 1 <= k <= n.
    """
    _check(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate over ``n`` tasks in ``clusters`` clusters and its interval.

    ``low``/``high`` are None when no interval can be computed: fewer than two clusters, or
    every task has the same value strictly inside the range (no spread to resample).
    """

    value: float
    low: float | None
    high: float | None
    n: int
    clusters: int

    @property
    def width(self) -> float | None:
        return None if self.low is None or self.high is None else self.high - self.low


def cluster_sums(values: Sequence[float], clusters: Sequence[Hashable]) -> tuple[NDArray[np.float64],
                                                                               NDArray[np.float64]]:
    """Per-cluster (sum of values, number of tasks), in first-seen cluster order."""
    if len(values) != len(clusters):
        raise ValueError("values and clusters differ in length")
    order: dict[Hashable, int] = {}
    for cluster in clusters:
        order.setdefault(cluster, len(order))
    sums = np.zeros(len(order))
    counts = np.zeros(len(order))
    for value, cluster in zip(values, clusters, strict=True):
        sums[order[cluster]] += value
        counts[order[cluster]] += 1
    return sums, counts


def _ratio(sums: NDArray[np.float64], counts: NDArray[np.float64], axis: int = -1) -> NDArray[np.float64]:
    return np.asarray(np.sum(sums, axis=axis) / np.sum(counts, axis=axis))


def binomial_floor(sums: NDArray[np.float64], counts: NDArray[np.float64], *,
                   confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval treating each cluster as one pass/fail trial with
    x = the sum of cluster means successes out of n = clusters (x need not be whole)."""
    n = float(len(sums))
    x = float(np.sum(sums / counts))
    alpha = 1.0 - confidence
    low = 0.0 if x <= 0 else float(scipy_stats.beta.ppf(alpha / 2, x, n - x + 1))
    high = 1.0 if x >= n else float(scipy_stats.beta.ppf(1 - alpha / 2, x + 1, n - x))
    return low, high


def bootstrap_mean(values: Sequence[float], clusters: Sequence[Hashable] | None = None, *,
                   bounds: tuple[float, float] = (0.0, 1.0), binary: bool = False,
                   confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = SEED) -> Interval:
    """Mean of per-task ``values`` with a clustered bootstrap interval.

    ``clusters`` names each task's cluster (its family); None makes every task its own
    cluster. ``bounds`` is the range a value can take. When every cluster sits at one end
    of it (all tasks passed, or none did) every resample agrees and the bootstrap interval
    would collapse to a point, claiming certainty three tasks cannot give; the interval is
    then the exact (Clopper-Pearson) binomial interval over the clusters instead.

    ``binary`` says the values are pass rates (shares of pass/fail trials). Near 0 or 1 a
    bootstrap over few families cannot see failures it never sampled and comes out far too
    narrow (nine perfect families and one at 2/3 would give [0.93, 1]); for pass rates the
    interval is therefore never narrower than :func:`binomial_floor` over the families.
    Raises ValueError on no values.
    """
    if not values:
        raise ValueError("no values to estimate from")
    clusters = list(clusters) if clusters is not None else list(range(len(values)))
    sums, counts = cluster_sums(values, clusters)
    value = float(sums.sum() / counts.sum())
    means = sums / counts
    if len(sums) >= 2 and np.allclose(means, means[0]) and not np.allclose(values, values[0]):
        # The families agree exactly but their tasks do not: resampling families would see
        # no spread at all. Fall back to the tasks' own spread rather than claim certainty.
        task_level = bootstrap_mean(values, None, bounds=bounds, binary=binary, confidence=confidence,
                                    resamples=resamples, seed=seed)
        return Interval(value=value, low=task_level.low, high=task_level.high, n=len(values), clusters=len(sums))
    low, high = _interval(sums, counts, bounds=bounds, confidence=confidence, resamples=resamples, seed=seed)
    if binary and len(sums) >= 2:
        floor_low, floor_high = binomial_floor(sums, counts, confidence=confidence)
        low = floor_low if low is None else min(low, floor_low)
        high = floor_high if high is None else max(high, floor_high)
    return Interval(value=value, low=low, high=high, n=len(values), clusters=len(sums))


def _interval(sums: NDArray[np.float64], counts: NDArray[np.float64], *, bounds: tuple[float, float],
              confidence: float, resamples: int, seed: int) -> tuple[float | None, float | None]:
    if len(sums) < 2:
        return None, None
    means = sums / counts
    if np.allclose(means, means[0]):
        # Every cluster says the same: every resample does too (BCa is undefined here).
        point = float(means[0])
        lo, hi = bounds
        if math.isclose(point, lo) or math.isclose(point, hi):
            n = len(sums)
            ci = scipy_stats.binomtest(n if math.isclose(point, hi) else 0, n).proportion_ci(
                confidence_level=confidence, method="exact")
            return lo + float(ci.low) * (hi - lo), lo + float(ci.high) * (hi - lo)
        # Every task scored exactly the same inside the range: resampling sees no spread,
        # yet a handful of tasks cannot pin the mean down. Say so instead of [v, v].
        return None, None
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = scipy_stats.bootstrap(
                (sums, counts), _ratio, paired=True, vectorized=True, n_resamples=resamples,
                confidence_level=confidence, method=method, rng=np.random.default_rng(seed))
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            return low, high
    return None, None


@dataclass(frozen=True, slots=True)
class PairedResult:
    """Mean of (b - a) over paired tasks, its interval and a two-sided p-value."""

    difference: Interval
    p_value: float | None


def paired_difference(a: Sequence[float], b: Sequence[float], clusters: Sequence[Hashable] | None = None, *,
                      confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = SEED) -> PairedResult:
    """Paired comparison of per-task values ``a`` and ``b`` (same task order).

    The interval is the clustered bootstrap of the mean difference; the p-value is a paired
    permutation test that swaps a and b within whole clusters (exact when 2^clusters is at
    most ``resamples``). The p-value is None with fewer than two clusters.
    """
    if len(a) != len(b):
        raise ValueError("paired values differ in length")
    if not a:
        raise ValueError("no paired values")
    differences = [y - x for x, y in zip(a, b, strict=True)]
    clusters = list(clusters) if clusters is not None else list(range(len(a)))
    interval = bootstrap_mean(differences, clusters, bounds=(-1.0, 1.0), confidence=confidence,
                              resamples=resamples, seed=seed)
    sums_a, counts = cluster_sums(a, clusters)
    sums_b, _ = cluster_sums(b, clusters)
    if len(counts) < 2:
        return PairedResult(interval, None)
    if np.allclose(sums_a, sums_b):
        return PairedResult(interval, 1.0)
    total = counts.sum()

    def mean_difference(x: NDArray[np.float64], y: NDArray[np.float64], axis: int = -1) -> NDArray[np.float64]:
        return np.asarray(np.sum(y - x, axis=axis) / total)

    test = scipy_stats.permutation_test(
        (sums_a, sums_b), mean_difference, permutation_type="samples", vectorized=True,
        n_resamples=resamples, alternative="two-sided", rng=np.random.default_rng(seed))
    return PairedResult(interval, float(min(1.0, test.pvalue)))
