"""The ems evaluate module, loaded by absolute path (offline)."""


import evaluate
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lm_eval_fin.plumbing.paths
from lm_eval_fin.ems import run_ems

PATH = lm_eval_fin.plumbing.paths.metric_path("ems")
METRIC = evaluate.load(PATH)


def test_hand_computed_offline_rouge():
    # points: reference ["Revenue increased 6% to $94.9 billion.", "The buyback was $110 billion."],
    # answer ["Revenue rose 6% to $94.9 billion.", "Margins held."]; the first pair matches.
    # ROUGE-L tokens: revenue rose|increased 6 to 94 9 billion -> LCS 6 of 7 each: F1 = 6/7.
    # P = (6/7) / 2 answer points, R = (6/7) / 2 reference points.
    results = METRIC.compute(
        predictions=["- Revenue rose 6% to $94.9 billion.\n- Margins held."],
        references=["Revenue increased 6% to $94.9 billion. The buyback was $110 billion."],
        scorers=["rouge"],
        return_details=True,
    )
    assert results["ems_offline_rouge_precision"] == pytest.approx(3 / 7)
    assert results["ems_offline_rouge_recall"] == pytest.approx(3 / 7)
    assert results["details"][0]["alignment"] == [0, -1]


def test_module_agrees_with_the_core():
    predictions = ["Revenue grew 5% to $2 billion. Margins were 40%.", "Nothing relevant here.", ""]
    references = ["Revenue grew 5% to $2 billion.", "Cash flow was $1 billion. Capex was $300 million.", ""]
    got = METRIC.compute(predictions=predictions, references=references, scorers=["rouge"])
    assert got == pytest.approx(run_ems(predictions, references, scorers=["rouge"]).metrics())


def test_bertscore_scorer_with_the_offline_model():
    results = METRIC.compute(
        predictions=["Revenue rose 6% to $94.9 billion."],
        references=["Revenue increased 6% to $94.9 billion."],
        bertscore_model="offline",
    )
    assert set(results) == {
        f"ems_offline_{s}_{p}" for s in ("rouge", "bertscore") for p in ("precision", "recall", "f1")
    }
    assert 0.5 < results["ems_offline_bertscore_f1"] <= 1.0


def test_bad_options_are_clear_errors():
    with pytest.raises(ValueError, match="needs a judge"):
        METRIC.compute(predictions=["a"], references=["b"], scorers=["llm"])
    with pytest.raises(ValueError, match="max_score"):
        METRIC.compute(predictions=["a"], references=["b"], scorers=["rouge"], max_score=0)
    with pytest.raises(ValueError):
        METRIC.compute(predictions=["a", "b"], references=["c"], scorers=["rouge"])


def test_megabyte_answer_and_binary_junk():
    big = "Revenue grew 5% to $2 billion. " * 33_000
    junk = bytes(range(256)).decode("latin-1") * 40
    results = METRIC.compute(
        predictions=[big, junk], references=["Revenue grew 5% to $2 billion.", junk], scorers=["rouge"]
    )
    assert all(0.0 <= v <= 1.0 for v in results.values())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.text(max_size=200), st.text(max_size=200)), min_size=1, max_size=4))
def test_any_text_scores_in_range(pairs):
    results = METRIC.compute(
        predictions=[p for p, _ in pairs], references=[r for _, r in pairs], scorers=["rouge"]
    )
    assert all(0.0 <= v <= 1.0 for v in results.values())
