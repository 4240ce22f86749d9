"""FinCARDS stage logic: hand-computed cases for the pure functions, tolerant parsers, and the
whole pipeline driven by a deterministic lexical judge (tests/fincards_fixtures.py)."""

import dataclasses
import json
import math
import random
import re

import bm25s
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lm_eval_fin.benchmarks.fin_agentbench import rerank as cli
from lm_eval_fin.benchmarks.fin_agentbench.rerank import queries_from_records
from lm_eval_fin.rerank import (
    VARIANTS,
    FinCardsConfig,
    bm25,
    cardview,
    corecard,
    doctype,
    rules,
    run_fincards,
    screening,
    tournament,
    zeroshot,
)
from lm_eval_fin.rerank.audit import card_matches, fill_ranking
from lm_eval_fin.rerank.cards import card_request, chunk_key, fallback_card, parse_card
from lm_eval_fin.rerank.cardview import fills_quota as satisfies_quota
from lm_eval_fin.rerank.intent import coverage_quotas, parse_intent
from lm_eval_fin.rerank.screening import Pick, group_picks, merge_picks, parse_selection, round_robin_groups
from lm_eval_fin.rerank.tournament import (
    Tournament,
    balanced_sizes,
    borda_points,
    group_size,
    jaccard,
    parse_listwise,
    rank_variance,
    round_points,
)
from lm_eval_fin.text.jsontext import as_enum, as_id, parse_json_object
from tests.finagentbench_fixtures import chunk_prompt, write_jsonl
from tests.fincards_fixtures import COVER_10Q, FILING, QUERIES, LexicalJudge, filing_records, write_filing
from tests.openai_server import ServerProcess, closed_port

# ---------------------------------------------------------------------------------------------
# Stage 1


@pytest.mark.parametrize(
    "chunks, expected",
    [(0, 0), (1, 1), (59, 59), (60, 60), (100, 60), (119, 60), (120, 60), (121, 61), (250, 125), (300, 150), (301, 150), (5000, 150)],
)
def test_candidate_count_clamps_half_the_filing_between_60_and_150(chunks, expected):
    assert bm25.candidate_count(chunks) == expected


def test_equal_bm25_scores_keep_document_order():
    chunks = {0: "cash flow", 1: "net revenue growth", 2: "cash flow", 3: "nothing relevant", 4: "revenue"}
    stage = bm25.bm25_stage("revenue cash", chunks)
    assert stage.scores[0] == stage.scores[2]
    assert stage.order.index(0) < stage.order.index(2)
    assert stage.order[-1] == 3  # no query word: last


def test_bm25_stage_cuts_at_k_and_ranks_by_bm25():
    chunks = {i: f"filler text number {i}" + (" revenue" * (i % 3)) for i in range(130)}
    stage = bm25.bm25_stage("revenue", chunks)
    assert len(stage.candidates) == 65  # ceil(0.5 * 130)
    assert stage.candidates == stage.order[:65]
    assert all(stage.scores[c] >= stage.scores[d] for c, d in zip(stage.order, stage.order[1:]))


CORPUS = [
    "Total revenue increased 8 percent to 1.2 billion dollars in fiscal 2025.",
    "Revenue from the pumps segment grew while water revenue was flat.",
    "The company repurchased shares and paid a quarterly dividend.",
    "Gross margin declined as steel prices increased; revenue rose.",
    "Risk factors: we depend on a small number of suppliers.",
    "Operating cash flow was 148 million dollars in fiscal 2025.",
    "Net income rose to 96 million dollars, or 2.41 per diluted share.",
    "Revenue revenue revenue recognition policy: revenue is recognised at delivery.",
]
QUESTION = "How did total revenue change in fiscal 2025?"


def test_bm25_stage_agrees_with_bm25s_own_retrieval():
    tokens = bm25s.tokenize(CORPUS, lower=True, token_pattern=r"(?u)\b\w+\b", stopwords=None,
                            return_ids=False, show_progress=False)
    retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    retriever.index(tokens, show_progress=False)
    query = bm25s.tokenize([QUESTION], lower=True, token_pattern=r"(?u)\b\w+\b", stopwords=None,
                           return_ids=False, show_progress=False)
    docs, scores = retriever.retrieve(query, k=len(CORPUS), show_progress=False)
    matched = [int(d) for d, s in zip(docs[0], scores[0]) if s > 0]
    assert len(matched) == len(set(scores[0][scores[0] > 0].round(5))) >= 5  # no ties among matches
    stage = bm25.bm25_stage(QUESTION, dict(enumerate(CORPUS)))
    assert list(stage.order[: len(matched)]) == matched
    assert list(stage.order[len(matched):]) == sorted(set(range(len(CORPUS))) - set(matched))  # doc order


def test_bm25_scores_are_the_public_codes_okapi_up_to_the_constant_k1_plus_1():
    docs = [bm25.tokenize(t) for t in CORPUS]
    avgdl = sum(map(len, docs)) / len(docs)

    def okapi(doc):
        total = 0.0
        for term in bm25.tokenize(QUESTION):
            df = sum(term in d for d in docs)
            if term not in doc:
                continue
            idf = math.log((len(docs) - df + 0.5) / (df + 0.5) + 1.0)
            tf = doc.count(term)
            total += idf * tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * len(doc) / avgdl))
        return total

    ours = bm25.FilingIndex(dict(enumerate(CORPUS))).scores(QUESTION)
    for i, doc in enumerate(docs):
        assert ours[i] * 2.5 == pytest.approx(okapi(doc), rel=1e-5)


def test_bm25_survives_empty_chunks_and_questions():
    assert bm25.FilingIndex({}).scores("revenue") == {}
    assert bm25.FilingIndex({0: "a", 1: "b"}).scores("") == {0: 0.0, 1: 0.0}
    assert bm25.FilingIndex({0: "", 1: "!!!"}).scores("revenue") == {0: 0.0, 1: 0.0}
    assert bm25.FilingIndex({0: "revenue", 1: ""}).scores("unseen words") == {0: 0.0, 1: 0.0}


# ---------------------------------------------------------------------------------------------
# Stage 2


def test_round_robin_deals_bm25_order_across_groups():
    groups = round_robin_groups(list(range(60)))
    assert [len(g) for g in groups] == [20, 20, 20]
    assert groups[0][:4] == [0, 3, 6, 9] and groups[2][-1] == 59
    assert round_robin_groups(list(range(25))) == [list(range(25))]
    assert [len(g) for g in round_robin_groups(list(range(26)))] == [13, 13]
    assert round_robin_groups([]) == []


def test_keep_bounds_shrink_with_small_groups():
    assert screening.keep_bounds(25) == (8, 15)
    assert screening.keep_bounds(12) == (8, 12)
    assert screening.keep_bounds(3) == (3, 3)


def test_union_keeps_the_maximum_score_and_breaks_ties_by_bm25():
    picks = [Pick(7, 60, 0), Pick(3, 80, 1), Pick(7, 90, 2, "better"), Pick(5, 80, 0), Pick(9, 10, 1)]
    merged = merge_picks(picks, bm25_rank={3: 2, 5: 1, 7: 3, 9: 4}, top_n=3)
    assert [(p.chunk, p.score, p.reason) for p in merged] == [(7, 90, "better"), (5, 80, ""), (3, 80, "")]


def _card(table=False, time_columns=False, periods=(), role="primary_evidence", definition=False):
    card = fallback_card("x")
    card.update(role=role, source="judge")
    card["temporal"]["periods"] = list(periods)
    card["verifiability"]["table"].update(present=table, time_columns=time_columns)
    card["measurement"]["definition_present"] = definition
    return card


def test_quotas_are_filled_from_the_group_when_the_judge_misses_them():
    cards = {1: _card(), 2: _card(), 3: _card(table=True, time_columns=True), 4: _card(table=True, time_columns=True),
             5: _card(role="definition")}
    group = [1, 2, 3, 4, 5]  # BM25 order
    picks = group_picks(0, group, [(1, 90.0, "a"), (2, 70.0, "b")], cards, ["trend", "definition"], low=2)
    assert [(p.chunk, p.score, p.via) for p in picks] == [
        (1, 90.0, "judge"), (2, 70.0, "judge"), (3, 70.0, "quota:trend"), (5, 70.0, "quota:definition")
    ]
    # a selection that already fills the quota is left alone
    assert len(group_picks(0, group, [(4, 50.0, "")], cards, ["trend"], low=1)) == 1


def test_an_unparsable_group_keeps_its_bm25_head_at_score_zero_and_its_quotas():
    cards = {9: _card(), 8: _card(), 7: _card(table=True, time_columns=True)}
    picks = group_picks(2, [9, 8, 7], None, cards, ["trend"], low=2)
    assert [(p.chunk, p.score, p.group, p.via) for p in picks] == [
        (9, 0.0, 2, "fallback"), (8, 0.0, 2, "fallback"), (7, 0.0, 2, "quota:trend")
    ]
    assert len(group_picks(2, [9, 8, 7], None, cards, [], low=2)) == 2


def test_a_judge_keeping_fewer_than_the_minimum_is_topped_up_by_bm25():
    group = list(range(20, 30))  # BM25 order
    cards = {c: _card() for c in group}
    picks = group_picks(1, group, [(23, 80.0, "x"), (27, 40.0, "y")], cards, [], low=8)
    # the two judged picks, then the best six others by BM25, at the lowest judged score
    assert [(p.chunk, p.score, p.via) for p in picks] == [
        (23, 80.0, "judge"), (27, 40.0, "judge"),
        (20, 40.0, "pad"), (21, 40.0, "pad"), (22, 40.0, "pad"), (24, 40.0, "pad"), (25, 40.0, "pad"), (26, 40.0, "pad"),
    ]
    # a group smaller than the minimum is asked to be kept whole, so it is padded to all of it
    small = group_picks(0, [1, 2, 3], [(2, 70.0, "")], {c: _card() for c in (1, 2, 3)}, [], low=8)
    assert [(p.chunk, p.via) for p in small] == [(2, "judge"), (1, "pad"), (3, "pad")]
    # enough picks: nothing added
    enough = [(c, 50.0, "") for c in group[:8]]
    assert all(p.via == "judge" for p in group_picks(0, group, enough, cards, [], low=8))


def test_a_quota_chunk_survives_the_top_n_cut():
    cards = {c: _card() for c in (1, 2, 3, 4)}
    cards[5] = _card(table=True, time_columns=True)
    picks = [Pick(1, 90, 0), Pick(2, 80, 0), Pick(3, 70, 1), Pick(4, 60, 1), Pick(5, 60, 1, via="quota:trend")]
    bm25_rank = {1: 1, 2: 2, 3: 3, 4: 4, 5: 5}
    # without the quota the cut keeps 1, 2, 3 and the trend chunk (lowest score, worst BM25) is lost
    assert [p.chunk for p in merge_picks(picks, bm25_rank, top_n=3)] == [1, 2, 3]
    kept = merge_picks(picks, bm25_rank, top_n=3, quotas=["trend"], cards=cards)
    assert [(p.chunk, p.via) for p in kept] == [(1, "judge"), (2, "judge"), (5, "quota:trend")]
    assert "top-3 cut for the trend quota" in kept[-1].reason
    # a quota already met inside the cut changes nothing
    assert [p.chunk for p in merge_picks(picks, bm25_rank, top_n=5, quotas=["trend"], cards=cards)] == [1, 2, 3, 4, 5]


def test_the_cut_never_swaps_out_a_chunk_that_fills_another_quota():
    cards = {1: _card(), 2: _card(role="definition"), 3: _card(table=True, time_columns=True)}
    picks = [Pick(1, 90, 0), Pick(2, 80, 0), Pick(3, 10, 1)]
    kept = merge_picks(picks, {1: 1, 2: 2, 3: 3}, top_n=2, quotas=["trend", "definition"], cards=cards)
    # the last kept chunk (2) holds the definition quota, so the trend chunk replaces 1
    assert [p.chunk for p in kept] == [2, 3]
    # no chunk outside the cut fills the quota: the cut stands
    assert [p.chunk for p in merge_picks(picks[:2], {1: 1, 2: 2}, top_n=1, quotas=["trend"], cards=cards)] == [1]


def test_quota_rules():
    assert satisfies_quota(_card(table=True, time_columns=True), "trend")
    assert satisfies_quota(_card(table=True, periods=["FY2024", "FY2025"]), "trend")
    assert not satisfies_quota(_card(table=False, time_columns=True), "trend")
    assert satisfies_quota(_card(definition=True), "definition")
    assert not satisfies_quota(_card(), "definition")
    assert coverage_quotas({"relation": "trend"}, "") == ["trend"]
    assert coverage_quotas({"relation": "policy"}, "") == ["definition"]
    assert coverage_quotas({"relation": "lookup"}, "How did revenue change?") == []  # the intent decides
    assert coverage_quotas(None, "How did revenue change year over year?") == ["trend"]
    assert coverage_quotas(None, "What was revenue in the second quarter?") == []


def test_an_intent_without_a_known_relation_falls_back_to_keyword_quotas():
    for answer in ('{"topic": "Revenue", "metrics": ["revenue"]}', '{"topic": "Revenue", "relation": "growth"}'):
        intent = parse_intent(answer)
        assert intent is not None and intent["relation"] is None
        assert coverage_quotas(intent, "How did revenue change year over year?") == ["trend"]
        assert coverage_quotas(intent, "What was revenue in 2025?") == []
    # a relation the intent does name still decides, keywords or not
    assert coverage_quotas(parse_intent('{"relation": "lookup"}'), "How did revenue change year over year?") == []
    # the audit labels follow the same quotas
    card = _card(table=True, time_columns=True)
    assert "fits trend quota" in card_matches(card, "How did revenue change?", parse_intent('{"topic": "Revenue"}'))


# ---------------------------------------------------------------------------------------------
# Stage 3


@pytest.mark.parametrize("n, size", [(1, 1), (15, 15), (16, 15), (30, 15), (31, 15), (40, 20), (50, 25), (51, 25), (150, 25)])
def test_stage3_group_size(n, size):
    assert group_size(n) == size


@pytest.mark.parametrize(
    "n, sizes",
    [
        (1, [1]), (15, [15]),
        (16, [8, 8]),  # target 15: 15 + 1 would leave a group of one
        (31, [11, 10, 10]),  # target 15: 15 + 15 + 1
        (33, [11, 11, 11]),  # target 16: 16 + 16 + 1
        (35, [12, 12, 11]),  # target 17: 17 + 17 + 1
        (49, [17, 16, 16]),  # target 24: 24 + 24 + 1
        (40, [20, 20]), (50, [25, 25]),
        (51, [17, 17, 17]),  # target 25: 25 + 25 + 1
        (150, [25] * 6),
    ],
)
def test_stage3_groups_are_balanced_around_the_target_size(n, sizes):
    assert balanced_sizes(n, group_size(n)) == sizes
    groups = tournament.regroup(list(range(n)), group_size(n), random.Random("0"))
    assert [len(g) for g in groups] == sizes and sorted(c for g in groups for c in g) == list(range(n))


def test_no_stage3_round_has_a_group_of_one_or_uneven_groups():
    for n in range(2, 201):
        sizes = balanced_sizes(n, group_size(n))
        assert sum(sizes) == n and max(sizes) - min(sizes) <= 1 and min(sizes) >= 2, n
        assert len(sizes) == math.ceil(n / group_size(n)), n


def test_regrouping_is_seeded_and_covers_every_candidate():
    items = list(range(40))
    first = tournament.regroup(items, 20, random.Random("7"))
    assert first == tournament.regroup(items, 20, random.Random("7"))
    assert first != tournament.regroup(items, 20, random.Random("8"))
    assert sorted(c for g in first for c in g) == items and [len(g) for g in first] == [20, 20]


def test_normalised_borda_points():
    assert [borda_points(5, r) for r in range(1, 6)] == [1.0, 0.75, 0.5, 0.25, 0.0]
    assert borda_points(1, 1) == 0.5  # a group of one carries no comparison
    assert round_points([["a", "b", "c"], ["d", "e"], ["f"]]) == {"a": 1.0, "b": 0.5, "c": 0.0, "d": 1.0, "e": 0.0, "f": 0.5}


class _Scripted:
    """Answers each planned group with a fixed preference order."""

    def __init__(self, preference):
        self.preference = preference

    def __call__(self, groups):
        return [sorted(g, key=self.preference.index) for g in groups]


def test_borda_sums_over_rounds_and_ties_keep_prior_order():
    t = Tournament(list("abcd"), seed=1, top_k=2, max_rounds=2)
    # round 1: [a, b] [c, d]; round 2: [b, c] [d, a]  (hand-made groups, not planned ones)
    t.record_round([["a", "b"], ["c", "d"]], [["a", "b"], ["c", "d"]])
    t.record_round([["b", "c"], ["d", "a"]], [["b", "c"], ["d", "a"]])
    assert t.points() == {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0}
    assert t.final_order() == list("abcd")  # all tied: prior order
    assert t.stopped == "max_rounds"


def test_jaccard_stop_needs_two_agreeing_rounds():
    assert jaccard({1, 2, 3}, {1, 2, 4}) == 0.5
    assert jaccard(set(), set()) == 1.0
    pool = list(range(12))  # one group per round: a consistent judge gives identical rounds
    answer = _Scripted(pool)
    t = Tournament(pool, seed=0, top_k=5)
    while not t.finished:
        groups = t.plan_round()
        t.record_round(answer(groups), groups)
    assert t.stopped == "converged" and len(t.rounds) == 2 and t.similarities == [None, 1.0]
    assert t.final_order() == pool and t.rank_variance() == 0.0 and t.variance_measured


def test_stop_rule_compares_the_aggregate_top_k_of_consecutive_rounds():
    t = Tournament(list("abcdef"), seed=0, top_k=2, max_rounds=5)
    groups = [list("abc"), list("def")]
    t.record_round([list("abc"), list("def")], groups)  # aggregate top 2: a, d
    t.record_round([list("cba"), list("fed")], groups)  # all tied at 1: prior order a, b
    assert t.similarities == [None, pytest.approx(1 / 3)] and not t.finished
    t.record_round([list("abc"), list("def")], groups)  # a, d lead again: top 2 {a, d}
    assert t.similarities[-1] == pytest.approx(1 / 3)
    t.record_round([list("abc"), list("dfe")], groups)  # a 3, d 3: top 2 {a, d} again
    assert t.similarities[-1] == 1.0 and t.stopped == "converged" and len(t.rounds) == 4


def test_random_answers_report_rank_variance():
    pool = list(range(30))
    rng = random.Random(3)
    t = Tournament(pool, seed=0, top_k=5, max_rounds=4)
    while not t.finished:
        groups = t.plan_round()
        t.record_round([rng.sample(g, len(g)) for g in groups], groups)
    assert 2 <= len(t.rounds) <= 4
    assert t.stopped == ("converged" if t.similarities[-1] >= 0.9 else "max_rounds")
    assert t.rank_variance() > 0


def test_rank_variance_by_hand():
    # normalised ranks (r - 1) / (g - 1) in groups of 3: a at 0, 0.5, 0; b at 0.5, 0, 1
    rounds = [[["a", "b", "c"]], [["b", "a", "c"]], [["a", "c", "b"]]]
    var_a = ((0 - 1 / 6) ** 2 * 2 + (0.5 - 1 / 6) ** 2) / 2  # sample variance: n - 1 = 2
    var_b = ((0.5 - 0.5) ** 2 + (0 - 0.5) ** 2 + (1 - 0.5) ** 2) / 2
    assert rank_variance(rounds, ["a", "b"]) == pytest.approx((var_a + var_b) / 2)
    assert rank_variance(rounds, ["a"]) == pytest.approx(1 / 12)
    # a chunk placed alike in every round has none, whatever its group
    assert rank_variance([[["a", "b"], ["c", "d"]], [["a", "c"], ["b", "d"]]], ["a"]) == 0.0
    assert rank_variance([], ["a"]) is None and rank_variance(rounds, []) is None


def test_one_round_gets_the_variance_of_a_random_ranking_in_its_groups():
    # a uniformly random rank in a group of g: (g + 1) / (12 (g - 1)); 1/4 for g = 2
    assert tournament.random_rank_variance(2) == 0.25
    assert tournament.random_rank_variance(3) == pytest.approx(sum((x - 0.5) ** 2 for x in (0, 0.5, 1)) / 3)
    assert tournament.random_rank_variance(1001) == pytest.approx(1 / 12, rel=1e-2)
    assert rank_variance([[["a", "b"], ["c", "d", "e"]]], ["a", "c"]) == pytest.approx((0.25 + 4 / 24) / 2)
    t = Tournament(list(range(12)), seed=0, top_k=3, max_rounds=1)
    groups = t.plan_round()
    t.record_round([sorted(g) for g in groups], groups)
    assert t.finished and not t.variance_measured
    assert t.rank_variance() == pytest.approx(13 / (12 * 11))  # one group of 12
    assert Tournament([5], seed=0, top_k=3).rank_variance() is None  # nothing to rank


def test_rank_variance_measures_how_a_top_chunk_moves_between_rounds():
    t = Tournament(list("abcd"), seed=0, top_k=2, max_rounds=3)
    t.record_round([list("ab"), list("cd")], [list("ab"), list("cd")])  # a 1, c 1, b 0, d 0
    t.record_round([list("ca"), list("bd")], [list("ac"), list("bd")])  # c 1, b 1, a 0, d 0
    # running totals: after round 1 a, c, b, d; after round 2 c 2, a 1, b 1, d 0: c, a, b, d
    assert t.running_orders == [list("acbd"), list("cabd")]
    assert t.final_order()[:2] == ["c", "a"] and t.stopped == "converged" and t.variance_measured
    # normalised ranks: c first both times (0, 0), a first then last (0, 1): variances 0 and 0.5
    assert t.rank_variance() == pytest.approx(0.25)
    assert t.running_positions("c") == [2, 1] and t.round_positions("a") == [1, 3]


def test_fixed_grouping_keeps_the_members_and_shuffles_the_order():
    fixed = Tournament(list(range(40)), seed=1, top_k=5, regroup=False)
    first = fixed.plan_round()
    fixed.record_round(first, first)
    second = fixed.plan_round()
    assert [sorted(g) for g in second] == [sorted(g) for g in first] and second != first
    moving = Tournament(list(range(40)), seed=1, top_k=5)
    groups = moving.plan_round()
    moving.record_round(groups, groups)
    assert [sorted(g) for g in moving.plan_round()] != [sorted(g) for g in groups]


def _one_round(aggregation):
    t = Tournament(list("abcdef"), seed=0, top_k=2, max_rounds=1, aggregation=aggregation)
    groups = [list("ab"), list("cdef")]
    t.record_round(groups, groups)
    return t


def test_mean_rank_and_votes_aggregate_differently_from_borda():
    # groups of 2 and 4: Borda normalises by size (b last of 2 scores 0, d second of 4 scores 2/3)
    assert _one_round("borda").final_order() == list("acdebf")
    # mean raw rank: a 1, c 1, b 2, d 2, e 3, f 4
    assert _one_round("mean_rank").final_order() == list("acbdef")
    # votes for each group's share of the top 2: ceil(2 * 2 / 6) = 1 of a, ceil(2 * 4 / 6) = 2 of c, d
    assert _one_round("votes").points() == {"a": 1.0, "b": 0.0, "c": 1.0, "d": 1.0, "e": 0.0, "f": 0.0}
    assert _one_round("votes").final_order() == list("acdbef")
    with pytest.raises(ValueError, match="aggregation"):
        Tournament(list("ab"), seed=0, top_k=1, aggregation="median")


def test_no_early_stop_runs_every_round():
    pool = list(range(12))
    for early_stop, rounds in ((True, 2), (False, 5)):
        t = Tournament(pool, seed=0, top_k=5, early_stop=early_stop)
        while not t.finished:
            groups = t.plan_round()
            t.record_round(_Scripted(pool)(groups), groups)
        assert len(t.rounds) == rounds and t.rank_variance() == 0.0


def test_unparsable_and_partial_group_answers_fall_back_to_prior_order():
    t = Tournament([5, 6, 7, 8], seed=0, top_k=2, max_rounds=1)
    t.record_round([None, [8]], [[7, 5], [8, 6]])
    assert t.rounds[0] == [[5, 7], [8, 6]]


# ---------------------------------------------------------------------------------------------
# Parsers


def test_json_objects_are_found_and_truncated_ones_repaired():
    assert parse_json_object('```json\n{"a": [1, 2]}\n```') == {"a": [1, 2]}
    assert parse_json_object('Here: {"a": 1} and {"b": 2}') == {"a": 1}
    assert parse_json_object('{"a": {"b": [1, 2, {"c": "unfinished') == {"a": {"b": [1, 2]}}
    assert parse_json_object('{"score": 8') is None  # a number cut by the budget is not trusted
    assert parse_json_object('{"n": 85, "m": tr') == {"n": 85}
    assert parse_json_object("[1, 2, 3]") is None
    assert parse_json_object(None) is None and parse_json_object(b'{"x": 1}') == {"x": 1}


def test_enums_ids_and_cards_are_read_tolerantly():
    assert as_enum("Non GAAP", ("GAAP", "non-GAAP"), "unknown") == "non-GAAP"
    assert as_enum(3, ("a",), "d") == "d"
    assert as_id("[Chunk Index 12]") == 12 and as_id(True) is None
    card = parse_card(
        '{"role": "Primary Evidence", "evidence_type": "table_numeric", "sketch": "Revenue by segment",'
        ' "answerability": {"trend": 7}, "verifiability": {"numeric_claim": "yes", "table": {"present": true}},'
        ' "risk": {"limitations": ["no_period", "made_up"]}, "temporal": {"periods": "FY2024"}}'
    )
    assert card["role"] == "primary_evidence" and card["answerability"]["trend"] == 1.0
    assert card["verifiability"]["numeric_claim"] is True and card["verifiability"]["table"]["present"] is True
    assert card["risk"]["limitations"] == ["no_period"] and card["temporal"]["periods"] == ["FY2024"]
    assert parse_card("not a card") is None and parse_card('{"unrelated": 1}') is None


def test_card_requests_depend_on_the_chunk_only():
    a, b = card_request("Revenue was $5 million.", 64), card_request("Revenue was $5 million.", 64)
    assert a == b and "Revenue was $5 million." in a.messages[-1]["content"]
    assert chunk_key("x") == chunk_key("x") != chunk_key("y")


def test_the_llm_prompt_shares_a_character_budget_between_its_chunks():
    assert zeroshot.chunk_chars(60) == 1500  # 90,000 / 60 = 1,500: the per-chunk maximum
    assert zeroshot.chunk_chars(150) == 600  # 90,000 / 150
    assert zeroshot.chunk_chars(40) == 1500  # 2,250 capped at the maximum
    assert zeroshot.chunk_chars(100, prompt_chars=30_000, most=200) == 200
    long_text = "revenue " * 300  # 2,400 characters
    for candidates, limit in ((150, 600), (60, 1500)):
        chunks = {i: long_text for i in range(candidates)}
        request = zeroshot.zeroshot_request("revenue?", chunks, list(chunks), 10, 256)
        blocks = re.findall(r"^\[Chunk Index \d+\] (.*)$", request.messages[-1]["content"], re.MULTILINE)
        assert len(blocks) == candidates
        assert all(limit - 10 <= len(block) <= limit + 2 for block in blocks)  # " …" marks the cut
    body = zeroshot.zeroshot_request("revenue?", {i: long_text for i in range(150)}, list(range(150)), 10, 256)
    assert len(body.messages[-1]["content"]) < 90_000 + 150 * 20 + 200


def test_selection_and_listwise_parsers():
    text = '{"selected": [{"id": "[Chunk Index 4]", "score": 100}, {"id": 4, "score": 1}, {"id": 2}, {"id": 99, "score": 5}]}'
    assert parse_selection(text, [2, 4]) == [(4, 100.0, ""), (2, 50.0, "")]
    assert parse_selection(text.replace("100", "140"), [2, 4]) is None  # off the 0-100 scale: no verdict
    assert parse_selection('{"selected": []}', [1]) is None
    assert parse_listwise('{"ranking": [3, 3, 1]}', [1, 2, 3]) == [3, 1]
    assert parse_listwise("```\n[2, 1]\n```", [1, 2, 3]) == [2, 1]
    assert parse_listwise("no idea", [1, 2]) is None


def test_intent_parser_and_fallback_fields():
    intent = parse_intent('{"topic": "revenue", "relation": "comparison", "temporal": {"periods": ["FY2024", 2025]}}')
    assert intent["topic"] == "Revenue" and intent["relation"] == "comparison"
    assert intent["temporal"]["periods"] == ["FY2024", "2025"] and intent["numeric"] is False
    assert parse_intent("[]") is None


JUNK = st.one_of(st.none(), st.text(max_size=400), st.binary(max_size=400), st.integers(), st.lists(st.integers()))


@settings(max_examples=150, deadline=None)
@given(JUNK)
def test_parsers_never_raise_on_junk(junk):
    for value in (parse_json_object(junk), parse_card(junk), parse_intent(junk), corecard.parse_card(junk, "$5 million")):
        assert value is None or isinstance(value, dict)
    core = corecard.parse_card(junk, "Revenue was $5 million in 2025.")
    assert core is None or all(rules.verbatim(span, "Revenue was $5 million in 2025.") for span in core["numeric_spans"])
    assert parse_selection(junk, [1, 2, 3]) is None or all(c in (1, 2, 3) for c, _, _ in parse_selection(junk, [1, 2, 3]))
    assert parse_listwise(junk, [1, 2, 3]) is None or set(parse_listwise(junk, [1, 2, 3])) <= {1, 2, 3}


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                    max_leaves=20),
       st.integers(min_value=1, max_value=200))
def test_truncated_json_objects_repair_to_a_dict_or_nothing(value, cut):
    text = json.dumps({"payload": value})
    repaired = parse_json_object(text[:cut])
    assert repaired is None or isinstance(repaired, dict)
    assert parse_json_object(text) == {"payload": value}


@settings(max_examples=80, deadline=None)
@given(st.lists(st.text(alphabet="$%.,0123456789 abcmillion\n", max_size=20), max_size=12),
       st.text(alphabet="$%.,0123456789 abcmillion\n", max_size=200))
def test_a_core_card_keeps_exactly_the_spans_its_chunk_holds(spans, chunk):
    card = corecard.parse_card(json.dumps({"numeric_spans": spans}), chunk)
    kept, dropped = card["numeric_spans"], card["checks"]["spans_dropped"]
    assert all(rules.has_digit(s) and rules.squash(s) in rules.squash(chunk) for s in kept)
    assert all(not rules.has_digit(s) or rules.squash(s) not in rules.squash(chunk) for s in dropped)
    written = [s.strip() for s in spans if s.strip()]
    assert len(kept) + len(dropped) <= len(written) and set(kept) | set(dropped) <= set(written)
    assert all(rules.squash(chunk[a:b]).lower() == rules.squash(v).lower() or f == "period"
               for f, v, (a, b) in ((e["field"], e["value"], e["span"]) for e in card["evidence"]))


def test_megabyte_inputs_are_handled():
    big = "{" + '"a": [' * 50_000 + "1" + "x" * 1_000_000
    assert parse_json_object(big) is None or isinstance(parse_json_object(big), dict)
    assert parse_card("y" * 1_000_000) is None
    assert bm25.FilingIndex({0: "revenue " * 100_000, 1: "cost"}).scores("revenue")[0] > 0


# ---------------------------------------------------------------------------------------------
# Audit helpers


def test_card_matches_flag_period_mismatches():
    card = _card(periods=["FY2022"])
    card["sketch"] = "Gross margin for fiscal 2022"
    labels = card_matches(card, "What was gross margin in 2024?",
                          {"metrics": ["gross margin"], "entities": [], "keywords": [], "temporal": {"periods": ["FY2024"]},
                           "numeric": False, "relation": "lookup"})
    assert labels == ["metric:gross margin", "period mismatch (asks 2024; card 2022)"]
    assert card_matches(card, "gross margin trend", None) == ["term:gross", "term:margin"]
    assert fill_ranking([3], [1, 2, 3]) == [3, 1, 2]


# ---------------------------------------------------------------------------------------------
# The pipeline with the lexical judge

SMALL = FinCardsConfig(group_size=3, min_keep=1, max_keep=2, top_n=4)
ALL_KINDS = {"fincards_core_card", "fincards_card", "fincards_intent", "fincards_screening", "fincards_ranking",
             "fincards_zeroshot"}


def test_every_variant_ranks_every_chunk_and_books_its_cost():
    queries = queries_from_records(filing_records())
    judge = LexicalJudge()
    run = run_fincards(queries, judge, VARIANTS, SMALL)
    assert [(r.query_id, r.variant) for r in run.results] == [(q.id, v) for q in queries for v in VARIANTS]
    for result in run.results:
        assert sorted(result.ranking) == list(range(len(FILING)))
        assert all(0.0 <= result.scores[m] <= 1.0 for m in ("ndcg", "map", "mrr"))
        assert len(result.audit["final"]) == len(FILING)
    by = {(r.query_id, r.variant): r for r in run.results}
    # cards: one request per distinct chunk for both queries, which share every card
    kinds = [r.json_schema["title"] for r in judge.requests]
    assert kinds.count("fincards_core_card") == len(FILING) == run.distinct_chunks
    assert by[("q-trend", "bm25")].cost["calls"] == 0
    assert by[("q-trend", "llm")].cost["calls"] == 1
    assert by[("q-trend", "s1+s2")].cost["calls"] == len(FILING) / 2 + 1 + 2  # card share + intent + 2 groups
    assert by[("q-trend", "full")].cost["calls"] > by[("q-trend", "s1+s2")].cost["calls"]
    assert sum(c.unusable for c in run.stages.values()) == 0
    # the trend question's table chunk comes first; the definition comes first for its question
    assert by[("q-trend", "full")].ranking[0] == 2
    assert by[("q-define", "full")].ranking[0] == 3
    trace = by[("q-trend", "full")].audit
    assert trace["quotas"] == ["trend"] and trace["stage3"]["stopped"] == "converged"
    assert "fits trend quota" in trace["final"][0]["card_matches"]
    assert trace["final"][0]["why"].startswith("Borda")


def test_each_stage_is_one_batch_across_queries():
    class Batches(LexicalJudge):
        def __init__(self):
            super().__init__()
            self.batches = []

        def complete(self, requests, desc="judge"):
            self.batches.append((desc, len(requests)))
            return super().complete(requests, desc)

    judge = Batches()
    run_fincards(queries_from_records(filing_records()), judge, VARIANTS, SMALL)
    descs = [d for d, _ in judge.batches]
    for stage in ("cards", "intent", "llm", "screening"):
        assert descs.count(f"fincards {stage}") == 1
    assert dict(judge.batches)["fincards screening"] == 4  # 2 groups x 2 queries
    assert 2 <= descs.count("fincards tournament") <= SMALL.max_rounds


def test_an_unusable_judge_leaves_bm25_order_and_is_counted():
    queries = queries_from_records(filing_records())
    broken = LexicalJudge(broken=ALL_KINDS)
    run = run_fincards(queries, broken, VARIANTS, FinCardsConfig(max_attempts=2))
    bm25_order = {r.query_id: r.ranking for r in run.results if r.variant == "bm25"}
    for result in run.results:
        assert result.ranking == bm25_order[result.query_id], result.variant
    assert all(c.unparsed == c.requests > 0 and c.failed == 0 for c in run.stages.values())
    assert len(broken.requests) == 2 * sum(c.requests for c in run.stages.values())  # every request re-asked once
    card = run.results[-1].audit["final"][0]
    assert card["card_source"] == "fallback"
    # the fallbacks are scored, and every variant that used one says so
    assert {r.judge.status for r in run.results if r.variant != "bm25"} == {"fallback"}
    assert all(r.scores is not None for r in run.results)


def test_fixed_seed_is_reproducible_and_seeds_change_the_groups():
    filing = [f"chunk {i} revenue {'growth ' * (i % 4)}segment {i % 5}" for i in range(40)]
    records = [{"uuid": "big", "messages": [{"role": "user", "content": chunk_prompt("revenue growth by segment", filing)}],
                "qrel": {"3": 2}}]
    queries = queries_from_records(records)

    def run(seed):
        judge = LexicalJudge()
        result = run_fincards(queries, judge, ("s1+s3", "full"), FinCardsConfig(seed=seed))
        groups = [r["groups"] for r in result.results[0].audit["stage3"]["rounds"]]
        return [r.ranking for r in result.results], groups, [r.messages for r in judge.requests]

    assert run(1) == run(1)
    assert run(1)[1] != run(2)[1]


def test_variants_other_than_bm25_need_a_judge():
    queries = queries_from_records(filing_records())
    assert len(run_fincards(queries, None, ("bm25",)).results) == 2
    with pytest.raises(ValueError, match="need a judge"):
        run_fincards(queries, None, ("full",))
    with pytest.raises(ValueError, match="unknown variant"):
        run_fincards(queries, LexicalJudge(), ("s2",))


def test_a_record_without_chunks_gets_an_empty_ranking():
    records = filing_records() + [{"uuid": "empty", "messages": [{"role": "user", "content": "Question: anything?"}],
                                   "qrel": {"0": 1}}]
    run = run_fincards(queries_from_records(records), LexicalJudge(), VARIANTS, SMALL)
    empty = [r for r in run.results if r.query_id == "empty"]
    assert [r.ranking for r in empty] == [[]] * len(VARIANTS)
    assert all(r.scores == {"ndcg": 0.0, "map": 0.0, "map_hits": 0.0, "mrr": 0.0} for r in empty)


class ForeignFirstJudge(LexicalJudge):
    """The lexical judge, except that a first answer to a screening, tournament or llm request
    names only chunk ids that the request did not show (ids of other groups or queries)."""

    def __init__(self, ids):
        super().__init__()
        self.ids = set(ids)

    def _answer(self, request):
        kind = request.json_schema["title"]
        content = request.messages[-1]["content"]
        shown = {int(i) for i in re.findall(r"^\[(?:Chunk Index )?(\d+)\]", content, re.MULTILINE)}
        foreign = sorted(self.ids - shown)
        if request.attempt == 0 and foreign and kind in ("fincards_screening", "fincards_ranking", "fincards_zeroshot"):
            if kind == "fincards_screening":
                return json.dumps({"selected": [{"id": i, "score": 90, "reason": "elsewhere"} for i in foreign]})
            return json.dumps({"ranking": foreign})
        return super()._answer(request)


def test_an_answer_naming_only_other_groups_chunks_is_asked_again():
    # a second filing with two more chunks, so the llm request of the first two queries can
    # be answered with chunks of another query's filing
    records = filing_records() + [
        {"uuid": "q-longer", "messages": [{"role": "user", "content": chunk_prompt("Northwind net income 2025",
                                                                                     FILING + ["Backlog rose.", "Debt fell."])}]}
    ]
    judge = ForeignFirstJudge(range(len(FILING) + 2))
    run = run_fincards(queries_from_records(records), judge, VARIANTS, SMALL)
    reasked = {r.json_schema["title"] for r in judge.requests if r.attempt == 1}
    assert reasked == {"fincards_screening", "fincards_ranking", "fincards_zeroshot"}
    # every such answer was re-asked and then read; nothing fell back
    assert all(c.unusable == 0 for c in run.stages.values()), run.stages
    by = {(r.query_id, r.variant): r for r in run.results}
    assert by[("q-trend", "llm")].audit["llm"]["parsed"] is True
    vias = {p["via"] for g in by[("q-trend", "full")].audit["stage2"]["groups"] for p in g["kept"]}
    assert "fallback" not in vias


def test_cost_is_summed_per_stage():
    judge = LexicalJudge()  # 10 prompt and 2 completion tokens per answer
    run = run_fincards(queries_from_records(filing_records()), judge, VARIANTS, SMALL)
    kinds = [r.json_schema["title"] for r in judge.requests]
    expected = {"cards": len(FILING), "intent": 2, "llm": 2, "screening": 4, "tournament": kinds.count("fincards_ranking")}
    assert {stage: count.cost.calls for stage, count in run.stages.items()} == expected
    assert all(c.cost.prompt_tokens == 10 * c.cost.calls and c.cost.completion_tokens == 2 * c.cost.calls
               for c in run.stages.values())
    assert sum(c.cost.calls for c in run.stages.values()) == len(judge.requests)
    # both tournaments (s1+s3 and full) book to the tournament stage
    tournaments = [r.cost["calls"] - len(FILING) / 2 for r in run.results if r.variant == "s1+s3"]
    full_rounds = sum(len(r.audit["stage3"]["rounds"]) for r in run.results if r.variant == "full")
    assert sum(tournaments) + full_rounds == expected["tournament"]  # one group per round in each


def test_card_cost_is_shared_by_the_queries_whose_candidates_use_the_card():
    # the second filing shares one chunk text with the first: 7 distinct cards, one call each
    records = filing_records()[:1] + [
        {"uuid": "q-other", "messages": [{"role": "user", "content": chunk_prompt("Northwind pumps", [FILING[0], "Pumps sold well."])}]}
    ]
    run = run_fincards(queries_from_records(records), LexicalJudge(), ("s1+s2",), SMALL)
    assert run.distinct_chunks == 7 and run.card_cost.calls == 7
    calls = {r.query_id: r.cost["calls"] for r in run.results}
    # q-trend: 5 own cards + half the shared one, intent, 2 groups; q-other: half the shared
    # card + its own, intent, 1 group (an even split would give each 3.5 cards)
    assert calls == {"q-trend": 5.5 + 1 + 2, "q-other": 1.5 + 1 + 1}


def test_costs_follow_requests_through_re_asks_and_duplicates():
    from lm_eval_fin.judge import JudgeRequest, JudgeResponse, complete_parsed
    from lm_eval_fin.rerank.cost import MeteredJudge

    class FirstTryFails:
        spec = "test:flaky"

        def complete(self, requests, desc="judge"):
            return [JudgeResponse("ok" if r.attempt else "??", prompt_tokens=5, completion_tokens=1) for r in requests]

    metered = MeteredJudge(FirstTryFails())
    same = JudgeRequest(messages=({"role": "user", "content": "same"},))
    other = JudgeRequest(messages=({"role": "user", "content": "other"},))
    metered.expect([same, same, other], ["a", "b", "c"])
    parsed = complete_parsed(metered, [same, same, other], lambda t: t if t == "ok" else None)
    assert parsed == ["ok", "ok", "ok"]
    assert {o: (c.calls, c.prompt_tokens) for o, c in metered.costs.items()} == {"a": (2, 10), "b": (2, 10), "c": (2, 10)}
    assert metered.cost(["a", "c"]).calls == 4


def _card_lines(judge, kind="fincards_screening"):
    return [line for r in judge.requests if r.json_schema["title"] == kind
            for line in r.messages[-1]["content"].splitlines() if re.match(r"\[\d+\] ", line)]


def test_core_cards_keep_only_verbatim_spans_and_link_their_fields():
    run = run_fincards(queries_from_records(filing_records()), LexicalJudge(), ("s1+s2",), SMALL)
    # the judge copied the first figure of each chunk that has one, and made one up
    with_figures = [t for t in FILING if re.search(r"\$[\d,.]+ million|\d+\.\d%", t)]
    assert run.spans_kept == run.spans_dropped == len(with_figures) == 3
    cards = {int(c): card for r in run.results for c, card in r.audit["cards"].items()}
    assert len(cards) == len(FILING)
    for chunk, card in cards.items():
        text = FILING[chunk]
        assert card["kind"] == "core" and card["source"] == "judge"
        assert all(span in text for span in card["numeric_spans"])
        assert card["checks"]["spans_dropped"] == (["$999.9 million"] if card["numeric_spans"] else [])
        for link in card["evidence"]:
            start, end = link["span"]
            assert text[start:end].lower() == link["value"].lower() or link["field"] == "period"
    revenue = cards[1]
    assert revenue["numeric_spans"] == ["$1,240.5 million"]
    assert revenue["triple"] == {"entity": "", "metric": "revenue", "period": "FY2025"}
    assert {(e["field"], e["value"]) for e in revenue["evidence"]} == {
        ("metrics", "revenue"), ("numeric_spans", "$1,240.5 million"), ("period", "FY2025")}
    table = cards[2]["aux"]["table"]
    assert table == {"present": True, "rows": 3, "periods": ["FY2025", "FY2024"], "change_column": True, "total_row": False}
    assert cards[4]["aux"]["boilerplate"] and cards[3]["aux"]["defines_metric"]


def test_the_rules_read_spans_periods_tables_and_sections():
    text = "Item 7. Management's Discussion\nRevenue was $1,240.5 million in fiscal 2025, up 8.2%; Q3 2024 EPS $0.35."
    assert rules.numeric_spans(text) == ["$1,240.5 million", "8.2%", "$0.35"]
    assert rules.periods(text) == ["FY2025", "Q3 FY2024"]
    assert rules.section(text) == "MD&A" and not rules.heading(text) and rules.heading("Item 1A. Risk Factors")
    assert rules.verbatim("$1,240.5\nmillion", text) and not rules.verbatim("$1,240 million", text)
    assert not rules.table_signature(text)["present"]
    card = corecard.parse_card('{"numeric_spans": ["8.2%", "8.20%", "eight", 9], "period": ["FY2024", "FY2025"]}', text)
    assert card["numeric_spans"] == ["8.2%"] and card["checks"]["spans_dropped"] == ["8.20%", "eight", "9"]
    assert card["period"] == "FY2024-FY2025" and card["section"] == "MD&A" and card["section_from"] == "heading"


@pytest.mark.parametrize("group, shown", [("temporal", "period: "), ("metrics", "metrics: "), ("tables", "table ("),
                                          ("scope", "scope: ")])
def test_card_field_ablations_hide_their_fields_from_the_judge(group, shown):
    queries = queries_from_records(filing_records())
    judges = {}
    for without in ((), (group,)):
        judges[without] = LexicalJudge()
        run_fincards(queries, judges[without], ("full",), dataclasses.replace(SMALL, card_without=without))
    for kind in ("fincards_screening", "fincards_ranking"):
        assert any(shown in line for line in _card_lines(judges[()], kind))
        assert not any(shown in line for line in _card_lines(judges[(group,)], kind))


def test_without_tables_no_card_can_fill_the_trend_quota():
    queries = queries_from_records(filing_records())
    for without, fits in (((), True), (("tables",), False)):
        run = run_fincards(queries, LexicalJudge(), ("s1+s2",), dataclasses.replace(SMALL, card_without=without))
        trend = next(r for r in run.results if r.query_id == "q-trend")
        labels = [label for entry in trend.audit["final"] for label in entry["card_matches"]]
        assert ("fits trend quota" in labels) == fits


def test_summary_raw_and_b1_card_views():
    queries = queries_from_records(filing_records())
    judge = LexicalJudge()
    run_fincards(queries, judge, ("full",), dataclasses.replace(SMALL, card_view="summary"))
    assert all(re.match(r"\[\d+\] summary: \S", line) for line in _card_lines(judge))
    judge = LexicalJudge()
    run = run_fincards(queries, judge, ("full",), dataclasses.replace(SMALL, card_view="raw", raw_chars=40))
    kinds = {r.json_schema["title"] for r in judge.requests}
    assert "fincards_core_card" not in kinds and run.stages.get("cards") is None
    lines = _card_lines(judge) + _card_lines(judge, "fincards_ranking")
    assert lines and all(line.split("] ", 1)[1].rstrip(" …") in " ".join(FILING[int(line[1])].split()) for line in lines)
    assert {entry["card_source"] for r in run.results for entry in r.audit["final"]} == {"rules"}
    judge = LexicalJudge()
    run = run_fincards(queries, judge, VARIANTS, dataclasses.replace(SMALL, card_kind="b1"))
    assert [r.json_schema["title"] for r in judge.requests].count("fincards_card") == len(FILING)
    assert all(sorted(r.ranking) == list(range(len(FILING))) for r in run.results)
    assert cardview.without(fallback_card("x"), ["temporal", "scope"]).keys().isdisjoint({"temporal", "scope"})


def test_table3_strategies_through_the_pipeline():
    queries = queries_from_records(filing_records())

    def tournaments(**changes):
        run = run_fincards(queries, LexicalJudge(), ("s1+s3",), dataclasses.replace(SMALL, **changes))
        return run.results

    single = tournaments(max_rounds=1)
    assert all(len(r.audit["stage3"]["rounds"]) == 1 and not r.variance_measured for r in single)
    assert all(r.rank_variance == pytest.approx(tournament.random_rank_variance(len(FILING))) for r in single)
    assert all(len(r.audit["stage3"]["rounds"]) == 5 and r.variance_measured for r in tournaments(early_stop=False))
    voted = tournaments(aggregation="votes", regroup=False)
    assert {(r.audit["stage3"]["aggregation"], r.audit["stage3"]["regroup"]) for r in voted} == {("votes", False)}
    with pytest.raises(ValueError, match="card field group"):
        FinCardsConfig(card_without=("sketch",))


def test_a_judge_that_does_not_answer_leaves_no_score_and_no_ranking():
    queries = queries_from_records(filing_records())
    judge = LexicalJudge(failing=ALL_KINDS)
    run = run_fincards(queries, judge, VARIANTS, SMALL)
    for result in run.results:
        if result.variant == "bm25":
            assert result.judge.status == "ok" and result.scores is not None
        else:
            assert result.judge.status == "failed" and result.ranking is None and result.scores is None
            assert result.judge.first_error == "connection refused"
    # later stages of a query whose cards or intent failed are not asked at all
    assert {stage: (c.requests, c.failed, c.unparsed) for stage, c in run.stages.items()} == {
        "cards": (6, 6, 0), "intent": (2, 2, 0), "llm": (2, 2, 0)}
    assert run.failed == 10 and run.unparsed == 0
    assert len(judge.requests) == 10  # a failed request is not re-asked as if unparsable


def test_a_failed_stage_costs_only_the_variants_that_need_it():
    queries = queries_from_records(filing_records())
    run = run_fincards(queries, LexicalJudge(failing={"fincards_ranking"}), VARIANTS, SMALL)
    status = {(r.query_id, r.variant): r.judge.status for r in run.results}
    assert {v: status[("q-trend", v)] for v in VARIANTS} == {
        "bm25": "ok", "llm": "ok", "s1+s3": "failed", "s1+s2": "ok", "full": "failed"}
    assert run.stages["tournament"].failed == run.stages["tournament"].requests > 0
    run = run_fincards(queries, LexicalJudge(failing={"fincards_zeroshot"}), VARIANTS, SMALL)
    assert {r.variant for r in run.results if r.judge.status == "failed"} == {"llm"}


# ---------------------------------------------------------------------------------------------
# The CLI in-process, without a judge


def _args(**overrides):
    import argparse

    from lm_eval_fin.judge.options import add_judge_arguments

    parser = argparse.ArgumentParser()
    add_judge_arguments(parser)
    cli.add_arguments(parser)
    argv = []
    for key, value in overrides.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return parser.parse_args(argv)


def test_cli_bm25_writes_rankings_and_prints_scores(tmp_path, capsys):
    data = write_filing(tmp_path / "chunks.jsonl")
    out = tmp_path / "run.jsonl"
    assert cli.main(_args(data=data, variant="bm25", out=out, judge="")) == 0
    printed = capsys.readouterr().out
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in lines] == ["q-trend", "q-define"]
    assert "nDCG@10" in printed and "bm25" in printed
    ndcg = sum(r["scores"]["ndcg"] for r in lines) / 2
    assert f"{100 * ndcg:8.2f}" in printed


def test_cli_gain_switch_reaches_the_scores_and_the_summary(tmp_path, capsys):
    """--gain linear scores nDCG with gain g, exponential (the default) with 2^g - 1; both MAP
    conventions are columns of the table and keys of every scored record."""
    data = write_filing(tmp_path / "chunks.jsonl")
    runs = {}
    for gain in ("exponential", "linear"):
        out = tmp_path / f"{gain}.jsonl"
        assert cli.main(_args(data=data, variant="bm25", out=out, judge="", gain=gain)) == 0
        printed = capsys.readouterr().out
        assert "MAP@10 MAPh@10" in " ".join(printed.split()) and "MAPh@10: over the relevant chunks found" in printed
        runs[gain] = {json.loads(line)["id"]: json.loads(line) for line in out.read_text().splitlines()}
        summary = json.loads((tmp_path / f"{gain}.summary.json").read_text())
        assert summary["settings"]["gain"] == gain
    for uid, _, qrel in QUERIES:
        ranking = runs["linear"][uid]["ranking"]
        assert runs["exponential"][uid]["ranking"] == ranking
        grades = [qrel.get(str(c), 0) for c in ranking[:10]]
        ideal = sorted(qrel.values(), reverse=True)[:10]

        def dcg(values, gain):
            return sum(gain(g) / math.log2(i + 2) for i, g in enumerate(values))

        for name, gain in (("linear", float), ("exponential", lambda g: 2.0**g - 1)):
            assert runs[name][uid]["scores"]["ndcg"] == pytest.approx(dcg(grades, gain) / dcg(ideal, gain))
        hits = [i for i, g in enumerate(grades, 1) if g >= 1]
        precision_sum = sum(n / rank for n, rank in enumerate(hits, 1))
        assert runs["linear"][uid]["scores"]["map"] == pytest.approx(precision_sum / 2)  # two relevant chunks
        assert runs["linear"][uid]["scores"]["map_hits"] == pytest.approx(precision_sum / len(hits))
    with pytest.raises(ValueError, match="gain"):
        FinCardsConfig(gain="cubic")


def test_cli_records_without_qrel_get_rankings_and_a_note(tmp_path, capsys):
    data = write_filing(tmp_path / "chunks.jsonl", with_qrel=False)
    out = tmp_path / "run.jsonl"
    assert cli.main(_args(data=data, variant="bm25", out=out, judge="")) == 0
    assert "no qrel" in capsys.readouterr().out
    assert all(json.loads(line)["scores"] is None for line in out.read_text().splitlines())


def test_cli_prints_the_cost_of_each_stage(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "load_judge", lambda spec, options: LexicalJudge())
    data = write_filing(tmp_path / "chunks.jsonl")
    assert cli.main(_args(data=data, variant="all", judge="test:lexical")) == 0
    printed = capsys.readouterr().out.splitlines()
    stage_lines = {line.split()[0]: line for line in printed if line.startswith("  ") and "calls" in line}
    assert list(stage_lines) == ["cards", "intent", "llm", "screening", "tournament"]
    # 6 cards, one call each at 10 prompt and 2 completion tokens
    assert stage_lines["cards"].split() == ["cards", "6", "requests,", "0", "failed,", "0", "unparsable,", "6", "calls",
                                            "(0", "cached),", "60", "prompt", "+", "12", "completion", "tokens"]


def test_cli_errors_are_clear(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE", raising=False)
    data = write_filing(tmp_path / "chunks.jsonl")
    assert cli.main(_args(data=data, variant="full", judge="")) == 2
    assert "need a judge" in capsys.readouterr().err
    assert cli.main(_args(data=tmp_path / "missing.jsonl", variant="bm25", judge="")) == 2
    (tmp_path / "bad.jsonl").write_text("not json\n")
    assert cli.main(_args(data=tmp_path / "bad.jsonl", variant="bm25", judge="")) == 2
    assert "not JSON" in capsys.readouterr().err


def _parse(argv):
    import argparse

    from lm_eval_fin.judge.options import add_judge_arguments

    parser = argparse.ArgumentParser()
    add_judge_arguments(parser)
    cli.add_arguments(parser)
    return parser.parse_args([str(a) for a in argv])


def test_cli_switches_map_to_config_fields():
    args = _parse(["--data", "x", "--cards", "b1", "--card_without", "temporal,tables", "--card_view", "summary",
                   "--rounds", "1", "--fixed_groups", "--aggregation", "mean-rank", "--no_early_stop"])
    config = cli.config_from_args(args, 64)
    assert (config.card_kind, config.card_without, config.card_view, config.max_rounds, config.regroup,
            config.aggregation, config.early_stop, config.max_tokens) == (
        "b1", ("temporal", "tables"), "summary", 1, False, "mean_rank", False, 64)
    assert config.changes() == {"max_tokens": 64, "card_kind": "b1", "card_without": ("temporal", "tables"),
                                "card_view": "summary", "max_rounds": 1, "regroup": False, "aggregation": "mean_rank",
                                "early_stop": False}
    assert cli.config_from_args(_parse(["--data", "x"]), 1024) == FinCardsConfig()
    assert _parse(["--data", "x"]).doc_types == ("10-K", "10-Q")
    for bad in (["--card_without", "sketch"], ["--doc_types", "S-1"]):
        with pytest.raises(SystemExit):
            _parse(["--data", "x", *bad])


def test_filing_type_is_read_from_a_field_the_prompt_or_the_cover_page():
    assert doctype.document_type({"form_type": "10q"}, "", []) == ("10-Q", "field")
    assert doctype.document_type({}, "Question: What does the 10-K say about backlog?", ["x"]) == ("10-K", "prompt")
    assert doctype.document_type({}, "Rank the chunks.", [COVER_10Q, "Revenue rose."]) == ("10-Q", "cover page")
    # filings mention other forms all the time: only cover lines count, and two forms decide nothing
    assert doctype.form_from_cover(["As described in our Annual Report on Form 10-K for fiscal 2024."]) is None
    assert doctype.form_from_cover(["FORM 10-K", "FORM 10-Q"]) is None
    assert doctype.form_from_cover(["Operator: Good morning.", "Welcome to the Q3 earnings call."]) == "Earnings"
    assert doctype.form_in_prompt("Compare the 10-K with the 10-Q") is None


def test_cli_keeps_the_paper_filing_types_and_records_them(tmp_path, capsys):
    eight_k = dict(filing_records()[0], uuid="q-8k", doc_type="8-K")
    cover = {"uuid": "q-cover", "messages": [{"role": "user", "content": chunk_prompt("Backlog?", [COVER_10Q, *FILING])}],
             "qrel": {"1": 1}}
    data = write_jsonl(tmp_path / "chunks.jsonl", [*filing_records(doc_type="10-K"), eight_k, cover])
    out = tmp_path / "run.jsonl"
    assert cli.main(_parse(["--data", data, "--variant", "bm25", "--out", out, "--judge", ""])) == 0
    printed = capsys.readouterr().out
    assert "document types 10-K, 10-Q: 3 of 4 queries kept (10-K 2, 10-Q 1; type read from: field 2, cover page 1); " \
           "dropped 8-K 1" in printed
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["doc_type"]) for r in records] == [("q-trend", "10-K"), ("q-define", "10-K"), ("q-cover", "10-Q")]
    summary = json.loads((tmp_path / "run.summary.json").read_text())
    assert summary["doc_types"]["wanted"] == ["10-K", "10-Q"] and summary["doc_types"]["dropped_by_type"] == {"8-K": 1}
    assert cli.main(_parse(["--data", data, "--variant", "bm25", "--doc_types", "all", "--judge", ""])) == 0
    assert "document types all: 4 of 4 queries kept" in capsys.readouterr().out
    assert cli.main(_parse(["--data", data, "--variant", "bm25", "--doc_types", "DEF14A", "--judge", ""])) == 2
    assert "no query left" in capsys.readouterr().err


def _table_rows(printed):
    """The printed table's rows by variant (stage lines are indented)."""
    return {line.split()[0]: line.split() for line in printed.splitlines() if line.split()[:1] and line.split()[0] in VARIANTS
            and not line.startswith(" ")}


# An answer every FinCARDS parser reads, for the six chunks of FILING.
EVERY_KIND = json.dumps({
    "topic": "Revenue", "metrics": ["revenue"], "period": "FY2025", "summary": "revenue", "numeric_spans": [],
    "relation": "lookup", "selected": [{"id": i, "score": 90 - i, "reason": "r"} for i in range(6)],
    "ranking": list(range(6)),
})


def test_cli_with_the_judge_down_prints_no_scores_exits_1_and_resumes_from_the_cache(tmp_path, judge_cache, capsys):
    data = write_filing(tmp_path / "chunks.jsonl")
    fast = ["--judge_max_retries", "0", "--judge_backoff", "0", "--judge_timeout", "5"]
    argv = ["--data", data, "--variant", "all", "--out", tmp_path / "run.jsonl", *fast]
    # a server that does not answer at all is known before any work: one line, status 2
    assert cli.main(_parse([*argv, "--judge", f"openai:http://127.0.0.1:{closed_port()}/v1#m"])) == 2
    assert "no answer from" in capsys.readouterr().err and not (tmp_path / "run.jsonl").exists()
    # one that answers, but only errors, fails every request it gets
    with ServerProcess(fail_rate=1.0) as failing:
        assert cli.main(_parse([*argv, "--judge", f"openai:{failing.base_url}#m"])) == 1
    captured = capsys.readouterr()
    rows = _table_rows(captured.out)
    assert rows["bm25"][1] != "-" and all(rows[v][1:5] == ["-", "-", "-", "-"] for v in VARIANTS[1:]), captured.out
    assert all(rows[v][8] == "0/2" for v in VARIANTS[1:])
    problem = captured.err.strip().splitlines()[-1]
    assert problem.startswith("lm-eval-fin rerank: the judge failed 10 requests (cards 6, intent 2, llm 2)")
    assert "no score for llm on 2 of 2" in problem and "resumes from the judge cache" in problem
    summary = json.loads((tmp_path / "run.summary.json").read_text())
    # strict JSON: a variant with no scored query has null means, never NaN
    assert summary["table"][1]["ndcg"] is None and summary["table"][0]["ndcg"] > 0
    records = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert {(r["variant"], r["judge"]["status"], r["scores"] is None) for r in records} == {
        ("bm25", "ok", False), *((v, "failed", True) for v in VARIANTS[1:])}

    with ServerProcess(reply=EVERY_KIND) as server:
        judge = ["--judge", f"openai:{server.base_url}#m"]
        assert cli.main(_parse([*argv, *judge])) == 0
        first_calls = server.stats()["calls"]
        out = capsys.readouterr().out
        assert "0 failed, 0 unparsable" in out and "\n  cards" in out
        rows = _table_rows(out)
        assert all(rows[v][8] == "2/2" and rows[v][1] != "-" for v in VARIANTS)
        assert cli.main(_parse([*argv, *judge])) == 0  # every answer from the cache now
        assert server.stats()["calls"] == first_calls


def test_cli_exits_1_when_answers_stay_unparsable(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "load_judge", lambda spec, options: LexicalJudge(broken={"fincards_intent"}))
    data = write_filing(tmp_path / "chunks.jsonl")
    assert cli.main(_parse(["--data", data, "--variant", "s1+s2", "--judge", "x", "--max_attempts", "2"])) == 1
    captured = capsys.readouterr()
    assert captured.err.strip() == (
        "lm-eval-fin rerank: 2 answers stayed unparsable after 2 attempts (intent 2); their fallbacks stood in and "
        "their queries count under 'fallbk'; a larger --max_attempts asks them again")
    row = next(line.split() for line in captured.out.splitlines() if line.startswith("s1+s2"))
    assert row[1] != "-" and row[8:10] == ["2/2", "2"]


@pytest.mark.parametrize(
    "module",
    ["bm25", "cards", "corecard", "cardview", "rules", "doctype", "intent", "screening", "tournament", "audit"],
)
def test_docstring_examples(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"lm_eval_fin.rerank.{module}"))
    assert result.attempted > 0 and result.failed == 0


def test_a_bound_below_one_names_the_snake_case_flag(tmp_path, capsys):
    from lm_eval_fin import cli

    code = cli.main(["rerank", "--data", str(tmp_path / "absent.jsonl"), "--llm_chunk_chars", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "--llm_chunk_chars must be at least 1" in err and "llm-chunk-chars" not in err
