"""The lm-eval tasks of FinLFQA, one per setting of the paper (section 5.1):

* ``fin_lfqa`` (validation split, scored) and ``fin_lfqa_test`` (test split, answers private:
  ``--predict_only``): end-to-end generation, one request per example;
* ``fin_lfqa_posthoc`` and ``fin_lfqa_iterative`` (validation split): post-hoc attribution and
  iterative refinement, several generation steps per example, run by the ``fin-refine`` model
  wrapper (:mod:`lm_eval_fin.harness.multistep`) with the protocols of
  :mod:`lm_eval_fin.benchmarks.fin_lfqa.refine`; their loaders stop with a message saying so
  when the run's model is not that wrapper.

``tasks/fin_lfqa/utils.py`` re-exports the functions the YAMLs name. Metadata: ``data_path``
(a local copy in the hub schema; default: the hub dataset), ``index_base`` (0 or 1: the first
paragraph's and knowledge entry's index; default: detected from the data's gold indices, else
the paper's 1), ``bertscore_model`` (a hub id, a folder or ``offline``), ``max_rounds``
(iterative refinement's bound) and the judge settings of :mod:`lm_eval_fin.harness.settings`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Sequence
from typing import Any

from lm_eval_fin import atomic, textsim
from lm_eval_fin.benchmarks.fin_lfqa import data, judge, prompt, refine, score
from lm_eval_fin.harness import multistep, outputs, taskfiles
from lm_eval_fin.harness.benchmark import Benchmark
from lm_eval_fin.harness.corpus import (
    CorpusItem,
    CorpusMetrics,
    JudgeUnavailable,
    corpus_metric,
    record_judge_failures,
    run_key,
    run_with_judge,
)
from lm_eval_fin.harness.preflight import UnscorableData
from lm_eval_fin.harness.settings import (
    RunSettings,
    Setting,
    SettingsError,
    bertscore_setting,
    one_of,
    optional,
    positive_int,
    text,
)
from lm_eval_fin.harness.task import model_answer, total
from lm_eval_fin.jsonl import answer_of

logger = logging.getLogger(__name__)

# task -> (hub split, multi-step protocol or "" for one request per example)
TASKS = {
    "fin_lfqa": ("validation", ""),
    "fin_lfqa_test": ("test", ""),
    "fin_lfqa_posthoc": ("validation", "fin_lfqa_posthoc"),
    "fin_lfqa_iterative": ("validation", "fin_lfqa_iterative"),
}
for _name, _protocol in refine.PROTOCOLS.items():
    multistep.register_protocol(_name, _protocol)


SETTINGS = (
    Setting("data_path", None, optional(text), "a local copy in the hub schema (JSON, JSONL or parquet)"),
    Setting("index_base", None, optional(one_of(*data.INDEX_BASES)),
            "index of the first paragraph and knowledge entry (default: from the data, else 1)"),
    bertscore_setting(textsim.DEFAULT_BERTSCORE_MODEL),
    Setting("max_rounds", refine.MAX_ROUNDS, positive_int, "feedback rounds of iterative refinement, at most"),
)


def _documents(task: str, settings: RunSettings) -> tuple[list[dict], data.IndexBase]:
    split, protocol = TASKS[task]
    documents, base = data.load_documents(split, settings["data_path"], settings["index_base"])
    return [dict(doc, protocol=protocol) for doc in documents], base


def _check_data(task: str, settings: RunSettings) -> None:
    """A local copy read whole as the loader reads it (the hub copy is read when the task
    loads); a scored split needs every reference answer (:class:`UnscorableData` if not)."""
    if not settings["data_path"]:
        return
    split = TASKS[task][0]
    examples = data.read_examples(split, settings["data_path"])
    data.documents(examples, settings["index_base"])
    missing = data.unreferenced(examples)
    if missing and split == "validation":
        raise UnscorableData(
            f"{missing[0].where}: no reference answer ('clauses' empty or null; {len(missing)} of {len(examples)} "
            f"records): {task} scores each answer against its reference; give the clauses, or run with "
            "--predict_only --log_samples"
        )


def _load(task: str, metadata: dict[str, Any]) -> dict:
    settings = BENCHMARK.read_settings(task, metadata)
    if TASKS[task][1] and not multistep.wrapper_loaded():
        raise SettingsError(
            f"{task} runs several generation steps per example, which one lm-eval request cannot: run it "
            f"with the model wrapper, --model {multistep.MODEL_NAME} --model_args base=<hf|vllm|...>,<that model's "
            "arguments> (lm-eval-fin run registers it; see the fin_lfqa task README)"
        )
    documents, base = _documents(task, settings)
    # the settings every document carries name the base used, and where it came from
    settings = dataclasses.replace(
        settings, values={**settings.values, "index_base": base.base, "index_base_source": base.source}
    )
    return BENCHMARK.dataset(TASKS[task][0], documents, settings)


def load_validation(**metadata: Any) -> dict:
    return _load("fin_lfqa", metadata)


def load_test(**metadata: Any) -> dict:
    return _load("fin_lfqa_test", metadata)


def load_posthoc(**metadata: Any) -> dict:
    return _load("fin_lfqa_posthoc", metadata)


def load_iterative(**metadata: Any) -> dict:
    return _load("fin_lfqa_iterative", metadata)


doc_to_text = prompt.build_prompt
doc_to_text_posthoc = prompt.build_answer_prompt


def doc_to_target(doc: dict) -> str:
    return prompt.render_answer(data.reference_clauses(doc))


def _code_failure_metrics() -> tuple[str, ...]:
    """The ``code_<category>`` metrics the YAML lists (the one place that names them)."""
    return tuple(m for m in taskfiles.higher_is_better("fin_lfqa") if m.startswith("code_") and m not in CODE_OTHERS)


CODE_OTHERS = ("code_exec_rate", "code_per_answer")


def run_metrics(items: Sequence[CorpusItem], settings: RunSettings) -> dict[str, float]:
    """The run-level metrics, in one pass: code execution (rate and failure categories),
    BERTScore, the judge; the steps of a multi-step setting go to a details file."""
    datas = [item.data for item in items]
    if datas and not any(d["knowledge_scored"] for d in datas):
        logger.warning(
            "%s: no reference cites knowledge, so knowledge_recall is NaN (knowledge_skipped counts the examples)",
            settings.task,
        )
    if any(d.get("trace") for d in datas):
        _write_traces(items, settings)
    return {
        **score.code_metrics([snippet for d in datas for snippet in d["code"]], _code_failure_metrics()),
        "bertscore_f1": score.bertscore_f1(
            [d["answer_text"] for d in datas], [d["reference_text"] for d in datas], settings["bertscore_model"]
        ),
        **judge_metrics(datas, settings),
    }


def _write_traces(items: Sequence[CorpusItem], settings: RunSettings) -> None:
    path = outputs.details_dir() / f"{settings.task}-steps-{run_key(items)[:12]}.json"
    steps = [{"doc_id": item.doc_id, **(item.data.get("trace") or {})} for item in items]
    if atomic.write_side_file(path, json.dumps(steps, indent=1, ensure_ascii=False), f"{settings.task}: the steps"):
        logger.info("%s: the steps of every example written to %s", settings.task, path)


def _judge_max_tokens(settings: RunSettings) -> int:
    return settings.judge_options.get("max_tokens", judge.JUDGE_MAX_TOKENS)


def judge_metrics(datas: Sequence[dict], settings: RunSettings) -> dict[str, float]:
    """The judge's metrics of a run (skipped, NaN with ``judge_skipped`` 1, without a judge)."""
    max_tokens = _judge_max_tokens(settings)
    try:
        answers = run_with_judge(
            settings,
            lambda j: None if j is None else judge.judge_answers(datas, j, max_tokens, settings["max_attempts"]),
        )
    except JudgeUnavailable as exc:
        record_judge_failures(settings.task, len(datas), 0, len(datas), str(exc))
        return judge.summarise_verdicts([None] * len(datas), [str(exc)] * len(datas))
    if answers is None:
        logger.warning(
            "%s: no judge configured ($LM_EVAL_FIN_JUDGE or --metadata '{\"judge\": ...}'); the judge's "
            "metrics are NaN and judge_skipped is 1. Score later with `lm-eval-fin score <output dir> --judge <spec>`.",
            settings.task,
        )
        return dict(judge.SKIPPED_JUDGE)
    record_judge_failures(
        settings.task,
        sum(a.failed for a in answers),
        sum(a.unparsed for a in answers),
        len(answers),
        next((a.error for a in answers if a.failed), None),
    )
    return judge.summarise_answers(answers)


CORPUS = CorpusMetrics(
    "fin_lfqa", ("code_exec_rate", *_code_failure_metrics(), "bertscore_f1", *judge.JUDGE_METRICS), run_metrics
)


def process_results(doc: dict, results: Sequence[str]) -> dict[str, Any]:
    answer, truncated = model_answer(results)
    scores, answer_data = score.score_document(doc, answer)
    settings = RunSettings.from_json(doc["settings"])
    answer_data["knowledge_scored"] = not math.isnan(scores["knowledge_recall"])
    extra: dict[str, float] = {"index_base": float(doc["index_base"]), "truncated_answers": truncated}
    if doc.get("protocol"):
        trace = multistep.take_trace(settings.task, doc)
        answer_data["trace"] = trace
        if doc["protocol"] == "fin_lfqa_iterative":
            # no trace: an answer lm-eval's --use_cache served from its cache
            extra["refine_rounds"] = float(trace["rounds"]) if trace else math.nan
            extra["refine_done"] = float(trace["done"]) if trace else math.nan
    return {**scores, **extra, **CORPUS.items(doc, answer_data)}


def rescore(samples: Sequence[dict], judge_: Any) -> tuple[dict[str, float], list[dict]]:
    """Judge metrics of samples logged by ``lm_eval --log_samples`` on a FinLFQA task (for
    instance after ``--predict_only``), in one batched pass; per sample: ``judge_failure`` and
    ``judge_error`` (the request failed for good), ``parse_failure`` (the reply stayed
    unreadable), ``judge_reply`` and, when scored, the three scores and their total."""
    datas = []
    for sample in samples:
        doc = sample.get("doc")
        if not isinstance(doc, dict) or "reports" not in doc:
            raise ValueError(f"sample {sample.get('doc_id')!r} has no FinLFQA document; was it logged by fin_lfqa?")
        datas.append(score.answer_data(doc, answer_of(sample)))
    settings = BENCHMARK.logged_settings(samples[0]["doc"])
    answers = judge.judge_answers(datas, judge_, _judge_max_tokens(settings), settings["max_attempts"])
    details = []
    for sample, answer in zip(samples, answers):
        detail: dict[str, Any] = {
            "doc_id": sample.get("doc_id"),
            "judge_failure": answer.failed,
            "parse_failure": answer.unparsed,
            "judge_error": answer.error,
            "judge_reply": answer.text,
        }
        if answer.value is not None:
            detail.update(dataclasses.asdict(answer.value), judge_score=answer.value.total)
        details.append(detail)
    return judge.summarise_answers(answers), details


BENCHMARK = Benchmark(
    name="fin_lfqa",
    tasks=tuple(TASKS),
    settings=SETTINGS,
    check_data=_check_data,
    rescore=rescore,
)

__all__ = [
    "BENCHMARK", "corpus_metric", "doc_to_target", "doc_to_text", "doc_to_text_posthoc", "load_iterative",
    "load_posthoc", "load_test", "load_validation", "process_results", "rescore", "total",
]
