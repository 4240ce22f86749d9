"""The rows of a leaderboard: one per model, runs of several benchmarks merged into it.

A model is its ``--name`` (when given for its folder) or its model id (``pretrained``,
``model``...). Its runs go into one row unless two of them ran the same task: then the run
with the settings that differ from the task defaults (``--gen_kwargs``, a seed other than
lm-eval's, other model arguments) gets a row of its own, labelled with those settings as
tags; runs with the same tags share it. A run merged into the model's row whose settings are
not the defaults tags its benchmark's cells (the demo's fin_ems at ``max_gen_toks=384``).

Each row also carries what a reader checks before trusting it: badges for ``--limit``,
synthetic (shipped demo) data, judged tasks run without a judge, samples not logged; the
model's metadata from the results file; wall time and judge usage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lm_eval_fin import paths
from lm_eval_fin.records import JUDGE_USAGE
from lm_eval_fin.report import stats
from lm_eval_fin.report.catalog import USAGE_LABELS, Catalog
from lm_eval_fin.runfiles import MODEL_ID_ARGS, Run, run_settings, short_name

SEED_FIELDS = ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed")
LM_EVAL_SEEDS = [0, 1234, 1234, 1234]  # lm-eval's defaults of those seeds
MODEL, BASELINE, REFERENCE = "model", "baseline", "reference"


@dataclass
class Cell:
    interval: stats.Interval
    values: dict[str, float] = field(default_factory=dict)  # question key -> value (bootstrap cells)
    note: str = ""


@dataclass(frozen=True)
class Badge:
    text: str
    title: str
    cls: str = ""  # "warn" for what changes how far a figure can be trusted


@dataclass
class Row:
    index: int  # 1-based, in the order rows were made (colours and anchors)
    label: str
    kind: str = MODEL
    runs: list[Run] = field(default_factory=list)
    given_name: str | None = None
    model_id: str = ""
    tags: list[str] = field(default_factory=list)  # settings that set the row apart from the model's own
    task_tags: dict[str, str] = field(default_factory=dict)  # task -> settings of the run merged in
    cells: dict[str, Cell] = field(default_factory=dict)
    description: str = ""  # baselines: how the answers were made; references: paper, split, note
    summary: str = ""  # the line shown under a baseline's or a paper's label (the description in full on hover)
    badges: list[Badge] = field(default_factory=list)
    metadata: list[tuple[str, str]] = field(default_factory=list)
    seconds: float | None = None  # lm-eval's total_evaluation_time_seconds, summed over the runs
    judge_usage: dict[str, int] = field(default_factory=dict)
    rank: int | None = None  # place in the standings (ties share it)
    ranks: dict[str, int] = field(default_factory=dict)  # per headline column
    win_rate: float | None = None
    flags: dict[str, str] = field(default_factory=dict)  # column key -> why a figure needs a second look

    @property
    def tasks(self) -> list[str]:
        return [task for run in self.runs for task in run.tasks]

    @property
    def model(self) -> bool:
        return self.kind == MODEL


# ------------------------------------------------------------------------------ settings


def _flat(prefix: str, value: Any) -> dict[str, str]:
    if isinstance(value, dict):
        return {f"{prefix}{key}": str(item) for key, item in sorted(value.items())}
    if isinstance(value, str) and "=" in value:  # lm-eval may keep gen_kwargs as its "k=v,k=v" text
        pairs = (part.partition("=") for part in value.split(","))
        return {f"{prefix}{k.strip()}": v.strip() for k, _, v in pairs if k.strip()}
    return {}


def settings_of(run: Run) -> dict[str, str]:
    """What a run was run with beyond its model and tasks, flattened to ``name -> text``
    (``--limit`` is not a setting of the model's: it is a badge)."""
    config = run.config
    found: dict[str, str] = {"model": str(config.get("model") or run.results.get("model_source") or "")}
    found.update({k: v for k, v in _flat("model_args.", run.model_args).items()
                  if k.removeprefix("model_args.") not in MODEL_ID_ARGS})
    found.update(_flat("gen_kwargs.", config.get("gen_kwargs")))
    seeds = [config.get(name) for name in SEED_FIELDS]
    if seeds != LM_EVAL_SEEDS and any(seed is not None for seed in seeds):
        found["seed"] = str(seeds[0]) if len(set(map(str, seeds))) == 1 else ",".join(map(str, seeds))
    for name in ("chat_template_sha", "system_instruction_sha", "fewshot_as_multiturn"):
        if run.results.get(name) is not None:
            found[name] = str(run.results[name])
    return found


def _chosen(key: str) -> bool:
    """Settings chosen on the command line against the task's own (generation, seed)."""
    return key.startswith("gen_kwargs.") or key == "seed"


def tag_text(key: str, value: str) -> str:
    name = key.split(".", 1)[-1]
    if name.endswith("_sha"):
        return f"{name[:-4]}={value[:8]}"
    return f"{name}={value}"


def not_default(run: Run, base: dict[str, str]) -> tuple[str, ...]:
    """The settings of ``run`` that differ from the task defaults (generation settings and
    seeds chosen on the command line) or from the model's first run (model arguments, chat
    template), as tags."""
    mine = settings_of(run)
    keys = sorted(k for k in set(mine) | set(base) if _chosen(k) and k in mine or (
        not _chosen(k) and mine.get(k) != base.get(k)))
    return tuple(tag_text(k, mine.get(k, "none")) for k in keys)


def group_rows(runs: Sequence[Run], names: dict[str, str] | None = None) -> list[Row]:
    """Rows, one per model (first seen first) plus one per setting that reran a task (see the
    module docstring). ``names``: results folder (as given) -> name."""
    names = names or {}
    models: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        given = names.get(str(run.results_dir)) or ""
        models.setdefault((given, given or run.model_id), []).append(run)
    rows: list[Row] = []
    for (given, identity), members in models.items():
        # the model's own row starts from its run closest to the task defaults
        ordered = sorted(members, key=lambda r: sum(_chosen(k) for k in settings_of(r)))
        base = settings_of(ordered[0])
        own = Row(0, "", runs=[], given_name=given or None, model_id=identity)
        extra: dict[tuple[str, ...], list[Row]] = {}
        model_rows = [own]
        for run in ordered:
            tags = not_default(run, base)
            if not set(own.tasks) & set(run.tasks):
                own.runs.append(run)
                own.task_tags.update({task: ", ".join(tags) for task in run.tasks if tags})
                continue
            for row in extra.setdefault(tags, []):
                if not set(row.tasks) & set(run.tasks):
                    row.runs.append(run)
                    break
            else:
                row = Row(0, "", runs=[run], given_name=given or None, model_id=identity, tags=list(tags))
                extra[tags].append(row)
                model_rows.append(row)
        rows += model_rows
    for number, row in enumerate(rows, start=1):
        row.index = number
    name_rows(rows)
    return rows


def name_rows(rows: Sequence[Row]) -> None:
    """Label each row: its ``--name`` or its model's short name (the full id where two models
    share one), its tags, and the run date where two rows would still read alike."""
    shorts: dict[str, set[str]] = {}
    for row in rows:
        shorts.setdefault(short_name(row.model_id), set()).add(row.model_id)
    for row in rows:
        name = row.given_name or (short_name(row.model_id) if len(shorts[short_name(row.model_id)]) == 1
                                  else row.model_id)
        row.label = " · ".join([name, *row.tags]) if row.tags else name
    labels = [row.label for row in rows]
    for row in rows:
        if labels.count(row.label) > 1:
            row.label = f"{row.label} · run {row.runs[0].date}"


# ------------------------------------------------------------------------ what each row is


def _shipped_data(value: Any) -> bool:
    """Whether a data_path is the package's shipped data (synthetic demo samples)."""
    if not isinstance(value, str) or not value:
        return False
    path = Path(value)
    parts = path.parts
    shipped = any(parts[i:i + 2] == ("lm_eval_fin", "data") for i in range(len(parts) - 1))
    try:
        return shipped or path.resolve().is_relative_to(paths.data_path().resolve())
    except OSError:
        return shipped


def badges(row: Row, catalog: Catalog) -> list[Badge]:
    found: list[Badge] = []
    limits = sorted({f"{run.config['limit']:g}" if isinstance(run.config.get("limit"), (int, float))
                     else str(run.config.get("limit")) for run in row.runs if run.config.get("limit") is not None})
    if limits:
        found.append(Badge(f"--limit {', '.join(limits)}", "run on part of the data (lm-eval's --limit): the figures "
                           "are not the benchmark's", "warn"))
    synthetic, unjudged, unlogged = [], [], []
    for run in row.runs:
        for task, task_run in run.tasks.items():
            settings = run_settings(task_run.samples[0].doc) if task_run.samples else {}
            values, metadata = settings.get("values"), task_run.config.get("metadata")
            values = values if isinstance(values, dict) else {}
            metadata = metadata if isinstance(metadata, dict) else {}
            if _shipped_data(values.get("data_path") or metadata.get("data_path")):
                synthetic.append(task)
            if catalog.judged(task) and task_run.samples and settings.get("judge") is None:
                unjudged.append(task)
            if not task_run.logged:
                unlogged.append(task)
    if synthetic:
        found.append(Badge("synthetic data", "run on the shipped demo samples (" + ", ".join(synthetic) + "), made up "
                           "to show the tasks working: not a measurement", "warn"))
    if unjudged:
        found.append(Badge("unjudged", "run without a judge (" + ", ".join(unjudged) + "): its judge metrics are "
                           "undefined; score it later with `lm-eval-fin score`"))
    if unlogged:
        found.append(Badge("no samples", "samples not logged (" + ", ".join(unlogged) + "): intervals from lm-eval's "
                           "stderr, no answers, no baselines", "warn"))
    return found


def parameters_text(count: Any) -> str | None:
    """A parameter count as people write it (135M, 7.2B)."""
    if isinstance(count, bool) or not isinstance(count, (int, float)) or not math.isfinite(count) or count <= 0:
        return None
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if count >= size:
            return f"{count / size:.3g}{suffix}"
    return str(int(count))


def metadata(row: Row) -> list[tuple[str, str]]:
    """The model's facts lm-eval records in its results file (first run that has each)."""
    found: dict[str, str] = {}
    for run in row.runs:
        config = run.config
        facts = {
            "parameters": parameters_text(config.get("model_num_parameters")),
            "dtype": str(config.get("model_dtype") or "").removeprefix("torch.") or None,
            "revision": config.get("model_revision") if config.get("model_revision") not in ("main", "") else None,
            "sha": str(config.get("model_sha") or "")[:10] or None,
            "backend": config.get("model"),
        }
        for name, value in facts.items():
            if value and name not in found:
                found[name] = str(value)
    return list(found.items())


def fill_facts(row: Row, catalog: Catalog) -> None:
    """Badges, metadata, wall time and judge usage of a model row."""
    row.badges = badges(row, catalog)
    row.metadata = metadata(row)
    times = [run.results.get("total_evaluation_time_seconds") for run in row.runs]
    numbers = [float(t) for t in times if isinstance(t, (int, float, str)) and _number(t) is not None]
    row.seconds = sum(numbers) if numbers else None
    usage: dict[str, int] = {}
    for run in row.runs:
        for task_run in run.tasks.values():
            for sample in task_run.samples:
                found = sample.record.get(JUDGE_USAGE)
                if not isinstance(found, dict):
                    continue
                for key, label in USAGE_LABELS.items():
                    value = found.get(key)
                    if isinstance(value, int) and not isinstance(value, bool):
                        usage[label] = usage.get(label, 0) + value
    row.judge_usage = usage


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
