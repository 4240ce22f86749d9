"""fin_ems scores of a run: BLEU, whole-answer BERTScore, the RAGChecker-style claim metrics
and EMS (the columns of the EMS paper's Table 1).

ROUGE-L is per document (the task computes it in ``process_results``); the rest needs the run
at once: BLEU is corpus-level, BERTScore loads a model, and EMS and the claim checks send at
most four batched judge rounds (:func:`lm_eval_fin.ems.run_ems`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from lm_eval_fin import textsim
from lm_eval_fin.ems.pipeline import DEFAULT_SUMMARY_REMOVAL, MAX_ATTEMPTS, run_ems


def whole_answer_scores(answers: Sequence[str], references: Sequence[str], model: str | None) -> dict[str, Any]:
    """BLEU of the run and BERTScore F1 of each whole answer (None where the model cannot load)."""
    bertscore = textsim.bertscore_f1(answers, references, model=model)
    return {
        "bleu": textsim.bleu(answers, references),
        "bertscore_f1": math.nan if bertscore is None else sum(bertscore) / max(len(bertscore), 1),
        "per_document_bertscore": bertscore,
    }


def score_corpus(
    ids: Sequence[str],
    answers: Sequence[str],
    references: Sequence[str],
    judge: Any,
    bertscore_model: str | None = None,
    max_score: int = 10,
    max_attempts: int = MAX_ATTEMPTS,
    extract_max_tokens: int | None = None,
    summary_removal: str = DEFAULT_SUMMARY_REMOVAL,
    ragchecker: bool = True,
) -> tuple[dict[str, float], dict[str, Any]]:
    """BLEU, whole-answer BERTScore F1, EMS and (with a judge and ``ragchecker``) the
    RAGChecker-style claim metrics of a run: (figures, details). ``judge`` None runs the
    offline EMS (``ems_offline_*``)."""
    model = textsim.resolve_bertscore_model(bertscore_model)
    whole = whole_answer_scores(answers, references, model)
    run = run_ems(
        answers,
        references,
        judge=judge,
        max_score=max_score,
        bertscore_model=model,
        max_attempts=max_attempts,
        extract_max_tokens=extract_max_tokens,
        summary_removal=summary_removal,
        ragchecker=ragchecker,
    )
    bertscore = whole.pop("per_document_bertscore")
    figures = {**whole, **run.metrics()}
    details = run.as_dict()
    # each document names its id and the answer scored, so a reader of the file (the report)
    # can tell which run's samples it belongs to
    details["documents"] = [
        {"id": doc_id, "answer": answer, "bertscore_f1": None if bertscore is None else bertscore[i], **doc}
        for i, (doc_id, answer, doc) in enumerate(zip(ids, answers, details["documents"]))
    ]
    details["metrics"] = figures
    return figures, details
