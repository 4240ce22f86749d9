"""The leaderboard of a report: rows (runs), columns (task metrics), intervals and the paired
tests of adjacent rows. Plain data, rendered by :mod:`lm_eval_fin.report.render`.

Rows. Each lm-eval results file is a run. Runs with the same model and settings whose tasks
do not overlap share a row (``lm-eval-fin run --tasks A`` then ``--tasks B`` is one model
evaluated on two benchmarks). A row is named by its model and the settings that tell it
apart from the other rows of the same model (``--gen_kwargs``, model arguments, seeds,
``--limit``...), or by the ``--name`` given to its folder.

Cells. A metric aggregated by the mean whose per-sample values were logged gets the
bootstrap interval of those values; when their mean disagrees with lm-eval's figure (an
unknown aggregation, a filtered sample) lm-eval's own figure and stderr are used instead,
with a note. Otherwise the cell is lm-eval's value with ``± z·stderr`` when lm-eval computed
a stderr, and a bare value when it did not (corpus metrics).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lm_eval_fin.report import stats
from lm_eval_fin.report.runs import Metric, Run, Unreadable

SEED_FIELDS = ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed")
LM_EVAL_SEEDS = [0, 1234, 1234, 1234]  # lm-eval's defaults of those seeds
_AGREE = 1e-6


@dataclass(frozen=True)
class Column:
    task: str
    metric: str  # Metric.name
    higher_is_better: bool | None

    @property
    def key(self) -> str:
        return f"{self.task}/{self.metric}"


@dataclass
class Cell:
    interval: stats.Interval
    values: dict[str, float] = field(default_factory=dict)  # question key -> value (bootstrap cells)
    note: str = ""


@dataclass
class Row:
    index: int  # 1-based, in command-line order
    label: str
    runs: list[Run]
    given_name: str | None = None
    cells: dict[str, Cell] = field(default_factory=dict)

    @property
    def tasks(self) -> list[str]:
        return [task for run in self.runs for task in run.tasks]


@dataclass
class Comparison:
    """The paired tests of two adjacent rows, per column they share per-sample values for."""

    upper: Row
    lower: Row
    tests: dict[str, stats.PairedTest]


@dataclass
class Settings:
    confidence: float = stats.CONFIDENCE
    bootstrap_resamples: int = stats.BOOTSTRAP_RESAMPLES
    permutation_resamples: int = stats.PERMUTATION_RESAMPLES
    seed: int = 0


@dataclass
class Leaderboard:
    rows: list[Row]
    columns: list[Column]
    comparisons: list[Comparison]
    unreadable: list[Unreadable]
    settings: Settings

    @property
    def tasks(self) -> list[str]:
        return list(dict.fromkeys(column.task for column in self.columns))

    def columns_of(self, task: str) -> list[Column]:
        return [column for column in self.columns if column.task == task]


# -------------------------------------------------------------------------------- naming


def _flat(prefix: str, value: Any) -> dict[str, str]:
    if isinstance(value, dict):
        return {f"{prefix}{key}": str(item) for key, item in sorted(value.items())}
    if isinstance(value, str) and "=" in value:  # lm-eval may keep gen_kwargs as its "k=v,k=v" text
        pairs = (part.partition("=") for part in value.split(","))
        return {f"{prefix}{k.strip()}": v.strip() for k, _, v in pairs if k.strip()}
    return {}


def settings_of(run: Run) -> dict[str, str]:
    """The settings that make a run what it is, flattened to ``name -> text``."""
    config = run.config
    found: dict[str, str] = {"model": str(config.get("model") or run.results.get("model_source") or "")}
    found.update(_flat("model_args.", run.model_args))
    found.update(_flat("gen_kwargs.", config.get("gen_kwargs")))
    seeds = [config.get(name) for name in SEED_FIELDS]
    if seeds == LM_EVAL_SEEDS:
        found["seed"] = "default"
    elif any(seed is not None for seed in seeds):
        found["seed"] = str(seeds[0]) if len(set(map(str, seeds))) == 1 else ",".join(map(str, seeds))
    if config.get("limit") is not None:
        found["limit"] = str(config["limit"])
    for name in ("chat_template_sha", "system_instruction_sha", "fewshot_as_multiturn"):
        if run.results.get(name) is not None:
            found[name] = str(run.results[name])
    return found


def _short(name: str, value: str) -> str:
    name = name.split(".", 1)[-1]
    if name.endswith("_sha"):
        return f"{name[:-4]}={value[:8]}"
    return f"{name}={value}"


def name_rows(rows: Sequence[Row]) -> None:
    """Label each row: its ``--name`` or model, plus the settings that differ between it and
    the other rows of the same name, plus the run date where two rows are still alike."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.given_name or row.runs[0].model, []).append(row)
    for base, members in groups.items():
        settings = [settings_of(row.runs[0]) for row in members]
        differing = sorted({k for s in settings for k in s if len({str(t.get(k)) for t in settings}) > 1})
        labels = []
        for found in settings:
            parts = [_short(k, found[k]) for k in differing if k in found]
            labels.append(f"{base} · {', '.join(parts)}" if parts else base)
        for row, label in zip(members, labels):
            twins = labels.count(label) > 1
            row.label = f"{label} · run {row.runs[0].date}" if twins else label


def group_rows(runs: Sequence[Run], names: dict[str, str] | None = None) -> list[Row]:
    """Rows in command-line order: runs of one model and settings (and ``--name``) whose tasks
    do not overlap share a row. ``names``: results folder (as given) -> name."""
    names = names or {}
    rows: list[Row] = []
    for run in runs:
        given = names.get(str(run.results_dir))
        identity = (given, tuple(sorted(settings_of(run).items())))
        for row in rows:
            same = (row.given_name, tuple(sorted(settings_of(row.runs[0]).items()))) == identity
            if same and not set(row.tasks) & set(run.tasks):
                row.runs.append(run)
                break
        else:
            rows.append(Row(len(rows) + 1, "", [run], given))
    name_rows(rows)
    return rows


# --------------------------------------------------------------------------------- cells


def metric_cell(metric: Metric, samples: Sequence[Any], logged: bool, settings: Settings, n: int) -> Cell:
    """The cell of one metric of one run (see the module docstring)."""
    values = {s.key: s.values[metric.name] for s in samples if metric.name in s.values}
    fallback = stats.stderr_interval(metric.value, metric.stderr, n, settings.confidence)
    if not values:
        note = "" if fallback.method != stats.NONE else (
            "no per-sample values and no stderr (a corpus-level metric)" if logged else
            "samples not logged (run lm-eval with --log_samples) and no stderr"
        )
        return Cell(fallback, note=note)
    interval = stats.bootstrap_interval(values.values(), settings.confidence, settings.bootstrap_resamples, settings.seed)
    reported = metric.value
    if math.isfinite(reported) and not (
        math.isfinite(interval.mean) and abs(interval.mean - reported) <= _AGREE * max(1.0, abs(reported))
    ):
        return Cell(fallback, note=(
            f"the mean of the {interval.n} per-sample values ({interval.mean:.6g}) is not lm-eval's figure "
            f"({reported:.6g}); lm-eval's figure is shown"
        ))
    note = f"{interval.dropped} non-finite per-sample values left out" if interval.dropped else ""
    return Cell(interval, values, note)


def build_leaderboard(
    runs: Sequence[Run],
    unreadable: Sequence[Unreadable] = (),
    names: dict[str, str] | None = None,
    settings: Settings | None = None,
) -> Leaderboard:
    settings = settings or Settings()
    rows = group_rows(runs, names)
    columns: dict[str, Column] = {}
    for row in rows:
        for run in row.runs:
            for task, task_run in run.tasks.items():
                for metric in task_run.metrics.values():
                    column = columns.setdefault(
                        f"{task}/{metric.name}", Column(task, metric.name, metric.higher_is_better)
                    )
                    n = int(task_run.n_samples.get("effective") or len(task_run.samples) or 0)
                    row.cells[column.key] = metric_cell(metric, task_run.samples, task_run.logged, settings, n)
    task_order = {task: n for n, task in enumerate(dict.fromkeys(c.task for c in columns.values()))}
    ordered = sorted(columns.values(), key=lambda c: task_order[c.task])  # stable: metrics keep their order
    comparisons = [compare(upper, lower, ordered, settings) for upper, lower in itertools.pairwise(rows)]
    return Leaderboard(rows, ordered, comparisons, list(unreadable), settings)


def compare(upper: Row, lower: Row, columns: Sequence[Column], settings: Settings) -> Comparison:
    """Paired tests of two rows on the questions both answered, per shared column."""
    tests = {}
    for column in columns:
        a, b = upper.cells.get(column.key), lower.cells.get(column.key)
        if not a or not b or not a.values or not b.values:
            continue
        shared = [key for key in a.values if key in b.values]
        if not shared:
            continue
        tests[column.key] = stats.paired_test(
            [a.values[k] for k in shared], [b.values[k] for k in shared], settings.confidence,
            settings.permutation_resamples, settings.bootstrap_resamples, settings.seed,
        )
    return Comparison(upper, lower, tests)
