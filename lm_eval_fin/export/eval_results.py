"""``.eval_results/<task>.yaml``: a model's results as the Hugging Face hub reads them from its
model repository (docs/hub/eval-results.md of huggingface/hub-docs): a YAML list of results,
each a ``dataset`` (``id``: the hub id of a benchmark dataset, required; ``task_id``: the task
in the benchmark's eval.yaml; ``revision``), a ``value``, a ``date`` (ISO-8601), a ``source``
(``url``, ``name``, ``user``) and ``notes``, a free text. The hub aggregates the results
of one dataset and task into its leaderboard, so one file per task carries one result: the
task's first headline metric with a value (every metric for a task of no benchmark of ours).

``notes`` says what the format has no field for: which metric the value is and how to read it,
the weights as run, the data (a sample or a local file says so, with its sha256), the judge and
its prompt version, the BERTScore model, the generation settings, the number of documents and
the metrics with no value, with why. A task is written only where its hub dataset id is known
(the run read the hub dataset) or given (``--dataset_id``): a result filed under a benchmark
it was not computed on would mislead its leaderboard.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

import yaml

from lm_eval_fin import __version__
from lm_eval_fin.export import facts
from lm_eval_fin.export.facts import ModelIdentity
from lm_eval_fin.export.public import public, public_text
from lm_eval_fin.measures.scales import matching
from lm_eval_fin.outputs.runfiles import Run, TaskRun

FOLDER = ".eval_results"
DIGITS = 4
HEADER = "# A result for the model repository's .eval_results/ folder (Hugging Face hub), by lm-eval-fin export\n"


@dataclass(frozen=True)
class Source:
    url: str | None
    user: str | None = None


def run_date(run: Run) -> str:
    """When the run happened, ISO-8601: lm-eval's ``date`` (Unix seconds, UTC), else the day of
    its run id (local time, so the day only)."""
    date = run.results.get("date")
    if isinstance(date, (int, float)) and not isinstance(date, bool):
        return datetime.datetime.fromtimestamp(date, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return run.date[:10]


def dataset_id_of(task_run: TaskRun, given: str | None) -> str | None:
    """The hub id of the task's benchmark dataset: ``given``, else the hub dataset the run read."""
    source = facts.dataset_source(task_run)
    return given or (source.hub_id if source.kind == facts.HUB else None)


def headline(task_run: TaskRun) -> facts.MetricFacts | None:
    items = {item.name: item for item in facts.metric_facts(task_run)}
    tables = facts.tables_of(task_run.task)
    shown = matching(items, tables.headline(task_run.task)) if tables else list(items)
    return items[shown[0]] if shown else None


def notes(run: Run, task_run: TaskRun, identity: ModelIdentity, item: facts.MetricFacts) -> str:
    context = facts.metric_context(item, task_run, facts.judges(task_run))
    scale = item.scale
    reading = [f"value: {item.name}"]
    if scale is not None:
        reading.append(f"range {scale.low:g} to {scale.high:g}")
    if item.higher_is_better is not None:
        reading.append("higher is better" if item.higher_is_better else "lower is better")
    if item.interval is not None and item.interval.has_bounds:
        reading.append(f"95% CI {item.interval.low:.{DIGITS}g} to {item.interval.high:.{DIGITS}g}")
    parts = [", ".join(reading), f"documents: {context.pop('n', 'not recorded')}",
             f"weights: {identity.weights.describe()}", f"data: {facts.dataset_source(task_run).describe()}"]
    parts += [f"{key.replace('_', ' ')}: {value}" for key, value in context.items()]
    parts.append(f"generation: {facts.generation_text(run, task_run)}")
    undefined = facts.undefined_summary(task_run)
    if undefined:
        parts.append(f"no value: {undefined}")
    parts.append(f"lm-eval task {task_run.task} version {task_run.version}, lm-eval "
                 f"{run.results.get('lm_eval_version') or 'version not recorded'}, lm-eval-fin {__version__}")
    return public_text("; ".join(parts))


def result(run: Run, task_run: TaskRun, identity: ModelIdentity, dataset_id: str,
           source: Source) -> list[dict[str, Any]] | None:
    """The file's content for one task; None when no metric of it has a value."""
    item = headline(task_run)
    if item is None:
        return None
    entry: dict[str, Any] = {"dataset": {"id": dataset_id, "task_id": task_run.task}}
    revision = facts.dataset_source(task_run).revision
    if revision:
        entry["dataset"]["revision"] = revision
    entry["value"] = round(item.value, DIGITS)
    entry["date"] = run_date(run)
    if source.url:  # the hub requires a source's url where it has a source
        lm_eval = run.results.get("lm_eval_version")
        entry["source"] = {"url": source.url, "name": f"lm-eval-fin {__version__}"
                           + (f" (lm-evaluation-harness {lm_eval})" if lm_eval else "")}
        if source.user:
            entry["source"]["user"] = source.user
    entry["notes"] = notes(run, task_run, identity, item)
    return [public(entry)]


def to_yaml(results: list[dict[str, Any]]) -> str:
    return HEADER + yaml.safe_dump(results, sort_keys=False, allow_unicode=True, width=120)
