"""The ndcg_rerank evaluate module, loaded by absolute path (offline)."""


import evaluate
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lm_eval_fin.plumbing.paths
from lm_eval_fin.measures.ranking import rank_metrics

PATH = lm_eval_fin.plumbing.paths.metric_path("ndcg_rerank")
METRIC = evaluate.load(PATH)


def test_matches_the_core_per_query_mean():
    predictions = [["b", "a"], ["c"], []]
    references = [
        {"ids": ["a", "b"], "grades": [2, 0]},
        {"ids": ["c", "d"], "grades": [1, 1]},
        {"ids": ["x"], "grades": [1]},
    ]
    got = METRIC.compute(predictions=predictions, references=references, k=2)
    expected = [rank_metrics(p, dict(zip(r["ids"], r["grades"])), k=2) for p, r in zip(predictions, references)]
    assert got["ndcg@2"] == pytest.approx(sum(e["ndcg"] for e in expected) / 3)
    assert got["map@2"] == pytest.approx((0.5 + 0.5 + 0) / 3)
    assert got["mrr@2"] == pytest.approx((0.5 + 1 + 0) / 3)
    # over the hits: query 1 finds its one relevant item (1/2 / 1), query 2 one of two (1 / 1)
    assert got["map_hits@2"] == pytest.approx((0.5 + 1.0 + 0) / 3)
    assert got["n_queries"] == 3


def test_both_map_conventions_by_hand():
    # relevant a, b, c; the ranking x, a, y finds a at rank 2: precision 1/2
    got = METRIC.compute(predictions=[["x", "a", "y"]], references=[{"ids": ["a", "b", "c"], "grades": [1, 2, 1]}], k=3)
    assert got["map@3"] == pytest.approx(0.5 / 3)
    assert got["map_hits@3"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    "predictions, ids",
    [
        ([[2, 0, 1]], [0, 1, 2]),  # integers on both sides (was a format error)
        ([[2, 0, 1]], ["0", "1", "2"]),
        ([["2", "0", "1"]], [0, 1, 2]),
        ([["2", "0", "1"]], ["0", "1", "2"]),
    ],
)
def test_integer_ids_are_accepted(predictions, ids):
    got = METRIC.compute(predictions=predictions, references=[{"ids": ids, "grades": [1, 0, 2]}], k=3, gain="linear")
    # by hand: ranks 2 (grade 2), 0 (grade 1), 1 (grade 0); ideal 2, 1, 0
    assert got["ndcg@3"] == pytest.approx(1.0)
    assert got["map@3"] == pytest.approx(1.0)


def test_a_grade_below_one_is_not_relevant():
    got = METRIC.compute(predictions=[["a", "b"]], references=[{"ids": ["a", "b"], "grades": [0.5, 0]}], k=5)
    assert (got["ndcg@5"], got["map@5"], got["mrr@5"]) == (0.0, 0.0, 0.0)  # nDCG was 1.0


def test_bad_reference_shape_is_a_clear_error():
    with pytest.raises(ValueError, match="as many grades as ids"):
        METRIC.compute(predictions=[["a"]], references=[{"ids": ["a", "b"], "grades": [1]}])
    with pytest.raises(ValueError, match="gain"):
        METRIC.compute(predictions=[["a"]], references=[{"ids": ["a"], "grades": [1]}], gain="bogus")


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from("abcdefg"), max_size=8),
            st.dictionaries(st.sampled_from("abcdefg"), st.integers(min_value=0, max_value=4), min_size=1),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_values_in_unit_interval(queries):
    got = METRIC.compute(
        predictions=[q[0] for q in queries],
        references=[{"ids": list(q[1]), "grades": list(q[1].values())} for q in queries],
        k=5,
    )
    assert all(0.0 <= got[name] <= 1.0 + 1e-12 for name in ("ndcg@5", "map@5", "map_hits@5", "mrr@5"))
    assert got["map_hits@5"] >= got["map@5"] - 1e-12
