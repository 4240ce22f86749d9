"""The significance of the report's figures: an interval for a run's mean and a paired test for two runs.

Pure functions of numbers; no I/O. Conventions, the same everywhere in the report:

* non-finite values (NaN: a judge that failed, a scorer that could not run) are left out and
  counted (``dropped``), never read as 0; no finite value leaves the mean NaN;
* :func:`bootstrap_interval` is the percentile bootstrap of the mean: resample the per-sample
  values with replacement, take the mean of each resample, and read the 2.5th and 97.5th
  percentiles of those means (for 95 %);
* :func:`stderr_interval` is what is left when a run kept no per-sample values: lm-eval's own
  standard error (itself a bootstrap for non-mean aggregations), as ``mean ± z·stderr``;
* :func:`paired_test` compares two runs on the questions both answered: the differences
  ``a_i - b_i`` and the sign-flip permutation test of their mean (under "no difference" each
  difference is as likely to have either sign), exact over all ``2**n`` sign patterns for
  small ``n`` and Monte Carlo beyond, two-sided.

Every random draw comes from ``numpy.random.default_rng(seed)``: a report is reproducible.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
PERMUTATION_RESAMPLES = 10000
EXACT_UP_TO = 16  # exact sign-flip test up to 2**16 patterns
_CHUNK_CELLS = 1 << 21  # resampled cells held in memory at once
_SHARED_CELLS = 1 << 22  # draws kept for the cells that share them (32 MB of counts)
_SHARED_PATTERNS = 1 << 24  # sign patterns kept for the tests that share them (16 MB)

BOOTSTRAP = "bootstrap"
STDERR = "stderr"
NONE = "none"


@dataclass(frozen=True)
class Interval:
    """A mean and its interval. ``method``: :data:`BOOTSTRAP` (from per-sample values),
    :data:`STDERR` (lm-eval's standard error) or :data:`NONE` (a bare value, e.g. a corpus
    metric without a standard error). ``n``: the values used; ``dropped``: the non-finite
    values left out."""

    mean: float
    low: float
    high: float
    n: int = 0
    dropped: int = 0
    method: str = NONE

    @property
    def has_bounds(self) -> bool:
        return self.method != NONE and math.isfinite(self.low) and math.isfinite(self.high)


@dataclass(frozen=True)
class PairedTest:
    """The paired comparison of runs A and B on ``n`` shared questions: the mean difference
    A - B with its bootstrap interval, and the two-sided sign-flip p-value."""

    n: int
    difference: Interval
    p_value: float
    method: str  # "exact", "monte carlo" or "none" (no shared question)
    dropped: int = 0  # shared questions left out because a value was not finite


def finite_values(values: Iterable[float]) -> tuple[np.ndarray, int]:
    """(the finite values as floats, how many values were not finite or not numbers; a
    text or a bool is not a number here, even "1" or True)."""
    kept, dropped = [], 0
    for value in values:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            dropped += 1
        elif math.isfinite(value):
            kept.append(float(value))
        else:
            dropped += 1
    return np.asarray(kept, dtype=float), dropped


def _check(confidence: float, resamples: int) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")


@functools.lru_cache(maxsize=2)
def _resample_counts(n: int, resamples: int, seed: int) -> np.ndarray:
    """How often each of ``n`` values is drawn in each resample (resamples x n), drawn as
    :func:`_resampled_means` draws them. A board's cells of one task share their question
    count and seed, so they share these draws: each cell's resampled means are then one
    matrix-vector product, not ``resamples x n`` random draws."""
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK_CELLS // n)
    counts = []
    for start in range(0, resamples, rows):
        picks = rng.integers(0, n, size=(min(rows, resamples - start), n))
        offsets = (np.arange(len(picks)) * n)[:, None]
        counts.append(np.bincount((picks + offsets).ravel(), minlength=len(picks) * n).reshape(len(picks), n))
    return np.concatenate(counts).astype(float)


def _resampled_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    n = len(values)
    if n * resamples <= _SHARED_CELLS:
        # einsum, not BLAS's threads: on a busy machine they wait on each other a hundredfold longer
        return np.einsum("ij,j->i", _resample_counts(n, resamples, seed), values) / n
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK_CELLS // n)
    means = []
    for start in range(0, resamples, rows):
        picks = rng.integers(0, n, size=(min(rows, resamples - start), n))
        means.append(values[picks].mean(axis=1))
    return np.concatenate(means)


def bootstrap_interval(
    values: Iterable[float],
    confidence: float = CONFIDENCE,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> Interval:
    """The mean of the finite ``values`` with its percentile-bootstrap interval.

    >>> bootstrap_interval([2.0, 2.0, float("nan")])
    Interval(mean=2.0, low=2.0, high=2.0, n=2, dropped=1, method='bootstrap')
    """
    _check(confidence, resamples)
    kept, dropped = finite_values(values)
    if not len(kept):
        return Interval(math.nan, math.nan, math.nan, 0, dropped, NONE)
    mean = float(kept.mean())
    if len(kept) == 1 or np.all(kept == kept[0]):
        return Interval(mean, mean, mean, len(kept), dropped, BOOTSTRAP)
    means = _resampled_means(kept, resamples, seed)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return Interval(mean, float(low), float(high), len(kept), dropped, BOOTSTRAP)


def stderr_interval(mean: Any, stderr: Any, n: int = 0, confidence: float = CONFIDENCE) -> Interval:
    """``mean ± z·stderr`` (z = 1.96 for 95 %) from lm-eval's reported figures. A missing or
    unreadable stderr (lm-eval writes ``"N/A"``) gives the bare mean (method :data:`NONE`)."""
    _check(confidence, 1)
    try:
        mean = float(mean)
    except (TypeError, ValueError):
        mean = math.nan
    try:
        stderr = float(stderr)
    except (TypeError, ValueError):
        stderr = math.nan
    if not math.isfinite(mean) or not math.isfinite(stderr) or stderr < 0:
        return Interval(mean, math.nan, math.nan, n, 0, NONE)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    return Interval(mean, mean - z * stderr, mean + z * stderr, n, 0, STDERR)


def _draw_sign_patterns(n: int, resamples: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK_CELLS // n)
    return [rng.random((min(rows, resamples - start), n)) < 0.5 for start in range(0, resamples, rows)]


# the random sign patterns of ``n`` questions, shared by a board's tests of one task (as the counts are)
_cached_sign_patterns = functools.lru_cache(maxsize=2)(_draw_sign_patterns)


def _sign_patterns(n: int, resamples: int, seed: int) -> list[np.ndarray]:
    return _cached_sign_patterns(n, resamples, seed) if n * resamples <= _SHARED_PATTERNS else \
        _draw_sign_patterns(n, resamples, seed)


def _sign_flip_p_value(differences: np.ndarray, resamples: int, seed: int) -> tuple[float, str]:
    n = len(differences)
    observed = abs(differences.sum())
    # sums equal to the observed one up to rounding count as "as extreme"
    tolerance = 1e-9 * max(1.0, float(np.abs(differences).sum()))
    if n <= EXACT_UP_TO:
        patterns = np.arange(2**n, dtype=np.int64)[:, None] >> np.arange(n) & 1
        sums = (1 - 2 * patterns) @ differences
        return float(np.mean(np.abs(sums) >= observed - tolerance)), "exact"
    total = differences.sum()
    extreme = 0
    for flipped in _sign_patterns(n, resamples, seed):
        sums = total - 2.0 * np.einsum("ij,j->i", flipped, differences)  # the flipped differences change sign
        extreme += int(np.sum(np.abs(sums) >= observed - tolerance))
    # the observed pattern counts as one of the draws, so p is never 0
    return (extreme + 1) / (resamples + 1), "monte carlo"


def paired_test(
    a: Iterable[float],
    b: Iterable[float],
    confidence: float = CONFIDENCE,
    resamples: int = PERMUTATION_RESAMPLES,
    bootstrap_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> PairedTest:
    """Runs A and B on the same questions, ``a[i]`` and ``b[i]`` being question i's values.
    Pairs with a non-finite value are left out (``dropped``); no pair left gives p NaN.

    >>> paired_test([1, 2, 3], [0, 0, 0]).p_value  # 2 of the 8 sign patterns reach |1+2+3|
    0.25
    """
    _check(confidence, resamples)
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"paired values must come in pairs: {len(a)} values for A, {len(b)} for B")
    pairs = [finite_values(pair) for pair in zip(a, b)]
    kept = [values for values, dropped in pairs if not dropped]
    dropped = len(pairs) - len(kept)
    if not kept:
        empty = Interval(math.nan, math.nan, math.nan, 0, dropped, NONE)
        return PairedTest(0, empty, math.nan, "none", dropped)
    differences = np.asarray([x - y for x, y in kept], dtype=float)
    interval = bootstrap_interval(differences, confidence, bootstrap_resamples, seed)
    p_value, method = _sign_flip_p_value(differences, resamples, seed)
    return PairedTest(len(kept), interval, p_value, method, dropped)
