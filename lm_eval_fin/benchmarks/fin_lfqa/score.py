"""FinLFQA scores: per document (pure) and over a run (code execution, BERTScore).

Per document, from the answer parsed by :func:`lm_eval_fin.attribution.parse_answer`:
numeric P/R/F1 of the clause texts (section 4.2), evidence P/R/F1 over (company, paragraph)
pairs and knowledge recall (section 4.3; NaN, and counted in ``knowledge_skipped``, where the
reference cites no knowledge), ROUGE-L, the number of code snippets and whether the answer was
a parse failure. Over the run: the code execution rate (every snippet of the run in the
sandbox, micro average) with the failures by category beside it, and BERTScore F1 of the
clause texts.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from typing import Any

from lm_eval_fin import attribution, numbers, textsim
from lm_eval_fin.benchmarks.fin_lfqa.data import reference_clauses
from lm_eval_fin.benchmarks.fin_lfqa.prompt import render_answer

logger = logging.getLogger(__name__)

CODE_TIMEOUT_S = 5.0


class NoReferenceError(ValueError):
    """A document of the hub's test split, whose answers are private."""


def require_reference(doc: dict) -> None:
    if not doc.get("has_reference"):
        raise NoReferenceError(
            f"FinLFQA document {doc.get('id')} has no reference answer (the hub's test split keeps "
            "its answers private): run fin_lfqa_test with --predict_only --log_samples, or score "
            "the validation split (fin_lfqa)."
        )


def answer_data(doc: dict, answer: str, parsed: attribution.ParsedAnswer | None = None) -> dict[str, Any]:
    """What the run-level scores (code, BERTScore, the judge) need of one answered document."""
    require_reference(doc)
    parsed = parsed or attribution.parse_answer(answer, doc["companies"])
    clauses = reference_clauses(doc)
    return {
        "answer": answer,
        "answer_text": parsed.text,
        "code": list(parsed.code),
        "reference_text": "\n".join(clause["text"] for clause in clauses),
        "reference_answer": render_answer(clauses),
        "question": doc["question"],
        "reports": doc["reports"],
    }


def score_document(doc: dict, answer: str | None) -> tuple[dict[str, float], dict[str, Any]]:
    """(every per-document metric, :func:`answer_data`) of one answer."""
    require_reference(doc)
    answer = answer if isinstance(answer, str) else ""
    parsed = attribution.parse_answer(answer, doc["companies"])
    data = answer_data(doc, answer, parsed)
    clauses = reference_clauses(doc)
    gold_evidence = [tuple(pair) for clause in clauses for pair in clause["evidence"]]
    gold_knowledge = [index for clause in clauses for index in clause["knowledge"]]
    numeric = numbers.numeric_prf(parsed.text, data["reference_text"])
    evidence = attribution.evidence_prf(parsed.evidence, gold_evidence)
    rouge = textsim.rouge_l([parsed.text], [data["reference_text"]])[0]
    scores = {
        "numeric_precision": numeric[0],
        "numeric_recall": numeric[1],
        "numeric_f1": numeric[2],
        "evidence_precision": evidence[0],
        "evidence_recall": evidence[1],
        "evidence_f1": evidence[2],
        **knowledge_scores(parsed.knowledge, gold_knowledge),
        "rouge_l": rouge[2],
        "code_per_answer": float(len(parsed.code)),
        "parse_failure": float(parsed.parse_failure),
    }
    return scores, data


def knowledge_scores(predicted: Iterable[int], reference: Iterable[int]) -> dict[str, float]:
    """``knowledge_recall`` (NaN where the reference cites no knowledge: lm-eval's ``nanmean``
    leaves it out) and ``knowledge_skipped`` (1 there, to count such examples)."""
    recall = attribution.knowledge_recall(predicted, reference)
    return {"knowledge_recall": math.nan if recall is None else recall, "knowledge_skipped": float(recall is None)}


def code_metrics(snippets: Sequence[str], failure_metrics: Sequence[str]) -> dict[str, float]:
    """``code_exec_rate``: the share of the run's snippets that define a function which, called
    with no arguments in the sandbox, returns a value other than None in time (micro average;
    0.0 when the run produced no snippet: no code, no credit, and ``code_per_answer`` shows the
    count beside it). ``failure_metrics`` (``code_<category>``): the share of the snippets that
    failed in each way the sandbox tells apart, so that the paper's error analysis can be
    compared. Everything NaN, with a warning, when the sandbox cannot be set up here."""
    from lm_eval_fin import sandbox

    missing = dict.fromkeys(failure_metrics, math.nan)
    try:
        results = sandbox.run_codes(list(snippets), timeout=CODE_TIMEOUT_S) if snippets else []
    except sandbox.SandboxError as exc:  # after generation: report, never discard the run
        logger.warning(
            "FinLFQA: the code sandbox cannot be set up, so code_exec_rate is NaN (%d snippets not "
            "run): %s", len(snippets), exc,
        )
        return {"code_exec_rate": math.nan, **missing}
    logger.info("FinLFQA code execution: %d of %d snippets ran", sum(r.ok for r in results), len(results))
    shares = sandbox.failure_categories(results)
    return {"code_exec_rate": sandbox.code_exec_rate(results), **{n: shares.get(n, math.nan) for n in failure_metrics}}


def bertscore_f1(answers: Sequence[str], references: Sequence[str], model: str) -> float:
    """Mean BERTScore F1 of the answers' clause texts against the references (``model``: a hub
    id, a folder or ``"offline"``); NaN (with a warning) when the model cannot load."""
    scores = textsim.bertscore_f1(list(answers), list(references), model=model) if answers else None
    if scores is None:
        return math.nan
    logger.info("FinLFQA BERTScore computed with model %s (%s)", model, textsim.resolve_bertscore_model(model))
    return sum(scores) / len(scores)
