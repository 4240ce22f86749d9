"""The report's statistics: hand-computed intervals and p-values, and properties on any input."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lm_eval_fin.report import significance

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
anything = st.one_of(finite, st.just(math.nan), st.just(math.inf), st.just(-math.inf), st.none(), st.text(max_size=3))


# ------------------------------------------------------------------------ hand-computed


def test_bootstrap_interval_of_three_zeros_and_a_one():
    # A resample's mean is k/4 with k ~ Binomial(4, 1/4): P(k=0) = .316, P(k<=2) = .949,
    # P(k<=3) = .996. The 2.5th percentile is k=0 and the 97.5th is k=3.
    interval = significance.bootstrap_interval([0, 0, 0, 1], resamples=10000, seed=3)
    assert (interval.mean, interval.low, interval.high) == (0.25, 0.0, 0.75)
    assert (interval.n, interval.dropped, interval.method) == (4, 0, significance.BOOTSTRAP)


def test_bootstrap_interval_of_two_values_spans_both():
    # resample means: 0 (1/4), 0.5 (1/2), 1 (1/4): both tails reach the extremes
    interval = significance.bootstrap_interval([0.0, 1.0], resamples=4000, seed=1)
    assert (interval.mean, interval.low, interval.high) == (0.5, 0.0, 1.0)


def test_a_constant_or_single_value_has_a_zero_width_interval():
    for values in ([0.7] * 9, [3.0]):
        interval = significance.bootstrap_interval(values)
        assert interval.low == interval.mean == interval.high == values[0]


def test_stderr_interval_is_mean_plus_minus_1_96_stderr():
    interval = significance.stderr_interval(0.5, 0.1, n=30)
    assert interval.method == significance.STDERR
    assert interval.low == pytest.approx(0.5 - 0.19600, abs=1e-5)
    assert interval.high == pytest.approx(0.5 + 0.19600, abs=1e-5)
    assert significance.stderr_interval(0.5, 0.1, confidence=0.9).high == pytest.approx(0.5 + 0.16449, abs=1e-5)


def test_lm_eval_na_stderr_gives_a_bare_value():
    interval = significance.stderr_interval(0.25, "N/A")
    assert interval.method == significance.NONE and interval.mean == 0.25 and not interval.has_bounds


def test_exact_sign_flip_p_values():
    # differences 1, 2, 3: sums over the 8 sign patterns are ±6, ±4, ±2, 0, 0; |sum| >= 6 twice
    assert significance.paired_test([1, 2, 3], [0, 0, 0]).p_value == 0.25
    # five equal differences: only all-plus and all-minus reach |5|: 2 / 32
    test = significance.paired_test([1] * 5, [0] * 5)
    assert (test.p_value, test.method, test.n) == (2 / 32, "exact", 5)
    assert test.difference.mean == 1.0
    # differences 1, -1: sums 2, 0, 0, -2; |sum| >= 0 always
    assert significance.paired_test([1, 0], [0, 1]).p_value == 1.0


def test_monte_carlo_p_value_when_the_exact_test_is_too_large():
    # 20 equal differences: the exact p is 2 / 2**20; the Monte Carlo estimate counts the
    # observed pattern, so it is (hits + 1) / (resamples + 1) with hits ~ 0
    test = significance.paired_test([1.0] * 20, [0.0] * 20, resamples=999, seed=0)
    assert test.method == "monte carlo"
    assert test.p_value == pytest.approx(1 / 1000)


def test_paired_test_leaves_out_pairs_with_a_missing_value():
    test = significance.paired_test([1, 2, math.nan, 3], [0, 0, 5, None])
    assert (test.n, test.dropped) == (2, 2)
    assert test.p_value == 0.5  # differences 1, 2: |sum| >= 3 for ++ and --


def test_no_shared_values_and_empty_inputs():
    assert math.isnan(significance.paired_test([], []).p_value)
    assert significance.paired_test([math.nan], [1.0]).method == "none"
    interval = significance.bootstrap_interval([])
    assert math.isnan(interval.mean) and interval.n == 0 and not interval.has_bounds
    interval = significance.bootstrap_interval([math.nan, "x", None])
    assert math.isnan(interval.mean) and interval.dropped == 3


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="pairs"):
        significance.paired_test([1, 2], [1])
    with pytest.raises(ValueError, match="confidence"):
        significance.bootstrap_interval([1, 2], confidence=1.0)
    with pytest.raises(ValueError, match="resamples"):
        significance.bootstrap_interval([1, 2], resamples=0)


def test_same_seed_same_interval():
    values = [0.1, 0.9, 0.4, 0.4, 0.7, 0.2, 0.3]
    assert significance.bootstrap_interval(values, seed=5) == significance.bootstrap_interval(values, seed=5)


# ----------------------------------------------------------------------------- properties


def _tolerance(values):
    return 1e-9 * max([1.0, *(abs(v) for v in values)])


@settings(max_examples=200, deadline=None)
@given(st.lists(finite, min_size=1, max_size=40), st.integers(0, 2**32 - 1))
def test_the_interval_contains_the_mean(values, seed):
    interval = significance.bootstrap_interval(values, resamples=200, seed=seed)
    eps = _tolerance(values)
    assert interval.low - eps <= interval.mean <= interval.high + eps
    assert min(values) - eps <= interval.low and interval.high <= max(values) + eps


@settings(max_examples=200, deadline=None)
@given(st.lists(anything, max_size=30))
def test_any_input_gives_an_interval_or_a_counted_nan(values):
    interval = significance.bootstrap_interval(values, resamples=100)
    assert interval.n + interval.dropped == len(values)
    if interval.n == 0:
        assert math.isnan(interval.mean)
    else:
        assert math.isfinite(interval.mean)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(anything, anything), max_size=24), st.integers(0, 1000))
def test_p_value_lies_in_0_1(pairs, seed):
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    test = significance.paired_test(a, b, resamples=200, bootstrap_resamples=100, seed=seed)
    assert test.n + test.dropped == len(pairs)
    if test.n:
        assert 0.0 < test.p_value <= 1.0
    else:
        assert math.isnan(test.p_value)


@settings(max_examples=100, deadline=None)
@given(st.lists(finite, min_size=1, max_size=30))
def test_identical_runs_are_not_different(values):
    test = significance.paired_test(values, values, resamples=200, bootstrap_resamples=100)
    assert test.p_value == 1.0
    assert test.difference.mean == test.difference.low == test.difference.high == 0.0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=14))
def test_swapping_the_runs_keeps_the_p_value_and_flips_the_difference(pairs):
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    forward, backward = significance.paired_test(a, b), significance.paired_test(b, a)
    assert forward.p_value == backward.p_value
    assert forward.difference.mean == pytest.approx(-backward.difference.mean, abs=_tolerance(a + b))
