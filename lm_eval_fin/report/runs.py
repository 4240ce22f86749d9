"""Reading lm-eval output folders into plain data.

lm-eval's ``--output_path`` holds, per model, ``<model dir>/results_<date>.json`` (figures,
task configs and versions, the run's ``config`` with ``model_args``, ``lm_eval_version``)
and, with ``--log_samples``, ``samples_<task>_<date>.jsonl`` (one line per document and
filter: the doc, the model's responses and the per-document value of every metric).
``lm-eval-fin score`` adds ``judged_results_<date>.json`` (the same results with the judge
metrics added) and ``judged_samples_<task>_<date>.jsonl`` (one line of judge details per
sample). Each results file is one :class:`Run`; a judged copy replaces its original.

What the benchmarks leave beside these (EMS details, judge details) is read by their views
(:mod:`lm_eval_fin.report.views`). A folder or file that cannot be read becomes an
:class:`Unreadable` with the reason; reading never raises for bad input.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lm_eval_fin.jsonl import read_jsonl
from lm_eval_fin.runfiles import answer_of

RESULTS_FILE = re.compile(r"^(?P<judged>judged_)?results_(?P<date>.+)\.json$")
NO_FILTER = "none"
# keys of a task's results entry that are not metrics
_NOT_METRICS = {"alias", "name", "sample_len", "samples", " "}


class RunError(Exception):
    """Why a run cannot be read; becomes an :class:`Unreadable`."""


@dataclass
class Metric:
    """One metric of one task as lm-eval reported it."""

    name: str  # the metric, with " (filter)" when the filter is not lm-eval's "none"
    metric: str  # lm-eval's metric name
    filter: str
    value: float
    stderr: Any  # a number, "N/A" or None
    higher_is_better: bool | None
    aggregation: str | None  # "mean", another aggregation's name, or None when unknown


@dataclass
class Sample:
    """One document of one task in one run."""

    key: str  # pairs the same question across runs (the view's question id)
    doc_id: Any
    doc: dict
    answer: str
    values: dict[str, float]  # per-document metric values, by Metric.name
    details: dict[str, Any] = field(default_factory=dict)  # side files: "ems", "judge", ...


@dataclass
class TaskRun:
    task: str
    version: Any
    metrics: dict[str, Metric]
    config: dict
    n_samples: dict
    samples: list[Sample] = field(default_factory=list)
    logged: bool = False  # a samples file was read
    notes: list[str] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)


@dataclass
class Run:
    source: Path  # the results file read
    results_dir: Path  # the folder named on the command line
    date: str  # lm-eval's run id (from the file name)
    results: dict  # the whole results document
    tasks: dict[str, TaskRun]
    judged: bool = False

    @property
    def config(self) -> dict:
        return self.results.get("config") if isinstance(self.results.get("config"), dict) else {}

    @property
    def model_args(self) -> dict:
        return parse_model_args(self.config.get("model_args"))

    @property
    def model(self) -> str:
        """The model's short name: the last part of its path or hub id."""
        args = self.model_args
        name = next(
            (str(args[k]) for k in ("pretrained", "model", "model_name", "path") if args.get(k)),
            str(self.results.get("model_name") or self.config.get("model") or "unknown model"),
        )
        return name.rstrip("/").rsplit("/", 1)[-1] or name


@dataclass(frozen=True)
class Unreadable:
    path: Path
    reason: str


def parse_model_args(value: Any) -> dict:
    """lm-eval keeps ``model_args`` as a dict (0.4.9+) or as its "k=v,k=v" string."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, str) and value.strip():
        pairs = (part.partition("=") for part in value.split(","))
        return {key.strip(): val.strip() for key, sep, val in pairs if sep and key.strip()}
    return {}


def as_float(value: Any) -> float | None:
    """A metric value as a float; None for what is not a number (lists, texts, bools)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


# ----------------------------------------------------------------------------- results


def _metric_list(config: dict) -> dict[str, dict]:
    entries = config.get("metric_list") if isinstance(config, dict) else None
    return {str(e["metric"]): e for e in entries or [] if isinstance(e, dict) and "metric" in e}


def task_metrics(task: str, entry: dict, results: dict) -> dict[str, Metric]:
    """The metrics of one task's results entry (``"metric,filter"`` keys) in their order."""
    config = (results.get("configs") or {}).get(task) or {}
    listed = _metric_list(config)
    higher = (results.get("higher_is_better") or {}).get(task) or {}
    metrics: dict[str, Metric] = {}
    for key, value in entry.items():
        if key in _NOT_METRICS or "," not in key:
            continue
        metric, _, filter_name = key.partition(",")
        if metric.endswith("_stderr"):
            continue
        number = as_float(value)
        if number is None:
            continue
        name = metric if filter_name == NO_FILTER else f"{metric} ({filter_name})"
        aggregation = listed.get(metric, {}).get("aggregation")
        metrics[name] = Metric(
            name=name,
            metric=metric,
            filter=filter_name,
            value=number,
            stderr=entry.get(f"{metric}_stderr,{filter_name}"),
            higher_is_better=higher.get(metric, listed.get(metric, {}).get("higher_is_better")),
            # lm-eval writes a custom aggregation's source code; only "mean" matters here
            aggregation=aggregation if isinstance(aggregation, str) and "\n" not in aggregation else None,
        )
    return metrics


def question_key(doc: Any, sample: dict) -> str:
    """The question's id: the doc's own ``id`` (stable across models and settings, unlike
    lm-eval's doc_hash, which covers every field of the doc), else lm-eval's doc_hash, else
    its doc_id."""
    if isinstance(doc, dict) and isinstance(doc.get("id"), (str, int)) and not isinstance(doc.get("id"), bool):
        return str(doc["id"])
    return str(sample.get("doc_hash") or sample.get("doc_id"))


def read_samples(path: Path, metrics: dict[str, Metric]) -> tuple[list[Sample], list[str], str]:
    """The samples of one task from lm-eval's samples file: per-document values of the
    mean-aggregated metrics (others, e.g. corpus metrics, carry no per-document value),
    notes, and a digest of lm-eval's per-sample prompt hashes (equal digests: the same
    prompts, chat template included)."""
    by_filter: dict[str, list[Metric]] = {}
    for metric in metrics.values():
        if metric.aggregation == "mean":
            by_filter.setdefault(metric.filter, []).append(metric)
    samples: dict[str, Sample] = {}
    seen: set[tuple[str, str]] = set()
    notes: list[str] = []
    prompts = hashlib.sha256()
    duplicates = 0
    for where, line in read_jsonl(path, RunError):
        if not isinstance(line, dict) or "doc" not in line:
            raise RunError(f"{where}: not an lm-eval sample (no 'doc')")
        doc = line["doc"] if isinstance(line["doc"], dict) else {"value": line["doc"]}
        key, filter_name = question_key(doc, line), str(line.get("filter", NO_FILTER))
        if (key, filter_name) in seen:  # lm-eval writes one line per document and filter
            duplicates += 1
            continue
        seen.add((key, filter_name))
        prompts.update(str(line.get("prompt_hash", "")).encode("utf-8"))
        sample = samples.get(key)
        if sample is None:
            sample = samples[key] = Sample(key, line.get("doc_id"), doc, answer_of(line), {})
        for metric in by_filter.get(filter_name, []):
            value = as_float(line.get(metric.metric))
            if value is not None:
                sample.values[metric.name] = value
    if duplicates:
        notes.append(f"{duplicates} samples repeat a question id of this task; the first of each is shown")
    return list(samples.values()), notes, prompts.hexdigest()


# -------------------------------------------------------------------------------- judged


def _judge_details(path: Path) -> dict[str, dict]:
    """``lm-eval-fin score``'s judged_samples lines, by doc_id (as text)."""
    details = {}
    for where, line in read_jsonl(path, RunError):
        if not isinstance(line, dict):
            raise RunError(f"{where}: not a JSON object")
        details[str(line.get("doc_id", len(details)))] = line
    return details


# ----------------------------------------------------------------------------------- runs


def read_run(results_path: Path, results_dir: Path) -> Run:
    """One lm-eval run: its results file, and its samples files where they were logged.
    Raises :class:`RunError` when the results file itself cannot be used."""
    match = RESULTS_FILE.match(results_path.name)
    if not match:
        raise RunError(f"{results_path.name} is not named like lm-eval's results_<date>.json")
    date = match["date"]
    try:
        results = json.loads(results_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise RunError(f"cannot read {results_path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise RunError(f"{results_path} is not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(results, dict) or not isinstance(results.get("results"), dict) or not results["results"]:
        raise RunError(f"{results_path} has no 'results' section: not an lm-eval results file")
    folder = results_path.parent
    tasks = {}
    for task, entry in results["results"].items():
        if not isinstance(entry, dict):
            continue
        metrics = task_metrics(task, entry, results)
        if not metrics:
            continue
        task_run = TaskRun(
            task=task,
            version=(results.get("versions") or {}).get(task),
            metrics=metrics,
            config=(results.get("configs") or {}).get(task) or {},
            n_samples=(results.get("n-samples") or {}).get(task) or {},
        )
        samples_path = folder / f"samples_{task}_{date}.jsonl"
        if samples_path.is_file():
            try:
                task_run.samples, task_run.notes, prompts = read_samples(samples_path, metrics)
                task_run.logged = True
                task_run.provenance["prompts hash (of lm-eval's per-sample prompt hashes)"] = prompts
            except (RunError, OSError, UnicodeDecodeError) as exc:
                task_run.notes.append(f"samples not read ({exc}); intervals from lm-eval's stderr")
        judged_path = folder / f"judged_samples_{task}_{date}.jsonl"
        if match["judged"] and judged_path.is_file() and task_run.samples:
            try:
                details = _judge_details(judged_path)
            except (RunError, OSError, UnicodeDecodeError) as exc:
                task_run.notes.append(f"judge details not read ({exc})")
            else:
                for sample in task_run.samples:
                    if str(sample.doc_id) in details:
                        sample.details["judge"] = details[str(sample.doc_id)]
        tasks[task] = task_run
    if not tasks:
        raise RunError(f"{results_path} reports no numeric metric")
    return Run(results_path, results_dir, date, results, tasks, judged=bool(match["judged"]))


def results_files(path: Path) -> list[Path]:
    """The results files of one lm-eval output folder (or the file itself): each run's
    ``judged_results_<date>.json`` where ``lm-eval-fin score`` wrote one (it holds lm-eval's
    results plus the judge metrics), else its ``results_<date>.json``; in date order."""
    if path.is_file():
        return [path]
    found = [p for p in path.rglob("*.json") if RESULTS_FILE.match(p.name)]
    judged = {(p.parent, RESULTS_FILE.match(p.name)["date"]) for p in found if p.name.startswith("judged_")}
    kept = [
        p for p in found
        if p.name.startswith("judged_") or (p.parent, RESULTS_FILE.match(p.name)["date"]) not in judged
    ]
    return sorted(kept, key=lambda p: (RESULTS_FILE.match(p.name)["date"], str(p)))


def read_results_dirs(paths: Iterable[str | Path]) -> tuple[list[Run], list[Unreadable]]:
    """Every run under the given lm-eval output folders, and what could not be read."""
    runs: list[Run] = []
    unreadable: list[Unreadable] = []
    for given in paths:
        path = Path(given).expanduser()
        if not path.exists():
            unreadable.append(Unreadable(path, "does not exist"))
            continue
        files = results_files(path)
        if not files:
            unreadable.append(
                Unreadable(path, "holds no results_<date>.json: not an lm-eval --output_path folder")
            )
            continue
        for file in files:
            try:
                runs.append(read_run(file, path))
            except RunError as exc:
                unreadable.append(Unreadable(file, str(exc)))
            except Exception as exc:  # noqa: BLE001 - one broken run must not stop the report
                unreadable.append(Unreadable(file, f"unexpected {type(exc).__name__}: {exc}"))
    return runs, unreadable

