"""The lm-eval tasks ``fin_agentbench_doc`` and ``fin_agentbench_chunk`` (group ``fin_agentbench``).

``tasks/fin_agentbench/utils.py`` re-exports the functions the YAMLs name. Metadata:
``data_path`` (a challenge file or a folder of them; required, there is no hub copy),
``gain`` (``exponential``, the default, or ``linear``) and ``max_gen_toks`` (the answer budget
chunk prompts leave room for; default: the YAML's). Chunk prompts are fitted to the model's
context (``max_length``, from the model arguments lm-eval mixes into the metadata, as for
fin_ems): chunks are dropped from the end of the list, the question and the instruction kept.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from lm_eval_fin.benchmarks.fin_agentbench import data, scales
from lm_eval_fin.benchmarks.fin_agentbench.prompt import fit_chunks
from lm_eval_fin.benchmarks.fin_agentbench.score import gold_ranking, read_ranking, score_ranking
from lm_eval_fin.benchmarks.fin_agentbench.view import VIEW
from lm_eval_fin.harness import taskfiles
from lm_eval_fin.harness.benchmark import Benchmark, Demo
from lm_eval_fin.harness.fitting import PromptFitter, prompt_fitter
from lm_eval_fin.harness.preflight import UnscorableData
from lm_eval_fin.harness.settings import RunSettings, Setting, SettingsError, one_of, optional, positive_int, text
from lm_eval_fin.harness.stage import predict_only
from lm_eval_fin.harness.task import (
    degenerate_answer,
    metric_values,
    require_data_path,
    scored_record,
    total,
)
from lm_eval_fin.measures.degenerate import in_input_order
from lm_eval_fin.measures.ranking import GAINS
from lm_eval_fin.plumbing import paths

logger = logging.getLogger(__name__)

# task -> challenge file kind
TASKS = {"fin_agentbench_doc": "document", "fin_agentbench_chunk": "chunk"}
CHUNK_TASK = "fin_agentbench_chunk"
DATA_HINT = f"{data.EXPECTED}. There is no hub copy; see the fin_agentbench task README for where the files are"


def _records(task: str, settings: RunSettings) -> list[dict]:
    return data.load_records(require_data_path(settings, DATA_HINT), TASKS[task])


def _check_data(task: str, settings: RunSettings) -> None:
    """The challenge file(s) read whole; every record needs its grades to be scored
    (:class:`UnscorableData` for an eval file, fine with ``--predict_only``)."""
    records = data.read_records(require_data_path(settings, DATA_HINT), TASKS[task])
    missing = data.ungraded(records)
    if missing:
        raise UnscorableData(
            f"{missing[0]}: no 'qrel' (grades; {len(missing)} of {len(records)} records): {task} scores each "
            "ranking against its grades; run an eval file with --predict_only --log_samples to collect the rankings"
        )


def fit_documents(documents: list[dict], fitter: PromptFitter | None, task: str = CHUNK_TASK) -> list[dict]:
    """The chunk task's documents with their prompts fitted to the context: ``truncated``,
    ``dropped_chunks`` (how many were left out, from the end of the list) and
    ``prompt_tokens`` (before fitting; -1 without a fitter) beside each prompt."""
    fitted = []
    for doc in documents:
        if fitter is None:
            fitted.append(dict(doc, truncated=False, dropped_chunks=0, prompt_tokens=-1))
            continue
        try:
            prompt = fit_chunks(doc["prompt"], fitter)
        except ValueError as exc:
            raise ValueError(f"{task}: record {doc['id']}: {exc}") from None
        fitted.append(dict(
            doc, prompt=prompt.text, truncated=bool(prompt.dropped), dropped_chunks=len(prompt.dropped),
            prompt_tokens=prompt.tokens,
        ))
    cut = [doc for doc in fitted if doc["truncated"]]
    if cut and fitter is not None:  # only a fitter cuts
        logger.warning(
            "%s: %d of %d prompts cut to fit max_length=%d with %d answer tokens (%d chunks left out in all; "
            "the question and the instruction are kept whole)",
            task, len(cut), len(fitted), fitter.max_length, fitter.max_gen_toks, sum(d["dropped_chunks"] for d in cut),
        )
    return fitted


def _documents(task: str, metadata: dict[str, Any]):
    def documents(settings: RunSettings) -> tuple[list[dict], RunSettings]:
        docs = data.to_documents(_records(task, settings), with_labels=TASKS[task] == "document")
        ungraded = [doc["id"] for doc in docs if not doc["qrel"]]
        if ungraded and not predict_only():
            raise SettingsError(
                f"{task}: {len(ungraded)} record(s) have no 'qrel' (an eval file without grades, first "
                f"{ungraded[0]}): they cannot be scored; run them with --predict_only --log_samples to collect rankings"
            )
        if task == CHUNK_TASK:
            budget = settings["max_gen_toks"] or taskfiles.max_gen_toks(task)
            docs = fit_documents(docs, prompt_fitter(metadata, budget, task), task)
        return docs, settings

    return documents


def load_document_ranking(**metadata: Any) -> dict:
    return BENCHMARK.load("fin_agentbench_doc", metadata, _documents("fin_agentbench_doc", metadata))


def load_chunk_ranking(**metadata: Any) -> dict:
    return BENCHMARK.load(CHUNK_TASK, metadata, _documents(CHUNK_TASK, metadata))


def doc_to_target(doc: dict) -> str:
    """The gold ranking, best first, written as the prompt asks for an answer (an eval file's
    ungraded document: empty)."""
    return "[" + ", ".join(str(candidate) for candidate in gold_ranking(doc)) + "]" if doc["qrel"] else ""


def read_rankings(answers: Sequence[str], docs: Sequence[dict], settings: RunSettings) -> list[dict]:
    """The filter stage: each answer's ranking as read (None when unreadable), and a ranking
    that only repeats the candidates in the order given flagged as degenerate."""
    details = []
    for doc, answer in zip(docs, answers):
        ranking = read_ranking(doc, answer)
        details.append({"ranking": ranking, **({"degenerate": "input order"}
                                                if in_input_order(ranking, doc["candidates"]) else {})})
    return details


def process_results(doc: dict, results: Sequence[str]) -> dict[str, float]:
    record = scored_record(results)
    settings = RunSettings.from_json(doc["settings"])
    values: dict[str, Any] = {**score_ranking(doc, record.get("ranking"), gain=settings["gain"]),
                              "truncated_answers": record.get("truncated_answer", False),
                              "degenerate_answer": degenerate_answer(record)}
    if settings.task == CHUNK_TASK:
        values["truncated_documents"] = doc.get("truncated", False)
    return metric_values(settings, values)


BENCHMARK = Benchmark(
    name="fin_agentbench",
    tasks=tuple(TASKS),
    settings=(
        Setting("data_path", None, optional(text), "a challenge JSONL file or a folder of them"),
        Setting("gain", "exponential", one_of(*GAINS), "nDCG gain: exponential (2^g - 1) or linear (g)"),
        Setting("max_gen_toks", None, optional(positive_int), "answer budget chunk prompts leave room for"),
    ),
    check_data=_check_data,
    score=read_rankings,
    prompt=lambda doc: doc["prompt"],
    scales=scales.SCALES,
    view=VIEW,
    headline={
        "fin_agentbench_doc": ("ndcg@5", "map@5", "map_hits@5", "mrr@5", "parse_failure"),
        "fin_agentbench_chunk": ("ndcg@10", "map@10", "map_hits@10", "mrr@10", "parse_failure"),
    },
    demo=Demo(
        metadata=lambda: {"data_path": str(paths.data_path("finagentbench_demo"))},
        notes={"fin_agentbench_chunk": "a 135M model seldom writes an index list for a 12-chunk prompt: its parse "
               "failures are real, not a bug (try a larger model, e.g. with --model vllm)"},
    ),
)
score_answers = BENCHMARK.filter_function()

__all__ = [
    "BENCHMARK", "doc_to_target", "load_chunk_ranking", "load_document_ranking", "process_results",
    "score_answers", "total",
]
