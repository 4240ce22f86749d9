"""The lm-eval tasks of FinLFQA, one per setting of the paper (section 5.1):

* ``fin_lfqa`` (validation split, scored) and ``fin_lfqa-test`` (test split, answers private:
  ``--predict_only``): end-to-end generation, one request per example;
* ``fin_lfqa-posthoc`` and ``fin_lfqa-iterative`` (validation split): post-hoc attribution and
  iterative refinement, several generation steps per example, run by the ``fin-refine`` model
  wrapper (:mod:`lm_eval_fin.harness.multistep`) with the protocols of
  :mod:`lm_eval_fin.benchmarks.fin_lfqa.refine`; their loaders stop with a message saying so
  when the run's model is not that wrapper.

``tasks/fin_lfqa/utils.py`` re-exports the functions the YAMLs name. Metadata: ``data_path``
(a local copy in the hub schema; default: the hub dataset), ``index_base`` (0 or 1: the first
paragraph's and knowledge entry's index; default: detected from the data's gold indices, else
the paper's 1), ``bertscore_model`` (a hub id, a folder or ``offline``), ``max_rounds``
(iterative refinement's bound), ``max_gen_toks`` (the answer budget the prompts leave room
for; keep it equal to ``--gen_kwargs max_gen_toks`` when you change that; default: the YAML's)
and the judge settings of :mod:`lm_eval_fin.harness.settings`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

from lm_eval_fin.benchmarks.fin_lfqa import data, judge, prompt, refine, scales, score
from lm_eval_fin.benchmarks.fin_lfqa.view import VIEW
from lm_eval_fin.harness import multistep, replay, taskfiles
from lm_eval_fin.harness.benchmark import Benchmark, Demo
from lm_eval_fin.harness.fitting import PromptFitter, prompt_fitter
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
from lm_eval_fin.harness.stage import JudgeUnavailable, predict_only, record_judge_failures, run_with_judge
from lm_eval_fin.harness.task import degenerate_answer, metric_values, scored_record, total
from lm_eval_fin.measures import textsim
from lm_eval_fin.outputs import records
from lm_eval_fin.plumbing import paths

logger = logging.getLogger(__name__)

# task -> (hub split, multi-step protocol or "" for one request per example)
TASKS = {
    "fin_lfqa": ("validation", ""),
    "fin_lfqa-test": ("test", ""),
    "fin_lfqa-posthoc": ("validation", "fin_lfqa-posthoc"),
    "fin_lfqa-iterative": ("validation", "fin_lfqa-iterative"),
}
# the demo's answers are shorter than the task's budget: a few minutes on 2 cores
DEMO_ANSWER_TOKENS = 384
for _name, _protocol in refine.PROTOCOLS.items():
    multistep.register_protocol(_name, _protocol)


def feedback_spec(value: Any) -> str:
    """A ``feedback_model`` value: a judge spec, checked when the dataset loads."""
    from lm_eval_fin.judge import JudgeSpecError, parse_spec

    try:
        return str(parse_spec(text(value)))
    except JudgeSpecError as exc:
        raise ValueError(str(exc)) from None


SETTINGS = (
    Setting("data_path", None, optional(text), "a local copy in the hub schema (JSON, JSONL or parquet)"),
    Setting("index_base", None, optional(one_of(*data.INDEX_BASES)),
            "index of the first paragraph and knowledge entry (default: from the data, else 1)"),
    bertscore_setting(textsim.DEFAULT_BERTSCORE_MODEL),
    Setting("max_rounds", refine.MAX_ROUNDS, positive_int, "feedback rounds of iterative refinement, at most"),
    Setting("max_gen_toks", None, optional(positive_int), "answer budget the prompts leave room for"),
    Setting("feedback_model", None, optional(feedback_spec),
            "iterative refinement: the model that gives the feedback, as a judge spec (default: the model under test)"),
)



def fit_documents(docs: list[dict], fitter: PromptFitter | None, task: str) -> list[dict]:
    """The documents with their report excerpts fitted to the context (:func:`prompt.fit_reports`):
    ``truncated``, ``dropped_paragraphs`` and ``prompt_tokens`` (before fitting; -1 without a
    fitter) beside each."""
    fitted = []
    for doc in docs:
        if fitter is None:
            fitted.append(dict(doc, truncated=False, dropped_paragraphs=0, prompt_tokens=-1))
            continue
        try:
            fit = prompt.fit_reports(doc, fitter, doc.get("protocol") or "")
        except ValueError as exc:
            raise SettingsError(f"{task}: record {doc['id']}: {exc}") from None
        fitted.append(dict(doc, reports=fit.reports, truncated=bool(fit.dropped_paragraphs),
                           dropped_paragraphs=fit.dropped_paragraphs, prompt_tokens=fit.prompt_tokens))
    cut = [doc for doc in fitted if doc["truncated"]]
    if cut and fitter is not None:
        logger.warning(
            "%s: %d of %d prompts cut to fit max_length=%d with %d answer tokens (%d report paragraphs left out in "
            "all; the instructions, format example, question and knowledge list are kept whole)",
            task, len(cut), len(fitted), fitter.max_length, fitter.max_gen_toks,
            sum(d["dropped_paragraphs"] for d in cut),
        )
    return fitted


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
    if TASKS[task][1] and not multistep.wrapper_loaded() and replay.plan() is None:
        raise SettingsError(
            f"{task} runs several generation steps per example, which one lm-eval request cannot: run it "
            f"with the model wrapper, --model {multistep.MODEL_NAME} --model_args base=<hf|vllm|...>,<that model's "
            "arguments> (lm-eval-fin run registers it; see the fin_lfqa task README)"
        )

    def documents(settings: RunSettings) -> tuple[list[dict], RunSettings]:
        docs, base = _documents(task, settings)
        unanswered = [doc["id"] for doc in docs if not doc.get("has_reference")]
        if unanswered and not predict_only():
            raise SettingsError(
                f"{task}: {len(unanswered)} example(s) have no reference answer (the hub's test split keeps its "
                f"answers private, first {unanswered[0]}): run it with --predict_only --log_samples"
            )
        # the settings every document carries name the base used, and where it came from
        values = {**settings.values, "index_base": base.base, "index_base_source": base.source}
        fitter = prompt_fitter(metadata, settings["max_gen_toks"] or taskfiles.max_gen_toks(task), task)
        return fit_documents(docs, fitter, task), dataclasses.replace(settings, values=values)

    return BENCHMARK.load(task, metadata, documents, split=TASKS[task][0])


def load_validation(**metadata: Any) -> dict:
    return _load("fin_lfqa", metadata)


def load_test(**metadata: Any) -> dict:
    return _load("fin_lfqa-test", metadata)


def load_posthoc(**metadata: Any) -> dict:
    return _load("fin_lfqa-posthoc", metadata)


def load_iterative(**metadata: Any) -> dict:
    return _load("fin_lfqa-iterative", metadata)


doc_to_text = prompt.build_prompt
doc_to_text_posthoc = prompt.build_answer_prompt


def doc_to_target(doc: dict) -> str:
    return prompt.render_answer(data.reference_clauses(doc))


def _code_failure_metrics() -> tuple[str, ...]:
    """The ``code_<category>`` metrics the YAML lists (the one place that names them)."""
    return tuple(m for m in taskfiles.metric_names("fin_lfqa") if m.startswith("code_") and m not in CODE_OTHERS)


CODE_OTHERS = ("code_exec_rate", "code_per_answer")


def _judge_max_tokens(settings: RunSettings) -> int:
    return settings.judge_options.get("max_tokens", judge.JUDGE_MAX_TOKENS)


def keep_traces(docs: Sequence[dict]) -> list[dict]:
    """What a --predict_only record keeps: the steps of a multi-step setting."""
    return [{"trace": multistep.take_trace(RunSettings.from_json(doc["settings"]).task, doc)} for doc in docs]


def score_answers_batch(answers: Sequence[str], docs: Sequence[dict], settings: RunSettings) -> list[dict]:
    """The filter stage: every answer's snippets in the sandbox, BERTScore and the judge, each
    in one batch; the steps of a multi-step setting are kept with each answer."""
    datas = [score.answer_data(doc, answer) for doc, answer in zip(docs, answers)]
    code = score.run_code([data["code"] for data in datas])
    texts = [d["answer_text"] for d in datas], [d["reference_text"] for d in datas]
    bertscore = score.bertscore_f1(*texts, settings["bertscore_model"])
    cuts = textsim.bertscore_cut(*texts, textsim.resolve_bertscore_model(settings["bertscore_model"]))
    judged = judge_documents(datas, settings)
    traces = keep_traces(docs)
    return [
        {"code": outcomes, "bertscore_f1": bs, "bertscore_model": settings["bertscore_model"], "bertscore_cut": cut,
         **verdict, **trace}
        for outcomes, bs, cut, verdict, trace in zip(code, bertscore, cuts, judged, traces)
    ]


def judge_documents(datas: Sequence[dict], settings: RunSettings) -> list[dict]:
    """The judge's part of every document's record (no judge configured: each says so) and,
    where it was asked, the judge work the document cost (``records.JUDGE_USAGE``)."""
    max_tokens = _judge_max_tokens(settings)
    try:
        answers = run_with_judge(
            settings,
            lambda j: None if j is None else judge.judge_answers(datas, j, max_tokens, settings["max_attempts"]),
        )
    except JudgeUnavailable as exc:
        record_judge_failures(settings.task, len(datas), 0, len(datas), str(exc))
        return [{"judge": judge.judge_details(None, settings.judge, str(exc))} for _ in datas]
    if answers is None:
        logger.warning(
            "%s: no judge configured ($LM_EVAL_FIN_JUDGE or --metadata '{\"judge\": ...}'); the judge's "
            "metrics are undefined and judge_skipped is 1. Score later with `lm-eval-fin score <output dir> --judge "
            "<spec>`.", settings.task,
        )
        return [{"judge": judge.judge_details(None, None)} for _ in datas]
    record_judge_failures(
        settings.task,
        sum(a.failed for a in answers),
        sum(a.unparsed for a in answers),
        len(answers),
        next((a.error for a in answers if a.failed), None),
    )
    return [{"judge": judge.judge_details(answer, settings.judge), records.JUDGE_USAGE: answer.usage.as_dict()}
            for answer in answers]


def process_results(doc: dict, results: Sequence[str]) -> dict[str, float]:
    """Every metric of one document: its answer's scores, and the values in its record."""
    record = scored_record(results)
    settings = RunSettings.from_json(doc["settings"])
    scores, _ = score.score_document(doc, record["answer"])
    values: dict[str, Any] = {
        **scores,
        **score.code_values(record.get("code"), _code_failure_metrics()),
        "bertscore_f1": record.get("bertscore_f1"),
        **judge.judge_values(record.get("judge")),
        "index_base": float(doc["index_base"]),
        "truncated_documents": doc.get("truncated", False),
        "truncated_answers": record.get("truncated_answer", False),
        "degenerate_answer": degenerate_answer(record),
    }
    if doc.get("protocol") == "fin_lfqa-iterative":
        trace = record.get("trace")  # none: an answer lm-eval's --use_cache served from its cache
        values["refine_rounds"] = trace["rounds"] if trace else None
        values["refine_done"] = trace["done"] if trace else None
    return metric_values(settings, values)


BENCHMARK = Benchmark(
    name="fin_lfqa",
    tasks=tuple(TASKS),
    settings=SETTINGS,
    check_data=_check_data,
    score=score_answers_batch,
    view=VIEW,
    keep=keep_traces,
    prompt=lambda doc: prompt.first_prompt(doc, doc.get("protocol") or ""),
    judged=True,
    scales=scales.SCALES,
    hub_dataset=data.HUB_DATASET,
    headline={task: ("judge_score", "numeric_f1", "evidence_f1", "code_exec_rate", "knowledge_recall", "rouge_l")
              for task in TASKS},
    demo=Demo(
        metadata=lambda: {"data_path": str(paths.data_path("finlfqa_demo", "finlfqa_demo.jsonl")), "judge": "none",
                          "bertscore_model": "offline", "max_gen_toks": DEMO_ANSWER_TOKENS},
        arguments=("--gen_kwargs", f"max_gen_toks={DEMO_ANSWER_TOKENS}", "--confirm_run_unsafe_code"),
    ),
)
score_answers = BENCHMARK.filter_function()

__all__ = [
    "BENCHMARK", "doc_to_target", "doc_to_text", "doc_to_text_posthoc", "load_iterative", "load_posthoc",
    "load_test", "load_validation", "process_results", "score_answers", "total",
]
