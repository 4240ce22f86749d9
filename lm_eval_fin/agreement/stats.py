"""The statistics of agreement: pure functions of paired numbers, no I/O.

Two raters scored the same units (answers, or EMS reference points): a ``reference`` (people,
or the first judge) and a ``judged`` one (the judge under test). :func:`compare` gives

* Pearson's r, Spearman's rho and Kendall's tau-b (:mod:`scipy.stats`), each with its
  percentile bootstrap interval: resample the units with replacement (whole clusters where
  units belong to one answer), recompute the statistic, read the 2.5th and 97.5th percentiles;
* Cohen's kappa (:func:`sklearn.metrics.cohen_kappa_score`) on ordinal scales, quadratic
  weights over the whole scale (a 1-vs-5 disagreement costs 16 times a 1-vs-2 one), and the
  share of units scored exactly alike; unweighted on a categorical scale (preferences);
* the mean signed bias ``mean(judged - reference)`` in the scale's units (> 0: the judge is
  more generous), with its interval.

:func:`leaderboard_order` asks whether two raters rank systems (models) alike: Kendall's tau
and Spearman's rho of the systems' mean scores and the share of system pairs whose order
flips, with intervals from resampling units within each system. :func:`stability` is the
agreement of one judge with itself over repeated runs.

The figures are computed from tables of counts of the paired values (ratings take few distinct
values), a resample being another table, so a comparison of 100,000 ratings costs what one of
100 does; values too varied for a table are resampled unit by unit. Both give scipy's and
scikit-learn's values. :func:`compare_pairs` pools raters: every pair of two ratings of a unit.

A statistic that is not defined (constant values, too few units) is None, never NaN; a
resample where it is not defined is left out of the interval and counted in a note. Every
random draw comes from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse, stats
from sklearn.metrics import cohen_kappa_score

from lm_eval_fin.agreement.criteria import RatingScale
from lm_eval_fin.agreement.figures import Estimate
from lm_eval_fin.agreement.resampling import CONFIDENCE, RESAMPLES
from lm_eval_fin.agreement.tables import TABLE_CELLS, resampled_statistics, table_statistics

MIN_UNITS = 3  # a correlation of fewer units says nothing
QUADRATIC = "quadratic"


NO_ESTIMATE = Estimate(None)


@dataclass
class Figures:
    """The agreement of two raters on one criterion over ``n`` units."""

    n: int
    pearson: Estimate = NO_ESTIMATE
    spearman: Estimate = NO_ESTIMATE
    kendall: Estimate = NO_ESTIMATE
    kappa: Estimate | None = None  # None: not defined on this scale (continuous values)
    exact: Estimate | None = None  # share of units scored alike; None on continuous scales
    bias: Estimate = NO_ESTIMATE
    clusters: int | None = None  # answers the units belong to, when units are parts of answers
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "n": self.n,
            "clusters": self.clusters,
            "pearson": self.pearson.as_dict(),
            "spearman": self.spearman.as_dict(),
            "kendall": self.kendall.as_dict(),
            "kappa": None if self.kappa is None else self.kappa.as_dict(),
            "exact": None if self.exact is None else self.exact.as_dict(),
            "bias": self.bias.as_dict(),
            "notes": list(self.notes),
        }


def _finite(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _quiet(function: Callable[..., float]) -> Callable[..., float | None]:
    """``function`` with scipy's and sklearn's warnings about constant input silenced: an
    undefined statistic comes back as None, which is what the caller reports."""

    def call(*args) -> float | None:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return _finite(function(*args))

    return call


def pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    return _quiet(lambda a, b: stats.pearsonr(a, b).statistic)(x, y)


def spearman(x: np.ndarray, y: np.ndarray) -> float | None:
    return _quiet(lambda a, b: stats.spearmanr(a, b).statistic)(x, y)


def kendall(x: np.ndarray, y: np.ndarray) -> float | None:
    return _quiet(lambda a, b: stats.kendalltau(a, b).statistic)(x, y)


def kappa(x: np.ndarray, y: np.ndarray, scale: RatingScale) -> float | None:
    """Cohen's kappa of two raters on a discrete scale: quadratic weights over every category of
    an ordinal scale (sklearn weighs by the position in ``labels``, so all are passed), none on
    a categorical one. None where it is not defined (both raters used a single category)."""
    weights = None if scale.categorical else QUADRATIC
    labels = scale.categories
    return _quiet(lambda a, b: cohen_kappa_score(a.astype(int), b.astype(int), labels=labels, weights=weights))(x, y)


def _p_value(test: Callable, x: np.ndarray, y: np.ndarray) -> float | None:
    return _quiet(lambda a, b: test(a, b).pvalue)(x, y)


def resample_indices(n: int, resamples: int, rng: np.random.Generator,
                     clusters: Sequence[int] | None = None,
                     strata: Sequence[int] | None = None) -> list[np.ndarray]:
    """Index arrays of ``resamples`` bootstrap resamples of ``n`` units: units drawn with
    replacement; with ``clusters`` (a cluster id per unit) whole clusters are drawn; with
    ``strata`` (a stratum id per unit) each stratum keeps its size."""
    if clusters is not None:
        members: dict[int, list[int]] = {}
        for index, cluster in enumerate(clusters):
            members.setdefault(cluster, []).append(index)
        groups = [np.asarray(m) for m in members.values()]
        draws = rng.integers(0, len(groups), size=(resamples, len(groups)))
        return [np.concatenate([groups[g] for g in row]) for row in draws]
    if strata is not None:
        by_stratum: dict[int, list[int]] = {}
        for index, stratum in enumerate(strata):
            by_stratum.setdefault(stratum, []).append(index)
        parts = [np.asarray(m)[rng.integers(0, len(m), size=(resamples, len(m)))] for m in by_stratum.values()]
        return list(np.concatenate(parts, axis=1))
    return list(rng.integers(0, n, size=(resamples, n)))


def _interval(values: list[float | None], confidence: float) -> tuple[float | None, float | None, int]:
    """(low, high) percentile bounds of the defined resampled values, and how many were undefined."""
    defined = np.asarray([v for v in values if v is not None], dtype=float)
    missing = len(values) - len(defined)
    if not len(defined):
        return None, None, missing
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(defined, [tail, 100 - tail])
    return float(low), float(high), missing


@dataclass
class _Gaps:
    """What :func:`compare` could not estimate, gathered into one note each."""

    undefined: list[str] = field(default_factory=list)
    thin: dict[str, int] = field(default_factory=dict)  # statistic -> resamples where it was undefined

    def notes(self, resamples: int) -> list[str]:
        found = []
        if self.undefined:
            found.append(f"{', '.join(self.undefined)} not defined: a rater gave every unit the same value")
        if self.thin:
            found.append(f"{', '.join(self.thin)}: up to {max(self.thin.values())} of {resamples} resamples had a "
                         "constant rater and are left out of the interval (too few distinct values for a reliable "
                         "interval)")
        return found


def check_values(values: np.ndarray, scale: RatingScale, who: str) -> None:
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{who} has values that are not finite numbers")
    if np.any(values < scale.low) or np.any(values > scale.high):
        raise ValueError(f"{who} has values outside the scale {scale.describe()}")
    if scale.discrete and np.any(values != np.round(values)):
        raise ValueError(f"{who} has values that are not integers on the scale {scale.describe()}")


# --------------------------------------------------------------- statistics of count tables
#
# Ratings take few distinct values (1..5, 0..10), so n paired units are summed up by a table of
def _interval_of(values: np.ndarray, confidence: float) -> tuple[float | None, float | None, int]:
    return _interval([None if not math.isfinite(v) else float(v) for v in values], confidence)


def _from_table(point: float | None, resampled: np.ndarray, confidence: float, name: str, gaps: _Gaps,
                p_value: float | None = None) -> Estimate:
    if point is None:
        gaps.undefined.append(name)
        return NO_ESTIMATE
    low, high, missing = _interval_of(resampled, confidence)
    if len(resampled) and missing / len(resampled) > 0.01:
        gaps.thin[name] = missing
    return Estimate(point, low, high, p_value)


def _estimate(statistic: Callable[[np.ndarray, np.ndarray], float | None], x: np.ndarray, y: np.ndarray,
              samples: list[np.ndarray], confidence: float, name: str, gaps: _Gaps,
              p_value: float | None = None) -> Estimate:
    value = statistic(x, y)
    if value is None:
        gaps.undefined.append(name)
        return NO_ESTIMATE
    low, high, missing = _interval([statistic(x[i], y[i]) for i in samples], confidence)
    if samples and missing / len(samples) > 0.01:
        gaps.thin[name] = missing
    return Estimate(value, low, high, p_value)


_NAMES = {"bias": "bias", "exact": "exact", "kappa": "kappa", "pearson": "Pearson", "spearman": "Spearman",
          "kendall": "Kendall"}


def _wanted(n: int, scale: RatingScale) -> list[str]:
    return ["bias", *(["exact", "kappa"] if scale.discrete else []),
            *(["pearson", "spearman", "kendall"] if n >= MIN_UNITS else [])]


def compare_table(tables: sparse.csr_matrix | None, counts: np.ndarray, xs: np.ndarray, ys: np.ndarray, scale: RatingScale,
                  *, resamples: int = RESAMPLES, seed: int = 0, confidence: float = CONFIDENCE,
                  p_values: dict[str, float | None] | None = None) -> Figures:
    """The figures of units summed up as a table of counts (see above): ``counts`` the whole
    table (cells flattened, ``len(xs) * len(ys)``), ``tables`` each cluster's (None: the units
    are resampled one by one)."""
    n = int(round(counts.sum()))
    figures = Figures(n=n, clusters=None if tables is None else int((tables.getnnz(axis=1) > 0).sum()))
    if n == 0:
        figures.notes.append("no unit has both values")
        return figures
    point = table_statistics(counts.reshape(1, len(xs), len(ys)), xs, ys, scale)
    resampled = resampled_statistics(tables, counts, xs, ys, scale, resamples, np.random.default_rng(seed))
    gaps = _Gaps()
    for name in _wanted(n, scale):
        value = float(point[name][0])
        setattr(figures, name, _from_table(value if math.isfinite(value) else None, resampled[name], confidence,
                                           _NAMES[name], gaps, (p_values or {}).get(name)))
    if n < MIN_UNITS:
        figures.notes.append(f"correlations need at least {MIN_UNITS} units")
    figures.notes += gaps.notes(resamples)
    return figures


def unit_table(x: np.ndarray, y: np.ndarray, clusters: Sequence[int] | None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, sparse.csr_matrix | None]:
    """Paired units as a table: the distinct values of each side, the counts (flattened) and,
    with ``clusters``, each cluster's counts."""
    xs, xi = np.unique(x, return_inverse=True)
    ys, yi = np.unique(y, return_inverse=True)
    cell = xi * len(ys) + yi
    counts = np.bincount(cell, minlength=len(xs) * len(ys)).astype(float)
    if clusters is None:
        return xs, ys, counts, None
    _, cluster = np.unique(np.asarray(clusters), return_inverse=True)
    tables = sparse.csr_matrix((np.ones(len(cell)), (cluster, cell)), shape=(int(cluster.max()) + 1, len(counts)))
    return xs, ys, counts, tables


def compare(reference: Sequence[float], judged: Sequence[float], scale: RatingScale, *,
            clusters: Sequence[int] | None = None, resamples: int = RESAMPLES, seed: int = 0,
            confidence: float = CONFIDENCE) -> Figures:
    """The agreement of ``judged`` with ``reference`` (paired, one value each per unit, on
    ``scale``). ``clusters``: the answer each unit belongs to, for units that are parts of
    answers (resampled by whole answers)."""
    x, y = np.asarray(reference, dtype=float), np.asarray(judged, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"reference and judged need one value per unit each; got {x.shape} and {y.shape}")
    check_values(x, scale, "the reference")
    check_values(y, scale, "the judged rater")
    n = len(x)
    if n == 0:
        return Figures(n=0, notes=["no unit has both values"], clusters=None if clusters is None else 0)
    p_values = {}
    if n >= MIN_UNITS:
        p_values = {"pearson": _p_value(stats.pearsonr, x, y), "spearman": _p_value(stats.spearmanr, x, y),
                    "kendall": _p_value(stats.kendalltau, x, y)}
    if len(np.unique(x)) * len(np.unique(y)) <= TABLE_CELLS:
        xs, ys, counts, tables = unit_table(x, y, clusters)
        figures = compare_table(tables, counts, xs, ys, scale, resamples=resamples, seed=seed,
                                confidence=confidence, p_values=p_values)
        figures.clusters = None if clusters is None else len(set(clusters))
        return figures
    return _compare_units(x, y, scale, clusters, resamples, seed, confidence, p_values)


def _compare_units(x: np.ndarray, y: np.ndarray, scale: RatingScale, clusters: Sequence[int] | None, resamples: int,
                   seed: int, confidence: float, p_values: dict[str, float | None]) -> Figures:
    """:func:`compare` one resample at a time (values too varied for a table)."""
    n = len(x)
    notes: list[str] = []
    figures = Figures(n=n, notes=notes, clusters=None if clusters is None else len(set(clusters)))
    samples = resample_indices(n, resamples, np.random.default_rng(seed), clusters=clusters)
    gaps = _Gaps()
    figures.bias = _estimate(lambda a, b: float(np.mean(b - a)), x, y, samples, confidence, "bias", gaps)
    if scale.discrete:
        figures.exact = _estimate(lambda a, b: float(np.mean(a == b)), x, y, samples, confidence, "exact", gaps)
        figures.kappa = _estimate(lambda a, b: kappa(a, b, scale), x, y, samples, confidence, "kappa", gaps)
    if n < MIN_UNITS:
        notes.append(f"correlations need at least {MIN_UNITS} units")
    else:
        figures.pearson = _estimate(pearson, x, y, samples, confidence, "Pearson", gaps, p_values.get("pearson"))
        figures.spearman = _estimate(spearman, x, y, samples, confidence, "Spearman", gaps, p_values.get("spearman"))
        figures.kendall = _estimate(kendall, x, y, samples, confidence, "Kendall", gaps, p_values.get("kendall"))
    notes += gaps.notes(len(samples))
    return figures


# ------------------------------------------------------------------------- leaderboard


@dataclass
class Order:
    """Whether two raters rank systems alike: the systems' mean scores under each, the rank
    correlations of those means and the share of system pairs the two order differently (a
    pair tied under one rater and not under the other counts as changed)."""

    systems: list[str]
    reference_means: list[float]
    judged_means: list[float]
    units: list[int]
    kendall: Estimate = NO_ESTIMATE
    spearman: Estimate = NO_ESTIMATE
    flipped: Estimate = NO_ESTIMATE
    same_top: bool | None = None  # the same system has the best mean under both (higher is better)
    top_agrees: float | None = None  # share of resamples in which it does
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "systems": [
                {"system": s, "units": u, "reference_mean": r, "judged_mean": j}
                for s, u, r, j in zip(self.systems, self.units, self.reference_means, self.judged_means)
            ],
            "kendall": self.kendall.as_dict(),
            "spearman": self.spearman.as_dict(),
            "flipped_pairs": self.flipped.as_dict(),
            "same_top": self.same_top,
            "top_agrees": self.top_agrees,
            "notes": list(self.notes),
        }


def _order_statistics(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """Per row of ``a`` and ``b`` (resamples x systems: the systems' means under each rater):
    the share of system pairs ordered differently, Kendall's tau-b and Spearman's rho of the
    means (scipy's values; NaN where not defined) and the index of each rater's single best
    system (-1 where the best is tied)."""
    first, second = np.triu_indices(a.shape[1], k=1)
    sign_a, sign_b = np.sign(a[:, first] - a[:, second]), np.sign(b[:, first] - b[:, second])
    found: dict[str, np.ndarray] = {"flipped": np.mean(sign_a != sign_b, axis=1) if len(first) else
                                    np.full(len(a), np.nan)}
    untied = np.sum(np.abs(sign_a), axis=1) * np.sum(np.abs(sign_b), axis=1)
    with np.errstate(all="ignore"):
        found["kendall"] = np.where(untied > 0, np.sum(sign_a * sign_b, axis=1) / np.sqrt(untied), np.nan)
    rank_a, rank_b = stats.rankdata(a, axis=1), stats.rankdata(b, axis=1)
    rank_a, rank_b = rank_a - rank_a.mean(axis=1, keepdims=True), rank_b - rank_b.mean(axis=1, keepdims=True)
    spread = np.sum(rank_a**2, axis=1) * np.sum(rank_b**2, axis=1)
    with np.errstate(all="ignore"):
        found["spearman"] = np.where(spread > 0, np.sum(rank_a * rank_b, axis=1) / np.sqrt(spread), np.nan)
    for name, means in (("top_a", a), ("top_b", b)):
        single = np.sum(means == means.max(axis=1, keepdims=True), axis=1) == 1
        found[name] = np.where(single, np.argmax(means, axis=1), -1)
    return found


def leaderboard_order(systems: Sequence[str], reference: Sequence[float], judged: Sequence[float], *,
                      resamples: int = RESAMPLES, seed: int = 0, confidence: float = CONFIDENCE) -> Order:
    """The order of systems by their mean score under each rater. ``systems``: the system of each
    unit. The intervals come from resampling the units within each system."""
    x, y = np.asarray(reference, dtype=float), np.asarray(judged, dtype=float)
    names = sorted(set(systems))
    stratum = np.asarray([names.index(s) for s in systems])
    sizes = np.bincount(stratum, minlength=len(names))

    def means(values: np.ndarray, index: np.ndarray) -> np.ndarray:
        """Each system's mean in each resample (rows of ``index``: resamples x units)."""
        rows = np.arange(len(index))[:, None] * len(names) + stratum[index]
        sums = np.bincount(rows.ravel(), weights=values[index].ravel(), minlength=len(index) * len(names))
        return sums.reshape(len(index), len(names)) / sizes

    everything = np.arange(len(x))[None]
    point = means(x, everything), means(y, everything)
    order = Order(names, point[0][0].tolist(), point[1][0].tolist(), sizes.tolist())
    if len(names) < 2:
        order.notes.append("one system: no order to compare")
        return order
    samples = np.asarray(resample_indices(len(x), resamples, np.random.default_rng(seed), strata=stratum.tolist()))
    at_point = _order_statistics(*point)
    resampled = _order_statistics(means(x, samples), means(y, samples))

    def estimate(name: str, label: str) -> Estimate:
        value = float(at_point[name][0])
        if math.isnan(value):
            order.notes.append(f"{label} of the system means is not defined (tied means)")
            return NO_ESTIMATE
        low, high, _ = _interval_of(resampled[name], confidence)
        return Estimate(value, low, high)

    order.flipped = estimate("flipped", "flipped pairs")
    if len(names) >= MIN_UNITS:
        order.kendall = estimate("kendall", "Kendall")
        order.spearman = estimate("spearman", "Spearman")
    else:
        order.notes.append(f"rank correlations of system means need at least {MIN_UNITS} systems")
    top = int(at_point["top_a"][0]), int(at_point["top_b"][0])
    order.same_top = None if -1 in top else top[0] == top[1]
    order.top_agrees = float(np.mean((resampled["top_a"] != -1) & (resampled["top_a"] == resampled["top_b"])))
    return order


# ---------------------------------------------------------------------------- stability


@dataclass
class Stability:
    """One judge's agreement with itself over ``repeats`` runs on the same ``n`` units (those
    judged in every run): the share of units given the same value every time, the mean
    within-unit standard deviation (in the scale's units), and the figures of each pair of runs."""

    repeats: int
    n: int
    unjudged: int  # units some run left unjudged, left out
    identical: Estimate | None = None
    within_sd: Estimate = NO_ESTIMATE
    pairs: dict[str, Figures] = field(default_factory=dict)  # "1-2" -> figures of run 1 vs run 2 (1-based)

    def as_dict(self) -> dict:
        return {
            "repeats": self.repeats,
            "n": self.n,
            "unjudged": self.unjudged,
            "identical": None if self.identical is None else self.identical.as_dict(),
            "within_sd": self.within_sd.as_dict(),
            "pairs": {name: f.as_dict() for name, f in self.pairs.items()},
        }


def stability(repeats: Sequence[Sequence[float | None]], scale: RatingScale, *, resamples: int = RESAMPLES,
              seed: int = 0, confidence: float = CONFIDENCE) -> Stability:
    """Agreement of a judge with itself: ``repeats[k][i]`` is run k's value for unit i (None: run
    k left it unjudged; those units are left out and counted)."""
    if len(repeats) < 2:
        raise ValueError(f"stability needs at least 2 runs of the judge, got {len(repeats)}")
    lengths = {len(run) for run in repeats}
    if len(lengths) != 1:
        raise ValueError(f"every run needs a value (or None) for the same units; got lengths {sorted(lengths)}")
    judged = [i for i in range(lengths.pop()) if all(run[i] is not None for run in repeats)]
    table = np.asarray([[run[i] for i in judged] for run in repeats], dtype=float).reshape(len(repeats), len(judged))
    result = Stability(len(repeats), len(judged), len(repeats[0]) - len(judged))
    if not judged:
        return result
    for k in range(len(repeats)):
        check_values(table[k], scale, f"run {k + 1}")
    samples = resample_indices(len(judged), resamples, np.random.default_rng(seed))

    def per_unit(statistic: Callable[[np.ndarray], np.ndarray]) -> Estimate:
        values = statistic(table)
        low, high, _ = _interval([float(values[i].mean()) for i in samples], confidence)
        return Estimate(float(values.mean()), low, high)

    if scale.discrete:
        result.identical = per_unit(lambda t: np.all(t == t[0], axis=0).astype(float))
    result.within_sd = per_unit(lambda t: t.std(axis=0, ddof=1))
    for a, b in itertools.combinations(range(len(repeats)), 2):
        result.pairs[f"{a + 1}-{b + 1}"] = compare(table[a], table[b], scale, resamples=resamples, seed=seed,
                                                    confidence=confidence)
    return result


# ------------------------------------------------------------------------ pooled raters


def compare_pairs(groups: Sequence[Sequence[float]], clusters: Sequence[int], scale: RatingScale, *,
                  resamples: int = RESAMPLES, seed: int = 0, confidence: float = CONFIDENCE) -> Figures:
    """How well raters agree with each other, pooled over raters: every pair of two ratings of
    one unit (``groups[i]``: the ratings of unit i, by any number of raters), resampled by
    ``clusters`` (the answer of each unit). The pairs are taken in both orders, so the figures
    do not depend on which rater is named first (and there is no bias); ``n`` counts each
    pair once. With two raters, the correlations and kappa are those of the two; with more,
    those of two raters drawn at random, a rating of each unit from each."""
    values = [np.asarray(group, dtype=float) for group in groups]
    values = [v for v in values if len(v) > 1]
    if not values:
        return Figures(n=0, notes=["no unit was rated twice"], clusters=0)
    everything = np.concatenate(values)
    check_values(everything, scale, "a rater")
    xs = np.unique(everything)
    if len(xs) ** 2 > TABLE_CELLS:
        return Figures(n=sum(len(v) * (len(v) - 1) // 2 for v in values),
                       notes=[f"{len(xs)} distinct values: too varied to pool; give --pairwise for each pair"])
    rows, cells, counts = [], [], []
    _, cluster_index = np.unique(np.asarray(clusters)[[len(g) > 1 for g in groups]], return_inverse=True)
    for value, cluster in zip(values, cluster_index):
        distinct, times = np.unique(value, return_counts=True)
        where = np.searchsorted(xs, distinct)
        pairs = np.outer(times, times) - np.diag(times)  # ordered pairs of two different ratings
        a, b = np.nonzero(pairs)
        rows.append(np.full(len(a), cluster))
        cells.append(where[a] * len(xs) + where[b])
        counts.append(pairs[a, b])
    tables = sparse.csr_matrix((np.concatenate(counts).astype(float), (np.concatenate(rows), np.concatenate(cells))),
                               shape=(int(cluster_index.max()) + 1, len(xs) ** 2))
    figures = compare_table(tables, np.asarray(tables.sum(axis=0)).ravel(), xs, xs, scale, resamples=resamples,
                            seed=seed, confidence=confidence)
    figures.n //= 2
    figures.bias = NO_ESTIMATE
    figures.notes.append("pooled over every pair of raters of a unit, in both orders: no bias between them")
    return figures
