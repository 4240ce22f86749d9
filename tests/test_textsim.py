"""ROUGE-L (equal to rouge-score), BERTScore with the offline model, BLEU."""

import logging
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer

from lm_eval_fin.measures import textsim
from lm_eval_fin.text import cleantext


def test_rouge_l_by_hand():
    # LCS of "the cat sat on the mat" and "the cat lay on a mat" is "the cat on mat": 4 tokens.
    [(p, r, f)] = textsim.rouge_l(["the cat sat on the mat"], ["the cat lay on a mat"])
    assert (p, r, f) == pytest.approx((4 / 6, 4 / 6, 4 / 6))
    assert textsim.lcs_length("a b c d".split(), "b d a".split()) == 2


def test_rouge_l_equals_rouge_score():
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    rng = random.Random(0)
    words = "revenue rose fell 5 3.2 the of CWT AWK margin million".split()
    for _ in range(300):
        prediction = " ".join(rng.choices(words, k=rng.randint(0, 60)))
        reference = " ".join(rng.choices(words, k=rng.randint(0, 60)))
        expected = scorer.score(reference, prediction)["rougeL"]
        [got] = textsim.rouge_l([prediction], [reference])
        assert got == pytest.approx((expected.precision, expected.recall, expected.fmeasure), abs=1e-12)


def test_rouge_l_empty_and_punctuation_only_score_zero():
    assert textsim.rouge_l(["", None, "!!!", "a"], ["a", "a", "a", ""]) == [(0.0, 0.0, 0.0)] * 4
    with pytest.raises(ValueError, match="2 predictions but 1 references"):
        textsim.rouge_l(["a", "b"], ["a"])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.text(max_size=200)), st.one_of(st.none(), st.text(max_size=200))), max_size=5))
def test_rouge_l_never_crashes(pairs):
    for p, r, f in textsim.rouge_l([a for a, _ in pairs], [b for _, b in pairs]):
        assert 0.0 <= p <= 1.0 and 0.0 <= r <= 1.0 and 0.0 <= f <= 1.0


def test_rouge_l_on_long_answers_reads_the_first_max_answer_chars():
    answer = "revenue rose 5 percent " * 8_000  # 184k characters: read whole
    [(p, r, f)] = textsim.rouge_l([answer], ["revenue rose sharply"])
    assert r == pytest.approx(2 / 3) and p == pytest.approx(2 / 32_000)
    huge = "revenue rose 5 percent " * 45_000  # a megabyte: the first MAX_ANSWER_CHARS are scored
    assert textsim.rouge_l([huge], ["revenue rose sharply"]) == textsim.rouge_l(
        [huge[: cleantext.MAX_ANSWER_CHARS]], ["revenue rose sharply"]
    )


def test_bertscore_with_the_offline_model():
    model = textsim.offline_bertscore_model()
    assert model is not None and model.endswith("model")
    scores = textsim.bertscore_f1(
        ["Revenue rose 5%.", "", "Revenue rose 5%."],
        ["Revenue increased by five percent.", "anything", "The weather was cold in Oslo."],
        model=model,
    )
    assert scores[1] == 0.0  # an empty side scores 0, bert-score's convention
    assert scores[0] > scores[2] > 0.0
    assert textsim.load_bert_scorer(model) is textsim.load_bert_scorer(model)  # memoised


def test_bertscore_reads_512_tokens_a_side_and_says_which_pairs_it_cut():
    """Issue 36, point 5: an EMS answer of 1,024 tokens (and a longer reference) is compared on
    its first 512 tokens only; the cut is recorded per pair."""
    model = textsim.offline_bertscore_model()
    head = "Revenue rose 5% to $12 million while margins held at 41%. "
    long_answer = head * 60  # about 900 tokens
    cuts = textsim.bertscore_cut([long_answer, head, ""], [head, head, head], model)
    assert [c["cut"] for c in cuts] == [True, False, False]
    assert cuts[0]["answer_tokens"] > 512 == cuts[0]["max_tokens"] and cuts[2]["answer_tokens"] == 0
    # what the cut means: text past the limit changes nothing
    tail = long_answer + "Costs fell sharply and the outlook was withdrawn. " * 40
    assert textsim.bertscore_f1([long_answer], [head], model) == textsim.bertscore_f1([tail], [head], model)
    assert textsim.bertscore_cut(["a"], ["b"], "/no/such/model") == [None]


def test_bertscore_missing_model_is_none_with_a_warning(caplog, tmp_path):
    missing = str(tmp_path / "no-such-model")
    with caplog.at_level(logging.WARNING, logger="lm_eval_fin.measures.textsim"):
        assert textsim.bertscore_f1(["a"], ["b"], model=missing) is None
    assert missing in caplog.text and "reported as missing" in caplog.text
    # nothing to score: no model needed
    assert textsim.bertscore_f1([""], ["b"], model=missing) == [0.0]


def test_bleu():
    assert textsim.bleu(["the cat sat on the mat"], ["the cat sat on the mat"]) == 1.0
    assert textsim.bleu([], []) == 0.0
    assert 0.0 < textsim.bleu(["the cat sat on the mat today"], ["the cat sat on the mat"]) < 1.0
    assert textsim.bleu([None], ["x"]) == 0.0
