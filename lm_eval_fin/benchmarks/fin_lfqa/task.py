"""The lm-eval tasks ``fin_lfqa`` (validation split, scored) and ``fin_lfqa_test`` (test split,
answers private: ``--predict_only``).

``tasks/fin_lfqa/utils.py`` re-exports the functions the YAMLs name. Metadata: ``data_path``
(a local copy in the hub schema; default: the hub dataset), ``index_base`` (0 or 1: the
first paragraph's and knowledge entry's index), ``bertscore_model``, and the judge settings
of :mod:`lm_eval_fin.harness.settings`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

from lm_eval_fin import textsim
from lm_eval_fin.benchmarks.fin_lfqa import data, judge, prompt, score
from lm_eval_fin.harness.benchmark import Benchmark
from lm_eval_fin.harness.corpus import (
    CorpusItem,
    CorpusMetrics,
    JudgeUnavailable,
    corpus_metric,
    record_judge_failures,
    run_with_judge,
)
from lm_eval_fin.harness.samples import answer_of
from lm_eval_fin.harness.settings import RunSettings, Setting, one_of, optional, text
from lm_eval_fin.harness.task import as_dataset

logger = logging.getLogger(__name__)

SPLIT_OF_TASK = {"fin_lfqa": "validation", "fin_lfqa_test": "test"}

SETTINGS = (
    Setting("data_path", None, optional(text), "a local copy in the hub schema (JSON, JSONL or parquet)"),
    Setting("index_base", data.DEFAULT_INDEX_BASE, one_of(0, 1), "index of the first paragraph and knowledge entry"),
    Setting("bertscore_model", textsim.DEFAULT_BERTSCORE_MODEL, text, "BERTScore model: hub id or folder"),
)


def _documents(task: str, settings: RunSettings) -> list[dict]:
    return data.load_documents(SPLIT_OF_TASK[task], settings["data_path"], settings["index_base"])


def _check_data(task: str, settings: RunSettings) -> None:
    if settings["data_path"]:  # the hub copy is read when the task loads
        _documents(task, settings)


def _load(task: str, metadata: dict[str, Any]) -> dict:
    settings = BENCHMARK.read_settings(task, metadata)
    return as_dataset(SPLIT_OF_TASK[task], _documents(task, settings), settings)


def load_validation(**metadata: Any) -> dict:
    return _load("fin_lfqa", metadata)


def load_test(**metadata: Any) -> dict:
    return _load("fin_lfqa_test", metadata)


doc_to_text = prompt.build_prompt


def doc_to_target(doc: dict) -> str:
    return prompt.render_answer(data.reference_clauses(doc))


def run_metrics(items: Sequence[CorpusItem], settings: RunSettings) -> dict[str, float]:
    """The run-level metrics, in one pass: code execution rate, BERTScore, the judge."""
    datas = [item.data for item in items]
    return {
        "code_exec_rate": score.code_exec_rate([snippet for d in datas for snippet in d["code"]]),
        "bertscore_f1": score.bertscore_f1(
            [d["answer_text"] for d in datas], [d["reference_text"] for d in datas], settings["bertscore_model"]
        ),
        **judge_metrics(datas, settings),
    }


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


CORPUS = CorpusMetrics("fin_lfqa", ("code_exec_rate", "bertscore_f1", *judge.JUDGE_METRICS), run_metrics)


def process_results(doc: dict, results: Sequence[str]) -> dict[str, Any]:
    scores, answer_data = score.score_document(doc, results[0] if results else "")
    return {**scores, **CORPUS.items(doc, answer_data)}


def rescore(samples: Sequence[dict], judge_: Any) -> tuple[dict[str, float], list[dict]]:
    """Judge metrics of samples logged by ``lm_eval --log_samples`` on fin_lfqa (for instance
    after ``--predict_only``), in one batched pass; per sample: ``judge_failure`` and
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
    tasks=tuple(SPLIT_OF_TASK),
    settings=SETTINGS,
    check_data=_check_data,
    rescore=rescore,
)

__all__ = [
    "BENCHMARK", "corpus_metric", "doc_to_target", "doc_to_text", "load_test", "load_validation",
    "process_results", "rescore",
]
