"""The fin_numeric_match and evidence_f1 evaluate modules, loaded by absolute path (offline)."""

import json
import math

import evaluate
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lm_eval_fin.plumbing.paths
from lm_eval_fin.benchmarks.fin_lfqa import score

MODULES = ("fin_numeric_match", "evidence_f1")


@pytest.fixture(scope="module")
def metrics():
    return {name: evaluate.load(lm_eval_fin.plumbing.paths.metric_path(name)) for name in MODULES}


def test_numeric_match_by_hand(metrics):
    got = metrics["fin_numeric_match"].compute(
        predictions=["3 million", "3.965%", "no numbers", None],
        references=["3,000 thousand", "3.97", "none", "12"],
    )
    assert got == {"numeric_precision": 0.75, "numeric_recall": 0.75, "numeric_f1": 0.75, "n_examples": 4}


ANSWER_WITH_CODE = (
    "1. CWT's net interest expense rose 25% to $125 million.\nEvidence: CWT [1]\nCode:\n"
    "```python\ndef growth():\n    return (125 - 100) / 100 * 100\n```\nKnowledge: [0]"
)
REFERENCE_TEXT = "CWT's net interest expense grew 25% to $125 million."


def test_numeric_match_scores_clause_text_as_the_task_does(metrics):
    # clause text {25, 1.25e8} vs reference {25, 1.25e8}: P = R = F1 = 1. Scored raw, the
    # code's 125 and 100 would count too: 125 matches 1.25e8 (factor 1e6), 100 matches
    # nothing, so P = 3/4 (R = 1, F1 = 6/7).
    module = metrics["fin_numeric_match"].compute(predictions=[ANSWER_WITH_CODE], references=[REFERENCE_TEXT])
    assert (module["numeric_precision"], module["numeric_recall"], module["numeric_f1"]) == (1.0, 1.0, 1.0)
    doc = {
        "id": "d", "has_reference": True, "companies": ["CWT", "AWK"], "question": "q", "reports": "",
        "knowledge": "",
        "reference_clauses": json.dumps([{"text": REFERENCE_TEXT, "evidence": [["CWT", 1]], "code": [], "knowledge": [0]}]),
    }
    task = score.score_document(doc, ANSWER_WITH_CODE)[0]
    for name in ("numeric_precision", "numeric_recall", "numeric_f1"):
        assert module[name] == pytest.approx(task[name]), name


def test_evidence_f1_by_hand_and_bad_reference(metrics):
    answer = "1. x\nEvidence: CWT [1, 2]\nKnowledge: [0]\n2. y\nEvidence: AWK [5]\nKnowledge: [4]"
    got = metrics["evidence_f1"].compute(
        predictions=[answer], references=[{"companies": ["CWT", "AWK"], "paragraphs": [1, 9], "knowledge": [0, 3]}]
    )
    # cited {CWT1, CWT2, AWK5} vs {CWT1, AWK9}: P = 1/3, R = 1/2, F1 = 0.4; knowledge 1 of 2
    assert got["evidence_precision"] == pytest.approx(1 / 3) and got["evidence_recall"] == 0.5
    assert got["evidence_f1"] == pytest.approx(0.4) and got["knowledge_recall"] == 0.5
    assert got["parse_failure_rate"] == 0.0
    with pytest.raises(ValueError, match="as many paragraphs as companies"):
        metrics["evidence_f1"].compute(predictions=["a"], references=[{"companies": ["A"], "paragraphs": [], "knowledge": []}])


@settings(max_examples=20, deadline=None)
@given(st.lists(st.text(max_size=120), min_size=1, max_size=4))
def test_modules_never_crash_on_junk(metrics, texts):
    numeric = metrics["fin_numeric_match"].compute(predictions=texts, references=list(reversed(texts)))
    evidence = metrics["evidence_f1"].compute(
        predictions=texts, references=[{"companies": ["CWT"], "paragraphs": [1], "knowledge": [2]}] * len(texts)
    )
    assert all(0.0 <= numeric[k] <= 1.0 for k in ("numeric_precision", "numeric_recall", "numeric_f1"))
    assert all(0.0 <= evidence[k] <= 1.0 for k in ("evidence_f1", "knowledge_recall", "parse_failure_rate"))
    assert evidence["knowledge_examples"] == len(texts)


def test_evidence_f1_leaves_out_examples_without_reference_knowledge(metrics):
    """Issue 16, point 2, in the evaluate module: such an example used to add a free 1.0."""
    answer = "1. x\nEvidence: CWT [1]\nKnowledge: [0]"
    got = metrics["evidence_f1"].compute(
        predictions=[answer, answer, answer],
        references=[
            {"companies": ["CWT"], "paragraphs": [1], "knowledge": [0, 3]},  # recall 1/2
            {"companies": ["CWT"], "paragraphs": [1], "knowledge": []},  # left out
            {"companies": ["CWT"], "paragraphs": [1], "knowledge": [5]},  # recall 0
        ],
    )
    assert got["knowledge_recall"] == pytest.approx(0.25) and got["knowledge_examples"] == 2
    assert got["evidence_f1"] == 1.0 and got["n_examples"] == 3
    with pytest.warns(UserWarning, match="no reference cites knowledge"):
        none = metrics["evidence_f1"].compute(
            predictions=[answer], references=[{"companies": ["CWT"], "paragraphs": [1], "knowledge": []}]
        )
    assert math.isnan(none["knowledge_recall"]) and none["knowledge_examples"] == 0
