"""Ranking maths (hand-computed), the tolerant parser, and agreement with pytrec_eval."""

import math
import random

import pytest
import pytrec_eval
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lm_eval_fin.measures.ranking import parse_ranking, rank_metrics, unique

LOG2_3 = math.log2(3)


def test_graded_ties_exponential_gain():
    # grades: a=2, b=2, c=1, d=0; ranking c, a, d, b at k=3
    qrel = {"a": 2, "b": 2, "c": 1, "d": 0}
    got = rank_metrics(["c", "a", "d", "b"], qrel, k=3)
    dcg = 1 / 1 + 3 / LOG2_3 + 0 / 2
    ideal = 3 / 1 + 3 / LOG2_3 + 1 / 2
    assert got["ndcg"] == pytest.approx(dcg / ideal)
    # relevant: a, b, c (3 of them); hits at ranks 1 and 2 within k=3
    assert got["map"] == pytest.approx((1 / 1 + 2 / 2) / 3)
    assert got["map_hits"] == pytest.approx((1 / 1 + 2 / 2) / 2)  # two of them within k=3
    assert got["mrr"] == 1.0


def test_map_conventions_by_hand():
    # issue 23: relevant r1..r4 (four); the ranking finds r1 at rank 2 and r2 at rank 5 of k=5
    qrel = {"r1": 1, "r2": 2, "r3": 1, "r4": 1, "n1": 0, "n2": 0, "n3": 0}
    got = rank_metrics(["n1", "r1", "n2", "n3", "r2", "r3"], qrel, k=5)
    precision_sum = 1 / 2 + 2 / 5  # 0.9
    assert got["map"] == pytest.approx(precision_sum / 4)  # 0.225: over every relevant item
    assert got["map_hits"] == pytest.approx(precision_sum / 2)  # 0.45: over the two hits
    # every relevant item within k: the two agree
    both = rank_metrics(["r1", "n1", "r2"], {"r1": 1, "r2": 1, "n1": 0}, k=3)
    assert both["map"] == both["map_hits"] == pytest.approx((1 + 2 / 3) / 2)
    # one hit at rank 1 and three relevant items missed: map_hits says 1.0, map 0.25
    lone = rank_metrics(["r1", "n1"], qrel, k=2)
    assert (lone["map"], lone["map_hits"]) == (pytest.approx(0.25), 1.0)


def test_linear_gain_differs_from_exponential():
    qrel = {"x": 3, "y": 1}
    linear = rank_metrics(["y", "x"], qrel, k=2, gain="linear")["ndcg"]
    exponential = rank_metrics(["y", "x"], qrel, k=2)["ndcg"]
    assert linear == pytest.approx((1 + 3 / LOG2_3) / (3 + 1 / LOG2_3))
    assert exponential == pytest.approx((1 + 7 / LOG2_3) / (7 + 1 / LOG2_3))


def test_no_relevant_item_scores_zero():
    zero = {"ndcg": 0.0, "map": 0.0, "map_hits": 0.0, "mrr": 0.0}
    assert rank_metrics(["a", "b"], {"a": 0, "b": 0}, k=5) == zero
    assert rank_metrics(["a"], {}, k=5) == zero


def test_relevance_is_grade_at_least_one_with_fractional_grades():
    # issue 16, point 9: the only graded candidate has grade 0.5, which is not relevant;
    # nDCG was 1.0 (ideal DCG from the 0.5 grade), MAP and MRR 0
    assert rank_metrics(["a", "b"], {"a": 0.5, "b": 0}, k=5) == {"ndcg": 0.0, "map": 0.0, "map_hits": 0.0, "mrr": 0.0}
    # a fractional grade >= 1 is relevant with its own gain; one below 1 brings none
    got = rank_metrics(["c", "a", "b"], {"a": 1.5, "b": 0.5, "c": 0.9}, k=3)
    gain = 2**1.5 - 1
    assert got["ndcg"] == pytest.approx((gain / LOG2_3) / gain)
    assert got["map"] == got["map_hits"] == pytest.approx(1 / 2)  # one relevant item, found at rank 2
    assert got["mrr"] == pytest.approx(1 / 2)
    linear = rank_metrics(["b", "a"], {"a": 1.5, "b": 0.5}, k=2, gain="linear")
    assert linear["ndcg"] == pytest.approx((1.5 / LOG2_3) / 1.5)


def test_k_larger_than_list():
    got = rank_metrics(["b", "a"], {"a": 1, "b": 0, "c": 1}, k=10, gain="linear")
    assert got["ndcg"] == pytest.approx((1 / LOG2_3) / (1 + 1 / LOG2_3))
    assert got["map"] == pytest.approx((1 / 2) / 2)  # c never retrieved still counts
    assert got["map_hits"] == pytest.approx(1 / 2)  # ... but not over the hits
    assert got["mrr"] == 0.5


def test_cut_at_k_ignores_later_hits():
    got = rank_metrics(["a", "b", "c"], {"c": 2}, k=2)
    assert got == {"ndcg": 0.0, "map": 0.0, "map_hits": 0.0, "mrr": 0.0}


def test_duplicates_count_once_and_string_ids_match_ints():
    assert unique([3, "3", 1, 3]) == [3, 1]
    got = rank_metrics([1, 1, 0], {"0": 1, "1": 0}, k=2)
    # after dedup: 1, 0 -> first relevant at rank 2
    assert got["mrr"] == 0.5


def test_empty_and_none_rankings():
    assert rank_metrics(None, {"a": 1}, k=3)["ndcg"] == 0.0
    assert rank_metrics([], {"a": 1}, k=3)["map"] == 0.0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"k": 0}, "k must be"),
        ({"k": 3, "gain": "cubic"}, "gain must be"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        rank_metrics(["a"], {"a": 1}, **kwargs)


@pytest.mark.parametrize("grade", ["high", None, -1, float("nan")])
def test_bad_grades(grade):
    with pytest.raises(ValueError, match="grade"):
        rank_metrics(["a"], {"a": grade}, k=3)


# --- parser -----------------------------------------------------------------------------

CANDIDATES = [0, 1, 2, 3, 4]
LABELS = {0: "DEF14A", 1: "10-K", 2: "10-Q", 3: "8-K", 4: "Earnings"}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[4, 2, 1, 0, 3]", [4, 2, 1, 0, 3]),
        ("```python\n[4, 2, 1, 0, 3]\n```", [4, 2, 1, 0, 3]),
        ("Here is my ranking: [2, 4, 1] because 10-Qs are quarterly.", [2, 4, 1]),
        ("['4', '2', \"1\"]", [4, 2, 1]),
        ("[4, 4, 2, 2, 1]", [4, 2, 1]),
        ("[9, 4, -1, 2, 17]", [4, 2]),
        ("[1st_most_relevant_index, 2nd_most_relevant_index, ...]\n[3, 1, 0]", [3, 1, 0]),
        ("[3, 1, 0]\nI echoed [1st_most_relevant_index, 2nd_most_relevant_index]", [3, 1, 0]),
        ("Reasoning: [0, 1] looked plausible, but final answer: [2, 1, 0]", [2, 1, 0]),
        ("[2, 1]\n\n[Document Index 4] Earnings is less useful", [2, 1]),
        ("Document Index 1: 10-K\nDocument Index 4: Earnings", [1, 4]),
        ("Ranking: 3, 1, 4", [3, 1, 4]),
        ("[[4, 2], [1]]", [1]),
        ("1. 10-K\n2. Earnings\n3. 10-Q", [1, 4, 2]),
        ("1. Northwind Corp\n2. 10-K\n3. 8-K\n4. 4-K", [1, 3]),
    ],
)
def test_parse_ranking_drift_formats(text, expected):
    assert parse_ranking(text, CANDIDATES, labels=LABELS) == expected


@pytest.mark.parametrize(
    "text",
    [None, "", "no list here", "[]", "[7, 8, 9]", "[a, b, c]", b"\xff\xfe\x00", 42, ["[1]"], "1. Apple\n2. Microsoft"],
)
def test_parse_ranking_failures(text):
    assert parse_ranking(text, CANDIDATES, labels=LABELS) is None


# issue 32: a numbered list of sentences that mention a candidate's name is prose, not a ranking
NUMBERED_SENTENCES = (
    "1. Northwind's cash flow from operations grew 12% in 2023.\n"
    "2. The company repaid most of its revolving credit.\n"
    "3. Margins improved on lower input costs.\n"
    "4. Diluted earnings per share rose to $2.10."
)


@pytest.mark.parametrize(
    "text, expected",
    [
        (NUMBERED_SENTENCES, None),
        ("1. The 10-K has the audited statements.\n2. The 8-K reports events.", None),
        ("1. Earnings per share\n2. 10-K filing", None),
        ("1. **10-K**: the annual report\n2. Earnings (the call)\n3. \"8-K\".", [1, 4, 3]),
        ("- 10-Q - the quarterly report\n* DEF14A, the proxy", [2, 0]),
        ("1. earnings\n2. def14a", [4, 0]),
    ],
)
def test_parse_ranking_reads_an_item_only_where_it_is_a_candidate_name(text, expected):
    assert parse_ranking(text, CANDIDATES, labels=LABELS) == expected


_WORDS = ["the", "company", "cash", "flow", "rose", "Earnings", "earnings", "10-K", "8-K", "per", "share", "DEF14A",
          "quarterly", "10-Q", "grew", "debt"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_WORDS), min_size=2, max_size=9), min_size=1, max_size=6),
       st.sampled_from(["{n}. ", "{n}) ", "- ", "* "]), st.sampled_from(["", ".", "!"]))
def test_numbered_sentences_are_not_a_ranking(sentences, marker, stop):
    """Sentences of two or more words, candidate names among them, are never read as a ranking."""
    text = "\n".join(marker.format(n=n) + " ".join(words) + stop for n, words in enumerate(sentences, start=1))
    assert parse_ranking(text, CANDIDATES, labels=LABELS) is None


@settings(max_examples=200, deadline=None)
@given(st.permutations(CANDIDATES), st.lists(st.sampled_from(["**{}**", "`{}`", '"{}"', "{}.", "{}: the filing",
                                                             "{} - why", "{} (why)", "{}, because"]), min_size=5,
                                             max_size=5))
def test_named_items_are_read_in_order(order, decorations):
    """Items that are candidate names, decorated or followed by a reason, give the ranking in order."""
    text = "\n".join(f"{n}. " + decoration.format(LABELS[cid])
                     for n, (cid, decoration) in enumerate(zip(order, decorations), start=1))
    assert parse_ranking(text, CANDIDATES, labels=LABELS) == list(order)


def test_parse_ranking_reads_the_first_part_of_a_huge_answer():
    text = ("noise [Chunk Index 3] " * 5_000) + "[4, 0]"  # 110k characters: read whole
    assert parse_ranking(text, CANDIDATES) == [4, 0]
    # past MAX_ANSWER_CHARS the list is not read: the mentions before the cut are the ranking
    assert parse_ranking(("noise [Chunk Index 3] " * 50_000) + "[4, 0]", CANDIDATES) == [3]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=400), st.binary(max_size=200), st.none(), st.integers()))
def test_parse_ranking_never_crashes(text):
    ranking = parse_ranking(text, CANDIDATES, labels=LABELS)
    assert ranking is None or (ranking and set(ranking) <= set(CANDIDATES) and len(set(ranking)) == len(ranking))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=-3, max_value=12), max_size=20),
    st.text(max_size=40),
    st.text(max_size=40),
)
@example(ids=[0], before="\x9d", after="\x07")  # a C1 OSC introducer and a BEL lines apart: no escape string
def test_parse_ranking_finds_a_list_in_prose(ids, before, after):
    before, after = before.replace("[", "").replace("]", ""), after.replace("[", "").replace("]", "")
    text = f"{before}\n[{', '.join(map(str, ids))}]\n{after}"
    expected = unique(i for i in ids if i in CANDIDATES)
    if expected:
        assert parse_ranking(text, CANDIDATES) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(max_size=3), max_size=12),
    st.dictionaries(
        st.text(max_size=3), st.one_of(st.integers(min_value=0, max_value=4), st.floats(min_value=0, max_value=4)),
        max_size=12,
    ),
    st.integers(min_value=1, max_value=20),
    st.sampled_from(["exponential", "linear"]),
)
def test_metrics_stay_in_unit_interval(ranking, qrel, k, gain):
    scores = rank_metrics(ranking, qrel, k=k, gain=gain)
    assert all(0.0 <= v <= 1.0 + 1e-12 for v in scores.values())


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from("abcdefghij"), max_size=12),
    st.dictionaries(st.sampled_from("abcdefghij"), st.integers(min_value=0, max_value=3), max_size=10),
    st.integers(min_value=1, max_value=12),
)
def test_map_over_the_hits_properties(ranking, qrel, k):
    got = rank_metrics(ranking, qrel, k=k)
    top = unique(ranking)[:k]
    hits = [rank for rank, item in enumerate(top, 1) if qrel.get(item, 0) >= 1]
    n_relevant = sum(g >= 1 for g in qrel.values())
    # never below trec_eval's; scaled by relevant / hits exactly; zero exactly when nothing is found
    assert got["map_hits"] >= got["map"] - 1e-12
    assert got["map_hits"] * len(hits) == pytest.approx(got["map"] * n_relevant)
    assert (got["map_hits"] > 0) == bool(hits) == (got["mrr"] > 0)
    # the two agree when every relevant item is within k
    if len(hits) == n_relevant:
        assert got["map_hits"] == pytest.approx(got["map"])
    # 1.0 exactly when the hits fill the first ranks (then map is the share of relevant items found)
    assert (got["map_hits"] == pytest.approx(1.0)) == (bool(hits) and hits == list(range(1, len(hits) + 1)))


def test_perfect_ranking_scores_one():
    qrel = {"a": 2, "b": 1, "c": 0}
    assert rank_metrics(["a", "b", "c"], qrel, k=3) == {"ndcg": 1.0, "map": 1.0, "map_hits": 1.0, "mrr": 1.0}


# --- agreement with trec_eval -----------------------------------------------------------


def _random_query(rng):
    n = rng.randint(1, 30)
    docs = [f"d{i}" for i in range(n)]
    qrel = {d: rng.choice([0, 0, 1, 2, 3]) for d in rng.sample(docs, rng.randint(1, n))}
    ranking = rng.sample(docs, rng.randint(1, n))
    return qrel, ranking


@pytest.mark.parametrize("k", [1, 3, 5, 10, 100])
def test_agrees_with_pytrec_eval(k):
    rng = random.Random(k)
    qrels, runs, ours = {}, {}, {}
    for q in range(300):
        qrel, ranking = _random_query(rng)
        qid = f"q{q}"
        qrels[qid] = qrel
        # distinct descending scores: trec_eval orders by score, so ties cannot reorder
        runs[qid] = {doc: float(len(ranking) - i) for i, doc in enumerate(ranking)}
        ours[qid] = rank_metrics(ranking, qrel, k=k, gain="linear")
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {f"ndcg_cut.{k}", f"map_cut.{k}", "recip_rank", f"P.{k}", "num_rel"}
    )
    theirs = evaluator.evaluate(runs)
    for qid, scores in ours.items():
        assert scores["ndcg"] == pytest.approx(theirs[qid][f"ndcg_cut_{k}"], abs=1e-9)
        assert scores["map"] == pytest.approx(theirs[qid][f"map_cut_{k}"], abs=1e-9)
        # map_hits from trec_eval's own counts: map_cut x relevant items / relevant items in the
        # top k (P@k x k: trec_eval divides P@k by k however short the ranking)
        hits = round(theirs[qid][f"P_{k}"] * k)
        expected = theirs[qid][f"map_cut_{k}"] * theirs[qid]["num_rel"] / hits if hits else 0.0
        assert scores["map_hits"] == pytest.approx(expected, abs=1e-9)
        if k >= 100:  # recip_rank has no cut; with k past every ranking they must agree
            assert scores["mrr"] == pytest.approx(theirs[qid]["recip_rank"], abs=1e-9)
