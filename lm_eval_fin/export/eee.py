"""Every Eval Ever records (schema 0.3.0) of our runs: per run and task, one aggregate record
with a result per defined metric, and one instance-level file with a row per document and
metric that has a per-document value.

Files go where the Every Eval Ever datastore wants them, under ``OUT/data/<task>/<developer>/
<model>/``: ``<uuid>.json`` and ``<uuid>_samples.jsonl``, the uuid derived from the run and
task (exporting a run again rewrites the same files). A metric's record carries its bounds and
direction (:mod:`lm_eval_fin.measures.scales`), lm-eval's standard error, the percentile-bootstrap
interval of its per-document values with their number (the report's, :mod:`lm_eval_fin.report.stats`),
the dataset's source, the generation settings and, for a metric the judge produced, the judge
(``metric_config.llm_scoring`` and ``score_details.details``). A metric with no value in the
run has no result: it is named, with why, under ``source_metadata.additional_details.undefined_metrics``.
The weights as run are in ``model_info.additional_details``. An instance row's ``is_correct``
says whether the document's value is the best possible one. No local path is written: a data
file, a model folder or a judge's folder is named by its last part (:func:`lm_eval_fin.export.public.public`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lm_eval_fin import __version__
from lm_eval_fin.export import facts
from lm_eval_fin.export.facts import DatasetSource, JudgeFacts, MetricFacts, ModelIdentity
from lm_eval_fin.export.public import public
from lm_eval_fin.outputs import records
from lm_eval_fin.outputs.runfiles import NO_FILTER, Run, TaskRun, question_key, raw_answer, read_samples
from lm_eval_fin.plumbing import atomic
from lm_eval_fin.report import stats

SCHEMA_VERSION = "0.3.0"
SOURCE_NAME = "lm-eval-fin export of lm-evaluation-harness runs"
RELATIONSHIPS = ("first_party", "third_party", "collaborative", "other")
_AT_K = re.compile(r"@(\d+)$")


@dataclass(frozen=True)
class Options:
    organization: str = "unknown"
    relationship: str = "other"
    resamples: int = stats.BOOTSTRAP_RESAMPLES
    seed: int = 0


@dataclass
class Written:
    """What one export wrote, and what it left out (``incomplete``: the command exits 1)."""

    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)


def strings(mapping: dict[str, Any]) -> dict[str, str]:
    """An ``additional_details`` object: every value as text (JSON for what is not text);
    None values left out."""
    return {key: value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
            for key, value in mapping.items() if value is not None}


def bound(value: float) -> float | str:
    """A bound as the schema writes it: infinities as the strings "Infinity"/"-Infinity"."""
    return value if math.isfinite(value) else ("Infinity" if value > 0 else "-Infinity")


def result_id(facts_: MetricFacts) -> str:
    """The join key of an aggregate result and its instance rows (the EEE lm-eval converter's)."""
    metric = facts_.metric
    return metric.metric if metric.filter == NO_FILTER else f"{metric.metric}:{metric.filter}"


def file_uuid(run: Run, task: str, model_id: str) -> str:
    """A version-4-shaped uuid of the run's results file, task and model: the same run exports
    to the same file names."""
    content = hashlib.sha256(run.source.read_bytes()).hexdigest()
    digest = hashlib.sha256(f"{model_id}\0{task}\0{run.date}\0{content}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


# ------------------------------------------------------------------------------- records


def model_info(identity: ModelIdentity) -> dict[str, Any]:
    info: dict[str, Any] = {
        "name": identity.id,
        "id": identity.id,
        "developer": identity.developer,
        "additional_details": strings({
            "deployment_type": identity.deployment_type,
            "model_availability": identity.availability,
            "lm_eval_model_type": identity.model_type or None,
            "weights": identity.weights.describe(),
            **identity.weights.details(),
        }),
    }
    if identity.engine:
        info["inference_engine"] = {"name": identity.engine, **({"version": identity.engine_version}
                                                                  if identity.engine_version else {})}
    return info


def judge_config(judge: JudgeFacts) -> dict[str, Any]:
    config: dict[str, Any] = {
        "model_info": {
            "name": judge.model,
            "id": judge.model,
            "additional_details": strings({
                "deployment_type": judge.deployment_type,
                "model_availability": judge.availability,
                "judge_spec": judge.spec,
            }),
        },
        "additional_details": strings({"judge_options": judge.options or None}),
    }
    temperature = judge.options.get("temperature")
    if isinstance(temperature, (int, float)) and not isinstance(temperature, bool):
        config["temperature"] = temperature
    return config


def judge_details(judges: list[JudgeFacts]) -> dict[str, str]:
    return {
        "judge_spec": "; ".join(j.spec for j in judges),
        "judge_model": "; ".join(j.model for j in judges),
        "judge_prompt_version": "; ".join(", ".join(j.prompt_versions) or "not recorded" for j in judges),
    }


def metric_config(item: MetricFacts, task_run: TaskRun, judges: list[JudgeFacts]) -> dict[str, Any]:
    task = task_run.task
    tables = facts.tables_of(task)
    scale, higher = item.scale, item.higher_is_better
    details: dict[str, Any] = {"aggregation": item.metric.aggregation or "a task function over the run"}
    if "bertscore" in item.metric.metric:
        details["bertscore_model"] = facts.bertscore_model(task_run)
    config: dict[str, Any] = {
        "evaluation_description": f"{item.name} of lm-eval task {task}",
        "metric_id": f"{tables.name if tables else 'lm_eval'}.{item.metric.metric}",
        "metric_name": item.name,
        "lower_is_better": higher is False,
    }
    if higher is None:
        details["polarity"] = "unknown"
    found = _AT_K.search(item.metric.metric)
    if found:
        config["metric_parameters"] = {"k": int(found[1])}
    if scale is None:
        details["bounds_status"] = "unknown"
    else:
        config.update(metric_kind=scale.kind, metric_unit=scale.unit, score_type="continuous",
                      min_score=bound(scale.low), max_score=bound(scale.high))
        document = scale.per_document
        if document is not scale:
            details.update(per_document_min=str(document.low), per_document_max=str(document.high))
        if higher is not None:
            details["instance_is_correct"] = f"the document's value is {document.best(higher)}, the best possible"
        if scale.judged and judges:
            versions = sorted({v for j in judges for v in j.prompt_versions})
            config["llm_scoring"] = {
                "judges": [judge_config(j) for j in judges],
                "input_prompt": f"the judge prompts of lm-eval-fin's {tables.name if tables else task} benchmark, "
                                f"prompt version {', '.join(versions) or 'not recorded'}",
                "additional_details": judge_details(judges),
            }
    if item.note:
        details["note"] = item.note
    config["additional_details"] = strings(details)
    return config


def score_details(item: MetricFacts, n: int, judges: list[JudgeFacts], options: Options) -> dict[str, Any]:
    uncertainty: dict[str, Any] = {}
    if item.stderr is not None:
        method = {"mean": "analytic (lm-eval: sample standard deviation / sqrt(n))"}.get(
            item.metric.aggregation or "", "bootstrap (lm-eval)")
        uncertainty["standard_error"] = {"value": item.stderr, "method": method}
    if item.interval is not None and item.interval.has_bounds:
        uncertainty["confidence_interval"] = {
            "lower": item.interval.low, "upper": item.interval.high, "confidence_level": stats.CONFIDENCE,
            "method": f"percentile bootstrap of the mean of the per-document values ({options.resamples} "
                      f"resamples, seed {options.seed})",
        }
        uncertainty["num_bootstrap_samples"] = options.resamples
    if item.standard_deviation is not None:
        uncertainty["standard_deviation"] = item.standard_deviation
    count = item.interval.n if item.interval is not None else n
    if count:
        uncertainty["num_samples"] = count
    details: dict[str, Any] = {"score": item.value}
    if uncertainty:
        details["uncertainty"] = uncertainty
    if item.scale is not None and item.scale.judged and judges:
        details["details"] = judge_details(judges)
    return details


def source_data(source: DatasetSource, n: int) -> dict[str, Any]:
    if source.kind == facts.HUB and source.hub_id:
        data: dict[str, Any] = {"dataset_name": source.task, "source_type": "hf_dataset", "hf_repo": source.hub_id}
        if source.split:
            data["hf_split"] = source.split
        if n:
            data["samples_number"] = n
        if source.ids:
            data["sample_ids"] = list(source.ids)
        data["additional_details"] = strings({"config": source.config, "data": source.describe(),
                                              **source.details()})
        return data
    return {"dataset_name": source.task, "source_type": "other", "additional_details": strings({
        "data": source.describe(), **source.details(), "samples_number": str(n) if n else None,
    })}


def generation_config(run: Run, task_run: TaskRun) -> dict[str, Any]:
    kwargs = facts.generation_kwargs(task_run)
    args: dict[str, Any] = {}
    for key in ("temperature", "top_p", "top_k"):
        value = kwargs.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            args[key] = value
    max_tokens = kwargs.get("max_gen_toks")
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens >= 1:
        args["max_tokens"] = max_tokens
    rest = {key: value for key, value in kwargs.items() if key not in ("temperature", "top_p", "top_k", "max_gen_toks")}
    settings = facts.settings_of(task_run)
    details = {
        **rest,
        "num_fewshot": task_run.config.get("num_fewshot"),
        **facts.run_details(run),
        "benchmark_settings": settings.get("values") or None,
    }
    return {"generation_args": args, "additional_details": strings(details)}


def run_timestamp(run: Run) -> str | None:
    """When the run happened: lm-eval's ``date`` (Unix seconds), as text."""
    date = run.results.get("date")
    return str(int(date)) if isinstance(date, (int, float)) and not isinstance(date, bool) else None


def aggregate_record(run: Run, task_run: TaskRun, identity: ModelIdentity, items: list[MetricFacts],
                     options: Options) -> dict[str, Any]:
    """The aggregate record of one task of one run (without its instance-file pointer)."""
    task = task_run.task
    judges = facts.judges(task_run)
    n = int(task_run.n_samples.get("effective") or len(task_run.samples) or 0)
    shared = {
        "source_data": source_data(facts.dataset_source(task_run), n),
        "generation_config": generation_config(run, task_run),
    }
    timestamp = run_timestamp(run)
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": f"{task}/{identity.id}/{run.date}",
        **({"evaluation_timestamp": timestamp} if timestamp else {}),
        "retrieved_timestamp": str(int(time.time())),
        "source_metadata": {
            "source_name": SOURCE_NAME,
            "source_type": "evaluation_run",
            "source_organization_name": options.organization,
            "evaluator_relationship": options.relationship,
            "additional_details": strings({
                "results_file": run.source.name,
                "exported_by": f"lm-eval-fin {__version__}",
                "task_version": task_run.version,
                "undefined_metrics": facts.undefined_summary(task_run) or None,
            }),
        },
        "eval_library": {
            "name": "lm_eval",
            "version": str(run.results.get("lm_eval_version") or "unknown"),
            "additional_details": {"tasks": "lm-eval-fin"},
        },
        "model_info": model_info(identity),
        "evaluation_results": [{
            "evaluation_result_id": result_id(item),
            "evaluation_name": task,
            **shared,
            "metric_config": metric_config(item, task_run, judges),
            "score_details": score_details(item, n, judges, options),
        } for item in items],
    }
    return public(record)


def instance_rows(task_run: TaskRun, record: dict[str, Any], items: list[MetricFacts]) -> list[dict[str, Any]]:
    """A row per document and metric with a per-document value, in the samples file's order."""
    if task_run.samples_path is None:
        return []
    lines: dict[str, dict] = {}
    for line in read_samples(task_run.samples_path):
        if str(line.get("filter", NO_FILTER)) == NO_FILTER:
            lines.setdefault(question_key(line.get("doc"), line), line)
    judges = facts.judges(task_run)
    rows = []
    for sample in task_run.samples:
        line = lines.get(sample.key, {})
        arguments = line.get("arguments")
        arguments = arguments if isinstance(arguments, dict) else {}
        first = arguments.get("gen_args_0")
        first = first if isinstance(first, dict) else {}
        prompt, target = str(first.get("arg_0", "")), str(line.get("target", ""))
        judge = sample.record.get("judge")
        judge = judge if isinstance(judge, dict) else {}
        shared = {
            "schema_version": SCHEMA_VERSION,
            "evaluation_id": record["evaluation_id"],
            "model_id": record["model_info"]["id"],
            "evaluation_name": task_run.task,
            "sample_id": sample.key,
            "sample_hash": hashlib.sha256(json.dumps({"raw": prompt, "reference": target}, sort_keys=True)
                                          .encode()).hexdigest(),
            "interaction_type": "single_turn",
            "input": {"raw": prompt, "reference": [target]},
            "output": {"raw": [raw_answer(line)]},
            "answer_attribution": [{
                "turn_idx": 0, "source": "output.raw", "extracted_value": sample.answer,
                "extraction_method": "lm-eval-fin scored-answer record" if "format" in sample.record else "lm-eval filter",
                "is_terminal": True,
            }],
        }
        base_metadata = strings({"doc_id": str(sample.doc_id), **{k: line.get(k) for k in (
            "doc_hash", "prompt_hash", "target_hash")}})
        for item in items:
            if item.name not in sample.values:
                continue
            value = sample.values[item.name]
            best = item.scale.per_document.best(item.higher_is_better) if (
                item.scale is not None and item.higher_is_better is not None) else None
            metadata = dict(base_metadata)
            if item.scale is not None and item.scale.judged and judges:
                metadata.update(public(strings({"judge_spec": judge.get("spec"),
                                                      "judge_prompt_version": judge.get("prompt_version")})))
            rows.append({
                **shared,
                "evaluation_result_id": result_id(item),
                "evaluation": {"score": value, "is_correct": best is not None and value == best},
                "metadata": metadata,
            })
    return rows


# ------------------------------------------------------------------------------- writing


def write_task(out: Path, run: Run, task_run: TaskRun, identity: ModelIdentity, options: Options,
               written: Written) -> None:
    """The aggregate and instance files of one task of one run, under ``out/data``."""
    task = task_run.task
    items = facts.metric_facts(task_run, options.resamples, options.seed)
    record = aggregate_record(run, task_run, identity, items, options)
    name = file_uuid(run, task, identity.id)
    relative = Path("data", task, identity.developer, identity.id.split("/", 1)[1].replace("/", "_"))
    folder = out / relative
    folder.mkdir(parents=True, exist_ok=True)
    rows = instance_rows(task_run, record, items)
    if rows:
        samples = folder / f"{name}_samples.jsonl"
        text = "".join(json.dumps(records.strict(row), ensure_ascii=False, allow_nan=False) + "\n" for row in rows)
        atomic.write_text(samples, text)
        record["detailed_evaluation_results"] = {
            "format": "jsonl",
            "file_path": (relative / samples.name).as_posix(),
            "hash_algorithm": "sha256",
            "checksum": hashlib.sha256(samples.read_bytes()).hexdigest(),
            "total_rows": len(rows),
        }
        written.files.append(samples)
    elif not task_run.logged:
        written.incomplete.append(f"{run.source}: {task} logged no samples (run lm-eval with --log_samples): "
                                  "aggregate record only")
    aggregate = folder / f"{name}.json"
    atomic.write_text(aggregate, json.dumps(records.strict(record), ensure_ascii=False, allow_nan=False, indent=2)
                      + "\n")
    written.files.append(aggregate)
    undefined = facts.undefined_summary(task_run)
    if undefined:
        written.notes.append(f"{run.source.name}: {task}: no value in the run, left out: {undefined}")
