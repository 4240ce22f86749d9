"""The benchmarks' report views on documents and scored-answer records in the shapes the tasks
log them, their baselines, and the catalog that finds them."""

import json

import pytest

from lm_eval_fin.benchmarks import all_benchmarks
from lm_eval_fin.benchmarks.fin_agentbench import view as agentbench_view
from lm_eval_fin.benchmarks.fin_agentbench.score import score_ranking
from lm_eval_fin.benchmarks.fin_ems import view as ems_view
from lm_eval_fin.benchmarks.fin_lfqa import view as lfqa_view
from lm_eval_fin.outputs.runfiles import Sample
from lm_eval_fin.report.blocks import GENERIC, HIT, MISS, NOTE
from lm_eval_fin.report.catalog import Catalog

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
LFQA_RECORD = {
    "format": "lm-eval-fin/1", "answer": LFQA_ANSWER,
    "code": [{"ok": True, "category": None, "value": 25.0, "error": None}],
    "judge": {"spec": "openai:http://127.0.0.1:1/v1#judge", "prompt_version": "abc", "reply": '{"accuracy": 4}',
              "error": None, "scores": {"accuracy": 4, "numerical_correctness": 5, "evidence_entailment": 3}},
    "trace": {"setting": "iterative", "rounds": 1, "done": True,
              "steps": [{"step": "answer", "reply": "first"}, {"step": "feedback", "executions": ["ran: 25.0"],
                                                                "reply": "Done"}]},
}


def cells(blocks, title_part):
    block = next(b for b in blocks if title_part in b.title)
    return [[(cell.text, cell.cls) for cell in row] for row in block.rows]


def sample(key, doc, answer, record=None, values=None):
    return Sample(key, 0, doc, answer, values or {}, {"answer": answer, **(record or {})})


def test_each_task_finds_its_benchmarks_view_and_headline():
    catalog = Catalog(all_benchmarks())
    assert catalog.view("fin_agentbench_chunk") is agentbench_view.VIEW
    assert catalog.view("fin_lfqa-test") is lfqa_view.VIEW and catalog.view("fin_ems") is ems_view.VIEW
    assert catalog.view("fin_emsx") is GENERIC and catalog.view("hellaswag") is GENERIC
    assert catalog.headline("fin_agentbench_doc")[0] == "ndcg@5" and catalog.judged("fin_ems")
    assert catalog.is_diagnostic("fin_lfqa", "index_base") and catalog.is_diagnostic("fin_lfqa", "code_syntax")
    assert not catalog.is_diagnostic("fin_lfqa", "code_exec_rate") and not catalog.is_diagnostic("fin_ems", "bleu")
    assert catalog.is_diagnostic("fin_ems", "degenerate_answer") and catalog.is_diagnostic("fin_ems", "judge_failure")


def test_indexed_entries_of_rendered_reports_and_knowledge():
    paragraphs = lfqa_view.indexed_entries(REPORTS)
    assert paragraphs[("CWT", 1)] == "Item | Q1 2024 | Q1 2023\nNet interest expense | 125 | 100\n"
    assert paragraphs[("AWK", 0)].startswith("American Water Works")
    assert lfqa_view.indexed_entries(KNOWLEDGE)[("", 1)].startswith("Interest coverage")


def test_finlfqa_view_marks_evidence_knowledge_and_numbers_and_shows_the_logged_outcomes():
    blocks = lfqa_view.answer(sample("cwt-awk-1", LFQA_DOC, LFQA_ANSWER, LFQA_RECORD))
    clause_rows = [row[1] for row in cells(blocks, "Clauses")]
    assert clause_rows[0] == ("CWT's net interest expense rose 25% from $100 million to $125 million.", "")
    evidence = [c for c in clause_rows if c[0].startswith("evidence")]
    assert evidence[0][1] == HIT and "Net interest expense | 125 | 100" in evidence[0][0]
    assert evidence[1] == ("evidence AWK [2]: (no such paragraph)", MISS)
    knowledge = [c for c in clause_rows if c[0].startswith("knowledge")]
    assert [cls for _, cls in knowledge] == [HIT, MISS] and "Growth rate" in knowledge[0][0]
    code_at = [text for text, _ in clause_rows].index(next(t for t, _ in clause_rows if t.startswith("code")))
    assert clause_rows[code_at + 1] == ("returned 25.0", HIT)  # the sandbox outcome the record logged
    numbers = {(row[0][0], row[1][0]): row[2] for row in cells(blocks, "Numbers")}
    assert numbers[("25", "answer")] == ("matched", HIT) and numbers[("1.1e+08", "reference")] == ("missed", MISS)
    judge = dict(next(b for b in blocks if b.title == "Judge").items)
    assert judge["accuracy"] == "4" and judge["evidence entailment"] == "3"
    assert next(b for b in blocks if b.title == "Judge reply").text == '{"accuracy": 4}'
    steps = cells(blocks, "Steps")
    assert [row[0][0] for row in steps] == ["answer", "feedback"] and "ran: 25.0" in steps[1][1][0]


def test_finlfqa_view_of_a_failed_snippet_and_an_unreadable_answer():
    failed = dict(LFQA_RECORD, code=[{"ok": False, "category": "exception", "value": None, "error": "ZeroDivisionError"}])
    rows = [row[1] for row in cells(lfqa_view.answer(sample("a", LFQA_DOC, LFQA_ANSWER, failed)), "Clauses")]
    assert ("failed (exception): ZeroDivisionError", MISS) in rows
    unrun = [row[1] for row in cells(lfqa_view.answer(sample("a", LFQA_DOC, LFQA_ANSWER)), "Clauses")]
    assert any(cls == NOTE and text.startswith("not run") for text, cls in unrun)
    blocks = lfqa_view.answer(sample("x", LFQA_DOC, "I cannot tell."))
    assert blocks[0].cls == MISS and "parse failure" in blocks[0].text and blocks[-1].text == "I cannot tell."


def test_finlfqa_baseline_cites_nothing_and_is_scored_by_the_task():
    baseline, = lfqa_view.baselines("fin_lfqa", [sample("cwt-awk-1", LFQA_DOC, "")])
    values = baseline.values["cwt-awk-1"]
    assert values["evidence_f1"] == 0.0 and values["evidence_recall"] == 0.0 and values["knowledge_recall"] == 0.0
    assert values["parse_failure"] == 0.0 and "judge_score" not in values and "bertscore_f1" not in values


EMS_RECORD = {
    "bertscore_f1": 0.41, "judge": {"spec": "hf:judge", "prompt_version": "p1"},
    "ems": {
        "method": "llm", "scorers": ["llm", "rouge", "bertscore"],
        "reference_points": ["Revenue grew 12% to $4.2 billion.", "Gross margin fell to 38.5%."],
        "answer_points": ["Margins were under pressure.", "Revenue rose 12% to $4.2bn."],
        "alignment": [1, -1],
        "scores": {"rouge": [0.6, 0.0], "bertscore": [0.9, 0.0]},
        "ems": {"rouge": [0.3, 0.3, 0.3], "bertscore": [0.45, 0.45, 0.45]},
        "verdicts": {"answer": ["neutral", "entailment"], "reference": ["entailment", "contradiction"]},
        "parse_failures": {"extraction": 0, "matching": 1, "scoring": 0}, "judge_error": None,
    },
}


def test_ems_view_shows_the_logged_alignment_scores_and_claim_checks():
    doc = {"id": "NWND-q1", "question": "Q?", "reference": "R."}
    blocks = ems_view.answer(sample("NWND-q1", doc, "An answer.", EMS_RECORD))
    reference_rows = cells(blocks, "Reference points")
    assert reference_rows[0] == [("1", ""), ("Revenue grew 12% to $4.2 billion.", ""),
                                 ("A2: Revenue rose 12% to $4.2bn.", HIT), ("0.6", ""), ("0.9", "")]
    assert reference_rows[1][2] == ("no match", MISS)
    assert cells(blocks, "Answer points") == [[("A1", ""), ("Margins were under pressure.", ""), ("unmatched", MISS)],
                                              [("A2", ""), ("Revenue rose 12% to $4.2bn.", ""), ("yes", HIT)]]
    assert cells(blocks, "the answer's points")[1] == [("Revenue rose 12% to $4.2bn.", ""), ("entailment", HIT)]
    assert dict(next(b for b in blocks if "unreadable" in b.title).items)["matching"] == "1"
    unscored = ems_view.answer(sample("NWND-q1", doc, "An answer."))
    assert unscored[0].cls == NOTE and "predict_only" in unscored[0].text


def test_ems_baselines_echo_the_question_and_say_the_first_sentence(monkeypatch):
    doc = {"id": "d", "question": "What did the company say about revenue?",
           "reference": "Revenue grew 12% to $4.2 billion. Gross margin fell to 38.5% as steel costs rose.",
           "settings": json.dumps({"values": {"bertscore_model": "roberta-large"}})}
    echo, prefix = ems_view.baselines("fin_ems", [sample("d", doc, "")])
    assert echo.name == "question echo" and prefix.name == "reference, first sentence"
    assert ems_view.first_sentence(doc["reference"]) == "Revenue grew 12% to $4.2 billion."
    # the first sentence is one of two reference points, said word for word: precision 1, recall 1/2
    assert prefix.values["d"]["ems_offline_rouge_precision"] == pytest.approx(1.0)
    assert prefix.values["d"]["ems_offline_rouge_recall"] == pytest.approx(0.5)
    assert "bertscore_f1" not in prefix.values["d"] and "BERTScore left out" in prefix.description
    assert echo.values["d"]["rouge_l_f1"] < prefix.values["d"]["rouge_l_f1"]


AGENTBENCH_DOC = {
    "id": "d1", "prompt": "Question: Who was paid what?\n\n[Document Index 0] DEF 14A", "candidates": [0, 1, 2, 3],
    "labels": json.dumps({"0": "DEF 14A", "1": "10-K", "2": "8-K", "3": "Earnings"}),
    "qrel": json.dumps({"0": 4, "1": 1, "2": 0, "3": 0}),
}


def test_agentbench_view_shows_the_logged_ranking_against_the_grades():
    rows = cells(agentbench_view.answer(sample("d1", AGENTBENCH_DOC, "[1, 0]", {"ranking": [1, 0]})), "ranking")
    assert rows[0] == [("1", ""), ("1: 10-K", ""), ("1", HIT), ("2", "")]
    assert rows[1] == [("2", ""), ("0: DEF 14A", ""), ("4", HIT), ("1", "")]
    assert rows[2][0] == ("not ranked", NOTE) and rows[2][2] == ("0", "")
    facts = dict(agentbench_view.answer(sample("d1", AGENTBENCH_DOC, "no idea", {"ranking": None}))[0].items)
    assert facts["ranking read"].startswith("none: a parse failure")
    assert agentbench_view.best_document_type(AGENTBENCH_DOC) == "DEF 14A"


CHUNK_DOC = {
    "id": "c1", "candidates": [0, 1, 2], "labels": "{}", "qrel": json.dumps({"0": 0, "1": 0, "2": 2}),
    "prompt": "Question: What was net income in fiscal 2025?\n\nChunks to rank:\n[Chunk Index 0] The board met.\n\n"
              "[Chunk Index 1] Revenue was $1.2 billion.\n\n[Chunk Index 2] Net income in fiscal 2025 was $96 "
              "million.\n\nAnswer with a list of indices.",
}


def test_agentbench_baselines_rank_without_a_model():
    found = {b.name: b for b in agentbench_view.baselines("fin_agentbench_chunk", [sample("c1", CHUNK_DOC, "")])}
    assert found["input order"].values["c1"] == score_ranking(CHUNK_DOC, [0, 1, 2], gain="exponential")
    assert found["BM25"].values["c1"]["mrr@10"] == 1.0  # the chunk that names net income and fiscal 2025 first
    shuffled = agentbench_view.random_order("c1", [0, 1, 2])
    assert sorted(shuffled) == [0, 1, 2] and shuffled == agentbench_view.random_order("c1", [0, 1, 2])
    # document types share no word with the question: no BM25 row for the document task
    names = [b.name for b in agentbench_view.baselines("fin_agentbench_doc", [sample("d1", AGENTBENCH_DOC, "")])]
    assert names == ["input order", "random order"]
