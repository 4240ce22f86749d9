"""fin_ems in the report: each answer's EMS as its record logged it (points, alignment, scores,
claim verdicts, failures), baselines that answer without a model, and the EMS paper's Table 1."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lm_eval_fin.benchmarks.fin_ems import score
from lm_eval_fin.ems.pipeline import run_ems
from lm_eval_fin.outputs.runfiles import Sample, run_settings
from lm_eval_fin.report.blocks import (
    HIT,
    MISS,
    NOTE,
    Baseline,
    Block,
    Cell,
    Reference,
    View,
    answer_block,
    facts_block,
    show,
    table_block,
    text_block,
)

OFFLINE_BERTSCORE = "offline"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def question(sample: Sample) -> list[Block]:
    doc = sample.doc
    return [
        facts_block("", [("company", doc.get("company")), ("ticker", doc.get("ticker")),
                         ("call date", doc.get("call_date")), ("question id", doc.get("question_id"))]),
        text_block("Question", str(doc.get("question", ""))),
        text_block("Reference answer", str(doc.get("reference", ""))),
    ]


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _alignment_rows(ems: dict[str, Any]) -> tuple[list[list[Cell]], list[str]]:
    refs = [str(p) for p in ems.get("reference_points") or []]
    answer_points = [str(p) for p in ems.get("answer_points") or []]
    alignment = list(ems.get("alignment") or [])
    scores = _mapping(ems.get("scores"))
    rows = []
    for i, ref in enumerate(refs):
        j = alignment[i] if i < len(alignment) else -1
        matched = isinstance(j, int) and 0 <= j < len(answer_points)
        row = [Cell(str(i + 1)), Cell(ref), Cell(f"A{j + 1}: {answer_points[j]}" if matched else "no match",
                                                HIT if matched else MISS)]
        for per_point in scores.values():
            value = per_point[i] if isinstance(per_point, list) and i < len(per_point) else None
            row.append(Cell(show(value)))
        rows.append(row)
    return rows, list(scores)


def answer(sample: Sample) -> list[Block]:
    """The EMS the filter stage logged for this answer (:func:`score.document_details`)."""
    ems = sample.record.get("ems")
    blocks: list[Block] = []
    if not isinstance(ems, dict):
        blocks.append(text_block("EMS", "No EMS in this answer's record (a --predict_only run: score it with "
                                 "`lm-eval-fin score`).", NOTE))
        return [*blocks, answer_block(sample)]
    judge = _mapping(sample.record.get("judge"))
    blocks.append(facts_block("", [
        ("method", "the judge extracts and matches" if ems.get("method") == "llm" else "offline extractor and matcher"),
        ("judge", judge.get("spec") or "none"),
        ("whole-answer BERTScore F1", sample.record.get("bertscore_f1")),
    ]))
    if ems.get("judge_error"):
        blocks.append(text_block("Judge failed: no EMS for this answer", str(ems["judge_error"]), MISS))
    per_scorer = _mapping(ems.get("ems"))
    if per_scorer:
        blocks.append(table_block("EMS per scorer", ["scorer", "precision", "recall", "F1"],
                                  [[s, *(show(v) for v in (t or [None] * 3))] for s, t in per_scorer.items()]))
    rows, scorers = _alignment_rows(ems)
    refs = ems.get("reference_points") or []
    blocks.append(table_block(
        f"Reference points ({len(refs)}) and the answer point each was matched to",
        ["#", "reference point", "matched answer point", *(f"s ({s})" for s in scorers)], rows,
    ))
    used = {j for j in ems.get("alignment") or [] if isinstance(j, int) and j >= 0}
    answer_points = [str(p) for p in ems.get("answer_points") or []]
    blocks.append(table_block(
        f"Answer points ({len(answer_points)})", ["#", "answer point", "matched"],
        [[Cell(f"A{j + 1}"), Cell(p), Cell("yes", HIT) if j in used else Cell("unmatched", MISS)]
         for j, p in enumerate(answer_points)],
    ))
    verdicts = _mapping(ems.get("verdicts"))
    for side, points in (("answer", answer_points), ("reference", [str(p) for p in refs])):
        found = verdicts.get(side)
        if isinstance(found, list) and found:
            premise = "the reference" if side == "answer" else "the answer"
            blocks.append(table_block(
                f"Claim checks: the {side}'s points against {premise} (RAGChecker-style)", ["point", "verdict"],
                [[Cell(p), Cell(str(v), HIT if v == "entailment" else MISS)] for p, v in zip(points, found)],
            ))
    failures = ems.get("parse_failures")
    if isinstance(failures, dict) and any(failures.values()):
        blocks.append(facts_block("Judge answers unreadable after the re-asks, per stage", sorted(failures.items())))
    return [*blocks, answer_block(sample)]


# ------------------------------------------------------------------------------ baselines


def first_sentence(text: str) -> str:
    """The first sentence (or first line) of a text."""
    text = text.strip()
    line = text.splitlines()[0] if text else ""
    return _SENTENCE_END.split(line, maxsplit=1)[0].strip()


def _bertscore_model(samples: Sequence[Sample]) -> str | None:
    """The runs' BERTScore model when it loads here without a download (the packaged MiniLM
    or a local folder); None otherwise: the baselines then leave BERTScore out."""
    values = run_settings(samples[0].doc).get("values") or {}
    model = values.get("bertscore_model")
    if model == OFFLINE_BERTSCORE or (isinstance(model, str) and Path(model).is_dir()):
        return model
    return None


def _score(answers: list[str], references: list[str], bertscore_model: str | None) -> list[dict[str, float]]:
    if bertscore_model:
        details, _ = score.score_documents(answers, references, None, bertscore_model=bertscore_model)
    else:
        run = run_ems(answers, references, judge=None, scorers=("rouge",))
        details = [{"ems": score.document_details(run, i)} for i in range(len(answers))]
    scored = []
    for answer_text, reference, detail in zip(answers, references, details):
        values = score.answer_values(answer_text, reference, detail)
        scored.append({name: float(v) for name, v in values.items() if isinstance(v, (int, float))})
    return scored


def baselines(task: str, samples: Sequence[Sample]) -> list[Baseline]:
    """Answers made without a model, scored offline as the task scores a model's: the question
    echoed (what a model that repeats its prompt earns) and the reference's first sentence (one
    point of the answer, said right)."""
    samples = [s for s in samples if s.doc.get("reference")]
    if not samples:
        return []
    model = _bertscore_model(samples)
    references = [str(s.doc["reference"]) for s in samples]
    made = {
        "question echo": ([str(s.doc.get("question", "")) for s in samples], "the question, repeated as the answer"),
        "reference, first sentence": ([first_sentence(r) for r in references],
                                      "the reference answer's first sentence"),
    }
    without = "" if model else "; BERTScore left out (the runs' model is not loaded for baselines)"
    found = []
    for name, (answers, description) in made.items():
        values = _score(answers, references, model)
        found.append(Baseline(name, f"{description}, offline EMS{without}",
                              {s.key: v for s, v in zip(samples, values)}))
    return found


# the EMS paper's Table 1, Llama 3.2 instruct models, averaged over 10 companies x 5 questions
_PAPER = "EMS (Hu et al. 2025), Table 1"
_SPLIT = "Q3 2024 earnings calls of the 10 largest S&P 500 companies, 5 questions (not the shipped demo)"
_NOTE = ("the paper's judge and BERTScore model are not named, nor its ROUGE variant (ours: ROUGE-L, no stemming), "
         "its BLEU variant (ours: sentence BLEU per answer, averaged) or its decoding (ours: greedy, 1,024 tokens); "
         "its references are GPT-4o's and Mistral Large's answers consolidated")
_COLUMNS = ("bleu", "rouge_l_precision", "rouge_l_recall", "rouge_l_f1", "bertscore_f1",
            "ems_rouge_precision", "ems_rouge_recall", "ems_rouge_f1",
            "ems_bertscore_precision", "ems_bertscore_recall", "ems_bertscore_f1",
            "ems_llm_precision", "ems_llm_recall", "ems_llm_f1")
_TABLE_1 = {
    "Llama 3.2 1B Instruct": (.02, .23, .14, .17, .84, .08, .07, .07, .38, .34, .35, .23, .21, .21),
    "Llama 3.2 11B Vision Instruct": (.04, .21, .21, .20, .85, .17, .12, .13, .63, .42, .49, .45, .30, .35),
    "Llama 3.2 90B Vision Instruct": (.03, .22, .19, .20, .85, .17, .13, .15, .65, .47, .54, .47, .36, .40),
}
REFERENCES = tuple(
    Reference(_PAPER, model, "answers from the whole transcript", _SPLIT, ("fin_ems",), dict(zip(_COLUMNS, values)),
              _NOTE)
    for model, values in _TABLE_1.items()
)

VIEW = View(
    question=question,
    answer=answer,
    baselines=baselines,
    references=REFERENCES,
    references_note=(
        "RAGChecker P/R/F1 are not shown: ours checks the EMS points as claims with our prompt, the paper ran "
        "RAGChecker's own extractor and checker. ems_offline_* (no judge) has no counterpart in the paper."
    ),
    subsets={"question": lambda doc: doc.get("question_id"),
             "company": lambda doc: doc.get("ticker") or doc.get("company")},
)
