"""EMS equations 6-9: hand-computed cases, degenerate cases, bad alignments, properties."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lm_eval_fin.ems.formulas import AlignmentError, ems_scores


def test_paper_example_alignment():
    # The paper's example alignment [4, 2, 3, -1]: reference points 1-3 matched, reference
    # point 4 unmatched. Whether the paper counts answer points from 0 or from 1, and how many
    # it has, could not be checked against its text (the stored copies hold the abstract
    # only), so both readings are computed; ems_scores takes 0-based indices, which is what
    # the pipeline hands it (the judge names answer points from 1 and the parser subtracts 1).
    scores = [0.8, 0.6, 0.9, 0.0]
    # 0-based, 5 answer points (indices up to 4):
    # recall = (0.8 + 0.6 + 0.9 + 0) / 4 = 0.575
    # precision = (answer 0: 0, 1: 0, 2: 0.6, 3: 0.9, 4: 0.8) / 5 = 2.3 / 5 = 0.46
    precision, recall, f1 = ems_scores([4, 2, 3, -1], scores, 5)
    assert recall == pytest.approx(0.575)
    assert precision == pytest.approx(0.46)
    assert f1 == pytest.approx(2 * 0.46 * 0.575 / (0.46 + 0.575))
    # 1-based, 4 answer points: answer points 4, 2, 3 are 0-based 3, 1, 2; answer point 1 is
    # unmatched: precision = (0 + 0.6 + 0.9 + 0.8) / 4 = 0.575, recall as above
    precision, recall, f1 = ems_scores([3, 1, 2, -1], scores, 4)
    assert (precision, recall) == (pytest.approx(0.575), pytest.approx(0.575))
    assert f1 == pytest.approx(0.575)
    # and the 1-based reading is not a valid 0-based alignment of 4 answer points
    with pytest.raises(AlignmentError, match="answer point index"):
        ems_scores([4, 2, 3, -1], scores, 4)


def test_answer_point_matched_twice_counts_once_with_its_best_score():
    # reference points 0 and 1 both match answer point 0 (scores 0.4 and 0.9)
    precision, recall, f1 = ems_scores([0, 0, 1], [0.4, 0.9, 0.5], n_answer_points=2)
    assert recall == pytest.approx((0.4 + 0.9 + 0.5) / 3)  # every reference point counts
    assert precision == pytest.approx((0.9 + 0.5) / 2)  # answer point 0 once, with max 0.9
    assert f1 == pytest.approx(2 * 0.7 * 0.6 / 1.3)


def test_perfect_and_empty_overlap():
    assert ems_scores([0, 1, 2], [1.0, 1.0, 1.0], 3) == (1.0, 1.0, 1.0)
    assert ems_scores([-1, -1], [0.0, 0.0], 4) == (0.0, 0.0, 0.0)


def test_unmatched_points_ignore_their_score():
    # a scorer may leave a number on an unmatched point; it must not count
    assert ems_scores([0, -1], [1.0, 0.7], 1) == ems_scores([0, -1], [1.0, 0.0], 1)


def test_extra_answer_points_lower_precision_only():
    precision, recall, _ = ems_scores([0], [1.0], n_answer_points=4)
    assert (precision, recall) == (0.25, 1.0)


@pytest.mark.parametrize(
    "alignment, scores, m, expected",
    [
        ([], [], 0, (1.0, 1.0, 1.0)),  # neither side states anything
        ([], [], 3, (0.0, 0.0, 0.0)),  # no reference points, answer has points
        ([-1, -1], [0.0, 0.0], 0, (0.0, 0.0, 0.0)),  # answer has no points
    ],
)
def test_degenerate_cases(alignment, scores, m, expected):
    assert ems_scores(alignment, scores, m) == expected


@pytest.mark.parametrize(
    "alignment, scores, m, message",
    [
        ([0, 1], [1.0], 2, "one per reference point"),
        ([2], [1.0], 2, r"answer point index in \[0, 2\)"),
        ([-2], [1.0], 2, "neither -1 nor"),
        ([0], [1.0], 0, "neither -1 nor"),
        ([0.5], [1.0], 2, "not an integer"),
        ([True], [1.0], 2, "not an integer"),
        ([0], [1.5], 1, r"not a number in \[0, 1\]"),
        ([0], [-0.1], 1, r"not a number in \[0, 1\]"),
        ([0], [math.nan], 1, r"not a number in \[0, 1\]"),
        ([0], [None], 1, r"not a number in \[0, 1\]"),
        ([0], [1.0], -1, "non-negative integer"),
        ([0], [1.0], 1.5, "non-negative integer"),
    ],
)
def test_bad_inputs_are_clear_errors(alignment, scores, m, message):
    with pytest.raises(AlignmentError, match=message):
        ems_scores(alignment, scores, m)


@st.composite
def matchings(draw):
    m = draw(st.integers(min_value=0, max_value=8))
    n = draw(st.integers(min_value=0, max_value=8))
    alignment = draw(st.lists(st.integers(min_value=-1, max_value=m - 1), min_size=n, max_size=n))
    scores = draw(st.lists(st.floats(min_value=0, max_value=1), min_size=n, max_size=n))
    return alignment, scores, m


@settings(max_examples=200, deadline=None)
@given(matchings())
def test_scores_are_in_range_and_f1_between_p_and_r(case):
    alignment, scores, m = case
    precision, recall, f1 = ems_scores(alignment, scores, m)
    for value in (precision, recall, f1):
        assert 0.0 <= value <= 1.0
    assert min(precision, recall) - 1e-12 <= f1 <= max(precision, recall) + 1e-12


@settings(max_examples=100, deadline=None)
@given(matchings(), st.floats(min_value=0, max_value=1))
def test_raising_one_matched_score_never_lowers_recall_or_precision(case, bump):
    alignment, scores, m = case
    matched = [i for i, a in enumerate(alignment) if a != -1]
    if not matched:
        return
    before = ems_scores(alignment, scores, m)
    raised = list(scores)
    raised[matched[0]] = max(raised[matched[0]], bump)
    after = ems_scores(alignment, raised, m)
    assert after[0] >= before[0] - 1e-12 and after[1] >= before[1] - 1e-12


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(st.none(), st.text(max_size=3), st.integers(min_value=-5, max_value=20), st.floats()),
        max_size=6,
    ),
    st.lists(st.one_of(st.none(), st.text(max_size=3), st.floats(allow_nan=True)), max_size=6),
    st.one_of(st.integers(min_value=-3, max_value=10), st.none(), st.floats()),
)
def test_arbitrary_inputs_give_a_score_or_a_clear_error(alignment, scores, m):
    try:
        result = ems_scores(alignment, scores, m)
    except AlignmentError:
        return
    assert all(0.0 <= value <= 1.0 for value in result)
