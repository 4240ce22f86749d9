"""The per-answer views on documents and answers in the shapes the tasks log them."""

import json

from lm_eval_fin.report.runs import Sample
from lm_eval_fin.report.views import HIT, MISS, NOTE, ViewOptions, ems_values, indexed_entries, view_for

REPORTS = (
    "=== CWT: 10-Q report excerpt ===\n"
    "[0] California Water Service Group (CWT) reports quarterly results.\n"
    "[1] Item | Q1 2024 | Q1 2023\nNet interest expense | 125 | 100\n"
    "\n=== AWK: 10-Q report excerpt ===\n"
    "[0] American Water Works (AWK) serves 14 million people.\n"
    "[1] Item | Q1 2024 | Q1 2023\nNet interest expense | 110 | 110"
)
KNOWLEDGE = "[0] Growth rate = (current - prior) / prior * 100\n[1] Interest coverage = EBIT / interest expense"
REFERENCE = [
    {"text": "CWT's net interest expense rose 25.00% from $100 million to $125 million.",
     "evidence": [["CWT", 1]], "code": ["def g():\n    return (125 - 100) / 100 * 100"], "knowledge": [0]},
    {"text": "AWK's net interest expense was flat at $110 million.", "evidence": [["AWK", 1]], "code": [], "knowledge": []},
]
LFQA_DOC = {"id": "cwt-awk-1", "question": "How did net interest expense change?", "companies": ["CWT", "AWK"],
            "reports": REPORTS, "knowledge": KNOWLEDGE, "reference_clauses": json.dumps(REFERENCE), "has_reference": True}
LFQA_ANSWER = (
    "1. CWT's net interest expense rose 25% from $100 million to $125 million.\n"
    "Evidence: CWT [1], AWK [2]\n"
    "Code:\n```python\ndef growth():\n    return (125 - 100) / 100 * 100\n```\n"
    "Knowledge: [0, 1]"
)


def cells(blocks, title_part):
    block = next(b for b in blocks if title_part in b.title)
    return [[(cell.text, cell.cls) for cell in row] for row in block.rows]


def test_view_by_task_prefix():
    assert view_for("fin_agentbench_chunk").name == "fin_agentbench"
    assert view_for("fin_lfqa_test").name == "fin_lfqa"
    assert view_for("fin_ems").name == "fin_ems"
    assert view_for("fin_emsx").name == "generic" and view_for("hellaswag").name == "generic"


def test_indexed_entries_of_rendered_reports_and_knowledge():
    paragraphs = indexed_entries(REPORTS)
    assert paragraphs[("CWT", 1)] == "Item | Q1 2024 | Q1 2023\nNet interest expense | 125 | 100\n"
    assert paragraphs[("AWK", 0)].startswith("American Water Works")
    assert indexed_entries(KNOWLEDGE)[("", 1)].startswith("Interest coverage")


def test_finlfqa_view_marks_evidence_knowledge_and_numbers_against_the_reference():
    view = view_for("fin_lfqa")
    sample = Sample("cwt-awk-1", 0, LFQA_DOC, LFQA_ANSWER, {})
    blocks = view.answer(sample, view.prepare([sample], ViewOptions()))
    clause_rows = [row[1] for row in cells(blocks, "Clauses")]
    assert clause_rows[0] == ("CWT's net interest expense rose 25% from $100 million to $125 million.", "")
    evidence = [c for c in clause_rows if c[0].startswith("evidence")]
    assert evidence[0][1] == HIT and "Net interest expense | 125 | 100" in evidence[0][0]
    assert evidence[1] == ("evidence AWK [2]: (no such paragraph)", MISS)
    knowledge = [c for c in clause_rows if c[0].startswith("knowledge")]
    assert [cls for _, cls in knowledge] == [HIT, MISS] and "Growth rate" in knowledge[0][0]
    code_outcome = clause_rows[clause_rows.index(next(c for c in clause_rows if c[0].startswith("code"))) + 1]
    assert code_outcome[1] == NOTE and "--execute_code" in code_outcome[0]
    numbers = {(row[0][0], row[1][0]): row[2] for row in cells(blocks, "Numbers")}
    assert numbers[("25", "answer")] == ("matched", HIT)
    assert numbers[("1.1e+08", "reference")] == ("missed", MISS)
    assert numbers[("1.25e+08", "reference")] == ("recalled", HIT)


def test_finlfqa_view_runs_the_code_in_the_sandbox_when_asked():
    view = view_for("fin_lfqa")
    broken = LFQA_ANSWER.replace("return (125 - 100) / 100 * 100", "return 1 / 0")
    samples = [Sample("a", 0, LFQA_DOC, LFQA_ANSWER, {}), Sample("b", 1, LFQA_DOC, broken, {})]
    context = view.prepare(samples, ViewOptions(execute_code=True))
    outcomes = []
    for sample in samples:
        rows = [row[1] for row in cells(view.answer(sample, context), "Clauses")]
        outcomes.append(rows[[text for text, _ in rows].index(next(t for t, _ in rows if t.startswith("code"))) + 1])
    assert outcomes[0] == ("returned 25.0", HIT)
    assert outcomes[1][1] == MISS and "ZeroDivisionError" in outcomes[1][0]


def test_finlfqa_view_of_an_unreadable_answer():
    view = view_for("fin_lfqa")
    blocks = view.answer(Sample("x", 0, LFQA_DOC, "I cannot tell.", {}), {})
    assert blocks[0].cls == MISS and "parse failure" in blocks[0].text
    assert blocks[-1].text == "I cannot tell."


EMS_DOCUMENT = {
    "id": "NWND-q1", "bertscore_f1": 0.41,
    "reference_points": ["Revenue grew 12% to $4.2 billion.", "Gross margin fell to 38.5%."],
    "answer_points": ["Margins were under pressure.", "Revenue rose 12% to $4.2bn."],
    "alignment": [1, -1],
    "scores": {"rouge": [0.6, 0.0], "bertscore": [0.9, 0.0]},
    "ems": {"rouge": [0.3, 0.3, 0.3], "bertscore": [0.45, 0.45, 0.45]},
    "parse_failures": {"extraction": 0, "matching": 0, "scoring": 0},
}


def test_ems_view_shows_the_alignment_and_each_pairs_scores():
    view = view_for("fin_ems")
    sample = Sample("NWND-q1", 0, {"id": "NWND-q1", "question": "Q?", "reference": "R."}, "An answer.", {},
                    details={"ems": EMS_DOCUMENT})
    blocks = view.answer(sample, {})
    reference_rows = cells(blocks, "Reference points")
    assert reference_rows[0] == [("1", ""), ("Revenue grew 12% to $4.2 billion.", ""),
                                 ("A2: Revenue rose 12% to $4.2bn.", HIT), ("0.6", ""), ("0.9", "")]
    assert reference_rows[1][2] == ("no match", MISS)
    assert cells(blocks, "Answer points") == [[("A1", ""), ("Margins were under pressure.", ""), ("unmatched", MISS)],
                                              [("A2", ""), ("Revenue rose 12% to $4.2bn.", ""), ("yes", HIT)]]


def test_ems_values_follow_the_metric_names():
    names = ["ems_offline_rouge_f1", "ems_offline_bertscore_recall", "ems_rouge_f1", "bertscore_f1", "bleu"]
    assert ems_values(EMS_DOCUMENT, names, "offline") == {
        "ems_offline_rouge_f1": 0.3, "ems_offline_bertscore_recall": 0.45, "bertscore_f1": 0.41}
    assert ems_values(EMS_DOCUMENT, names, "llm") == {"ems_rouge_f1": 0.3, "bertscore_f1": 0.41}
    unavailable = dict(EMS_DOCUMENT, ems={"rouge": [0.3, 0.3, 0.3], "bertscore": None})
    assert str(ems_values(unavailable, names, "offline")["ems_offline_bertscore_recall"]) == "nan"


def test_agentbench_view_ranks_against_the_grades():
    view = view_for("fin_agentbench_doc")
    doc = {"id": "d1", "prompt": "Question: Who was paid what?\n\n[Document Index 0] DEF 14A ...", "candidates": [0, 1, 2, 3],
           "labels": json.dumps({"0": "DEF 14A", "1": "10-K", "2": "8-K", "3": "Earnings"}),
           "qrel": json.dumps({"0": 4, "1": 1, "2": 0, "3": 0}), "gain": "exponential"}
    rows = cells(view.answer(Sample("d1", 0, doc, "```\n[1, 0]\n```", {}), {}), "ranking")
    assert rows[0] == [("1", ""), ("1: 10-K", ""), ("1", HIT), ("2", "")]
    assert rows[1] == [("2", ""), ("0: DEF 14A", ""), ("4", HIT), ("1", "")]
    assert rows[2][0] == ("not ranked", NOTE) and rows[2][2] == ("0", "")
    facts = dict(view.answer(Sample("d1", 0, doc, "no idea", {}), {})[0].items)
    assert facts["ranking read"].startswith("none: a parse failure")
