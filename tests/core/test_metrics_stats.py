"""The statistics behind every reported number, checked against exact values and simulations.

- pass@k and pass^k: hand-computed values, and unbiasedness as an exact expectation over the
  binomial distribution (hypothesis picks n, k and the true pass probability) plus a
  Monte Carlo check on synthetic tasks;
- the clustered bootstrap: hand-checkable cases, and coverage of the true value at about
  the stated 95% over many simulated runs, where resampling tasks one by one (ignoring
  families) is shown to under-cover;
- the paired test: exact permutation p-values.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from autocad_bench.metrics.stats import bootstrap_mean, paired_difference, pass_at_k, pass_hat_k


def test_pass_at_k_hand_values() -> None:
    # 3 trials, 1 pass: every 3-subset contains the pass; 2-subsets: 2 of 3 do.
    assert pass_at_k(3, 1, 3) == 1.0
    assert pass_at_k(3, 1, 2) == pytest.approx(2 / 3)
    assert pass_at_k(3, 1, 1) == pytest.approx(1 / 3)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(5, 2))  # 0.7
    assert pass_at_k(4, 0, 2) == 0.0
    assert pass_hat_k(3, 2, 2) == pytest.approx(1 / 3)  # one of the three pairs is both passes
    assert pass_hat_k(3, 3, 3) == 1.0
    assert pass_hat_k(3, 2, 3) == 0.0
    with pytest.raises(ValueError):
        pass_at_k(2, 3, 1)
    with pytest.raises(ValueError):
        pass_hat_k(2, 1, 3)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 25), data=st.data(),
       p=st.one_of(st.sampled_from([0.0, 1.0]), st.floats(1e-6, 1 - 1e-6)))
def test_pass_at_k_and_pass_hat_k_are_unbiased(n: int, data: st.DataObject, p: float) -> None:
    """E[estimator] over c ~ Binomial(n, p) equals the true probability, exactly."""
    k = data.draw(st.integers(1, n))
    weights = scipy_stats.binom.pmf(np.arange(n + 1), n, p)
    expected_at = sum(w * pass_at_k(n, c, k) for c, w in enumerate(weights))
    expected_hat = sum(w * pass_hat_k(n, c, k) for c, w in enumerate(weights))
    assert expected_at == pytest.approx(1 - (1 - p) ** k, abs=1e-9)
    assert expected_hat == pytest.approx(p ** k, abs=1e-9)


def test_pass_at_k_on_synthetic_tasks_matches_the_truth() -> None:
    """Monte Carlo: many tasks with random difficulty, 5 trials each; the mean estimate of
    pass@3 lands on the true mean of 1 - (1-p)^3 (the naive 'any of the first 3' does too,
    but the plug-in 1 - (1 - c/n)^3 is biased, which this test can tell apart)."""
    rng = np.random.default_rng(7)
    p = rng.beta(0.6, 0.9, size=40_000)
    c = rng.binomial(5, p)
    truth = float(np.mean(1 - (1 - p) ** 3))
    unbiased = float(np.mean([pass_at_k(5, int(ci), 3) for ci in c]))
    plug_in = float(np.mean(1 - (1 - c / 5) ** 3))
    assert unbiased == pytest.approx(truth, abs=0.006)
    assert abs(plug_in - truth) > 0.02
    hat = float(np.mean([pass_hat_k(5, int(ci), 3) for ci in c]))
    assert hat == pytest.approx(float(np.mean(p ** 3)), abs=0.006)


def test_bootstrap_hand_cases() -> None:
    one = bootstrap_mean([1.0])
    assert (one.value, one.low, one.high, one.n, one.clusters) == (1.0, None, None, 1, 1)
    # Every task passed: the bootstrap would say [1, 1]; the exact binomial bound is honest.
    three = bootstrap_mean([1.0, 1.0, 1.0])
    assert three.value == 1.0 and three.high == 1.0
    assert three.low == pytest.approx(0.025 ** (1 / 3))
    none = bootstrap_mean([0.0] * 40)
    assert none.low == 0.0 and none.high == pytest.approx(1 - 0.025 ** (1 / 40))
    # A constant inside the range has no spread to resample: no interval rather than [v, v].
    half = bootstrap_mean([0.5] * 5)
    assert (half.value, half.low, half.high) == (0.5, None, None)
    # Clusters: the value is the mean over tasks, the interval counts families.
    clustered = bootstrap_mean([1, 1, 1, 0, 0, 1], ["a", "a", "a", "b", "b", "c"])
    assert clustered.value == pytest.approx(4 / 6)
    assert clustered.clusters == 3 and clustered.n == 6
    assert clustered.low is not None and clustered.high is not None
    assert clustered.low <= clustered.value <= clustered.high
    with pytest.raises(ValueError):
        bootstrap_mean([])


def test_bootstrap_is_reproducible() -> None:
    values = [0.1, 0.9, 0.4, 0.7, 0.3, 0.8, 0.5]
    assert bootstrap_mean(values) == bootstrap_mean(values)


def _coverage(runs: int, *, clustered_data: bool, cluster_aware: bool, seed: int) -> float:
    """Share of simulated runs whose interval covers the population mean."""
    rng = np.random.default_rng(seed)
    hits = 0
    families, per_family = (12, 6) if clustered_data else (12, 4)
    for run in range(runs):
        if clustered_data:
            # Instances of one family share its difficulty: strongly correlated outcomes.
            family_p = rng.beta(0.5, 0.5, size=families)
            p = np.repeat(family_p, per_family)
            truth = 0.5
        else:
            p = rng.beta(2.0, 2.0, size=families * per_family)
            truth = 0.5
        outcomes = rng.binomial(1, p).astype(float)
        labels = list(np.repeat(np.arange(families), per_family)) if cluster_aware else None
        interval = bootstrap_mean(list(outcomes), labels, resamples=1999, seed=seed + run)
        assert interval.low is not None and interval.high is not None
        hits += interval.low <= truth <= interval.high
    return hits / runs


@pytest.mark.parametrize("clustered_data", [False, True])
def test_intervals_cover_the_truth_at_about_the_stated_rate(clustered_data: bool) -> None:
    coverage = _coverage(300, clustered_data=clustered_data, cluster_aware=True, seed=11)
    # 300 runs: a true 95% lands in [0.92, 0.98] with probability ~0.99.
    assert 0.90 <= coverage <= 0.985, coverage


def test_ignoring_families_under_covers() -> None:
    """Why families are resampled whole: treating correlated instances as independent
    makes the intervals too narrow (coverage far below 95%)."""
    naive = _coverage(300, clustered_data=True, cluster_aware=False, seed=11)
    assert naive < 0.85, naive


def test_paired_permutation_p_values_are_exact() -> None:
    # Six families all gaining: the only sign patterns as extreme are all + and all -.
    result = paired_difference([0.0] * 6, [1.0] * 6)
    assert result.p_value == pytest.approx(2 / 64)
    assert result.difference.value == 1.0
    # Three families cannot reach significance whatever happens.
    assert paired_difference([0.0] * 3, [1.0] * 3).p_value == pytest.approx(0.25)
    # Identical sides.
    assert paired_difference([0.2, 0.4], [0.2, 0.4]).p_value == 1.0
    # Six tasks but only two families: the test counts families, not tasks.
    grouped = paired_difference([0.0] * 6, [1.0] * 6, ["a", "a", "a", "b", "b", "b"])
    assert grouped.p_value == pytest.approx(0.5)
    assert paired_difference([0.0], [1.0]).p_value is None
    with pytest.raises(ValueError):
        paired_difference([0.0], [1.0, 0.0])


def test_paired_difference_interval_contains_the_observed_mean() -> None:
    rng = np.random.default_rng(3)
    a = list(rng.random(30))
    b = [min(1.0, x + 0.1 + 0.05 * rng.standard_normal()) for x in a]
    result = paired_difference(a, b)
    e = result.difference
    assert e.low is not None and e.high is not None
    assert e.low < e.value < e.high
    assert e.value == pytest.approx(float(np.mean(np.array(b) - np.array(a))))
    assert result.p_value is not None and result.p_value < 0.001
