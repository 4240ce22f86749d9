"""Issue 22, point 1: a judge's reply is a verdict only when it is one. Per judge prompt: rubric
echoes, refusals, partial verdicts, out-of-range values and reasoning blocks are unreadable
(re-asked, then counted), never a score; real verdicts, however they are written, still read."""

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lm_eval_fin.benchmarks.fin_lfqa import judge as lfqa_judge
from lm_eval_fin.ems.parsing import parse_match, parse_points, parse_score, parse_summary_bounds, parse_verdicts
from lm_eval_fin.judge import JudgeResponse
from lm_eval_fin.rerank import corecard
from lm_eval_fin.rerank.cards import parse_card
from lm_eval_fin.rerank.intent import parse_intent
from lm_eval_fin.rerank.screening import parse_selection
from lm_eval_fin.rerank.tournament import parse_listwise

RANGE = st.sampled_from(["1-5", "1 - 5", "1–5", "1 to 5", "1 (worst) to 5 (best)", "<1-5>", "between 1 and 5"])
NAMES = st.sampled_from([
    ("accuracy", "numerical_correctness", "evidence_entailment"),
    ("Accuracy", "Numerical correctness", "Evidence entailment"),
    ("**accuracy**", "numerical", "evidence"),
])

# ------------------------------------------------------------------------------ FinLFQA judge

NOT_A_VERDICT = [
    # the reply: a refusal that restates the scale (main read it as three 1s)
    "I cannot grade this. Scale: accuracy: 1-5, numerical_correctness: 1-5, evidence_entailment: 1-5.",
    'Reply with JSON only: {"accuracy": <1-5>, "numerical_correctness": <1-5>, "evidence_entailment": <1-5>}',
    "accuracy: 1 (worst) to 5 (best); numerical_correctness: 1 to 5; evidence_entailment: 1 to 5",
    '{"accuracy": "1-5", "numerical_correctness": "1-5", "evidence_entailment": "1-5"}',
    "I'm sorry, I can't evaluate financial answers.",
    '{"accuracy": 4, "numerical_correctness": 3}',  # partial
    "Accuracy: 4\nNumerical correctness: 3",  # partial
    '{"accuracy": 0, "numerical_correctness": 3, "evidence_entailment": 5}',  # out of range
    "Accuracy: 4, numerical correctness: -2, evidence entailment: 5",
    "accuracy: 8/10, numerical_correctness: 3, evidence_entailment: 5",  # another scale
    "Accuracy: 4.5, numerical correctness: 3, evidence entailment: 5",  # not an integer
    "Accuracy: 4, numerical: 3, evidence: 5. On reflection, accuracy: 2.",  # two different values
    "<think>Accuracy: 4, numerical: 3, evidence: 5 ... but the",  # cut off while thinking
]


@pytest.mark.parametrize("reply", NOT_A_VERDICT)
def test_lfqa_replies_that_are_not_verdicts_are_unreadable(reply):
    assert lfqa_judge.parse_verdict(reply) is None


@pytest.mark.parametrize("reply, scores", [
    ('{"accuracy": 4, "numerical_correctness": 3, "evidence_entailment": 5}', (4, 3, 5)),
    ("Scale: accuracy 1-5 and so on.\nAccuracy: 4\nNumerical correctness: 3/5\nEvidence entailment: 5", (4, 3, 5)),
    ("- accuracy (1-5): 2\n- numerical correctness (1-5): 2\n- evidence entailment (1-5): 1", (2, 2, 1)),
    ('<think>accuracy: 1?</think>{"accuracy": 4, "numerical_correctness": 3, "evidence_entailment": 5}', (4, 3, 5)),
    ('{"scores": {"accuracy": 5, "numerical_correctness": 5, "evidence_entailment": 4}, "why": "ok"}', (5, 5, 4)),
])
def test_lfqa_verdicts_read_whatever_their_form(reply, scores):
    verdict = lfqa_judge.parse_verdict(reply)
    assert (verdict.accuracy, verdict.numerical_correctness, verdict.evidence_entailment) == scores


@settings(max_examples=150, deadline=None)
@given(st.integers(-3, 9), st.integers(-3, 9), st.integers(-3, 9), st.booleans())
def test_lfqa_json_verdict_reads_iff_every_score_is_in_range(a, n, e, as_lines):
    if as_lines:
        reply = f"Accuracy: {a}\nNumerical correctness: {n}\nEvidence entailment: {e}"
    else:
        reply = json.dumps({"accuracy": a, "numerical_correctness": n, "evidence_entailment": e})
    verdict = lfqa_judge.parse_verdict(reply)
    if all(1 <= v <= 5 for v in (a, n, e)):
        assert verdict == lfqa_judge.JudgeVerdict(a, n, e)
    else:
        assert verdict is None


@settings(max_examples=150, deadline=None)
@given(NAMES, st.lists(RANGE, min_size=3, max_size=3), st.sampled_from([": ", " = ", ":", " "]),
       st.sampled_from(["", "I cannot grade this. ", "Scale: ", "Use this rubric:\n"]))
def test_lfqa_any_restated_rubric_is_no_verdict(names, ranges, separator, preface):
    reply = preface + ", ".join(f"{name}{separator}{scale}" for name, scale in zip(names, ranges))
    assert lfqa_judge.parse_verdict(reply) is None


class EchoingJudge:
    """A judge that restates the rubric instead of grading, every time it is asked."""

    spec = "echo"

    def __init__(self):
        self.asked = 0

    def complete(self, requests, desc="judge"):
        self.asked += len(requests)
        return [JudgeResponse(text=NOT_A_VERDICT[0]) for _ in requests]


def test_a_judge_that_only_restates_the_rubric_is_re_asked_then_counted_never_scored():
    data = {"reports": "r", "knowledge": "k", "question": "q", "reference_answer": "a", "answer": "b"}
    echo = EchoingJudge()
    answers = lfqa_judge.judge_answers([data, data], echo, max_attempts=3)
    assert echo.asked == 2 * 3  # each request asked three times
    assert all(a.unparsed and a.value is None for a in answers)
    for answer in answers:
        values = lfqa_judge.judge_values(lfqa_judge.judge_details(answer, "hf:echo"))
        assert values["judge_parse_failure"] == 1.0 and values["judge_failure"] == 0.0
        assert values["judge_score"] is None and values["judge_accuracy"] is None


# ------------------------------------------------------------------------------------ EMS


@pytest.mark.parametrize("reply", [
    "Score: 0-10",
    "I cannot score this pair (scale: 0 to 10).",
    '{"score": "<integer from 0 to 10>"}',
    "Rate it with an integer between 0 and 10.",
    "Score: 1 to 9",  # the prompt's middle band restated
    "Score: 4/5",  # another scale
    "4/5",
    '{"score": 11}',
    "score: -1",
    "7\n\nThe points share the revenue figure, 2 of 3 facts.",  # a number in prose is no bare reply
    "<think>Score: 8",
])
def test_ems_score_of_a_non_verdict_is_unreadable(reply):
    assert parse_score(reply, 10) is None


@pytest.mark.parametrize("reply, expected", [
    ('{"score": "7/10"}', 0.7), ("**7**", 0.7), ("<think>score: 3</think>Score: 8", 0.8), ("Score: 6/10", 0.6),
])
def test_ems_score_still_reads_verdicts(reply, expected):
    assert parse_score(reply, 10) == pytest.approx(expected)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 10), st.integers(1, 10).filter(lambda d: d != 10))
def test_ems_score_on_another_scale_is_never_read(value, scale):
    assert parse_score(f"Score: {value}/{scale}", 10) is None
    assert parse_score(f"{value} out of {scale}", 10) is None


@pytest.mark.parametrize("reply, expected", [
    ("I cannot determine a match among the 5 answer points.", None),  # main: point 5
    ("None of the 3 answer points match.", -1),  # main: point 3
    ("Match: 1-5", None),  # main: point 1
    ('{"match": "<number of the answer point>"}', None),
    ('{"match": "answer point 3"}', 2),
    ('<think>{"match": 1}</think>{"match": 3}', 2),
])
def test_ems_match(reply, expected):
    assert parse_match(reply, 5) == expected


@pytest.mark.parametrize("reply", [
    '{"opening": "0-2", "closing": 0}',  # main: (0, 0)
    '{"opening": "<integer>", "closing": "<integer>"}',
    '{"opening": 1}',
    '{"opening": 9, "closing": 0}',
    "<think>",
])
def test_ems_summary_bounds_of_a_non_verdict_are_unreadable(reply):
    assert parse_summary_bounds(reply, 5) is None


def test_ems_claim_verdicts_and_points_come_from_the_answer_part():
    draft = '<think>{"verdicts": ["neutral", "neutral"]} no, wait</think>{"verdicts": ["entailment", "contradiction"]}'
    assert parse_verdicts(draft, 2) == ["entailment", "contradiction"]
    assert parse_verdicts('{"verdicts": ["entailment"]}', 2) is None  # partial
    assert parse_verdicts("I cannot check these claims.", 2) is None
    assert parse_points('<think>["draft point"]</think>["Revenue rose 6%."]') == ["Revenue rose 6%."]
    assert parse_points('<think>["draft point"]') is None


# ------------------------------------------------------------------------------- FinCARDS


@pytest.mark.parametrize("reply", [
    '{"selected": [{"id": 4, "score": 140, "reason": "x"}]}',  # off the 0-100 scale (main: clipped to 100)
    '{"selected": [{"id": 4, "score": -5, "reason": "x"}]}',
    '{"selected": [{"id": 4, "score": "<0-100>", "reason": "x"}]}',  # main: scored 50
    "I cannot rank these chunks.",
    '<think>{"selected": [{"id": 4, "score": 90, "reason": "x"}]}',
])
def test_screening_reply_that_is_not_a_selection_is_unreadable(reply):
    assert parse_selection(reply, [2, 4]) is None


def test_judge_parsers_of_fincards_read_the_answer_part_only():
    assert parse_selection('<think>[2]</think>{"selected": [{"id": 4, "score": 90, "reason": "r"}]}', [2, 4]) == [
        (4, 90.0, "r")]
    assert parse_listwise('<think>{"ranking": [1, 2]}</think>{"ranking": [2, 1]}', [1, 2]) == [2, 1]
    assert parse_listwise("<think>[1, 2]", [1, 2]) is None
    assert parse_intent('<think>{"relation": "lookup"}</think>{"relation": "trend"}')["relation"] == "trend"
    assert parse_card('<think>{"role": "heading"}') is None
    assert corecard.parse_card('<think>{"summary": "x"}', "text") is None


# ----------------------------------------------------------------------------- the helpers


def test_answer_part_and_scale_ends():
    from lm_eval_fin.text.replies import answer_part, is_scale

    assert answer_part("a</think>b</think>c") == "c"
    assert answer_part("plain") == "plain"
    text = "accuracy: 1-5, score 7, between 0 and 10, <3>"
    spans = {text[m.start():m.end()]: is_scale(text, m.start(), m.end()) for m in re.finditer(r"\d+", text)}
    assert spans == {"1": True, "5": True, "7": False, "0": True, "10": True, "3": True}
