"""The ``model-index`` block of a Hugging Face model card: the YAML a model author pastes into
the card's front matter so the hub shows our results beside the model.

One entry per task, with the task's headline metrics (its benchmark's ``headline``; every
metric for a task of no benchmark of ours) that have a value. The dataset is the hub dataset
and split the run read (``type``: its id, or the one ``--dataset_id`` gives), or, for a shipped
sample or a local file, no split and the file's name and sha256 in ``args`` (``type``: the
task's name where no dataset id is known); ``config`` is the lm-eval task, because settings of
one benchmark (FinLFQA's end-to-end, post-hoc and iterative) share a dataset and split and the
hub keeps one entry per task type, dataset, config, split and revision. Each metric's ``args``
say what the format has no field for: the weights as run (in short; in full in a comment above
the block), the generation settings, the number
of documents, the judge and its prompt version, the BERTScore model. The metrics with no value
in a run are named with the reason in comments above the block (and on stderr). ``source``
names this project and its URL (the hub wants both): ``--source_url``, else the project URL of
the installed package's metadata; with neither the entries have no source. No local path is
written (:func:`lm_eval_fin.export.public.public`).
"""

from __future__ import annotations

import importlib.metadata
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from lm_eval_fin import __version__
from lm_eval_fin.export import facts
from lm_eval_fin.export.facts import ExportError, MetricFacts, ModelIdentity
from lm_eval_fin.export.public import public, public_text
from lm_eval_fin.measures.scales import matching
from lm_eval_fin.outputs.runfiles import Run, TaskRun

TASK_TYPE = "text-generation"  # what every fin_ task asks of the model
DIGITS = 4
HEADER = "# The model-index block for the YAML front matter of the model card (README.md), by lm-eval-fin export\n"


def project_url() -> str | None:
    """This project's home page as its installed metadata states it (None when it states none)."""
    try:
        metadata = importlib.metadata.metadata("lm-eval-fin")
    except importlib.metadata.PackageNotFoundError:
        return None
    urls = metadata.get_all("Project-URL") or []
    if urls:
        return urls[0].partition(",")[2].strip() or None
    home = next(iter(metadata.get_all("Home-page") or []), None)
    return home if home and home != "UNKNOWN" else None


def metric_name(item: MetricFacts) -> str:
    """A name that says how to read the value: its range, direction and interval."""
    parts = []
    if item.scale is not None:
        high = "no ceiling" if not math.isfinite(item.scale.high) else f"{item.scale.high:g}"
        parts.append(f"range {item.scale.low:g} to {high}")
    if item.higher_is_better is not None:
        parts.append("higher is better" if item.higher_is_better else "lower is better")
    if item.interval is not None and item.interval.has_bounds:
        parts.append(f"95% CI {item.interval.low:.{DIGITS}g} to {item.interval.high:.{DIGITS}g} "
                     f"over {item.interval.n} documents")
    return f"{item.name} ({', '.join(parts)})" if parts else item.name


def dataset_entry(task_run: TaskRun, dataset_id: str | None = None) -> dict[str, Any]:
    """The dataset of one task: ``dataset_id`` (given) or the hub dataset the run read as its
    type; a sample's or a local file's name says so, and it has no split."""
    source = facts.dataset_source(task_run)
    known = dataset_id or (source.hub_id if source.kind == facts.HUB else None)
    what = source.hub_id if source.kind == facts.HUB else f"{source.kind} {source.file or ''}".strip()
    entry: dict[str, Any] = {"name": f"{what} ({task_run.task})", "type": known or task_run.task,
                             "config": task_run.task}
    if source.kind == facts.HUB and source.split:
        entry["split"] = source.split
    if source.kind == facts.HUB and source.revision:
        entry["revision"] = source.revision
    args = {**source.details(), **({"hub_config": source.config} if source.config else {})}
    if args:
        entry["args"] = args
    return entry


def metric_args(item: MetricFacts, run: Run, task_run: TaskRun, identity: ModelIdentity,
                judges: list[facts.JudgeFacts]) -> dict[str, str]:
    return {"weights": identity.weights.short(), "generation": facts.generation_text(run, task_run),
            **facts.metric_context(item, task_run, judges)}


def task_result(run: Run, task_run: TaskRun, identity: ModelIdentity, source_url: str | None,
                dataset_id: str | None = None) -> dict[str, Any] | None:
    """The entry of one task; None when none of its headline metrics has a value."""
    items = {item.name: item for item in facts.metric_facts(task_run)}
    tables = facts.tables_of(task_run.task)
    shown = matching(items, tables.headline(task_run.task)) if tables else list(items)
    if not shown:
        return None
    judges = facts.judges(task_run)
    result = {
        "task": {"type": TASK_TYPE, "name": task_run.task},
        "dataset": dataset_entry(task_run, dataset_id),
        "metrics": [{"type": name, "value": round(items[name].value, DIGITS), "name": metric_name(items[name]),
                     "args": metric_args(items[name], run, task_run, identity, judges),
                     "verified": False} for name in shown],
    }
    if source_url:  # the hub takes a source with both its name and its URL, or none
        lm_eval = run.results.get("lm_eval_version")
        result["source"] = {"name": f"lm-eval-fin {__version__}" + (f" (lm-evaluation-harness {lm_eval})"
                                                                      if lm_eval else ""), "url": source_url}
    return result


def model_index(runs: Sequence[Run], identities: Sequence[ModelIdentity], source_url: str | None,
                dataset_id: str | None = None) -> list[dict]:
    """The model-index of one model's runs; :class:`ExportError` for runs of several models or
    two runs of one task (a card shows one figure per task)."""
    ids = sorted({identity.id for identity in identities})
    if len(ids) != 1:
        raise ExportError(f"a model card holds one model's results; these runs are of {', '.join(ids)}: "
                          "export them one model at a time")
    results: list[dict] = []
    seen: dict[str, Path] = {}
    for run, identity in zip(runs, identities):
        for task, task_run in run.tasks.items():
            if task in seen:
                raise ExportError(f"two runs of {task} ({seen[task].name} and {run.source.name}): a card shows one; "
                                  "export the one to show")
            seen[task] = run.source
            result = task_result(run, task_run, identity, source_url, dataset_id)
            if result is not None:
                results.append(result)
    return public([{"name": ids[0], "results": results}])


def comments(runs: Sequence[Run], identities: Sequence[ModelIdentity]) -> list[str]:
    """What the block cannot hold, as comment lines: the weights, and each task's metrics with
    no value with the reason."""
    lines = sorted({f"weights: {identity.weights.describe()}" for identity in identities})
    for run in runs:
        for task, task_run in run.tasks.items():
            undefined = facts.undefined_summary(task_run)
            if undefined:
                lines.append(f"{task}: no value, left out: {undefined}")
    return [public_text(line) for line in lines]


def to_yaml(index: list[dict], notes: Sequence[str] = ()) -> str:
    # a comment line ends at its line end: a note's line breaks would start YAML of their own
    commented = "".join(f"# {' '.join(note.split())}\n" for note in notes)
    return HEADER + commented + yaml.safe_dump({"model-index": index}, sort_keys=False, allow_unicode=True,
                                               width=120)
