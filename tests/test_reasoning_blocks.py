"""Issue 35: a reasoning block is stripped once, where a reply enters (the judge layer for every
judge parser and the reference builder, the filter stage for the model's answer), so no parser
sees one, and the raw reply stays where it is logged (the parsed answer's ``text``, lm-eval's
``resps``)."""

from functools import partial

import pytest

from lm_eval_fin.benchmarks.fin_lfqa import judge as lfqa_judge
from lm_eval_fin.benchmarks.fin_lfqa import refine
from lm_eval_fin.builders import earnings_call
from lm_eval_fin.ems.parsing import parse_match, parse_points, parse_score, parse_summary_bounds, parse_verdicts
from lm_eval_fin.harness import stage
from lm_eval_fin.harness.settings import read_settings
from lm_eval_fin.judge import JudgeRequest, JudgeResponse, complete_parsed_answers
from lm_eval_fin.outputs import records
from lm_eval_fin.rerank import corecard
from lm_eval_fin.rerank.cards import parse_card
from lm_eval_fin.rerank.intent import parse_intent
from lm_eval_fin.rerank.screening import parse_selection
from lm_eval_fin.rerank.tournament import parse_listwise

LFQA = '{"accuracy": %d, "numerical_correctness": 3, "evidence_entailment": 5}'
CHUNK = "Revenue was $5 million in fiscal 2025."

# (parser, the verdict after the block, a different verdict inside it): every parser a judge
# reply reaches, the reference builder's included
PARSERS = {
    "fin_lfqa verdict": (lfqa_judge.parse_verdict, LFQA % 4, LFQA % 1),
    "ems score": (partial(parse_score, max_score=10), "Score: 8", "score: 3"),
    "ems match": (partial(parse_match, n_answer_points=5), '{"match": 3}', '{"match": 1}'),
    "ems summary bounds": (partial(parse_summary_bounds, n_units=5), '{"opening": 1, "closing": 0}',
                           '{"opening": 2, "closing": 2}'),
    "ems claim verdicts": (partial(parse_verdicts, n_claims=2), '{"verdicts": ["entailment", "contradiction"]}',
                           '{"verdicts": ["neutral", "neutral"]}'),
    "ems points": (parse_points, '["Revenue rose 6%."]', '["draft point"]'),
    "fincards screening": (partial(parse_selection, group_ids=[2, 4]),
                           '{"selected": [{"id": 4, "score": 90, "reason": "r"}]}', "[2]"),
    "fincards listwise": (partial(parse_listwise, ids=[1, 2]), '{"ranking": [2, 1]}', '{"ranking": [1, 2]}'),
    "fincards intent": (parse_intent, '{"relation": "trend"}', '{"relation": "lookup"}'),
    "fincards card": (parse_card, '{"role": "structural_heading", "sketch": "Income statement header"}',
                      '{"role": "footnote"}'),
    "fincards core card": (partial(corecard.parse_card, chunk_text=CHUNK), '{"metrics": ["revenue"], "period": "FY2025"}',
                           '{"metrics": ["draft"]}'),
    "reference builder": (earnings_call.parse_answer, "Revenue fell 3%.", "Maybe revenue rose? Draft."),
}


class ScriptedJudge:
    """Answers request i with ``replies[i]``."""

    spec = "scripted"

    def __init__(self, replies):
        self.replies = replies

    def complete(self, requests, desc="judge"):
        return [JudgeResponse(text=self.replies[i]) for i in range(len(requests))]


def seen_by(parser, seen):
    def parse(text):
        seen.append(text)
        return parser(text)

    return parse


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_judge_parser_is_handed_the_reply_without_its_reasoning(name):
    parser, verdict, draft = PARSERS[name]
    expected = parser(verdict)
    assert expected is not None and parser(draft) != expected  # the block would change the value
    replies = [f"<think>{draft}</think>\n{verdict}", f"{draft}</THINKING>{verdict}", f"<think>{verdict}"]
    seen: list[str] = []
    answers = complete_parsed_answers(
        ScriptedJudge(replies), [JudgeRequest(messages=({"role": "user", "content": str(i)},)) for i in range(3)],
        seen_by(parser, seen), max_attempts=1,
    )
    assert [a.value for a in answers[:2]] == [expected, expected]
    # a reply cut off while thinking has no answer part: unreadable, not the thought's verdict
    assert answers[2].value is None and answers[2].unparsed
    assert not any("think" in text.lower() or draft in text for text in seen)
    assert [a.text for a in answers] == replies  # the raw reply is kept as it came


def test_the_filter_stage_scores_the_models_answer_part_and_lm_eval_keeps_the_raw_output(monkeypatch):
    monkeypatch.delenv(stage.PREDICT_ONLY_ENV, raising=False)
    seen: list[str] = []

    def score(answers, docs, settings):
        seen.extend(answers)
        return [{} for _ in answers]

    settings = read_settings("fin_ems", {"judge": "none"}).to_json()
    docs = [{"id": f"d{i}", "settings": settings} for i in range(3)]
    resps = [["<think>Revenue fell? No.</think>Revenue rose 5%."], ["Revenue rose 5%."], ["<think>Revenue rose"]]
    filtered = stage.filter_function(score)(resps, docs)
    assert seen == ["Revenue rose 5%.", "Revenue rose 5%.", ""]
    assert [records.decode(text)["answer"] for text in filtered] == seen


def test_refinement_feedback_is_read_from_its_answer_part(monkeypatch):
    monkeypatch.setattr(refine, "run_snippets", lambda answers, companies: [[] for _ in answers])
    asked: list[list[int]] = []

    def generate(which, prompts):
        asked.append(list(which))
        if len(asked) == 1:  # the feedback: a reasoning model that thinks, then says it is done
            return ["<think>Maybe fix the numbers? No.</think>\nDone" for _ in which]
        return ["revised" for _ in which]

    docs = [{"id": "d0", "companies": [], "question": "q", "reports": "r", "knowledge": "k"}]
    [(text, trace)] = refine.iterative(docs, ["first answer"], generate)
    assert text == "first answer" and trace["done"] and asked == [[0], []]
    assert trace["steps"][1]["reply"].startswith("<think>")  # the trace keeps the raw reply
