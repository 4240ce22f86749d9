"""The EMS pass through the real judge layer (CachedJudge + sqlite cache) with a scripted,
deterministic model behind it: the four batched rounds, re-asks, cache reuse, failures,
summary removal, the RAGChecker-style claim metrics; and fin_ems' filter stage, which runs the
pass once over a task's answers and logs each document's outcome in its record, judged, warm
(no model call) and with a judge that fails."""

import json
import math
import re

import pytest
from lm_eval.api.metrics import mean as lm_eval_mean

from lm_eval_fin.benchmarks.fin_ems import task
from lm_eval_fin.ems import prompts
from lm_eval_fin.ems.pipeline import metric_names, run_ems
from lm_eval_fin.harness import stage
from lm_eval_fin.judge import JudgeOptions, JudgeResponse, parse_spec
from lm_eval_fin.judge.cache import JudgeCache
from lm_eval_fin.judge.core import CachedJudge
from lm_eval_fin.outputs import records

GARBLE = "GARBLE"  # a text containing this word gets unreadable answers on the first attempt
ALWAYS_GARBLE = "NOISE"  # ... on every attempt


class ScriptedModel:
    """Answers each stage by a fixed rule: summary removal drops leading units that open with
    "Here is" and trailing ones that open with "Overall"; extraction splits on '. '; matching
    picks the answer point sharing most words (-1 unless it shares three); scoring says 8 out
    of 10; a claim is entailed when the text contains it word for word, else neutral."""

    def __init__(self):
        self.batches = []  # every batch the judge layer sent to the model

    def close(self):
        pass

    def run(self, requests, sink):
        self.batches.append(list(requests))
        for index, request in enumerate(requests):
            sink.done(index, JudgeResponse(self.answer(request), prompt_tokens=10, completion_tokens=3))

    def answer(self, request):
        system, user = request.messages[0]["content"], request.messages[-1]["content"]
        if ALWAYS_GARBLE in user or (GARBLE in user and request.attempt == 0):
            return "Let me think about that."
        if system == prompts.MATCH_SYSTEM and OFF_LIST in user and request.attempt == 0:
            return json.dumps({"match": 99})  # a point the answer does not have
        if system == prompts.SUMMARY_SYSTEM:
            units = re.findall(r"^\[\d+\] (.*)$", user, re.MULTILINE)
            opening = sum(1 for unit in units[:1] if unit.startswith("Here is"))
            closing = sum(1 for unit in units[-1:] if unit.startswith("Overall"))
            return json.dumps({"opening": opening, "closing": closing})
        if system in (prompts.EXTRACT_SYSTEM, prompts.EXTRACT_SYSTEM_FOLDED):
            text = user.removeprefix("Answer:\n")
            return "```json\n" + json.dumps([s.strip() for s in text.split(". ") if s.strip()]) + "\n```"
        if system == prompts.MATCH_SYSTEM:
            reference = user.split("\n")[1]
            options = re.findall(r"^\[(\d+)\] (.*)$", user, re.MULTILINE)
            words = set(reference.lower().split())
            best = max(options, key=lambda option: len(words & set(option[1].lower().split())))
            return json.dumps(
                {"match": int(best[0]) if len(words & set(best[1].lower().split())) >= 3 else -1}
            )
        if system == prompts.CLAIMS_SYSTEM:
            premise, listing = user.removeprefix("Text:\n").rsplit("\n\nClaims:\n", 1)
            claims = re.findall(r"^\[\d+\] (.*)$", listing, re.MULTILINE)
            return json.dumps({"verdicts": ["entailment" if c in premise else "neutral" for c in claims]})
        return 'Score: {"score": 8}'


OFF_LIST = "OFFLIST"


def scripted_judge(cache_path, model, name="scripted"):
    return CachedJudge(parse_spec(f"hf:{name}"), model, JudgeOptions(), cache=JudgeCache(cache_path))


class CountingJudge:
    """Records every ``complete`` call (desc, attempts) of the judge it wraps."""

    def __init__(self, judge):
        self.judge, self.calls = judge, []
        self.spec = judge.spec

    @property
    def stats(self):
        return self.judge.stats

    @property
    def last_batch(self):
        return self.judge.last_batch

    @last_batch.setter
    def last_batch(self, value):
        self.judge.last_batch = value

    def complete(self, requests, desc="judge"):
        self.calls.append((desc, [r.attempt for r in requests]))
        return self.judge.complete(requests, desc=desc)


REFERENCES = [
    "Revenue rose 6% to 94.9 billion. Services hit a record. The buyback was 110 billion",
    "Cash flow was 5 billion. Capex was 2 billion",
]
ANSWERS_SMALL = ["Revenue rose 6% to 94.9 billion. Margins held", "Cash flow was 5 billion"]
ANSWERS_LARGE = [
    "Revenue rose 6% to 94.9 billion. Services hit a record. GARBLE margins held",
    "Capex was 2 billion",
]


def test_a_match_off_the_answer_list_is_asked_again(tmp_path):
    judge = CountingJudge(scripted_judge(tmp_path / "cache.sqlite", ScriptedModel()))
    run = run_ems(["Cash flow was 5 billion"], [f"Cash flow was 5 billion {OFF_LIST}"], judge=judge, scorers=["llm"])
    assert ("EMS match + claims (re-ask 1)", [1]) in judge.calls
    assert run.documents[0].alignment == [0]
    assert run.metrics()["judge_parse_failure"] == 0


def test_four_batched_rounds_plus_reasks_and_hand_checked_scores(tmp_path):
    judge = CountingJudge(scripted_judge(tmp_path / "cache.sqlite", ScriptedModel()))
    run = run_ems(ANSWERS_LARGE, REFERENCES, judge=judge, scorers=["llm", "rouge"])

    first_rounds = [desc for desc, attempts in judge.calls if set(attempts) == {0}]
    assert first_rounds == ["EMS summary", "EMS extract", "EMS match + claims", "EMS score"]
    reasks = [(desc, attempts) for desc, attempts in judge.calls if desc not in first_rounds]
    # the garbled answer was re-asked once at each stage that shows it: its summary units,
    # its extraction, the three match requests that list its points, and the two claim checks
    # with it (its own points, and the reference's points against its text); only those
    assert reasks == [
        ("EMS summary (re-ask 1)", [1]),
        ("EMS extract (re-ask 1)", [1]),
        ("EMS match + claims (re-ask 1)", [1, 1, 1, 1, 1]),
    ]
    # one-unit texts ("Capex was 2 billion") need no summary request; four texts are extracted
    assert [len(attempts) for _, attempts in judge.calls[:3:2]] == [3, 4]
    assert [(r.name, r.requests, r.reasked) for r in run.rounds] == [
        ("summary", 3, 1), ("extract", 4, 1), ("match + claims", 9, 5), ("score", 3, 0),
    ]

    doc = run.documents[0]
    assert doc.reference_points == [
        "Revenue rose 6% to 94.9 billion",
        "Services hit a record",
        "The buyback was 110 billion",
    ]
    assert doc.answer_points == [
        "Revenue rose 6% to 94.9 billion",
        "Services hit a record",
        "GARBLE margins held",
    ]
    assert doc.alignment == [0, 1, -1]
    assert doc.scores["llm"] == [0.8, 0.8, 0.0]
    # P = (0.8 + 0.8) / 3 answer points, R = (0.8 + 0.8) / 3 reference points
    assert doc.ems["llm"] == pytest.approx((1.6 / 3, 1.6 / 3, 1.6 / 3))
    assert doc.scores["rouge"] == [1.0, 1.0, 0.0]  # identical points
    # claims: two of the three answer points are in the reference text, and two of the three
    # reference points in the answer text
    assert doc.verdicts == {
        "answer": ["entailment", "entailment", "neutral"],
        "reference": ["entailment", "entailment", "neutral"],
    }
    assert doc.ragchecker == pytest.approx((2 / 3, 2 / 3, 2 / 3))
    second = run.documents[1]
    assert second.alignment == [-1, 0]
    # second document: R = 0.8 / 2, P = 0.8 / 1
    assert second.ems["llm"] == pytest.approx((0.8, 0.4, 2 * 0.8 * 0.4 / 1.2))
    # "Capex was 2 billion" is in the reference; of the reference's two points the answer has one
    assert second.ragchecker == pytest.approx((1.0, 0.5, 2 / 3))
    assert second.summaries == {"reference": (0, 0), "answer": (0, 0)}
    metrics = run.metrics()
    assert metrics["ems_llm_recall"] == pytest.approx((1.6 / 3 + 0.4) / 2)
    assert metrics["ragchecker_precision"] == pytest.approx((2 / 3 + 1.0) / 2)
    assert metrics["ragchecker_recall"] == pytest.approx((2 / 3 + 0.5) / 2)
    assert metrics["ragchecker_f1"] == pytest.approx(2 / 3)
    assert metrics["judge_parse_failure"] == metrics["judge_failure"] == 0
    assert metrics["ems_judge_rounds"] == 4
    assert metrics["ems_judge_requests"] == 3 + 1 + 4 + 1 + 9 + 5 + 3
    assert set(metrics) >= {"ems_rouge_f1", "ems_llm_f1"} and not any("offline" in name for name in metrics)


def test_summary_round_removes_introduction_and_conclusion_before_extraction(tmp_path):
    answer = "Here is the overview. Revenue rose 6% to 94.9 billion. Services hit a record. Overall a good quarter"
    model = ScriptedModel()
    run = run_ems([answer], [REFERENCES[0]], judge=scripted_judge(tmp_path / "c.sqlite", model), scorers=["rouge"])
    doc = run.documents[0]
    assert doc.summaries["answer"] == (1, 1)
    assert doc.answer_points == ["Revenue rose 6% to 94.9 billion", "Services hit a record."]
    extraction = next(batch for batch in model.batches if batch[0].messages[0]["content"] == prompts.EXTRACT_SYSTEM)
    assert "Answer:\nRevenue rose 6% to 94.9 billion. Services hit a record." in [
        r.messages[-1]["content"] for r in extraction
    ]

    # folded: three rounds, the extraction prompt removes the summaries itself (this scripted
    # extractor does not, so the framing sentences stay points here)
    folded_model = ScriptedModel()
    folded = run_ems(
        [answer], [REFERENCES[0]], judge=scripted_judge(tmp_path / "d.sqlite", folded_model), scorers=["rouge"],
        summary_removal="folded",
    )
    assert [r.name for r in folded.rounds] == ["extract", "match + claims"]  # no LLM scorer: no score round
    assert folded.documents[0].summaries is None
    assert {r.messages[0]["content"] for r in folded_model.batches[0]} == {prompts.EXTRACT_SYSTEM_FOLDED}
    assert folded.documents[0].answer_points[0] == "Here is the overview"
    assert folded.as_dict()["summary_removal"] == "folded" and run.as_dict()["summary_removal"] == "round"
    with pytest.raises(ValueError, match="summary_removal must be one of round, folded"):
        run_ems([answer], [answer], judge=scripted_judge(tmp_path / "e.sqlite", ScriptedModel()), summary_removal="x")


def test_claim_checks_group_distinct_points_and_count_repeats(tmp_path):
    reference = "A was 1. B was 2. C was 3. D was 4. E was 5. F was 6. G was 7"
    answer = "A was 1. A was 1. Z was 9"
    model = ScriptedModel()
    run = run_ems([answer], [reference], judge=scripted_judge(tmp_path / "c.sqlite", model), scorers=["rouge"])
    claim_batches = [
        [r for r in batch if r.messages[0]["content"] == prompts.CLAIMS_SYSTEM] for batch in model.batches
    ]
    checks = [r for batch in claim_batches for r in batch]
    listed = [re.findall(r"^\[\d+\] (.*)$", r.messages[-1]["content"].rsplit("Claims:\n", 1)[1], re.M) for r in checks]
    # the answer's two distinct points in one request; the reference's seven in groups of five
    assert sorted(map(len, listed)) == [2, 2, 5]
    assert all(r.max_tokens >= prompts.CLAIMS_MIN_TOKENS for r in checks)
    doc = run.documents[0]
    assert doc.verdicts["answer"] == ["entailment", "entailment", "neutral"]  # the repeat counts twice
    assert doc.ragchecker == pytest.approx((2 / 3, 1 / 7, 2 * (2 / 3) * (1 / 7) / (2 / 3 + 1 / 7)))
    # switched off: no claim requests, no ragchecker figures
    quiet = run_ems(
        [answer], [reference], judge=scripted_judge(tmp_path / "d.sqlite", ScriptedModel()), scorers=["rouge"],
        ragchecker=False,
    )
    assert quiet.documents[0].ragchecker is None and "ragchecker_f1" not in quiet.metrics()
    assert [r.requests for r in quiet.rounds if r.name == "match + claims"] == [7]


def test_reference_extractions_come_from_the_cache_for_a_second_model(tmp_path):
    cache = tmp_path / "cache.sqlite"
    run_ems(ANSWERS_SMALL, REFERENCES, judge=scripted_judge(cache, ScriptedModel()), scorers=["llm"])

    model = ScriptedModel()  # a new process: new judge object, same cache file and judge
    second = run_ems(ANSWERS_LARGE, REFERENCES, judge=scripted_judge(cache, model), scorers=["llm"])
    sent = [r for batch in model.batches for r in batch if r.attempt == 0]
    summarised = [r.messages[-1]["content"] for r in sent if r.messages[0]["content"] == prompts.SUMMARY_SYSTEM]
    assert len(summarised) == 1 and "GARBLE margins held" in summarised[0]  # the long answer's units only
    extracted = [r.messages[-1]["content"].removeprefix("Answer:\n") for r in sent if r.json_schema.get(
        "required") == ["points"]]
    assert extracted == ANSWERS_LARGE  # the references were not sent again
    assert second.judge_usage["cache_hits"] >= len(REFERENCES)


def test_unreadable_answers_leave_their_documents_unjudged(tmp_path):
    answers = ["NOISE revenue rose 6% to 94.9 billion", "Cash flow was 5 billion. Capex was 2 billion"]
    references = ["Revenue rose 6% to 94.9 billion", "Cash flow was 5 billion. Capex was 2 billion"]
    run = run_ems(
        answers, references, judge=scripted_judge(tmp_path / "c.sqlite", ScriptedModel()), scorers=["llm", "rouge"]
    )
    first, second = run.documents
    # the first answer's extraction never parsed: no points, no matching, no EMS of any scorer
    assert first.answer_points == [] and first.parse_failures["extraction"] == 1
    assert first.ems == {"llm": None, "rouge": None} and first.judge_unparsed and not first.judge_failed
    assert second.ems["llm"] == pytest.approx((0.8, 0.8, 0.8)) and not second.judge_unparsed
    metrics = run.metrics()
    # means over the judged document only; shares over all
    assert metrics["ems_llm_f1"] == pytest.approx(0.8) and metrics["ems_rouge_f1"] == 1.0
    assert (metrics["judge_parse_failure"], metrics["judge_failure"]) == (0.5, 0.0)


class FailingModel(ScriptedModel):
    """A ScriptedModel behind a server that fails every request quoting FAIL (as an HTTP 500
    that outlived its retries would), and every score request when ``scores_fail``."""

    def __init__(self, scores_fail=False):
        super().__init__()
        self.scores_fail = scores_fail

    def run(self, requests, sink):
        self.batches.append(list(requests))
        for index, request in enumerate(requests):
            scoring = request.messages[0]["content"].startswith(prompts.SCORE_SYSTEM[:40])
            if "FAIL" in request.messages[-1]["content"] or (self.scores_fail and scoring):
                sink.done(index, JudgeResponse(None, error="HTTP 500: server error (after 5 attempts)"))
            else:
                sink.done(index, JudgeResponse(self.answer(request), prompt_tokens=10, completion_tokens=3))


def test_a_failed_request_is_no_score_and_is_counted(tmp_path):
    answers = ["Revenue rose 6% to 94.9 billion FAIL", "Cash flow was 5 billion"]
    references = ["Revenue rose 6% to 94.9 billion", "Cash flow was 5 billion"]
    run = run_ems(answers, references, judge=scripted_judge(tmp_path / "c.sqlite", FailingModel()), scorers=["llm"])
    assert run.documents[0].ems["llm"] is None and run.documents[0].judge_failed
    assert run.documents[0].judge_error.startswith("HTTP 500")
    assert run.first_error().startswith("HTTP 500")
    metrics = run.metrics()
    assert (metrics["judge_failure"], metrics["judge_parse_failure"]) == (0.5, 0.0)
    assert metrics["ems_llm_f1"] == pytest.approx(0.8)  # the judged document alone

    # every score request failing: EMS(LLM) is missing, EMS(ROUGE) of the same pairs stands
    scores_fail = run_ems(
        answers[1:], references[1:], judge=scripted_judge(tmp_path / "d.sqlite", FailingModel(scores_fail=True)),
        scorers=["llm", "rouge"],
    ).metrics()
    assert math.isnan(scores_fail["ems_llm_f1"]) and scores_fail["ems_rouge_f1"] == 1.0
    assert scores_fail["judge_failure"] == 1.0


class StageFailingModel(ScriptedModel):
    """A ScriptedModel whose server fails every request of one stage (by its system prompt),
    or answers it unreadably on every attempt (``garble``)."""

    def __init__(self, system, garble=False):
        super().__init__()
        self.system, self.garble = system, garble

    def run(self, requests, sink):
        self.batches.append(list(requests))
        for index, request in enumerate(requests):
            if request.messages[0]["content"] != self.system:
                sink.done(index, JudgeResponse(self.answer(request), prompt_tokens=10, completion_tokens=3))
            elif self.garble:
                sink.done(index, JudgeResponse("I would rather not say.", prompt_tokens=10, completion_tokens=3))
            else:
                sink.done(index, JudgeResponse(None, error="HTTP 503: overloaded (after 5 attempts)"))


@pytest.mark.parametrize(
    "system, garble, ems_stands, claims_stand",
    [
        (prompts.SUMMARY_SYSTEM, False, False, False),  # no body: nothing extracted, nothing measured
        (prompts.EXTRACT_SYSTEM, True, False, False),
        (prompts.MATCH_SYSTEM, False, False, True),  # matching and claim checks stand apart
        (prompts.CLAIMS_SYSTEM, False, True, False),
        (prompts.CLAIMS_SYSTEM, True, True, False),
    ],
)
def test_each_stage_failing_leaves_out_what_needs_it(tmp_path, system, garble, ems_stands, claims_stand):
    answers = ["Revenue rose 6% to 94.9 billion. Services hit a record", "Cash flow was 5 billion"]
    references = [REFERENCES[0], "Cash flow was 5 billion"]
    judge = scripted_judge(tmp_path / "c.sqlite", StageFailingModel(system, garble))
    run = run_ems(answers, references, judge=judge, scorers=["llm", "rouge"], max_attempts=2)
    first = run.documents[0]  # every text of it has two units or more: each stage asks about it
    assert (first.ems["llm"] is not None, first.ems["rouge"] is not None) == (ems_stands, ems_stands)
    assert (first.ragchecker is not None) == claims_stand
    assert first.judge_unparsed == garble and first.judge_failed == (not garble)
    metrics = run.metrics()
    assert math.isnan(metrics["ragchecker_f1"]) == (not claims_stand and run.documents[1].ragchecker is None)
    failed_share = metrics["judge_parse_failure"] if garble else metrics["judge_failure"]
    assert failed_share == (sum(doc.judge_error is not None or doc.judge_unparsed for doc in run.documents) / 2)
    assert failed_share >= 0.5


class CuttingModel(ScriptedModel):
    """A ScriptedModel whose outputs stop at their token budget, 3 characters a token, as a
    real model's do: a list longer than the budget is cut mid-JSON."""

    def answer(self, request):
        return super().answer(request)[: 3 * request.max_tokens]


def test_long_answers_get_an_extraction_budget_that_holds_them(tmp_path):
    long_answer = ". ".join(f"Segment {i} revenue grew {i}% to {i}.5 billion" for i in range(150))
    assert len(long_answer) > 3 * JudgeOptions().max_tokens  # more than the judge's default budget holds
    model = CuttingModel()
    judge = scripted_judge(tmp_path / "c.sqlite", model)
    run = run_ems([long_answer], ["Segment 3 revenue grew 3% to 3.5 billion"], judge=judge, scorers=["rouge"])
    extraction = next(b for b in model.batches if b[0].messages[0]["content"] == prompts.EXTRACT_SYSTEM)
    budgets = {r.messages[-1]["content"].removeprefix("Answer:\n"): r.max_tokens for r in extraction}
    assert budgets[long_answer] >= 2 * len(long_answer) / 3  # twice a generous token estimate
    assert budgets["Segment 3 revenue grew 3% to 3.5 billion"] == prompts.EXTRACT_MIN_TOKENS
    assert len(run.documents[0].answer_points) == 150  # the whole list came back and parsed
    assert run.metrics()["judge_parse_failure"] == 0
    # a budget set by the caller applies to every text
    capped = run_ems(
        [long_answer],
        ["Segment 3"],
        judge=scripted_judge(tmp_path / "d.sqlite", CuttingModel()),
        scorers=["rouge"],
        extract_max_tokens=64,
        max_attempts=1,
    )
    # a cut list does not parse: that document is unjudged, not scored on other points
    assert capped.metrics()["judge_parse_failure"] == 1.0 and math.isnan(capped.metrics()["ems_rouge_f1"])


def test_failure_shares_are_judge_metrics_only():
    assert {"judge_failure", "judge_parse_failure"} <= set(metric_names("llm", ["llm"]))
    assert not {"judge_failure", "judge_parse_failure"} & set(metric_names("offline", ["rouge"]))


def test_offline_run_is_named_offline_and_needs_no_judge():
    run = run_ems(
        ["Revenue rose 6% to $94.9 billion."], ["Revenue increased 6% to $94.9 billion."], scorers=["rouge"]
    )
    assert list(run.metrics()) == [
        "ems_offline_rouge_precision",
        "ems_offline_rouge_recall",
        "ems_offline_rouge_f1",
    ]
    with pytest.raises(ValueError, match="needs a judge"):
        run_ems(["a"], ["b"], scorers=["llm"])
    with pytest.raises(ValueError, match="unknown EMS scorer"):
        run_ems(["a"], ["b"], scorers=["bleu"])
    with pytest.raises(ValueError, match="2 answers but 1 references"):
        run_ems(["a", "b"], ["c"])


def test_empty_and_missing_texts_score_without_judge_calls(tmp_path):
    model = ScriptedModel()
    run = run_ems(
        [None, ""], ["", "Some point"], judge=scripted_judge(tmp_path / "c.sqlite", model), scorers=["llm"]
    )
    assert [d.ems["llm"] for d in run.documents] == [(1.0, 1.0, 1.0), (0.0, 0.0, 0.0)]
    assert [len(batch) for batch in model.batches] == [1]  # only the one non-empty text was extracted


def _docs(references=REFERENCES, **metadata):
    settings = task.BENCHMARK.read_settings("fin_ems", {"judge": "none", "bertscore_model": "offline", **metadata})
    return [
        {"id": f"d{i}", "question": "How did the quarter go?", "transcript": "Operator: welcome.",
         "reference": ref, "settings": settings.to_json(), "truncated": i == 0}
        for i, ref in enumerate(references)
    ]


def stage_values(answers, docs):
    """The filter stage over every answer at once, then process_results per document: (the
    records, the per-document values)."""
    texts = task.score_answers([[answer] for answer in answers], docs)
    return [records.decode(text) for text in texts], [task.process_results(d, [t]) for d, t in zip(docs, texts)]


def test_the_filter_stage_runs_one_pass_over_every_answer(monkeypatch):
    monkeypatch.delenv("LM_EVAL_FIN_PREDICT_ONLY", raising=False)
    passes = []
    real = task.score.score_documents
    monkeypatch.setattr(task.score, "score_documents", lambda *a, **k: passes.append(len(a[0])) or real(*a, **k))
    recorded, values = stage_values(ANSWERS_SMALL, _docs())
    assert passes == [2]  # one pass over both answers
    assert recorded[0]["ems"]["alignment"] == [0, -1, -1]  # "Revenue rose ..." matched
    assert recorded[0]["ems"]["method"] == "offline" and recorded[0]["judge"] is None
    assert [v["truncated_documents"] for v in values] == [1.0, 0.0] and task.total(
        [v["truncated_documents"] for v in values]) == 1.0
    assert all(0.0 <= v["ems_offline_rouge_f1"] <= 1.0 and 0.0 < v["bertscore_f1"] <= 1.0 for v in values)
    assert all("ems_llm_f1" not in v and "judge_failure" not in v for v in values)


def test_a_judged_filter_stage_then_a_warm_rerun_without_model_calls(tmp_path, monkeypatch):
    monkeypatch.delenv("LM_EVAL_FIN_PREDICT_ONLY", raising=False)
    judge = CountingJudge(scripted_judge(tmp_path / "c.sqlite", ScriptedModel()))
    monkeypatch.setattr(stage, "judge_for", lambda settings: judge)  # the process's judge for the task
    docs = _docs(judge="hf:scripted")
    failures = len(stage.FAILURES)
    recorded, values = stage_values(ANSWERS_LARGE, docs)
    # at most four batched rounds, whatever the number of documents (plus re-asks)
    assert [desc for desc, attempts in judge.calls if set(attempts) == {0}] == [
        "EMS summary", "EMS extract", "EMS match + claims", "EMS score"]
    # the hand-checked figures of test_four_batched_rounds_plus_reasks_and_hand_checked_scores, per document
    assert (values[0]["ems_llm_precision"], values[0]["ems_llm_recall"]) == pytest.approx((1.6 / 3, 1.6 / 3))
    assert values[1]["ems_llm_precision"] == pytest.approx(0.8) and values[1]["ems_llm_recall"] == pytest.approx(0.4)
    assert lm_eval_mean([v["ems_llm_recall"] for v in values]) == pytest.approx((1.6 / 3 + 0.4) / 2)
    assert values[0]["ragchecker_f1"] == pytest.approx(2 / 3) and values[1]["ragchecker_recall"] == 0.5
    assert values[0]["ems_rouge_f1"] == pytest.approx(2 / 3)
    assert [(v["judge_failure"], v["judge_parse_failure"]) for v in values] == [(0.0, 0.0)] * 2
    assert not any(name.startswith("ems_offline") for v in values for name in v)  # undefined: left out
    assert recorded[0]["judge"] == {"spec": "hf:scripted", "prompt_version": prompts.EMS_PROMPTS_HASH}
    assert recorded[0]["ems"]["verdicts"]["answer"] == ["entailment", "entailment", "neutral"]
    assert len(stage.FAILURES) == failures  # nothing to report
    # each record holds its document's judge work; together they are the run's, each request once
    usage = [record["judge_usage"] for record in recorded]
    for name in ("requests", "model_calls", "prompt_tokens", "completion_tokens"):
        assert sum(u[name] for u in usage) == getattr(judge.stats, name), name
    assert all(u["model_calls"] > 0 for u in usage)

    # a re-run (a new judge object, the same cache): every answer from the cache, the same values
    warm_model = ScriptedModel()
    warm = CachedJudge(parse_spec("hf:scripted"), warm_model, JudgeOptions(retry_unparsable=False),
                       cache=JudgeCache(tmp_path / "c.sqlite"))
    monkeypatch.setattr(stage, "judge_for", lambda settings: warm)
    warm_recorded, warm_values = stage_values(ANSWERS_LARGE, docs)
    assert warm_values == values
    assert [dict(r, judge_usage=None) for r in warm_recorded] == [dict(r, judge_usage=None) for r in recorded]
    # the same requests, none sent to the model
    assert [(u["requests"], u["model_calls"], u["prompt_tokens"]) for u in (r["judge_usage"] for r in warm_recorded)] \
        == [(u["requests"], 0, 0) for u in usage]
    assert warm_model.batches == [] and warm.stats.model_calls == 0 and warm.stats.cache_hits > 0


def test_judge_failures_in_the_filter_stage_are_null_values_and_reported(tmp_path, monkeypatch):
    monkeypatch.delenv("LM_EVAL_FIN_PREDICT_ONLY", raising=False)
    docs = _docs(references=["Revenue rose 6% to 94.9 billion", "Cash flow was 5 billion"], judge="hf:scripted")
    monkeypatch.setattr(stage, "judge_for", lambda settings: scripted_judge(tmp_path / "c.sqlite", FailingModel()))
    failures = len(stage.FAILURES)
    recorded, values = stage_values(["Revenue rose 6% to 94.9 billion FAIL", "Cash flow was 5 billion"], docs)
    assert (values[0]["judge_failure"], values[1]["judge_failure"]) == (1.0, 0.0)
    assert not any(name.startswith(("ems_llm", "ems_rouge", "ragchecker")) for name in values[0])
    assert values[1]["ems_llm_f1"] == pytest.approx(0.8)
    assert recorded[0]["ems"]["judge_error"].startswith("HTTP 500")
    assert stage.FAILURES[failures:] == [stage.JudgeFailures("fin_ems", 1, 0, 2, recorded[0]["ems"]["judge_error"])]

    # a judge that cannot be set up: no EMS for any document, each counted; BERTScore still measured
    def no_judge(settings):
        raise OSError("no such model")

    monkeypatch.setattr(stage, "judge_for", no_judge)
    recorded, values = stage_values(["Cash flow was 5 billion"], docs[1:])
    assert values[0]["judge_failure"] == 1.0 and "ems_llm_f1" not in values[0]
    assert 0.0 < values[0]["bertscore_f1"] <= 1.0
    assert "judge setup: no such model" in recorded[0]["ems"]["judge_error"]
    assert stage.FAILURES[-1].task == "fin_ems" and stage.FAILURES[-1].failed == 1
