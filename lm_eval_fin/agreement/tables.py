"""Agreement statistics from tables of counts: pure numpy, no I/O.

A table counts how many units have reference value ``xs[a]`` and judged value ``ys[b]``. Every
statistic of :func:`lm_eval_fin.agreement.stats.compare` is a function of that table, and a
bootstrap resample is another table (the sum of the resampled clusters' tables, or a multinomial
draw over the cells), so a resample costs the size of the table, not the number of units:
100,000 labels resample as fast as 100. The values are those of scipy and scikit-learn
(tests/test_agreement_stats.py checks them).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from lm_eval_fin.agreement.criteria import RatingScale

TABLE_CELLS = 2**16  # the most cells a table may have; beyond, the units are resampled one by one
_BLOCK = 2**22  # table cells of the resamples handled at once (bounds the memory)


def _ranks(counts: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties sharing their mean rank) of the values of each row of
    ``counts`` (resamples x values): scipy's ``rankdata(method="average")``."""
    return np.cumsum(counts, axis=-1) - (counts - 1) / 2


def _moments(t: np.ndarray, xv: np.ndarray, yv: np.ndarray) -> tuple[np.ndarray, ...]:
    """Means, variances (population) and covariance of the two raters under tables ``t``
    (resamples x kx x ky), with per-resample values ``xv`` (resamples x kx) and ``yv``."""
    n = t.sum(axis=(1, 2))
    px, py = t.sum(axis=2), t.sum(axis=1)
    mx, my = (px * xv).sum(axis=1) / n, (py * yv).sum(axis=1) / n
    vx = (px * xv**2).sum(axis=1) / n - mx**2
    vy = (py * yv**2).sum(axis=1) / n - my**2
    cov = np.einsum("rab,ra,rb->r", t, xv, yv) / n - mx * my
    return mx, my, vx, vy, cov


def _correlation(cov: np.ndarray, vx: np.ndarray, vy: np.ndarray, defined: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        r = np.clip(cov / np.sqrt(vx * vy), -1.0, 1.0)
    return np.where(defined, r, np.nan)


def _kendall_tau_b(t: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of each table (scipy's ``kendalltau``): concordant minus discordant pairs
    over the pairs not tied on either side."""
    # later[r, a, b]: units with x index > a and y index > b; earlier_y: x index > a, y index < b
    below = np.cumsum(t[:, ::-1, :], axis=1)[:, ::-1, :]  # x index >= a
    below = np.concatenate([below[:, 1:, :], np.zeros_like(below[:, :1, :])], axis=1)  # x index > a
    right = np.cumsum(below[:, :, ::-1], axis=2)[:, :, ::-1]  # ... and y index >= b
    later = np.concatenate([right[:, :, 1:], np.zeros_like(right[:, :, :1])], axis=2)
    left = np.cumsum(below, axis=2)  # y index <= b
    earlier = np.concatenate([np.zeros_like(left[:, :, :1]), left[:, :, :-1]], axis=2)
    difference = (t * (later - earlier)).sum(axis=(1, 2))
    n = t.sum(axis=(1, 2))
    pairs = n * (n - 1) / 2
    x_ties = (t.sum(axis=2) * (t.sum(axis=2) - 1) / 2).sum(axis=1)
    y_ties = (t.sum(axis=1) * (t.sum(axis=1) - 1) / 2).sum(axis=1)
    with np.errstate(all="ignore"):
        tau = difference / np.sqrt(pairs - x_ties) / np.sqrt(pairs - y_ties)
    return np.where((pairs > x_ties) & (pairs > y_ties), np.clip(tau, -1.0, 1.0), np.nan)


def table_statistics(t: np.ndarray, xs: np.ndarray, ys: np.ndarray, scale: RatingScale) -> dict[str, np.ndarray]:
    """Every statistic of :func:`compare` for each table of ``t`` (resamples x len(xs) x
    len(ys) counts of units with reference value ``xs[a]`` and judged value ``ys[b]``); NaN
    where one is not defined."""
    t = np.asarray(t, dtype=float)
    resamples = t.shape[0]
    xv, yv = np.broadcast_to(xs, (resamples, len(xs))), np.broadcast_to(ys, (resamples, len(ys)))
    mx, my, vx, vy, cov = _moments(t, xv, yv)
    px, py = t.sum(axis=2), t.sum(axis=1)
    varies = ((px > 0).sum(axis=1) > 1) & ((py > 0).sum(axis=1) > 1)  # neither rater constant
    n = t.sum(axis=(1, 2))
    same = xs[:, None] == ys[None, :]
    found = {"bias": my - mx, "exact": (t * same).sum(axis=(1, 2)) / n,
             "pearson": _correlation(cov, vx, vy, varies)}
    rx, ry = _ranks(px), _ranks(py)
    _, _, rvx, rvy, rcov = _moments(t, rx, ry)
    found["spearman"] = _correlation(rcov, rvx, rvy, varies)
    found["kendall"] = _kendall_tau_b(t)
    if scale.categorical:  # unweighted: (observed - chance agreement) / (1 - chance)
        chance = (px[:, :, None] * py[:, None, :] * same).sum(axis=(1, 2)) / n**2
        with np.errstate(all="ignore"):
            found["kappa"] = np.where(chance < 1, (found["exact"] - chance) / (1 - chance), np.nan)
    else:  # quadratic weights: 1 - E(x-y)^2 / E(x-y)^2 under independence
        expected = vx + vy + (mx - my) ** 2
        with np.errstate(all="ignore"):
            found["kappa"] = np.where(expected > 1e-12 * max(1.0, scale.high - scale.low) ** 2,
                                      2 * cov / expected, np.nan)
    return found


def _cluster_draws(clusters: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """How often each cluster is drawn in each resample (resamples x clusters)."""
    draws = rng.integers(0, clusters, size=(resamples, clusters))
    offsets = draws + clusters * np.arange(resamples)[:, None]
    return np.bincount(offsets.ravel(), minlength=resamples * clusters).reshape(resamples, clusters)


def resampled_statistics(tables: sparse.csr_matrix | None, counts: np.ndarray, xs: np.ndarray, ys: np.ndarray,
                         scale: RatingScale, resamples: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The statistics of ``resamples`` bootstrap tables. ``tables``: each cluster's counts
    (clusters x cells; the clusters are drawn with replacement), or None where the units are
    drawn one by one from ``counts`` (the whole table, cells flattened)."""
    cells = len(xs) * len(ys)
    block = max(1, _BLOCK // max(cells, 1 if tables is None else tables.shape[0]))
    parts: dict[str, list[np.ndarray]] = {}
    total = int(counts.sum())
    for start in range(0, resamples, block):
        size = min(block, resamples - start)
        if tables is None:
            drawn = rng.multinomial(total, counts / total, size=size).astype(float)
        else:
            drawn = np.asarray((tables.T @ _cluster_draws(tables.shape[0], size, rng).T).T, dtype=float)
        for name, values in table_statistics(drawn.reshape(size, len(xs), len(ys)), xs, ys, scale).items():
            parts.setdefault(name, []).append(values)
    return {name: np.concatenate(values) for name, values in parts.items()}
