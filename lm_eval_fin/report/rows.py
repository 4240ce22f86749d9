"""The rows of a leaderboard: one per model, runs of several benchmarks merged into it.

A model is its ``--name`` (when given for its folder) or its model id (``pretrained``,
``model``...), and what decides its answers (:func:`settings_of`: a quantized file or revision,
generation settings, the seed where it samples, the chat template), never how it was run (batch
size, device, dtype on CPU) nor which command wrote the file: ``lm-eval-fin score`` writes a new
run from a run's logged answers, and the run and its scorings are one (the latest scoring
shown, the others under the row's provenance, as is an earlier run with the same settings).

A model's runs go into one row unless two of them ran the same task with different settings:
then the run whose settings differ from the task defaults (``--gen_kwargs``, a seed where it
samples, other model arguments) gets a row of its own, labelled with those settings as tags;
runs with the same tags share it. A run merged into the model's row whose settings are not the
defaults tags its benchmark's cells (the demo's fin_ems at ``max_gen_toks=384``).

Each row also carries what a reader checks before trusting it: badges for ``--limit``,
synthetic (shipped demo) data, judged tasks run without a judge, samples not logged; the
model's metadata from the results file; wall time and judge usage.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lm_eval_fin.outputs.records import JUDGE_USAGE
from lm_eval_fin.outputs.runfiles import MODEL_ID_ARGS, Run, TaskRun, run_settings, short_name
from lm_eval_fin.plumbing import paths
from lm_eval_fin.report import stats
from lm_eval_fin.report.catalog import USAGE_LABELS, Catalog

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
    scale: str = ""  # references: the BERTScore model the paper names for its figures
    badges: list[Badge] = field(default_factory=list)
    metadata: list[tuple[str, str]] = field(default_factory=list)
    seconds: float | None = None  # lm-eval's total_evaluation_time_seconds, summed over the runs
    judge_usage: dict[str, int] = field(default_factory=dict)
    rank: int | None = None  # place in the standings (ties share it)
    ranks: dict[str, int] = field(default_factory=dict)  # per headline column
    win_rate: float | None = None
    flags: dict[str, str] = field(default_factory=dict)  # column key -> why a figure needs a second look
    earlier: list[Earlier] = field(default_factory=list)  # runs of its tasks it shows a later one of
    failures: dict[str, list[str]] = field(default_factory=dict)  # column key -> failure rates above the threshold
    undefined: dict[str, str] = field(default_factory=dict)  # column key -> why the row has no figure there

    @property
    def tasks(self) -> list[str]:
        return [task for run in self.runs for task in run.tasks]

    @property
    def model(self) -> bool:
        return self.kind == MODEL


# ------------------------------------------------------------------------------ settings

# model arguments that decide where and how fast a model runs, never what it answers
NEUTRAL_MODEL_ARGS = frozenset({
    "batch_size", "max_batch_size", "device", "device_map", "parallelize", "trust_remote_code", "max_memory_per_gpu",
    "max_cpu_memory", "offload_folder", "gpu_memory_utilization", "tensor_parallel_size", "data_parallel_size",
})
# ... and those that do only on an accelerator (on CPU the demo's float32 is the only dtype)
CPU_NEUTRAL_MODEL_ARGS = frozenset({"dtype", "torch_dtype"})


def _flat(prefix: str, value: Any) -> dict[str, str]:
    if isinstance(value, dict):
        return {f"{prefix}{key}": str(item) for key, item in sorted(value.items())}
    if isinstance(value, str) and "=" in value:  # lm-eval may keep gen_kwargs as its "k=v,k=v" text
        pairs = (part.partition("=") for part in value.split(","))
        return {f"{prefix}{k.strip()}": v.strip() for k, _, v in pairs if k.strip()}
    return {}


def on_cpu(run: Run) -> bool:
    """Whether the run ran on CPU: lm-eval's environment record found no CUDA device (its
    ``device`` says ``cuda:0`` by default even then), or the model's device is the CPU."""
    if "Is CUDA available: False" in str(run.results.get("pretty_env_info") or ""):
        return True
    return str(run.model_args.get("device") or run.config.get("device") or "").lower() == "cpu"


def _sampling(gen: dict[str, str]) -> bool:
    if gen.get("gen_kwargs.do_sample", "").lower() == "true":
        return True
    try:
        return float(gen.get("gen_kwargs.temperature", "0")) > 0
    except ValueError:
        return False


def settings_of(run: Run) -> dict[str, str]:
    """What decides a run's answers beyond its model id and tasks, flattened to ``name -> text``:
    the backend, the model arguments that change answers (a quantized file, a revision; not the
    batch size, the device, nor the dtype on CPU), the generation settings, the seed where it
    samples, the chat template and system instruction. ``--limit`` is not one: it is a badge."""
    config = run.config
    neutral = NEUTRAL_MODEL_ARGS | (CPU_NEUTRAL_MODEL_ARGS if on_cpu(run) else frozenset())
    found: dict[str, str] = {"model": str(config.get("model") or run.results.get("model_source") or "")}
    found.update({k: v for k, v in _flat("model_args.", run.model_args).items()
                  if k.removeprefix("model_args.") not in MODEL_ID_ARGS and k.removeprefix("model_args.") not in neutral})
    generation = _flat("gen_kwargs.", config.get("gen_kwargs"))
    found.update(generation)
    seeds = [config.get(name) for name in SEED_FIELDS]
    if _sampling(generation) and seeds != LM_EVAL_SEEDS and any(seed is not None for seed in seeds):
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


def not_default(mine: dict[str, str], base: dict[str, str]) -> tuple[str, ...]:
    """The settings ``mine`` that differ from the task defaults (generation settings and seeds
    chosen on the command line) or from the model's first run's ``base`` (model arguments, chat
    template), as tags."""
    keys = sorted(k for k in set(mine) | set(base) if _chosen(k) and k in mine or (
        not _chosen(k) and mine.get(k) != base.get(k)))
    return tuple(tag_text(k, mine.get(k, "none")) for k in keys)


# --------------------------------------------------------------------- one run per answers


@dataclass(frozen=True)
class Earlier:
    """A run of a task that a row shows a later one of: a scoring of the same answers, or an
    earlier run with the same settings."""

    run: Run
    task: str
    why: str


def answers_digest(task_run: TaskRun) -> str | None:
    """What a task's answers were: a digest of every question and its answer (None without
    samples). Equal digests: the same answers, whichever command scored them."""
    if not task_run.samples:
        return None
    digest = hashlib.sha256()
    for sample in sorted(task_run.samples, key=lambda s: s.key):
        digest.update(json.dumps([sample.key, sample.answer]).encode("utf-8"))
    return digest.hexdigest()


def _latest(run: Run) -> tuple[str, str]:
    return run.date, str(run.source)


def latest_runs(runs: Sequence[Run], names: dict[str, str]) -> tuple[list[tuple[Run, dict[str, str]]], list[Earlier]]:
    """Each task of a model once: where several runs hold the same answers (a run and its
    ``score``s), the latest scoring, with the settings of the run that generated them; where
    several runs with the same settings ran a task, the latest. Returns the runs to show (each
    cut to the tasks it shows) with their settings, and the runs of tasks left out."""
    given = {id(run): names.get(str(run.results_dir)) or "" for run in runs}
    # (given name, model, task, answers) -> the runs holding those answers
    same_answers: dict[tuple, list[Run]] = {}
    for run in runs:
        for task, task_run in run.tasks.items():
            digest = answers_digest(task_run) or f"run {id(run)}"
            same_answers.setdefault((given[id(run)], run.model_id, task, digest), []).append(run)
    earlier: list[Earlier] = []
    shown: dict[tuple, tuple[Run, dict[str, str]]] = {}  # (given, model, settings, task) -> run
    for (name, model_id, task, _), members in same_answers.items():
        members.sort(key=_latest)
        latest = members[-1]
        generator = next((run for run in members if not run.replayed), latest)
        settings = settings_of(generator)
        if generator.replayed:  # the run that generated them is not on the board: its settings are unknown
            settings = {}
        earlier += [Earlier(run, task, "the same answers, scored earlier") for run in members[:-1]]
        key = (name, model_id, tuple(sorted(settings.items())), task)
        before = shown.get(key)
        if before is not None:
            older, newer = sorted([before[0], latest], key=_latest)
            earlier.append(Earlier(older, task, "an earlier run with the same settings"))
            if newer is before[0]:
                continue
        shown[key] = (latest, settings)
    # each run cut to the tasks it shows (a run shows its tasks with one set of settings)
    kept: dict[int, tuple[Run, dict[str, str], list[str]]] = {}
    for (_, _, _, task), (run, settings) in shown.items():
        kept.setdefault(id(run), (run, settings, []))[2].append(task)
    result = []
    for run in runs:
        if id(run) in kept:
            _, settings, tasks = kept[id(run)]
            cut = run if len(tasks) == len(run.tasks) else replace(run, tasks={t: run.tasks[t] for t in run.tasks
                                                                                if t in tasks})
            result.append((cut, settings))
    return result, earlier


def group_rows(runs: Sequence[Run], names: dict[str, str] | None = None) -> list[Row]:
    """Rows, one per model (first seen first) plus one per setting that reran a task (see the
    module docstring). ``names``: results folder (as given) -> name."""
    names = names or {}
    shown, earlier = latest_runs(runs, names)
    models: dict[tuple[str, str], list[tuple[Run, dict[str, str]]]] = {}
    for run, settings in shown:
        given = names.get(str(run.results_dir)) or ""
        models.setdefault((given, given or run.model_id), []).append((run, settings))
    rows: list[Row] = []
    for (given, identity), members in models.items():
        # the model's own row starts from its run closest to the task defaults
        ordered = sorted(members, key=lambda member: sum(_chosen(k) for k in member[1]))
        base = ordered[0][1]
        own = Row(0, "", runs=[], given_name=given or None, model_id=identity)
        extra: dict[tuple[str, ...], list[Row]] = {}
        model_rows = [own]
        for run, settings in ordered:
            tags = not_default(settings, base)
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
    attach_earlier(rows, earlier, names)
    for number, row in enumerate(rows, start=1):
        row.index = number
    name_rows(rows)
    return rows


def attach_earlier(rows: Sequence[Row], earlier: Sequence[Earlier], names: dict[str, str]) -> None:
    """Each run left out to the row that shows a later run of its model and task."""
    for item in earlier:
        name = names.get(str(item.run.results_dir)) or None
        shown = next((row for row in rows if row.given_name == name and any(
            run.model_id == item.run.model_id and item.task in run.tasks for run in row.runs)), None)
        if shown is not None:
            shown.earlier.append(item)


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
