"""fin_ems scores: the columns of the EMS paper's Table 1, per document.

Per answer, from its text alone: ROUGE-L and BLEU against the reference (the paper averages
results over companies and questions: one figure per document, then the mean). Over all the
answers of a task at once, in lm-eval's filter stage: BERTScore F1 of each whole answer (one
model load) and EMS with the RAGChecker-style claim metrics (at most four batched judge rounds,
:func:`lm_eval_fin.ems.run_ems`). A document's EMS outcome travels in its scored-answer record
(:func:`document_details`); :func:`ems_values` turns it into the metric values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lm_eval_fin.ems import prompts
from lm_eval_fin.ems.pipeline import (
    DEFAULT_SUMMARY_REMOVAL,
    LLM,
    MAX_ATTEMPTS,
    OFFLINE,
    PARTS,
    RAGCHECKER,
    EmsRun,
    check_scorers,
    metric_prefix,
    run_ems,
)
from lm_eval_fin.measures import textsim
from lm_eval_fin.outputs import records


def text_scores(answer: str, reference: str) -> dict[str, float]:
    """ROUGE-L precision, recall and F1 and BLEU of one answer against its reference."""
    precision, recall, f1 = textsim.rouge_l([answer], [reference])[0]
    return {
        "rouge_l_precision": precision, "rouge_l_recall": recall, "rouge_l_f1": f1,
        "bleu": textsim.sentence_bleu(answer, reference),
    }


def score_documents(
    answers: Sequence[str],
    references: Sequence[str],
    judge: Any,
    bertscore_model: str | None = None,
    max_score: int = 10,
    max_attempts: int = MAX_ATTEMPTS,
    extract_max_tokens: int | None = None,
    summary_removal: str = DEFAULT_SUMMARY_REMOVAL,
    ragchecker: bool = True,
) -> tuple[list[dict[str, Any]], EmsRun]:
    """Each document's details (whole-answer BERTScore F1, EMS) and the EMS run. ``judge``
    None runs the offline EMS."""
    model = textsim.resolve_bertscore_model(bertscore_model)
    bertscore = textsim.bertscore_f1(list(answers), list(references), model=model)
    run = run_ems(
        answers, references, judge=judge, max_score=max_score, bertscore_model=model, max_attempts=max_attempts,
        extract_max_tokens=extract_max_tokens, summary_removal=summary_removal, ragchecker=ragchecker,
    )
    details = [
        {"bertscore_f1": None if bertscore is None else bertscore[i], "ems": document_details(run, i),
         records.JUDGE_USAGE: run.documents[i].judge_usage}
        for i in range(len(answers))
    ]
    return details, run


def document_details(run: EmsRun, index: int) -> dict[str, Any]:
    """What a document's record keeps of the EMS run: its method and scorers, and everything
    the pass decided for it (points, alignment, scores, claim verdicts, failures)."""
    return {
        "method": run.method,
        "scorers": list(run.scorers),
        "ragchecker_checked": run.ragchecker,
        "max_score": run.max_score,
        "summary_removal": run.summary_removal,
        **{key: value for key, value in run.documents[index].as_dict().items() if key != "judge_usage"},
    }


def unjudged_details(error: str, with_bertscore: Sequence[float | None]) -> list[dict[str, Any]]:
    """Every document's details when the judge could not be used at all: no EMS, the error."""
    return [{"bertscore_f1": score, "ems": {"method": LLM, "judge_error": error}} for score in with_bertscore]


def answer_values(answer: str, reference: str, details: Mapping[str, Any]) -> dict[str, float | None]:
    """The scores of one answer: its text against the reference (ROUGE-L, BLEU) and what the
    scoring pass recorded for it (whole-answer BERTScore, EMS)."""
    return {**text_scores(answer, reference), "bertscore_f1": details.get("bertscore_f1"),
            **ems_values(details.get("ems") or {})}


def ems_values(ems: Mapping[str, Any]) -> dict[str, float | None]:
    """The EMS metric values of one document's record: P/R/F1 per scorer of its method (None
    where the document was left unjudged for that scorer), the RAGChecker-style claim figures
    and, in a judged run, whether the judge failed or answered unreadably."""
    method = ems.get("method", OFFLINE)
    values: dict[str, float | None] = {}
    scored = ems.get("ems") or {}
    for scorer in check_scorers(None, method == LLM):
        triple = scored.get(scorer)
        values.update({f"{metric_prefix(method, scorer)}_{part}": None if triple is None else triple[i]
                       for i, part in enumerate(PARTS)})
    if method == LLM:
        claims = ems.get("ragchecker")
        if ems.get("ragchecker_checked", True):
            values.update({f"{RAGCHECKER}_{part}": None if claims is None else claims[i] for i, part in enumerate(PARTS)})
        failed = ems.get("judge_error") is not None
        unparsed = not failed and any((ems.get("parse_failures") or {}).values())
        values.update({"judge_failure": float(failed), "judge_parse_failure": float(unparsed)})
    return values


def judge_of(spec: str | None) -> dict[str, Any] | None:
    """The judge part of a record: which judge, which prompts (None without a judge)."""
    if spec is None:
        return None
    return {"spec": spec, "prompt_version": prompts.EMS_PROMPTS_HASH}
