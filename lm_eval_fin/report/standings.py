"""Standings of the model rows: a rank per headline column with ties, an order across
benchmarks, and the paired tests of neighbours.

* Rank in a column: 1 + the number of rows whose interval lies wholly on the better side of
  this row's (a row without an interval is its mean). Rows whose intervals overlap are not
  told apart, so they can share a rank; with two questions per run most rows tie, as they
  should.
* Order across benchmarks: the mean win rate over the headline columns a row has (HELM's
  aggregate): in each column, the share of the other rows with a figure that this row's mean
  beats (a tie counts half). Columns with one row only are left out. Rows with equal win rates
  share a place; rows without any comparable figure come last.
* Paired tests: in each headline column, each row against the next one down, on the
  questions both answered (:func:`lm_eval_fin.report.significance.paired_test`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lm_eval_fin.report import significance

if TYPE_CHECKING:
    from lm_eval_fin.report.rows import Row

_SAME = 1e-12


@dataclass
class Comparison:
    """The paired test of two neighbouring rows in one headline column."""

    column: Any  # leaderboard.Column
    upper: Row
    lower: Row
    test: significance.PairedTest


def _bounds(interval: significance.Interval) -> tuple[float, float]:
    return (interval.low, interval.high) if interval.has_bounds else (interval.mean, interval.mean)


def column_ranks(intervals: Mapping[int, significance.Interval], higher_is_better: bool | None) -> dict[int, int]:
    """Row -> rank with ties (see the module docstring); rows are keys of ``intervals``.

    >>> i = lambda low, high: significance.Interval((low + high) / 2, low, high, 2, 0, significance.BOOTSTRAP)
    >>> column_ranks({1: i(0.5, 0.7), 2: i(0.3, 0.55), 3: i(0.1, 0.35)}, True)
    {1: 1, 2: 1, 3: 2}
    """
    ranks = {}
    for row, interval in intervals.items():
        low, high = _bounds(interval)
        above = 0
        for other, theirs in intervals.items():
            if other == row:
                continue
            their_low, their_high = _bounds(theirs)
            above += their_high < low if higher_is_better is False else their_low > high
        ranks[row] = 1 + above
    return ranks


def win_rates(means: Mapping[int, float], higher_is_better: bool | None) -> dict[int, float]:
    """Row -> share of the other rows its mean beats (ties count half)."""
    rates = {}
    for row, mean in means.items():
        others = [m for other, m in means.items() if other != row]
        if not others:
            continue
        beaten = sum((m > mean if higher_is_better is False else m < mean) for m in others if abs(m - mean) > _SAME)
        tied = sum(abs(m - mean) <= _SAME for m in others)
        rates[row] = (beaten + tied / 2) / len(others)
    return rates


def rank_rows(rows: Sequence[Row], headlines: Mapping[str, Any], settings: Any) -> list[Comparison]:
    """Set each row's ``ranks``, ``win_rate`` and ``rank``; the paired tests of neighbours."""
    rates: dict[int, list[float]] = {}
    comparisons = []
    for column in headlines.values():
        cells = {row.index: row.cells[column.key] for row in rows
                 if column.key in row.cells and math.isfinite(row.cells[column.key].interval.mean)}
        if not cells:
            continue
        ranks = column_ranks({index: cell.interval for index, cell in cells.items()}, column.higher_is_better)
        for row in rows:
            if row.index in ranks:
                row.ranks[column.key] = ranks[row.index]
        for index, rate in win_rates({i: c.interval.mean for i, c in cells.items()}, column.higher_is_better).items():
            rates.setdefault(index, []).append(rate)
        ordered = sorted((row for row in rows if row.index in cells),
                         key=lambda row: (row.ranks[column.key], -_signed(cells[row.index].interval.mean, column)))
        for upper, lower in zip(ordered, ordered[1:]):
            a, b = cells[upper.index].values, cells[lower.index].values
            shared = [key for key in a if key in b]
            if shared:
                test = significance.paired_test([a[k] for k in shared], [b[k] for k in shared], settings.confidence,
                                         settings.permutation_resamples, settings.bootstrap_resamples, settings.seed)
                comparisons.append(Comparison(column, upper, lower, test))
    for row in rows:
        row.win_rate = sum(rates[row.index]) / len(rates[row.index]) if row.index in rates else None
    places = sorted((row.win_rate for row in rows if row.win_rate is not None), reverse=True)
    for row in rows:
        if row.win_rate is not None:
            row.rank = 1 + sum(rate > row.win_rate + _SAME for rate in places)
    unplaced = [row for row in rows if row.win_rate is None]
    first_free = len(places) + 1
    for row in unplaced:  # one headline figure, or none: after every ranked row, in their own order
        row.rank = first_free if any(row.ranks) else None
    return comparisons


def _signed(mean: float, column: Any) -> float:
    return -mean if column.higher_is_better is False else mean
