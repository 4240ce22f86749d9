"""FinLFQA scores: per document (pure) and over a run (code execution, BERTScore).

Per document, from the answer parsed by :func:`lm_eval_fin.attribution.parse_answer`:
numeric P/R/F1 of the clause texts (section 4.2), evidence P/R/F1 over (company, paragraph)
pairs and knowledge recall (section 4.3), ROUGE-L, the number of code snippets and whether the
answer was a parse failure. Over the run: the code execution rate (every snippet of the run in
the sandbox, micro average) and BERTScore F1 of the clause texts.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
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
        "knowledge": doc["knowledge"],
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
        "knowledge_recall": attribution.knowledge_recall(parsed.knowledge, gold_knowledge),
        "rouge_l": rouge[2],
        "code_per_answer": float(len(parsed.code)),
        "parse_failure": float(parsed.parse_failure),
    }
    return scores, data


def code_exec_rate(snippets: Sequence[str]) -> float:
    """Share of the run's snippets that define a function which, called with no arguments in
    the sandbox, returns a value other than None in time (micro average). 0.0 when the run
    produced no snippet (no code, no credit; ``code_per_answer`` shows the count beside it).
    NaN, with a warning, when the sandbox cannot be set up here."""
    from lm_eval_fin import sandbox

    try:
        results = sandbox.run_codes(list(snippets), timeout=CODE_TIMEOUT_S) if snippets else []
    except sandbox.SandboxError as exc:  # after generation: report, never discard the run
        logger.warning(
            "FinLFQA: the code sandbox cannot be set up, so code_exec_rate is NaN (%d snippets not "
            "run): %s", len(snippets), exc,
        )
        return math.nan
    logger.info("FinLFQA code execution: %d of %d snippets ran", sum(r.ok for r in results), len(results))
    return sandbox.code_exec_rate(results)


def bertscore_f1(answers: Sequence[str], references: Sequence[str], model: str) -> float:
    """Mean BERTScore F1 of the answers' clause texts against the references; NaN (with a
    warning) when the model cannot load."""
    scores = textsim.bertscore_f1(list(answers), list(references), model=model) if answers else None
    if scores is None:
        return math.nan
    logger.info("FinLFQA BERTScore computed with model %s", model)
    return sum(scores) / len(scores)
