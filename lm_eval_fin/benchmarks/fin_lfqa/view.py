"""fin_lfqa in the report: each answer's clauses with their evidence, code and knowledge against
the reference, the sandbox outcome of each snippet and the judge's reply as the record logged
them, the refinement steps, a baseline that cites nothing, and FinLFQA's Table 2."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from lm_eval_fin import attribution
from lm_eval_fin.benchmarks.fin_lfqa.score import score_document
from lm_eval_fin.measures import numbers
from lm_eval_fin.outputs.runfiles import Sample
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
    json_field,
    table_block,
    text_block,
)

_REPORT_HEADER = re.compile(r"^=== (?P<company>.+?): .*===\s*$")
_INDEXED_LINE = re.compile(r"^\[(?P<index>-?\d+)\]\s?(?P<text>.*)$")


def indexed_entries(text: str) -> dict[tuple[str, int], str]:
    """``(company, index) -> paragraph`` of FinLFQA's rendered reports ("=== CWT: ... ==="
    headers, "[i] text" paragraphs, continuation lines joined), company "" for the knowledge
    list, which has no header."""
    entries: dict[tuple[str, int], str] = {}
    company, last = "", None
    for line in str(text or "").splitlines():
        header = _REPORT_HEADER.match(line)
        if header:
            company, last = header["company"].strip().upper(), None
            continue
        indexed = _INDEXED_LINE.match(line)
        if indexed:
            last = (company, int(indexed["index"]))
            entries[last] = indexed["text"]
        elif last is not None:
            entries[last] += "\n" + line
    return entries


def reference_clauses(doc: dict[str, Any]) -> list[dict]:
    clauses = json_field(doc, "reference_clauses", [])
    return [c for c in clauses if isinstance(c, dict)] if isinstance(clauses, list) else []


def question(sample: Sample) -> list[Block]:
    doc = sample.doc
    clauses = reference_clauses(doc)
    blocks = [text_block("Question", str(doc.get("question", "")))]
    if clauses:
        blocks.append(table_block(
            "Reference clauses", ["#", "clause", "evidence", "code", "knowledge"],
            [[str(n), str(c.get("text", "")),
              ", ".join(f"{e[0]} [{e[1]}]" for e in c.get("evidence") or [] if isinstance(e, list) and len(e) == 2),
              "\n\n".join(str(s) for s in c.get("code") or []) or "none",
              ", ".join(str(k) for k in c.get("knowledge") or []) or "none"]
             for n, c in enumerate(clauses, start=1)],
        ))
    blocks.append(text_block("Report excerpts", str(doc.get("reports", ""))))
    blocks.append(text_block("Professional knowledge", str(doc.get("knowledge", ""))))
    return blocks


def _outcome(outcome: Any) -> Cell:
    """A snippet's sandbox outcome as the filter stage logged it."""
    if not isinstance(outcome, dict):
        return Cell("not run (the sandbox could not start, or the record holds no outcome)", NOTE)
    if outcome.get("ok"):
        return Cell(f"returned {outcome.get('value')}", HIT)
    return Cell(f"failed ({outcome.get('category') or 'exception'}): {outcome.get('error')}", MISS)


def _clause_rows(parsed: attribution.ParsedAnswer, doc: dict, outcomes: list) -> list[list[Cell]]:
    reference = reference_clauses(doc)
    gold_evidence = {(str(e[0]).upper(), int(e[1])) for c in reference for e in c.get("evidence") or []
                     if isinstance(e, list) and len(e) == 2 and isinstance(e[1], int)}
    gold_knowledge = {int(k) for c in reference for k in c.get("knowledge") or [] if isinstance(k, int)}
    paragraphs = indexed_entries(doc.get("reports", ""))
    knowledge = indexed_entries(doc.get("knowledge", ""))
    rows = []
    snippet = 0
    for number, clause in enumerate(parsed.clauses, start=1):
        rows.append([Cell(str(number)), Cell(clause.text)])
        for company, index in clause.evidence:
            key = (str(company).upper(), int(index))
            rows.append([Cell(""), Cell(f"evidence {company} [{index}]: {paragraphs.get(key, '(no such paragraph)')}",
                                        HIT if key in gold_evidence else MISS)])
        for code in clause.code:
            rows.append([Cell(""), Cell(f"code:\n{code}", "code")])
            rows.append([Cell(""), _outcome(outcomes[snippet] if snippet < len(outcomes) else None)])
            snippet += 1
        for index in clause.knowledge:
            rows.append([Cell(""), Cell(f"knowledge [{index}]: {knowledge.get(('', index), '(no such entry)')}",
                                        HIT if index in gold_knowledge else MISS)])
    return rows


def _number_rows(parsed: attribution.ParsedAnswer, doc: dict) -> list[list[Cell]]:
    reference_text = "\n".join(str(c.get("text", "")) for c in reference_clauses(doc))
    predicted = list(dict.fromkeys(numbers.extract_numbers(parsed.text)))
    expected = list(dict.fromkeys(numbers.extract_numbers(reference_text)))
    rows = [[Cell(f"{v:g}"), Cell("answer"), Cell("matched", HIT) if hit else Cell("not in the reference", MISS)]
            for v, hit in zip(predicted, numbers.matched(predicted, expected))]
    rows += [[Cell(f"{v:g}"), Cell("reference"), Cell("recalled", HIT) if hit else Cell("missed", MISS)]
             for v, hit in zip(expected, numbers.matched(expected, predicted))]
    return rows


def answer(sample: Sample) -> list[Block]:
    doc, record = sample.doc, sample.record
    parsed = attribution.parse_answer(sample.answer, doc.get("companies") or [])
    code = record.get("code")
    outcomes = code if isinstance(code, list) else []
    blocks = []
    if parsed.parse_failure:
        blocks.append(text_block("Clauses", "No attributed clause could be read from this answer (a parse failure).",
                                 MISS))
    rows = _clause_rows(parsed, doc, outcomes)
    if rows:
        blocks.append(table_block(
            "Clauses with their evidence, code (and its outcome in the sandbox) and knowledge (green: also in the "
            "reference)", ["#", "clause"], rows,
        ))
    number_rows = _number_rows(parsed, doc)
    if number_rows:
        blocks.append(table_block("Numbers (matched within 1%, up to scale)", ["value", "in", "outcome"], number_rows))
    judge = record.get("judge") if isinstance(record.get("judge"), dict) else None
    if judge and judge.get("spec"):
        scores = judge.get("scores") if isinstance(judge.get("scores"), dict) else {}
        blocks.append(facts_block("Judge", [
            ("judge", judge.get("spec")), ("prompt version", judge.get("prompt_version")),
            *((name.replace("_", " "), scores.get(name)) for name in
              ("accuracy", "numerical_correctness", "evidence_entailment")),
            ("error", judge.get("error")),
        ]))
        if judge.get("reply"):
            blocks.append(text_block("Judge reply", str(judge["reply"])))
    trace = record.get("trace") if isinstance(record.get("trace"), dict) else None
    if trace and trace.get("steps"):
        steps = [[Cell(str(step.get("step", ""))),
                  Cell("\n\n".join([*map(str, step.get("executions") or []), str(step.get("reply", ""))]))]
                 for step in trace["steps"] if isinstance(step, dict)]
        blocks.append(table_block(f"Steps ({trace.get('setting', '')}, {trace.get('rounds', 0)} feedback rounds, "
                                  f"done: {trace.get('done')})", ["step", "reply"], steps))
    blocks.append(answer_block(sample))
    return blocks


# ------------------------------------------------------------------------------ baselines


def uncited(doc: dict[str, Any]) -> str:
    """The question restated as the one clause of an answer that cites nothing."""
    return f"1. {doc.get('question', '')}\nEvidence: none\nCode: none\nKnowledge: []"


def baselines(task: str, samples: Sequence[Sample]) -> list[Baseline]:
    """An answer citing nothing (the question restated, no evidence, code or knowledge),
    scored by the task's own per-answer scores (the judge and BERTScore need models: left out)."""
    values = {}
    for sample in samples:
        if not sample.doc.get("has_reference"):
            continue
        scores, _ = score_document(sample.doc, uncited(sample.doc))
        values[sample.key] = {name: float(v) for name, v in scores.items() if isinstance(v, (int, float))}
    if not values:
        return []
    return [Baseline("citing nothing", "the question restated as one clause, no evidence, code or knowledge "
                     "(no judge, no BERTScore)", values)]


# FinLFQA Table 2, development set; percentages / 100, the judge's total on its own 3..15 scale
_PAPER = "FinLFQA (Long et al. 2025), Table 2"
_SPLIT = "FinLFQA development set, 302 examples (not the shipped demo)"
_COLUMNS = ("evidence_precision", "evidence_recall", "evidence_f1", "code_exec_rate", "knowledge_recall", "rouge_l",
            "bertscore_f1", "judge_score", "numeric_precision", "numeric_recall", "numeric_f1")
_SETTINGS = {"fin_lfqa": "end-to-end", "fin_lfqa-posthoc": "post-hoc", "fin_lfqa-iterative": "iterative refinement"}
_TABLE_2 = {
    "fin_lfqa": {
        "GPT-4o": (46.9, 75.0, 53.3, 26.3, 17.3, 19.3, 87.0, 13.7, 35.2, 54.9, 39.4),
        "Llama-3.3-70B": (53.7, 68.3, 56.1, 20.1, 17.1, 21.1, 87.0, 12.0, 35.8, 45.0, 36.5),
        "Llama-3.2-3B": (13.3, 22.8, 15.1, 22.5, 6.2, 18.5, 85.8, 7.5, 19.3, 27.0, 19.9),
        "Llama-3.2-1B": (0.6, 0.7, 0.6, 8.5, 0.0, 13.9, 81.1, 4.5, 6.8, 8.5, 6.6),
    },
    "fin_lfqa-posthoc": {
        "GPT-4o": (49.0, 78.1, 55.5, 9.3, 19.3, 23.1, 87.5, 13.6, 37.9, 58.0, 42.3),
        "Llama-3.3-70B": (44.9, 71.3, 50.4, 16.6, 16.1, 19.7, 87.5, 13.1, 35.9, 51.8, 39.1),
        "Llama-3.2-3B": (10.5, 19.2, 12.2, 14.3, 8.2, 19.1, 86.6, 8.9, 24.2, 32.6, 25.3),
        "Llama-3.2-1B": (1.7, 3.0, 1.9, 1.5, 0.5, 15.3, 84.6, 5.6, 12.3, 14.5, 11.7),
    },
    "fin_lfqa-iterative": {
        "GPT-4o": (46.7, 75.0, 53.1, 29.8, 17.1, 20.0, 86.8, 13.5, 34.2, 54.7, 38.9),
        "Llama-3.3-70B": (50.8, 67.9, 54.1, 27.3, 17.3, 22.0, 86.7, 12.1, 35.4, 46.8, 36.6),
        "Llama-3.2-3B": (9.1, 13.3, 10.0, 22.5, 5.0, 20.6, 86.8, 6.7, 19.1, 22.9, 18.5),
        "Llama-3.2-1B": (0.5, 0.7, 0.5, 8.9, 0.0, 13.0, 80.3, 3.8, 2.8, 3.0, 2.3),
    },
}


def _scaled(values: tuple[float, ...]) -> dict[str, float]:
    return {name: value if name == "judge_score" else value / 100 for name, value in zip(_COLUMNS, values)}


REFERENCES = tuple(
    Reference(_PAPER, model, f"{_SETTINGS[task]}, zero-shot, temperature 1.0, judge GPT-4o", _SPLIT, (task,),
              _scaled(values), "BERTScore and ROUGE configurations are not named in the paper; its code execution "
              "rate counts snippets, ours is the per-answer mean")
    for task, rows in _TABLE_2.items() for model, values in rows.items()
)

VIEW = View(
    question=question,
    answer=answer,
    baselines=baselines,
    references=REFERENCES,
    references_note=(
        "Table 2's models GPT-4o, Llama-3.3-70B, Llama-3.2-3B and -1B are shown (the others are in the paper). Two "
        "columns are computed otherwise than the paper's: code_exec_rate is each answer's share of snippets that ran, "
        "averaged over the answers with code, where the paper counts all snippets (section 4.3); knowledge recall "
        "leaves out examples whose reference cites none (counted in knowledge_skipped). The open details (numbers "
        "read, BERTScore and ROUGE settings, the judge model, greedy decoding) are in the task README."
    ),
    diagnostics=(r"index_base", r"code_(?!exec_rate$).+", r"knowledge_skipped", r"refine_.+"),
)
