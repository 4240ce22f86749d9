"""FinLFQA scores, per document.

From the answer parsed by :func:`lm_eval_fin.attribution.parse_answer` (pure): numeric P/R/F1
of the clause texts (section 4.2), evidence P/R/F1 over (company, paragraph) pairs and
knowledge recall (section 4.3; undefined, and counted in ``knowledge_skipped``, where the
reference cites no knowledge), ROUGE-L, the number of code snippets and whether the answer was
a parse failure. What needs all answers at once, in lm-eval's filter stage: every snippet in
the sandbox (:func:`run_code`; the answer's execution rate and failure shares follow from its
outcomes, :func:`code_values`) and BERTScore F1 of the clause texts (one model load).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lm_eval_fin import attribution
from lm_eval_fin.benchmarks.fin_lfqa.data import reference_clauses
from lm_eval_fin.benchmarks.fin_lfqa.prompt import render_answer
from lm_eval_fin.measures import numbers, textsim

logger = logging.getLogger(__name__)

CODE_TIMEOUT_S = 5.0


class NoReferenceError(ValueError):
    """A document of the hub's test split, whose answers are private."""


def require_reference(doc: dict) -> None:
    if not doc.get("has_reference"):
        raise NoReferenceError(
            f"FinLFQA document {doc.get('id')} has no reference answer (the hub's test split keeps "
            "its answers private): run fin_lfqa-test with --predict_only --log_samples, or score "
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


def score_document(doc: dict, answer: str | None) -> tuple[dict[str, float | None], dict[str, Any]]:
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
    scores: dict[str, float | None] = {
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


def knowledge_scores(predicted: Iterable[int], reference: Iterable[int]) -> dict[str, float | None]:
    """``knowledge_recall`` (None where the reference cites no knowledge: the mean leaves it
    out) and ``knowledge_skipped`` (1 there, to count such examples)."""
    recall = attribution.knowledge_recall(predicted, reference)
    return {"knowledge_recall": recall, "knowledge_skipped": float(recall is None)}


def run_code(snippets_per_answer: Sequence[Sequence[str]]) -> list[list[dict[str, Any]] | None]:
    """Every snippet of every answer in the sandbox, in one batch: per answer, one outcome per
    snippet (``ok``, and the failure ``category`` and ``error``, or the ``value``). None for
    every answer, with a warning, when the sandbox cannot be set up here."""
    from lm_eval_fin import sandbox

    snippets = [snippet for answer in snippets_per_answer for snippet in answer]
    try:
        results = sandbox.run_codes(snippets, timeout=CODE_TIMEOUT_S) if snippets else []
    except sandbox.SandboxError as exc:  # after generation: report, never discard the run
        logger.warning("FinLFQA: the code sandbox cannot be set up, so the code metrics are undefined (%d snippets "
                       "not run): %s", len(snippets), exc)
        return [None for _ in snippets_per_answer]
    logger.info("FinLFQA code execution: %d of %d snippets ran", sum(r.ok for r in results), len(results))
    outcomes: list[list[dict[str, Any]] | None] = []
    start = 0
    for answer in snippets_per_answer:
        outcomes.append([
            {"ok": r.ok, "category": r.category, "value": r.value, "error": r.error}
            for r in results[start:start + len(answer)]
        ])
        start += len(answer)
    return outcomes


def code_values(outcomes: Sequence[Mapping[str, Any]] | None, failure_metrics: Sequence[str]) -> dict[str, float | None]:
    """``code_exec_rate``: the share of the answer's snippets that define a function which,
    called with no arguments in the sandbox, returns a value other than None in time; beside
    it ``code_<category>``, the share that failed in each way the sandbox tells apart (with the
    rate they add up to 1). All undefined (None) for an answer without code, or when the
    sandbox could not run."""
    if not outcomes:
        return {"code_exec_rate": None, **dict.fromkeys(failure_metrics)}
    categories = {f"code_{o['category'] or 'exception'}" for o in outcomes if not o["ok"]}
    unknown = categories - set(failure_metrics)
    if unknown:
        raise ValueError(f"sandbox failure categories {sorted(unknown)} are not task metrics")
    n = len(outcomes)
    shares = {name: sum(f"code_{o['category'] or 'exception'}" == name for o in outcomes if not o["ok"]) / n
              for name in failure_metrics}
    return {"code_exec_rate": sum(bool(o["ok"]) for o in outcomes) / n, **shares}


def bertscore_f1(answers: Sequence[str], references: Sequence[str], model: str) -> list[float | None]:
    """BERTScore F1 of each answer's clause texts against its reference (``model``: a hub id, a
    folder or ``"offline"``); None for all (with a warning) when the model cannot load."""
    scores = textsim.bertscore_f1(list(answers), list(references), model=model) if answers else []
    if scores is None:
        return [None for _ in answers]
    logger.info("FinLFQA BERTScore computed with model %s (%s)", model, textsim.resolve_bertscore_model(model))
    return list(scores)
