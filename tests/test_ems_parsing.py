"""Tolerant readers of the EMS judge's extraction, matching and scoring answers."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lm_eval_fin.ems.parsing import (
    answer_index,
    parse_match,
    parse_match_number,
    parse_points,
    parse_score,
    parse_summary_bounds,
    parse_verdicts,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('["Revenue rose 6%.", "Margins fell."]', ["Revenue rose 6%.", "Margins fell."]),
        ('```json\n[\n  "A [bracketed] point.",\n  "B"\n]\n```', ["A [bracketed] point.", "B"]),
        ('Sure! Here are the points:\n["one", "two"]\nHope this helps.', ["one", "two"]),
        ("['single quoted', \"mixed\"]", ["single quoted", "mixed"]),
        ('{"points": ["a", "  ", "b"]}', ["a", "b"]),
        ('[{"point": "a"}, {"text": "b"}]', ["a", "b"]),
        ('[Note: draft] then the list: ["x"]', ["x"]),
        ("Here's my take: [\"Apple's revenue grew.\"]", ["Apple's revenue grew."]),
        ("[]", []),
        ('["escaped \\" quote"]', ['escaped " quote']),
    ],
)
def test_parse_points_reads_messy_lists(text, expected):
    assert parse_points(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "No points here.",
        "[1, 2, 3]",
        '["unterminated',
        '{"answer": "x"}',
        "[[[[",
        b"\x00\xff".decode("latin-1"),
    ],
)
def test_parse_points_unreadable_is_none(text):
    assert parse_points(text) is None


@pytest.mark.parametrize(
    "text, n, expected",
    [
        ('{"match": 3}', 5, 2),
        ('{"match": -1}', 5, -1),
        ('{"match": null}', 5, -1),
        ('```json\n{"match": 1}\n```', 5, 0),
        ("The best match is answer point 4.", 5, 3),
        ("Match: [2]", 5, 1),
        ("2", 5, 1),
        ("None of the answer points matches.", 5, -1),
        ("no match", 5, -1),
        ('{"match": "3"}', 5, 2),
        ('{"match": 6}', 5, None),  # not on the list: unreadable, re-asked
        ('{"match": 0}', 5, None),  # numbering starts at 1
        ("2.5", 5, None),
        # the answer point's number, never the reference point's
        ("Reference point 1 matches answer point 3.", 5, 2),
        ("Reference point 2 corresponds to Answer Point #4", 5, 3),
        ("Reference point 1: none of the answer points match.", 5, -1),
        ("For reference point 2 the match is 5", 5, 4),
        ("I am not sure.", 5, None),
        (None, 5, None),
    ],
)
def test_parse_match(text, n, expected):
    assert parse_match(text, n) == expected


def test_match_number_and_index_split():
    assert parse_match_number('{"match": 7}') == 7  # no list length known yet
    assert answer_index(7, 7) == 6 and answer_index(7, 6) is None and answer_index(-1, 0) == -1
    assert answer_index(None, 3) is None


@pytest.mark.parametrize(
    "text, max_score, expected",
    [
        ('{"score": 7}', 10, 0.7),
        ('{"score": "9"}', 10, 0.9),
        ("Score: 6", 10, 0.6),
        ("I would rate it 8/10.", 10, 0.8),
        ("8 out of 10", 10, 0.8),
        ("The pair covers 2 of 3 facts; score 5", 10, 0.5),
        ("10", 10, 1.0),
        ("0", 10, 0.0),
        ("4", 5, 0.8),
        ('{"score": 7.0}', 10, 0.7),
        ("11", 10, None),
        ("-1", 10, None),
        # the scale is integer: a fraction is unreadable and asked again
        ("7.5", 10, None),
        ('{"score": 7.5}', 10, None),
        ("Score: 8.5", 10, None),
        ("7.5/10", 10, None),
        ("excellent", 10, None),
        (None, 10, None),
    ],
)
def test_parse_score(text, max_score, expected):
    result = parse_score(text, max_score)
    assert result == (pytest.approx(expected) if expected is not None else None)


def test_megabyte_of_brackets_is_read_in_bounded_time():
    junk = "[" * 500_000 + "{" * 500_000
    assert parse_points(junk) is None
    assert parse_match(junk, 3) is None
    assert parse_score(junk, 10) is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_parsers_never_raise(text):
    points = parse_points(text)
    assert points is None or all(isinstance(p, str) and p.strip() for p in points)
    match = parse_match(text, 4)
    assert match is None or -1 <= match < 4
    score = parse_score(text, 10)
    assert score is None or 0.0 <= score <= 1.0
    bounds = parse_summary_bounds(text, 4)
    assert bounds is None or (min(bounds) >= 0 and sum(bounds) < 4)
    verdicts = parse_verdicts(text, 2)
    assert verdicts is None or (len(verdicts) == 2 and set(verdicts) <= {"entailment", "neutral", "contradiction"})


@pytest.mark.parametrize(
    "text, n, expected",
    [
        ('{"opening": 1, "closing": 1}', 5, (1, 1)),
        ('Sure: {"opening": "2", "closing": 0}', 5, (2, 0)),
        ('{"intro": 0, "conclusion": 1}', 3, (0, 1)),
        ('{"opening": 0, "closing": 0}', 1, (0, 0)),
        ('{"opening": 2, "closing": 1}', 3, None),  # nothing would be left
        ('{"opening": -1, "closing": 0}', 3, None),
        ('{"opening": 1.5, "closing": 0}', 3, None),
        ('{"opening": 1}', 3, None),  # both counts are needed
        ("one and one", 3, None),
        (None, 3, None),
    ],
)
def test_parse_summary_bounds(text, n, expected):
    assert parse_summary_bounds(text, n) == expected


@pytest.mark.parametrize(
    "text, n, expected",
    [
        ('{"verdicts": ["entailment", "neutral"]}', 2, ["entailment", "neutral"]),
        ('```json\n["Entailed", "Contradiction."]\n```', 2, ["entailment", "contradiction"]),
        ('{"verdicts": ["supported", "not mentioned", "contradicts"]}', 3, ["entailment", "neutral", "contradiction"]),
        ('{"verdicts": ["entailment"]}', 2, None),  # one verdict per claim, no fewer
        ('{"verdicts": ["entailment", "maybe"]}', 2, None),
        ('{"verdicts": [1, 0]}', 2, None),
        ("All claims are entailed.", 2, None),
    ],
)
def test_parse_verdicts(text, n, expected):
    assert parse_verdicts(text, n) == expected


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=40).filter(lambda s: s.strip()), max_size=6))
def test_points_round_trip_through_json(points):
    import json

    assert parse_points(json.dumps(points)) == [p.strip() for p in points]
