"""Plot geometry for the page's inline SVG: per-metric bar charts with interval whiskers and
precision/recall scatters (any task with ``<name>_precision`` and ``<name>_recall`` metrics). Pure functions returning coordinates; the template draws them
(so every text is escaped there). Hand-written SVG keeps the page small: a bar is one
``<rect>`` and one ``<path>``, where a plotting library writes kilobytes per figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from lm_eval_fin.outputs.runfiles import run_settings
from lm_eval_fin.report.leaderboard import Column, Leaderboard
from lm_eval_fin.report.rows import BASELINE, MODEL, REFERENCE, Row

# Okabe-Ito and Tableau hues: distinguishable, and legible in print
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#7f7f7f", "#F0E442", "#8c564b", "#17becf")

BAR_WIDTH = 440
LABEL_MARGIN = 160  # the model's name, cut to fit (whole in the bar's tooltip)
BAR_HEIGHT = 14
BAR_GAP = 4
AXIS_HEIGHT = 18
SCATTER_SIZE = 300
SCATTER_MARGIN = 34
ISO_F1 = (0.2, 0.4, 0.6, 0.8)


KIND_COLORS = {BASELINE: "#aab2bc", REFERENCE: "#4a4f57"}


def color(row_index: int) -> str:
    return PALETTE[(row_index - 1) % len(PALETTE)]


def row_color(row: Row) -> str:
    """A model row's colour, or the grey of baselines and the dark grey of papers' figures."""
    return KIND_COLORS.get(row.kind) or color(row.index)


def _r(value: float) -> float:
    return round(value, 1)


def nice_ticks(low: float, high: float, count: int = 4) -> list[float]:
    """About ``count`` round tick values covering [low, high]."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low] if math.isfinite(low) else []
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    value = first
    while value <= high + 1e-9 * step:
        ticks.append(round(value, 10))
        value += step
    return ticks


@dataclass
class Bar:
    row: int
    label: str
    y: float
    x: float
    width: float
    whisker: tuple[float, float] | None
    value: str
    color: str


@dataclass
class BarChart:
    column: Column
    width: int
    height: int
    bars: list[Bar]
    ticks: list[tuple[float, str]]
    zero: float
    axis_y: float
    scale: str = ""  # what the values are on, where rows of one metric are not (a BERTScore model)


def _fmt(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else "NaN"


def bar_chart(column: Column, rows: Sequence[Row]) -> BarChart | None:
    """One bar per row that has this metric: from 0 to the mean, whisker over the interval."""
    cells = [(row, row.cells[column.key].interval) for row in rows if column.key in row.cells]
    cells = [(row, i) for row, i in cells if math.isfinite(i.mean)]
    if not cells:
        return None
    points = [i.mean for _, i in cells] + [v for _, i in cells if i.has_bounds for v in (i.low, i.high)]
    low, high = min(0.0, *points), max(0.0, *points)
    if high - low < 1e-12:
        high = low + 1.0
    plot = BAR_WIDTH - LABEL_MARGIN - 8

    def x(value: float) -> float:
        return _r(LABEL_MARGIN + (value - low) / (high - low) * plot)

    bars = []
    for n, (row, interval) in enumerate(cells):
        start, end = sorted((x(0.0), x(interval.mean)))
        bars.append(Bar(
            row=row.index, label=row.label, y=n * (BAR_HEIGHT + BAR_GAP) + 2, x=start, width=_r(max(end - start, 1.0)),
            whisker=(x(interval.low), x(interval.high)) if interval.has_bounds else None,
            value=_fmt(interval.mean), color=row_color(row),
        ))
    axis_y = len(bars) * (BAR_HEIGHT + BAR_GAP) + 2
    ticks = [(x(t), f"{t:g}") for t in nice_ticks(low, high)]
    return BarChart(column, BAR_WIDTH, int(axis_y + AXIS_HEIGHT), bars, ticks, x(0.0), axis_y)


def bertscore_model(row: Row, task: str) -> str:
    """The BERTScore model a row's figures of ``task`` were computed with: the runs' setting, a
    paper's (as its reference names it, else "not named"); baselines use the runs' own."""
    if row.kind == REFERENCE:
        return row.scale or "not named by the paper"
    for run in row.runs:
        task_run = run.tasks.get(task)
        for sample in task_run.samples[:1] if task_run else ():
            model = (run_settings(sample.doc).get("values") or {}).get("bertscore_model")
            if model:
                return "packaged MiniLM (offline)" if model == "offline" else str(model)
    return "not recorded"


def bar_charts(column: Column, rows: Sequence[Row]) -> list[BarChart]:
    """The bar charts of one column: one, or for a BERTScore metric one per BERTScore model (a
    score on roberta-large and one on MiniLM are on different scales: never on one axis)."""
    if "bertscore" not in column.metric:
        chart = bar_chart(column, rows)
        return [chart] if chart else []
    groups: dict[str, list[Row]] = {}
    with_cells = [row for row in rows if column.key in row.cells]
    runs_model = next((bertscore_model(row, column.task) for row in with_cells if row.kind == MODEL), None)
    for row in with_cells:
        model = runs_model if row.kind == BASELINE and runs_model else bertscore_model(row, column.task)
        groups.setdefault(model, []).append(row)
    charts = []
    for model, members in groups.items():
        chart = bar_chart(column, members)
        if chart:
            chart.scale = f"BERTScore model: {model}" + (" (another scale: not on the runs' axis)"
                                                        if runs_model and model != runs_model else "")
            charts.append(chart)
    return charts


@dataclass
class Point:
    row: int
    label: str
    cx: float
    cy: float
    recall: tuple[float, float] | None  # whisker, x coordinates
    precision: tuple[float, float] | None  # whisker, y coordinates
    value: str
    color: str


@dataclass
class Scatter:
    title: str
    task: str
    size: int
    points: list[Point]
    ticks: list[tuple[float, str]]
    iso_f1: list[tuple[str, str, float, float]] = field(default_factory=list)  # (path, label, x, y)
    plot_low: float = SCATTER_MARGIN  # x (and flipped y) of value 0
    plot_high: float = SCATTER_SIZE - 8  # of value 1


def _unit(value: float) -> float:
    """A [0, 1] value to a plot coordinate (the y axis is flipped by the caller)."""
    return _r(SCATTER_MARGIN + min(max(value, 0.0), 1.0) * (SCATTER_SIZE - 8 - SCATTER_MARGIN))


def _iso_f1(f1: float) -> str:
    """The curve P = F·R / (2R - F) of equal F1 within the unit square."""
    start = f1 / (2 - f1)  # where P reaches 1
    coordinates = []
    for step in range(21):
        recall = start + (1 - start) * step / 20
        precision = f1 * recall / (2 * recall - f1)
        coordinates.append(f"{_unit(recall)},{_flip(precision)}")
    return "M" + " L".join(coordinates)


def _flip(value: float) -> float:
    return _r(SCATTER_SIZE - _unit(value))


def precision_recall_scatters(board: Leaderboard) -> list[Scatter]:
    """Precision against recall, one scatter per task and metric family with both (EMS per
    scorer, RAGChecker, ROUGE-L...), one point per row."""
    series: dict[tuple[str, str], dict[str, Column]] = {}
    for column in board.columns:
        for part in ("precision", "recall"):
            if not column.diagnostic and column.metric.endswith("_" + part):
                series.setdefault((column.task, column.metric[: -len(part) - 1]), {})[part] = column
    scatters = []
    for (task, prefix), parts in series.items():
        if set(parts) != {"precision", "recall"}:
            continue
        points = []
        for row in board.rows:
            p, r = row.cells.get(parts["precision"].key), row.cells.get(parts["recall"].key)
            if not p or not r or not math.isfinite(p.interval.mean) or not math.isfinite(r.interval.mean):
                continue
            points.append(Point(
                row=row.index, label=row.label, cx=_unit(r.interval.mean), cy=_flip(p.interval.mean),
                recall=(_unit(r.interval.low), _unit(r.interval.high)) if r.interval.has_bounds else None,
                precision=(_flip(p.interval.low), _flip(p.interval.high)) if p.interval.has_bounds else None,
                value=f"P {_fmt(p.interval.mean)}, R {_fmt(r.interval.mean)}", color=row_color(row),
            ))
        if points:
            ticks = [(_unit(t), f"{t:g}") for t in (0.0, 0.25, 0.5, 0.75, 1.0)]
            # each curve labelled where it meets recall 1, at precision F/(2-F)
            iso = [(_iso_f1(f), f"F1={f:g}", _unit(1.0) - 36, _flip(f / (2 - f)) - 3) for f in ISO_F1]
            scatters.append(Scatter(f"{prefix}: precision against recall", task, SCATTER_SIZE, points, ticks, iso))
    return scatters
