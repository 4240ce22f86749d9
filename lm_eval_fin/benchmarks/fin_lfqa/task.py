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

from lm_eval_fin.benchmarks import demo_data
from lm_eval_fin.benchmarks.fin_lfqa import data, judge, metrics, prompt, refine, score
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
from lm_eval_fin.harness.stage import Judged, JudgeWork, command_line_model, judge_stage, predict_only
from lm_eval_fin.harness.task import degenerate_answer, metric_values, scored_record, total
from lm_eval_fin.measures import textsim

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


def _without_the_wrapper(task: str) -> SettingsError | None:
    """Why a multi-step task cannot run here: its answers need the ``fin-refine`` wrapper, and
    no fin-refine model exists in this process (a replay of logged answers needs none)."""
    if not TASKS[task][1] or multistep.wrapper_loaded() or replay.plan() is not None:
        return None
    return SettingsError(
        f"{task} runs several generation steps per example, which one lm-eval request cannot: run it "
        f"with the model wrapper, --model {multistep.MODEL_NAME} --model_args base=<hf|vllm|...>,<that model's "
        "arguments> (lm-eval-fin run registers it; see the fin_lfqa task README)"
    )


def _load(task: str, metadata: dict[str, Any]) -> dict:
    # lm-eval's command line builds its model before the tasks: another model stops the run
    # here, before generation. Elsewhere (Python's API, lm-eval's own task tests, which build
    # tasks and requests with no model at all) the task loads, and the filter stage checks.
    problem = _without_the_wrapper(task)
    if problem is not None and command_line_model() not in (None, multistep.MODEL_NAME):
        raise problem

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


CODE_FAILURES = tuple(metric.name for metric in metrics.CODE_FAILURES)


def _judge_max_tokens(settings: RunSettings) -> int:
    return settings.judge_options.get("max_tokens", judge.JUDGE_MAX_TOKENS)


def keep_traces(docs: Sequence[dict]) -> list[dict]:
    """What a --predict_only record keeps: the steps of a multi-step setting. Answers of a
    multi-step task that no fin-refine model wrote (one generation each) are refused."""
    for task in dict.fromkeys(RunSettings.from_json(doc["settings"]).task for doc in docs):
        problem = _without_the_wrapper(task) if task in TASKS else None
        if problem is not None:
            raise problem
    return [{"trace": multistep.take_trace(RunSettings.from_json(doc["settings"]).task, doc)} for doc in docs]


def score_answers_batch(answers: Sequence[str], docs: Sequence[dict], settings: RunSettings) -> list[dict]:
    """The filter stage: every answer parsed once, its per-document scores kept in its record
    (``scores``, what :func:`process_results` reads); its snippets in the sandbox, BERTScore and
    the judge, each in one batch; the steps of a multi-step setting kept with each answer."""
    scored = [score.score_document(doc, answer) for doc, answer in zip(docs, answers)]
    datas = [data for _, data in scored]
    code = score.run_code([data["code"] for data in datas])
    texts = [d["answer_text"] for d in datas], [d["reference_text"] for d in datas]
    bertscore = score.bertscore_f1(*texts, settings["bertscore_model"])
    cuts = textsim.bertscore_cut(*texts, textsim.resolve_bertscore_model(settings["bertscore_model"]))
    judged = judge_documents(datas, settings)
    traces = keep_traces(docs)
    return [
        {"scores": scores, "code": outcomes, "bertscore_f1": bs, "bertscore_model": settings["bertscore_model"],
         "bertscore_cut": cut, **verdict, **trace}
        for (scores, _), outcomes, bs, cut, verdict, trace in zip(scored, code, bertscore, cuts, judged, traces)
    ]


def judge_documents(datas: Sequence[dict], settings: RunSettings) -> list[dict]:
    """The judge's part of every document's record (no judge configured: each says so) and,
    where it was asked, the judge work the document cost (the judge stage's)."""
    max_tokens = _judge_max_tokens(settings)

    def run(judge_: Any, items: Sequence[dict]) -> list[Judged]:
        answers = judge.judge_answers(items, judge_, max_tokens, settings["max_attempts"])
        return [Judged({"judge": judge.judge_details(answer, settings.judge)}, answer.failed, answer.unparsed,
                       answer.error, answer.usage.as_dict()) for answer in answers]

    return judge_stage(settings, datas, JudgeWork(
        run,
        unavailable=lambda items, error: [{"judge": judge.judge_details(None, settings.judge, error)} for _ in items],
        unjudged=lambda items: [{"judge": judge.judge_details(None, None)} for _ in items],
    ))


def process_results(doc: dict, results: Sequence[str]) -> dict[str, float]:
    """Every metric of one document: the values in its record (the filter stage parsed and
    scored the answer; a record written before it kept ``scores`` is scored here)."""
    record = scored_record(results)
    settings = RunSettings.from_json(doc["settings"])
    scores = record.get("scores") or score.score_document(doc, record["answer"])[0]
    values: dict[str, Any] = {
        **scores,
        **score.code_values(record.get("code"), CODE_FAILURES),
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
    metrics=metrics.METRICS,
    headline={task: metrics.HEADLINE for task in TASKS},
    agreement=metrics.AGREEMENT,
    hub_dataset=data.HUB_DATASET,
    demo=Demo(
        metadata=lambda: {"data_path": str(demo_data("fin_lfqa", "finlfqa_demo.jsonl")), "judge": "none",
                          "bertscore_model": "offline", "max_gen_toks": DEMO_ANSWER_TOKENS},
        arguments=("--gen_kwargs", f"max_gen_toks={DEMO_ANSWER_TOKENS}", "--confirm_run_unsafe_code"),
    ),
)
score_answers = BENCHMARK.filter_function()

__all__ = [
    "BENCHMARK", "doc_to_target", "doc_to_text", "doc_to_text_posthoc", "load_iterative", "load_posthoc",
    "load_test", "load_validation", "process_results", "score_answers", "total",
]
