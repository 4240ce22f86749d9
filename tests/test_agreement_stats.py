"""The statistics of lm_eval_fin.agreement against scipy and scikit-learn, and on synthetic
ratings whose agreement is known by construction."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from sklearn.metrics import cohen_kappa_score

from lm_eval_fin.agreement import stats
from lm_eval_fin.agreement.criteria import RatingScale

FIVE = RatingScale(1, 5, ordinal=True)
CONTINUOUS = RatingScale(-100, 100)


def bivariate(n, rho, seed):
    """Judge scores and labels = judge scores + noise, correlated rho by construction."""
    rng = np.random.default_rng(seed)
    judge = rng.standard_normal(n)
    noise = rng.standard_normal(n) * math.sqrt(1 / rho**2 - 1)
    return judge + noise, judge


def test_point_values_are_scipy_and_sklearn_values():
    people = [1, 2, 2, 3, 4, 5, 5, 3, 2, 4]
    judge = [1, 3, 2, 3, 5, 4, 5, 2, 2, 5]
    f = stats.compare(people, judge, FIVE, resamples=20)
    assert f.pearson.value == pytest.approx(scipy_stats.pearsonr(people, judge).statistic)
    assert f.pearson.p_value == pytest.approx(scipy_stats.pearsonr(people, judge).pvalue)
    assert f.spearman.value == pytest.approx(scipy_stats.spearmanr(people, judge).statistic)
    assert f.kendall.value == pytest.approx(scipy_stats.kendalltau(people, judge).statistic)
    assert f.kappa.value == pytest.approx(cohen_kappa_score(people, judge, labels=[1, 2, 3, 4, 5], weights="quadratic"))
    assert f.exact.value == pytest.approx(0.5)
    assert f.bias.value == pytest.approx(0.1)  # judge - people: +1 +1 -1 -1 +1 over 10


def test_weighted_kappa_by_hand():
    # 1 vs 2 and 2 vs 1 on a 1..3 scale: observed cost (1 + 1) / 2 = 1 per weight unit; expected
    # over independent pairs of marginals {1: .5, 2: .5} x {1: .5, 2: .5}: (0 + 1 + 1 + 0) / 4 = .5
    assert stats.kappa(np.array([1, 2]), np.array([2, 1]), RatingScale(1, 3, ordinal=True)) == pytest.approx(1 - 1 / 0.5)
    # a 1-vs-3 miss costs four times a 1-vs-2 miss: only the scale's categories decide the weights
    near = stats.kappa(np.array([1, 2, 3, 1]), np.array([1, 2, 3, 2]), RatingScale(1, 3, ordinal=True))
    far = stats.kappa(np.array([1, 2, 3, 1]), np.array([1, 2, 3, 3]), RatingScale(1, 3, ordinal=True))
    assert near > far


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=2, max_size=30))
def test_kappa_is_sklearns_over_the_whole_scale(pairs):
    x, y = (np.array(v) for v in zip(*pairs))
    ours = stats.kappa(x, y, FIVE)
    theirs = cohen_kappa_score(x, y, labels=[1, 2, 3, 4, 5], weights="quadratic")
    assert (ours is None and not math.isfinite(theirs)) or ours == pytest.approx(theirs)


def _same(ours, theirs):
    return (ours is None and not math.isfinite(theirs)) or ours == pytest.approx(theirs, abs=1e-9)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=3, max_size=40),
       st.lists(st.integers(0, 3), min_size=40, max_size=40))
def test_count_tables_give_scipys_and_sklearns_values(pairs, clusters):
    """compare() works on tables of counts; every figure is still the libraries' value, also where
    it is not defined (a constant rater), with clusters or without."""
    x, y = (np.array(v) for v in zip(*pairs))
    with np.errstate(all="ignore"):
        for f in (stats.compare(x, y, FIVE, resamples=5), stats.compare(x, y, FIVE, resamples=5,
                                                                       clusters=clusters[:len(x)])):
            assert _same(f.pearson.value, scipy_stats.pearsonr(x, y).statistic)
            assert _same(f.spearman.value, scipy_stats.spearmanr(x, y).statistic)
            assert _same(f.kendall.value, scipy_stats.kendalltau(x, y).statistic)
            assert _same(f.kappa.value, cohen_kappa_score(x, y, labels=[1, 2, 3, 4, 5], weights="quadratic"))
            assert f.exact.value == pytest.approx(np.mean(x == y)) and f.bias.value == pytest.approx(np.mean(y - x))
    first, second = np.sign(x - 3), np.sign(y - 3)  # preferences: -1, 0, 1, unweighted kappa
    preference = stats.compare(first, second, RatingScale(-1, 1, categorical=True), resamples=5)
    assert _same(preference.kappa.value, cohen_kappa_score(first, second, labels=[-1, 0, 1]))


def test_pooled_pairs_of_two_raters_are_the_two_in_both_orders():
    rng = np.random.default_rng(4)
    a = rng.integers(1, 6, 40)
    b = np.clip(a + rng.integers(-1, 2, 40), 1, 5)
    pooled = stats.compare_pairs([[p, q] for p, q in zip(a, b)], list(range(40)), FIVE, resamples=50)
    both = np.r_[a, b], np.r_[b, a]
    assert pooled.n == 40 and pooled.clusters == 40 and pooled.bias.value is None
    assert pooled.pearson.value == pytest.approx(scipy_stats.pearsonr(*both).statistic)
    assert pooled.kendall.value == pytest.approx(scipy_stats.kendalltau(*both).statistic)
    assert pooled.kappa.value == pytest.approx(cohen_kappa_score(*both, labels=[1, 2, 3, 4, 5], weights="quadratic"))


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_known_correlation_is_inside_the_intervals(rho):
    people, judge = bivariate(1000, rho, seed=1)
    f = stats.compare(people, judge, CONTINUOUS, resamples=200, seed=2)
    expected = {  # bivariate normal: Spearman 6/pi asin(rho/2), Kendall 2/pi asin(rho)
        "pearson": rho, "spearman": 6 / math.pi * math.asin(rho / 2), "kendall": 2 / math.pi * math.asin(rho)}
    for name, value in expected.items():
        estimate = getattr(f, name)
        assert estimate.low <= value <= estimate.high, (name, estimate, value)
        assert estimate.high - estimate.low < 0.1
    assert f.kappa is None and f.exact is None  # continuous values
    assert f.bias.low <= 0 <= f.bias.high


def test_shuffled_labels_agree_about_nothing():
    people, judge = bivariate(500, 0.9, seed=3)
    shuffled = np.random.default_rng(4).permutation(people)
    f = stats.compare(shuffled, judge, CONTINUOUS, resamples=200)
    for estimate in (f.pearson, f.spearman, f.kendall):
        assert abs(estimate.value) < 0.1 and estimate.low < 0 < estimate.high, estimate
    rng = np.random.default_rng(5)
    ratings = rng.integers(1, 6, 300)
    f = stats.compare(rng.permutation(ratings), ratings, FIVE, resamples=100)
    assert abs(f.kappa.value) < 0.15 and f.kappa.low < 0 < f.kappa.high


def test_a_generous_judge_shows_as_bias_not_as_disagreement_in_order():
    people = np.array([1, 2, 3, 4, 2, 3, 1, 4] * 5)
    f = stats.compare(people, people + 1, FIVE, resamples=50)
    assert f.bias.value == f.bias.low == f.bias.high == 1
    assert f.pearson.value == pytest.approx(1) and f.kendall.value == pytest.approx(1)
    assert f.exact.value == 0 and f.kappa.value < 1


def test_cluster_resampling_keeps_answers_whole():
    rng = np.random.default_rng(0)
    samples = stats.resample_indices(7, 30, rng, clusters=[0, 0, 0, 1, 1, 2, 2])
    groups = [{0, 1, 2}, {3, 4}, {5, 6}]
    for sample in samples:
        assert all(set(sample) & g in (set(), g) for g in groups)


def test_undefined_is_none_and_strict_json():
    f = stats.compare([3, 3, 3, 3], [1, 2, 3, 4], FIVE, resamples=20)
    assert f.pearson.value is None and f.kendall.value is None
    assert any("not defined" in note for note in f.notes)
    json.dumps(f.as_dict(), allow_nan=False)
    assert stats.compare([], [], FIVE).n == 0
    with pytest.raises(ValueError, match="outside the scale"):
        stats.compare([6], [1], FIVE)


def test_leaderboard_order():
    systems = ["a"] * 10 + ["b"] * 10 + ["c"] * 10
    people = np.r_[np.full(10, 4.0), np.full(10, 3.0), np.full(10, 2.0)] + np.tile([0.1, -0.1], 15)
    same = stats.leaderboard_order(systems, people, people * 2, resamples=50)
    assert same.kendall.value == pytest.approx(1) and same.flipped.value == 0 and same.same_top
    reversed_ = stats.leaderboard_order(systems, people, -people, resamples=50)
    assert reversed_.kendall.value == pytest.approx(-1) and reversed_.flipped.value == 1
    assert reversed_.same_top is False and reversed_.top_agrees == 0
    assert [row["system"] for row in same.as_dict()["systems"]] == ["a", "b", "c"]


def test_stability_of_repeated_runs():
    run = [1, 2, 3, 4, 5, 3, 2]
    exact = stats.stability([run, list(run), list(run)], FIVE, resamples=20)
    assert exact.identical.value == 1 and exact.within_sd.value == 0 and set(exact.pairs) == {"1-2", "1-3", "2-3"}
    assert exact.pairs["1-2"].kappa.value == pytest.approx(1)
    noisy = stats.stability([run, [1, 2, 3, 4, 4, None, 2]], FIVE, resamples=20)
    assert noisy.n == 6 and noisy.unjudged == 1
    assert noisy.identical.value == pytest.approx(5 / 6)
    assert noisy.within_sd.value == pytest.approx(np.std([5, 4], ddof=1) / 6)
    with pytest.raises(ValueError, match="at least 2 runs"):
        stats.stability([run], FIVE)
