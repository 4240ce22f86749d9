"""The attributed-answer parser on every drift format, and the evidence / knowledge scores."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lm_eval_fin.attribution import (
    code_from_json,
    evidence_from_json,
    evidence_prf,
    knowledge_recall,
    parse_answer,
    parse_evidence,
    parse_indices,
)

COMPANIES = ["CWT", "AWK"]

CANONICAL = """1. CWT's net interest expense rose 25.00%.
Evidence: CWT [16], AWK []
Code:
```python
def cwt_interest_growth():
    return (125 - 100) / 100 * 100
```
Knowledge: [3]
2. AWK's expense stayed flat.
Evidence: inferred from clause 1
Code: none
Knowledge: []"""


def test_canonical_format():
    answer = parse_answer(CANONICAL, COMPANIES)
    assert not answer.parse_failure
    first, second = answer.clauses
    assert first.text == "CWT's net interest expense rose 25.00%."
    assert first.evidence == (("CWT", 16),)
    assert first.code == ("def cwt_interest_growth():\n    return (125 - 100) / 100 * 100",)
    assert first.knowledge == (3,)
    assert second.evidence == () and second.code == () and second.knowledge == ()
    assert second.inferred_from == (1,)
    assert answer.text == "CWT's net interest expense rose 25.00%.\nAWK's expense stayed flat."
    assert answer.evidence == {("CWT", 16)} and answer.knowledge == {3}


DRIFTS = {
    "markdown headings, bullets and bold labels": (
        "Here is the analysis.\n\n### Clause 1\n**CWT** rose 25%.\n- **Evidence:** CWT: [16], AWK: []\n"
        "- **Code:**\n```python\ndef f():\n    return 25.0\n```\n- **Knowledge:** 3\n\n"
        "### Clause 2\nAWK flat. *Evidence*: inferred from clause 1. *Code*: N/A. *Knowledge*: None",
        [("CWT rose 25%.", {("CWT", 16)}, 1, {3}), ("AWK flat.", set(), 0, set())],
    ),
    "attributes on the clause line": (
        "1. Revenue grew 5%. Evidence: CWT [3, 4]; AWK [7]. Code: `def g(): return 5` Knowledge: [1]\n"
        "2) Margin fell. Evidence: paragraph 9 of AWK. Code: none. Knowledge: 2",
        [("Revenue grew 5%.", {("CWT", 3), ("CWT", 4), ("AWK", 7)}, 1, {1}), ("Margin fell.", {("AWK", 9)}, 0, {2})],
    ),
    "bold numbers, lower-case tickers, ranges": (
        "**1.** CWT grew.\nEvidence: cwt [2-4], awk's [1]\nKnowledge: [0, 2]",
        [("CWT grew.", {("CWT", 2), ("CWT", 3), ("CWT", 4), ("AWK", 1)}, 0, {0, 2})],
    ),
    "JSON answer in a fence": (
        '```json\n{"clauses": [{"text": "CWT grew 5%", "evidence": {"CWT": [3], "AWK": []}, '
        '"code": "def f():\\n    return 5", "knowledge": [1]}, {"text": "AWK fell", "evidence": ["AWK 7"], '
        '"code": null, "knowledge": null}]}\n```',
        [("CWT grew 5%", {("CWT", 3)}, 1, {1}), ("AWK fell", {("AWK", 7)}, 0, set())],
    ),
    "bare JSON list with company/paragraph objects": (
        json.dumps([{"clause": "X", "evidence": [{"company": "cwt", "paragraph": 5}], "code": ["def a():\n  return 1"], "knowledge": "2"}]),
        [("X", {("CWT", 5)}, 1, {2})],
    ),
    "JSON with trailing commas": (
        '{"clauses": [{"text": "CWT grew", "evidence": {"CWT": [16],}, "knowledge": [1],},]}',
        [("CWT grew", {("CWT", 16)}, 0, {1})],
    ),
    "whole answer in an outer fence with a fence inside": (
        "```markdown\n1. CWT grew.\nEvidence: CWT [2]\nCode:\n```python\ndef h():\n    return 1\n```\nKnowledge: []\n```",
        [("CWT grew.", {("CWT", 2)}, 1, set())],
    ),
    "unclosed fence": (
        "1. CWT grew.\nCode:\n```python\ndef h():\n    return 1\nEvidence: CWT [2]\n2. AWK fell.\nEvidence: AWK [5]",
        [("CWT grew.", {("CWT", 2)}, 1, set()), ("AWK fell.", {("AWK", 5)}, 0, set())],
    ),
    "code without a fence": (
        "1. CWT grew.\nEvidence: CWT [2]\nCode:\ndef h():\n    x = 2\n    return x\n\nKnowledge: [4]",
        [("CWT grew.", {("CWT", 2)}, 1, {4})],
    ),
    "evidence as a multi-line list": (
        "1. CWT grew.\nEvidence:\n- CWT [2, 3]\n- AWK [4]\nKnowledge: [1]",
        [("CWT grew.", {("CWT", 2), ("CWT", 3), ("AWK", 4)}, 0, {1})],
    ),
    "Markdown bullets with attributes on nested lines": (
        "Here is the analysis.\n\n- **CWT** rose 25%.\n  - Evidence: CWT [16]\n  - Code:\n    ```python\n"
        "    def f():\n        return 25.0\n    ```\n  - Knowledge: [3]\n* AWK was flat.\n    * **Evidence:** AWK [2]\n"
        "      - AWK [5]\n    * Knowledge: 1\n- CWT borrowed more.\n  - Evidence: inferred from clause 1",
        [("CWT rose 25%.", {("CWT", 16)}, 1, {3}), ("AWK was flat.", {("AWK", 2), ("AWK", 5)}, 0, {1}),
         ("CWT borrowed more.", set(), 0, set())],
    ),
    "attributes without numbered clauses": (
        "CWT grew 5%.\nEvidence: CWT [1]",
        [("CWT grew 5%.", {("CWT", 1)}, 0, set())],
    ),
}


@pytest.mark.parametrize("name", DRIFTS)
def test_drift_formats_parse(name):
    text, expected = DRIFTS[name]
    answer = parse_answer(text, COMPANIES)
    assert not answer.parse_failure
    got = [(c.text, set(c.evidence), len(c.code), set(c.knowledge)) for c in answer.clauses]
    assert got == expected


def test_clause_numbers_are_kept():
    answer = parse_answer("2. B.\nEvidence: CWT [1]\nClause 5: C.\nEvidence: AWK [2]", COMPANIES)
    assert [c.number for c in answer.clauses] == [2, 5]
    assert parse_answer("- B.\n  - Evidence: CWT [1]", COMPANIES).clauses[0].number is None


@pytest.mark.parametrize(
    "text",
    ["CWT grew by 5% while AWK declined.", "", None, "1. A claim.\n2. Another claim.", "```\n```", "{not json", b"\xff\xfe"],
)
def test_no_attribution_is_a_parse_failure(text):
    answer = parse_answer(text, COMPANIES)
    assert answer.parse_failure and answer.clauses == ()
    assert answer.evidence == frozenset() and answer.code == ()


def test_parse_failure_keeps_the_text_for_text_metrics():
    assert parse_answer("CWT grew 5%.").text == "CWT grew 5%."


@pytest.mark.parametrize(
    "value, expected",
    [
        ("CWT [16], AWK []", [("CWT", 16)]),
        ("CWT: [16], AWK: [3, 4]", [("CWT", 16), ("AWK", 3), ("AWK", 4)]),
        ('{"CWT": [1], "AWK": [2]}', [("CWT", 1), ("AWK", 2)]),
        ("CWT-16; AWK 3", [("CWT", 16), ("AWK", 3)]),
        ("[CWT 16], [AWK 2]", [("CWT", 16), ("AWK", 2)]),
        ("paragraph 16 of CWT", [("CWT", 16)]),
        ("inferred from clause 2", []),
        ("None", []),
        ("[3, 5]", [("", 3), ("", 5)]),
        ("XYZ [2]", [("XYZ", 2)]),  # an unknown ticker used as a label is still a company
        # "10-Q" names a report, not paragraph 10 (this case once expected ("CWT", 10) too)
        ("Q3 10-Q paragraph 4 of CWT", [("CWT", 4)]),
    ],
)
def test_evidence_values(value, expected):
    assert list(parse_evidence(value, COMPANIES)) == expected


@pytest.mark.parametrize(
    "value, expected",
    [
        # numbers that are not paragraph indices: a report name, a year, an amount, a table
        ("CWT's 10-Q, paragraph 16", [("CWT", 16)]),
        ("CWT [16] (Q3 2023)", [("CWT", 16)]),
        ("CWT 16 ($125 million)", [("CWT", 16)]),
        ("Table 3, CWT paragraph 5", [("CWT", 5)]),
        ("CWT 16, up 2.5%", [("CWT", 16)]),
        # with brackets, only bracketed numbers (and those after "paragraph") are indices
        ("CWT [16], 2 tables", [("CWT", 16)]),
        ("CWT [1]; paragraphs 3 and 4 of AWK", [("CWT", 1), ("AWK", 3), ("AWK", 4)]),
    ],
)
def test_evidence_numbers_that_are_not_paragraph_indices(value, expected):
    assert list(parse_evidence(value, COMPANIES)) == expected


@pytest.mark.parametrize(
    "value, expected",
    [
        ("Paragraph 16 (CWT), paragraph 3 (AWK)", [("CWT", 16), ("AWK", 3)]),
        ("CWT [2]; paragraph 3 of AWK", [("CWT", 2), ("AWK", 3)]),
        ("CWT: 16 (AWK: 3)", [("CWT", 16), ("AWK", 3)]),  # "(AWK: 3)" opens AWK's own list
    ],
)
def test_a_company_named_right_after_a_number_owns_it(value, expected):
    assert list(parse_evidence(value, COMPANIES)) == expected


def test_evidence_json_shapes():
    assert evidence_from_json({"CWT": [1, "2"], "AWK": 3}, COMPANIES) == (("CWT", 1), ("CWT", 2), ("AWK", 3))
    assert evidence_from_json([["awk", 4], 7], COMPANIES) == (("AWK", 4), ("", 7))
    assert evidence_from_json(None) == ()


def test_knowledge_values():
    assert parse_indices("[2, 5] (ROE formula), K7") == (2, 5, 7)
    assert parse_indices("None") == ()
    assert parse_indices("1-3, clause 9") == (1, 2, 3)


def test_knowledge_indices_are_bracketed_or_leading_numbers():
    # "100" belongs to the formula, not to the list of indices
    assert parse_indices("[3] ROE = NI/equity * 100") == (3,)
    assert parse_indices("2 (ROE formula), 5 (interest coverage)") == (2, 5)
    assert parse_indices("ROE = net income / equity * 100 [4]") == (4,)
    answer = parse_answer("1. ROE rose.\nEvidence: CWT [1]\nKnowledge: [3] ROE = NI/equity * 100", COMPANIES)
    assert answer.knowledge == {3}


def _only_clause(text):
    answer = parse_answer(text, COMPANIES)
    assert not answer.parse_failure and len(answer.clauses) == 1
    return answer.clauses[0]


@pytest.mark.parametrize(
    "text",
    [
        # fenced code indented under a list item
        "1. CWT grew.\n- Evidence: CWT [2]\n- Code:\n  ```python\n  def f():\n      return 1\n  ```\n- Knowledge: []",
        # unfenced code indented after "Code:"
        "1. CWT grew.\nEvidence: CWT [2]\nCode:\n    def f():\n        return 1\n\nKnowledge: []",
    ],
)
def test_indented_code_is_dedented_so_it_runs(text):
    (snippet,) = _only_clause(text).code
    assert snippet == "def f():\n    return 1"
    compile(snippet, "<snippet>", "exec")  # no IndentationError


@pytest.mark.parametrize("label", ["Code:", "**Code:**", "- Code:"])
def test_fence_opened_on_the_code_line(label):
    text = f"1. CWT grew 25%.\nEvidence: CWT [16]\n{label} ```python\ndef g():\n    return 25.0\n```\nKnowledge: [3]"
    clause = _only_clause(text)
    assert clause.text == "CWT grew 25%."  # the code's lines are not clause text
    assert clause.code == ("def g():\n    return 25.0",)
    assert clause.evidence == (("CWT", 16),) and clause.knowledge == (3,)


@pytest.mark.parametrize("prose", ["None needed", "N/A - read from the table", "Calculated from paragraph 16"])
def test_json_code_prose_is_no_snippet(prose):
    assert code_from_json(prose) == ()
    answer = parse_answer(json.dumps([{"text": "CWT grew", "evidence": {"CWT": [1]}, "code": prose}]), COMPANIES)
    assert not answer.parse_failure and answer.code == ()
    assert code_from_json("def f():\n    return 1") == ("def f():\n    return 1",)


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(["CWT grew 5%.", "AWK fell 2%."]),
        json.dumps({"clauses": [{"text": "CWT grew 5%."}, {"text": "AWK fell 2%."}]}),
    ],
)
def test_json_without_attributions_is_a_parse_failure_as_in_text(text):
    # the JSON twin of "1. A claim.\n2. Another claim.", which is a parse failure
    answer = parse_answer(text, COMPANIES)
    assert answer.parse_failure and answer.clauses == ()
    labelled = json.dumps({"clauses": [{"text": "CWT grew 5%.", "evidence": []}, {"text": "AWK fell 2%."}]})
    assert not parse_answer(labelled, COMPANIES).parse_failure  # an empty attribution is one


def test_evidence_scores_by_hand():
    # predicted {CWT16, AWK3}, reference {CWT16, CWT17}: one hit -> P = R = F1 = 1/2
    assert evidence_prf([("CWT", 16), ("awk", 3)], [("CWT", 16), ("CWT", 17)]) == (0.5, 0.5, 0.5)
    # predicted {CWT16}, reference {CWT16, CWT17, AWK1}: P = 1, R = 1/3, F1 = 1/2
    assert evidence_prf([("CWT", 16)], [("CWT", 16), ("CWT", 17), ("AWK", 1)]) == pytest.approx((1.0, 1 / 3, 0.5))
    assert evidence_prf([], []) == (1.0, 1.0, 1.0)
    assert evidence_prf([("CWT", 1)], []) == (0.0, 0.0, 0.0)
    assert evidence_prf([], [("CWT", 1)]) == (0.0, 0.0, 0.0)
    assert evidence_prf([("", 16)], [("CWT", 16)]) == (0.0, 0.0, 0.0)  # no company never matches


def test_knowledge_recall_is_undefined_without_reference_knowledge():
    # issue 16, point 2: was 1.0 whatever the answer cited, a free floor under every model
    assert knowledge_recall([], []) is None and knowledge_recall([1, 2, 3], []) is None
    assert knowledge_recall([], [4]) == 0.0  # the reference's index is missed


def test_knowledge_recall_by_hand():
    assert knowledge_recall([2, 9], [2, 5]) == 0.5
    assert knowledge_recall([2, 5, 9], [2, 5]) == 1.0
    assert knowledge_recall([], [1]) == 0.0
    assert knowledge_recall([1, 1, 2], [1, 2, 3]) == pytest.approx(2 / 3)


FENCE_PIECES = st.sampled_from(
    ["```", "````", "```python", "```json", "~~~", "\n", "1. ", "Evidence: ", "Code:", "Knowledge: [",
     "CWT [", "]", "{", "}", "[", '"text": ', "def f():", "    return 1", "inferred from clause ", "**", "2"]
)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), st.text(max_size=300), st.binary(max_size=300), st.lists(FENCE_PIECES, max_size=60).map("".join)))
def test_parser_never_crashes(text):
    answer = parse_answer(text, COMPANIES)
    assert isinstance(answer.parse_failure, bool)
    assert all(isinstance(company, str) and isinstance(index, int) for company, index in answer.evidence)
    assert all(isinstance(snippet, str) and snippet.strip() for snippet in answer.code)
    p, r, f1 = evidence_prf(answer.evidence, [("CWT", 1)])
    assert 0.0 <= f1 <= 1.0 and 0.0 <= knowledge_recall(answer.knowledge, [1]) <= 1.0


@pytest.mark.parametrize(
    "text",
    [
        CANONICAL * 2500,  # about 1 MB of well-formed clauses
        "```\n" * 250_000,  # nested / unclosed fences
        "1. a\nCode: " + "-" * 1_000_000 + "x",
        "Evidence: inferred from" + " " * 1_000_000 + "x",
        "Evidence: CWT" + " " * 1_000_000 + "x",
        "[" * 1_000_000,
    ],
)
def test_one_megabyte_inputs(text):
    answer = parse_answer(text, COMPANIES)
    assert isinstance(answer.parse_failure, bool)
