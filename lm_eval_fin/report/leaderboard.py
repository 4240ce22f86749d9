"""The leaderboard of a report: rows (models, baselines, figures reported in papers), columns
(task metrics), the headline column of each task, intervals and standings. Plain data, rendered
by :mod:`lm_eval_fin.report.render`.

Cells. A metric whose per-sample values were logged gets the bootstrap interval of those
values; when their mean disagrees with lm-eval's figure (a sum, a corpus aggregation) lm-eval's
own figure and stderr are used instead, with a note. Otherwise the cell is lm-eval's value with
``± z·stderr`` when lm-eval computed a stderr, and a bare value when it did not. A metric lm-eval
reports as null (undefined in that run) has no cell.

Baselines are computed by each benchmark's view on the documents the model rows logged (the
union of their questions, at most :data:`BASELINE_QUESTIONS` of them, spread evenly); reference rows are the papers' figures the views declare. Neither
takes part in the standings; both are shown beside the models.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from lm_eval_fin.outputs.runfiles import Metric, Run, Sample, Unreadable
from lm_eval_fin.report import stats
from lm_eval_fin.report.blocks import Baseline
from lm_eval_fin.report.catalog import DEGENERATE, Catalog
from lm_eval_fin.report.rows import BASELINE, MODEL, REFERENCE, Badge, Cell, Row, fill_facts, group_rows
from lm_eval_fin.report.standings import Comparison, rank_rows

_AGREE = 1e-6
# a task's failure rates (answers that could not be read, judge calls that failed or could not be
# read) above which every figure of the task carries a badge: a tenth of the answers unscored
# moves a mean more than most intervals are wide
FAILURE_THRESHOLD = 0.1
# questions a task's baselines are computed on at most: some score with models (BERTScore), and a
# baseline is a reference point whose interval a few hundred questions pin down
BASELINE_QUESTIONS = 300
FAILURE_RATES = re.compile(r"(?:.+_)?parse_failures?|(?:.+_)?judge_(?:failure|parse_failure)")


@dataclass(frozen=True)
class Column:
    task: str
    metric: str  # Metric.name
    higher_is_better: bool | None
    diagnostic: bool = False

    @property
    def key(self) -> str:
        return f"{self.task}/{self.metric}"


@dataclass
class Settings:
    confidence: float = stats.CONFIDENCE
    bootstrap_resamples: int = stats.BOOTSTRAP_RESAMPLES
    permutation_resamples: int = stats.PERMUTATION_RESAMPLES
    seed: int = 0


@dataclass
class Leaderboard:
    rows: list[Row]  # models in their standings, then baselines, then reference rows
    columns: list[Column]
    headlines: dict[str, Column]  # task -> the metric its default view ranks by
    comparisons: list[Comparison]
    unreadable: list[Unreadable]
    settings: Settings
    catalog: Catalog
    notes: list[str] = field(default_factory=list)

    @property
    def tasks(self) -> list[str]:
        return list(dict.fromkeys(column.task for column in self.columns))

    def headline_rows(self, kind: str) -> list[Row]:
        """The rows of a kind with a figure in some headline column (a paper's row without one
        is shown in its benchmark's table only)."""
        keys = {column.key for column in self.headlines.values()}
        return [row for row in self.rows_of(kind) if keys & set(row.cells)]

    @property
    def models(self) -> list[Row]:
        return [row for row in self.rows if row.kind == MODEL]

    def rows_of(self, kind: str) -> list[Row]:
        return [row for row in self.rows if row.kind == kind]

    def columns_of(self, task: str, diagnostic: bool | None = None) -> list[Column]:
        return [c for c in self.columns if c.task == task and (diagnostic is None or c.diagnostic == diagnostic)]

    def table(self, task: str, diagnostic: bool, kinds: Sequence[str] = (MODEL, BASELINE, REFERENCE)
              ) -> tuple[list[Column], list[Row]]:
        """A task's metric table: the columns some row has a figure for, and those rows."""
        rows = [row for row in self.rows if row.kind in kinds]
        columns = [c for c in self.columns_of(task, diagnostic)
                   if any(c.key in row.cells and math.isfinite(row.cells[c.key].interval.mean) for row in rows)]
        keys = {c.key for c in columns}
        return columns, [row for row in rows if keys & set(row.cells)]

    def groups(self) -> dict[str, list[str]]:
        """Benchmark (or lone task) -> its tasks on the board, in order."""
        found: dict[str, list[str]] = {}
        for task in self.tasks:
            found.setdefault(self.catalog.group(task), []).append(task)
        return found

    def samples(self, task: str) -> list[Sample]:
        """The questions the model rows logged for ``task``, each once (first run's sample)."""
        seen: dict[str, Sample] = {}
        for row in self.models:
            for run in row.runs:
                for sample in run.tasks[task].samples if task in run.tasks else ():
                    seen.setdefault(sample.key, sample)
        return list(seen.values())


# --------------------------------------------------------------------------------- cells


def metric_cell(metric: Metric, samples: Sequence[Sample], logged: bool, settings: Settings, n: int) -> Cell | None:
    """The cell of one metric of one run (see the module docstring); None: undefined there."""
    values = {s.key: s.values[metric.name] for s in samples if metric.name in s.values}
    if metric.value is None and not values:
        return None
    fallback = stats.stderr_interval(metric.value, metric.stderr, n, settings.confidence)
    if not values:
        note = "" if fallback.method != stats.NONE else (
            "no per-sample values and no stderr" if logged else
            "samples not logged (run lm-eval with --log_samples) and no stderr"
        )
        return Cell(fallback, note=note)
    interval = stats.bootstrap_interval(values.values(), settings.confidence, settings.bootstrap_resamples, settings.seed)
    reported = metric.value
    if reported is not None and math.isfinite(reported) and not (
        math.isfinite(interval.mean) and abs(interval.mean - reported) <= _AGREE * max(1.0, abs(reported))
    ):
        return Cell(fallback, note=(
            f"lm-eval's figure ({reported:.6g}) aggregates the {interval.n} per-sample values otherwise than their "
            f"mean ({interval.mean:.6g}); lm-eval's figure is shown"
        ))
    note = f"{interval.dropped} non-finite per-sample values left out" if interval.dropped else ""
    return Cell(interval, values, note)


def values_cell(values: dict[str, float], settings: Settings) -> Cell:
    interval = stats.bootstrap_interval(values.values(), settings.confidence, settings.bootstrap_resamples, settings.seed)
    return Cell(interval, dict(values))


# ------------------------------------------------------------------------------ building


def _columns(rows: Sequence[Row], catalog: Catalog) -> list[Column]:
    columns: dict[str, Column] = {}
    for row in rows:
        for run in row.runs:
            for task, task_run in run.tasks.items():
                for metric in task_run.metrics.values():
                    key = f"{task}/{metric.name}"
                    if key not in columns:  # the first run that reports a metric makes its column
                        columns[key] = Column(task, metric.name, metric.higher_is_better,
                                              catalog.is_diagnostic(task, metric.name))
    task_order = {task: n for n, task in enumerate(dict.fromkeys(c.task for c in columns.values()))}
    return sorted(columns.values(), key=lambda c: task_order[c.task])  # stable: metrics keep their order


def _fill_cells(row: Row, settings: Settings) -> None:
    for run in row.runs:
        for task, task_run in run.tasks.items():
            n = int(task_run.n_samples.get("effective") or len(task_run.samples) or 0)
            for metric in task_run.metrics.values():
                cell = metric_cell(metric, task_run.samples, task_run.logged, settings, n)
                if cell is not None:
                    row.cells[f"{task}/{metric.name}"] = cell


def headline_columns(board_columns: Sequence[Column], rows: Sequence[Row], catalog: Catalog) -> dict[str, Column]:
    """Per task, the first of its benchmark's headline metrics that some model row has a value
    for; a task without one ranks by its first scored metric with a value."""
    found: dict[str, Column] = {}
    by_key = {c.key: c for c in board_columns}
    with_value = {key for row in rows for key, cell in row.cells.items() if math.isfinite(cell.interval.mean)}
    for task in dict.fromkeys(c.task for c in board_columns):
        declared = [by_key.get(f"{task}/{name}") for name in catalog.headline(task)]
        candidates = [c for c in declared if c] or [c for c in board_columns if c.task == task and not c.diagnostic]
        chosen = next((c for c in candidates if c.key in with_value), None)
        if chosen:
            found[task] = chosen
    return found


def baseline_rows(tasks: Sequence[str], catalog: Catalog, samples_of, settings: Settings,
                  notes: list[str]) -> list[Row]:
    """The rows each benchmark's view computes without a model, one per baseline name."""
    made: dict[str, Row] = {}
    for task in tasks:
        samples = samples_of(task)
        if not samples:
            continue
        if len(samples) > BASELINE_QUESTIONS:  # evenly spread over the questions, the same at each build
            step = len(samples) / BASELINE_QUESTIONS
            ordered = sorted(samples, key=lambda sample: sample.key)
            notes.append(f"{task}: baselines on {BASELINE_QUESTIONS} of the {len(samples)} questions (every "
                         f"{step:.3g}th by question id): a baseline's interval, not every question's answer")
            samples = [ordered[int(n * step)] for n in range(BASELINE_QUESTIONS)]
        try:
            baselines: list[Baseline] = catalog.view(task).baselines(task, samples)
        except Exception as exc:  # noqa: BLE001 - a baseline that cannot be computed must not stop the report
            notes.append(f"{task}: baselines not computed ({type(exc).__name__}: {exc})")
            continue
        for baseline in baselines:
            row = made.get(baseline.name)
            if row is None:
                row = made[baseline.name] = Row(0, baseline.name, kind=BASELINE, description=baseline.description,
                                                summary=baseline.description)
            elif baseline.description not in row.description:
                row.description += f"; {baseline.description}"
                row.summary = row.description
            metrics = dict.fromkeys(name for values in baseline.values.values() for name in values)
            for metric in metrics:
                values = {key: v[metric] for key, v in baseline.values.items() if metric in v}
                row.cells[f"{task}/{metric}"] = values_cell(values, settings)
    return list(made.values())


def reference_rows(tasks: Sequence[str], catalog: Catalog) -> list[Row]:
    """The papers' figures the views declare, for the tasks on the board."""
    rows = []
    for entry in catalog.entries:
        for reference in entry.view.references:
            shown = [task for task in reference.tasks if task in tasks]
            if not shown:
                continue
            row = Row(0, reference.label, kind=REFERENCE, summary=reference.setting, description=(
                f"{reference.paper}: {reference.model}, {reference.setting}, {reference.split}"
                + (f". {reference.note}" if reference.note else "")), scale=reference.bertscore_model)
            for task in shown:
                for metric, value in reference.values.items():
                    row.cells[f"{task}/{metric}"] = Cell(stats.Interval(float(value), math.nan, math.nan))
            rows.append(row)
    labels = [row.label for row in rows]
    for row in rows:  # a paper's figure sets for one model, told apart by their settings
        if labels.count(row.label) > 1 and row.summary:
            row.label = f"{row.label} · {row.summary}"
    return rows


def flag_cells(board: Leaderboard) -> None:
    """Model cells to look at twice: headline figures not above the best baseline's, and tasks
    where some answers were degenerate (empty, repeated, an echo of the prompt, or the
    candidates in the order given)."""
    baselines = board.rows_of(BASELINE)
    for task, column in board.headlines.items():
        best = None
        for row in baselines:
            cell = row.cells.get(column.key)
            if cell and math.isfinite(cell.interval.mean) and (best is None or _better(cell.interval.mean, best[1], column)):
                best = (row, cell.interval.mean)
        for row in board.models:
            cell = row.cells.get(column.key)
            flags = []
            if best and cell and math.isfinite(cell.interval.mean) and not _better(cell.interval.mean, best[1], column):
                flags.append(f"not above the {best[0].label} baseline ({best[1]:.3f})")
            degenerate = row.cells.get(f"{task}/{DEGENERATE}")
            if degenerate and math.isfinite(degenerate.interval.mean) and degenerate.interval.mean > 0:
                flags.append(f"{degenerate.interval.mean:.0%} of the answers degenerate")
                row.badges.append(Badge(f"{degenerate.interval.mean:.0%} degenerate", (
                    f"{task}: {degenerate.interval.mean:.0%} of the answers are empty, repeated, an echo of the prompt "
                    "or the candidates in the order given (degenerate_answer)"), "warn"))
            if flags:
                row.flags[column.key] = "; ".join(flags)


def _rate(row: Row, column: Column) -> float | None:
    cell = row.cells.get(column.key)
    return cell.interval.mean if cell and math.isfinite(cell.interval.mean) else None


def failure_notes(row: Row, rates: Sequence[Column]) -> list[str]:
    """The failure rates of a row's task above :data:`FAILURE_THRESHOLD`, as badge texts."""
    return [f"{column.metric} {rate:.0%}" for column in rates
            if (rate := _rate(row, column)) is not None and rate > FAILURE_THRESHOLD]


def undefined_reason(row: Row, task: str, metric: str, rates: Sequence[Column]) -> str:
    """Why a row that ran ``task`` has no figure for ``metric``."""
    reported = [run.tasks[task].metrics[metric] for run in row.runs if task in run.tasks
                and metric in run.tasks[task].metrics]
    if not reported:
        return "not reported by this run (another task version or configuration)"
    by_name = {column.metric: _rate(row, column) for column in rates}
    for name, text in (("judge_failure", "the judge failed on every answer"),
                       ("judge_parse_failure", "the judge's every verdict was unreadable"),
                       ("parse_failure", "no answer could be read (parse_failure 100%)")):
        if any(rate is not None and rate >= 1.0 for found, rate in by_name.items() if found.endswith(name)):
            return "undefined: " + text
    if any(badge.text == "unjudged" for badge in row.badges):
        return "undefined: the run had no judge (score it with `lm-eval-fin score`)"
    return "undefined: lm-eval reports null (no answer it is defined on)"


def mark_failures(board: Leaderboard) -> None:
    """Per model row and task it ran: failure rates above the threshold on every figure of the
    task, and why a figure the task reports is missing (a cell that says only "—" hides a judge
    that never answered)."""
    for task in board.tasks:
        rates = [c for c in board.columns_of(task, diagnostic=True) if FAILURE_RATES.fullmatch(c.metric)]
        for row in board.models:
            if not any(task in run.tasks for run in row.runs):
                continue
            found = failure_notes(row, rates)
            for column in board.columns_of(task, diagnostic=False):
                if found:
                    row.failures[column.key] = found
                if column.key not in row.cells or not math.isfinite(row.cells[column.key].interval.mean):
                    row.undefined[column.key] = undefined_reason(row, task, column.metric, rates)


def _better(a: float, b: float, column: Column) -> bool:
    return a < b if column.higher_is_better is False else a > b


def build_leaderboard(
    runs: Sequence[Run],
    unreadable: Sequence[Unreadable] = (),
    names: dict[str, str] | None = None,
    settings: Settings | None = None,
    catalog: Catalog | None = None,
) -> Leaderboard:
    settings = settings or Settings()
    catalog = catalog or Catalog()
    models = group_rows(runs, names)
    for row in models:
        _fill_cells(row, settings)
        fill_facts(row, catalog)
    columns = _columns(models, catalog)
    headlines = headline_columns(columns, models, catalog)
    comparisons = rank_rows(models, headlines, settings)
    models.sort(key=lambda row: (row.rank is None, row.rank or 0, row.index))
    for number, row in enumerate(models, start=1):  # a row's number is its line in the table
        row.index = number
    board = Leaderboard(models, columns, headlines, comparisons, list(unreadable), settings, catalog)
    tasks = board.tasks
    extra = baseline_rows(tasks, catalog, board.samples, settings, board.notes) + reference_rows(tasks, catalog)
    for number, row in enumerate(extra, start=len(models) + 1):
        row.index = number
    board.rows = models + extra
    flag_cells(board)
    mark_failures(board)
    return board
