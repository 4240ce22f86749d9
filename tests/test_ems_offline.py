"""The offline EMS extractor (bullets, sentences, summaries) and matcher (overlap, numbers)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lm_eval_fin.ems.offline import (
    MATCH_THRESHOLD,
    extract_points,
    match_points,
    numbers_agree,
    numbers_in,
    similarity,
    split_sentences,
)

ANSWER = """Sure! Here is a detailed analysis of the earnings call.

## Key themes
**Revenue growth**
- Revenue was $94.9 billion, up 6% year over year. It was a September quarter record. iPhone grew 5.5%.
- Services reached an all-time high of $25 billion.
- Revenue was $94.9 billion, up 6% year over year.

Gross margin was 46.2%, at the high end of guidance. Mr. Cook said the U.S. market grew.

Overall, the company delivered a strong quarter and is well positioned."""


def test_extractor_drops_intro_headings_and_conclusion_and_keeps_repeats():
    assert extract_points(ANSWER) == [
        # a bullet of three sentences: points of at most two sentences
        "Revenue was $94.9 billion, up 6% year over year. It was a September quarter record.",
        "iPhone grew 5.5%.",
        "Services reached an all-time high of $25 billion.",
        "Revenue was $94.9 billion, up 6% year over year.",  # the repeat stays
        "Gross margin was 46.2%, at the high end of guidance.",
        "Mr. Cook said the U.S. market grew.",
    ]


@pytest.mark.parametrize(
    "text, expected",
    [
        # numbered list after a colon intro; closing "In summary" paragraph dropped
        (
            "Key points:\n\n1. Revenue grew 5%.\n2) Margins were 40%.\n\nIn summary, solid.",
            ["Revenue grew 5%.", "Margins were 40%."],
        ),
        # one block of prose: the summing-up last sentence goes, the rest are points
        (
            "Revenue grew 5%. Margins were 40%. Overall, it was a good quarter.",
            ["Revenue grew 5%.", "Margins were 40%."],
        ),
        # an informative first paragraph is not an introduction
        (
            "Revenue grew 5% to $2 billion.\n\nMargins were 40%.",
            ["Revenue grew 5% to $2 billion.", "Margins were 40%."],
        ),
        # a lone paragraph is never dropped, whatever it opens with
        ("Overall, revenue grew 5%.", ["Overall, revenue grew 5%."]),
        # bullets with * and •, emphasis removed, wrapped bullet line joined
        (
            "* **Cash:** $5 billion\n  in operating cash flow.\n• Buybacks of $1 billion.",
            ["Cash: $5 billion in operating cash flow.", "Buybacks of $1 billion."],
        ),
        ("", []),
        ("   \n\n  ", []),
    ],
)
def test_extractor_cases(text, expected):
    assert extract_points(text) == expected


def test_lead_in_right_above_a_list_and_closing_summary_under_it_are_dropped():
    # no blank lines: the lead-in (too long for a heading) and the closing sentence sit in
    # the list's own paragraph
    text = (
        "Apple's management pointed to several growth drivers during the call this quarter:\n"
        "1. Services revenue reached a record $25 billion.\n"
        "2. iPhone revenue grew 6% to $46.2 billion.\n"
        "These elements position Apple well for continued growth."
    )
    assert extract_points(text) == [
        "Services revenue reached a record $25 billion.",
        "iPhone revenue grew 6% to $46.2 billion.",
    ]
    # the same closing sentence as its own paragraph, and other summing-up phrasings
    for closing in (
        "These elements position Apple well for continued growth.",
        "Together, these results underscore the strength of the ecosystem.",
        "All told, a solid quarter.",
        "In short, demand held up.",
    ):
        assert extract_points(
            "- Services revenue reached a record $25 billion.\n- Margins held.\n\n" + closing
        ) == ["Services revenue reached a record $25 billion.", "Margins held."]


@pytest.mark.parametrize(
    "last",
    [
        "These investments total $5 billion.",  # a back-reference stating a figure is content
        "This quarter revenue grew 5%.",
        "These stores opened in Texas and Ohio.",  # no judging verb: a fact
        "Together, the two segments added 300 jobs.",
    ],
)
def test_closing_sentences_with_content_are_kept(last):
    text = "- Services revenue reached a record $25 billion.\n- Margins held.\n" + last
    assert extract_points(text)[-1] == last
    assert extract_points(text.replace("\n" + last, "\n\n" + last))[-1] == last
    prose = "Services revenue reached a record. Margins held. " + last
    assert extract_points(prose)[-1] == last


def test_a_colon_sentence_inside_the_answer_stays():
    # only a leading lead-in goes; a colon sentence after other content is kept
    text = "- Revenue grew 5%.\nMargins were hit by two costs, steel and freight:\n- Steel rose 10%."
    assert extract_points(text) == [
        "Revenue grew 5%.",
        "Margins were hit by two costs, steel and freight:",
        "Steel rose 10%.",
    ]


def test_sentence_splitter_keeps_abbreviations_and_decimals():
    assert split_sentences(
        "EPS was $1.64 vs. $1.46 a year ago. Dr. Su spoke. Growth was approx. 9%. Done."
    ) == [
        "EPS was $1.64 vs. $1.46 a year ago.",
        "Dr. Su spoke.",
        "Growth was approx. 9%.",
        "Done.",
    ]


def test_matcher_pairs_paraphrases_and_leaves_the_rest_unmatched():
    references = [
        "Total revenue rose 6% to $94.9 billion.",
        "Services revenue set a record of $25 billion.",
        "The board authorized a $110 billion buyback.",
    ]
    answers = [
        "Services hit an all-time high of $25 billion in revenue.",
        "Revenue increased 6% to $94.9 billion.",
    ]
    assert match_points(references, answers) == [1, 0, -1]


def test_numbers_must_agree():
    # same words, different figures: not the same fact
    assert similarity("Revenue grew 6% to $94.9 billion.", "Revenue grew 8% to $90.1 billion.") == 0.0
    assert match_points(["Revenue grew 6% to $94.9 billion."], ["Revenue grew 8% to $90.1 billion."]) == [-1]
    # "1,200.50" and "1200.5" are one number
    assert similarity("Capex was $1,200.50 million.", "Capex was $1200.5 million.") == pytest.approx(1.0)
    # a point without numbers can still match one with numbers on its words
    assert similarity("Revenue grew strongly.", "Revenue grew strongly, by 6%.") > MATCH_THRESHOLD


def test_numbers_must_agree_in_context():
    # one shared bare number is not enough: 35% is not 35 people
    reference = "Revenue grew 35% in the quarter."
    answer = "The team grew by 35 people in the quarter."
    assert similarity(reference, answer) == 0.0
    assert match_points([reference], [answer]) == [-1]
    assert numbers_in(reference) == {("35", "%")} and numbers_in(answer) == {("35", "word:peopl")}
    # the same number in the same context, written differently, still matches
    assert similarity(reference, "Revenue grew 35 percent in the quarter.") > MATCH_THRESHOLD
    assert similarity("Revenue was $25 billion.", "Revenue was 25 billion dollars.") > MATCH_THRESHOLD
    assert similarity("Revenue was $25 billion.", "Revenue was $25 million.") == 0.0
    assert similarity("The firm added 1,000 stores.", "The firm added 1,000 new stores.") > MATCH_THRESHOLD
    # a number without context (a year, a figure before a comma) agrees with its value anywhere
    assert numbers_agree(numbers_in("In 2024, revenue grew."), numbers_in("2024 revenue grew."))
    # numbers glued to letters are labels, not figures
    assert numbers_in("Q3 FY2024 results") == frozenset()


def test_threshold_decides():
    ref, answer = ["Margins improved on lower freight costs."], ["Margins improved."]
    score = similarity(ref[0], answer[0])
    assert match_points(ref, answer, threshold=score) == [0]
    assert match_points(ref, answer, threshold=score + 0.01) == [-1]


def test_matcher_with_no_answer_points():
    assert match_points(["a point"], []) == [-1]
    assert match_points([], ["a point"]) == []


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=500))
def test_extractor_never_raises_and_returns_nonempty_points(text):
    points = extract_points(text)
    assert all(isinstance(p, str) and p.strip() for p in points)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=5), st.lists(st.text(max_size=60), max_size=5))
def test_matcher_returns_valid_alignments(references, answers):
    alignment = match_points(references, answers)
    assert len(alignment) == len(references)
    assert all(-1 <= a < len(answers) for a in alignment)


def test_extractor_on_a_megabyte_and_on_junk():
    big = ("Revenue grew 5% to $2 billion. " * 35_000)[:1_000_000]
    assert len(extract_points(big)) > 30_000
    assert extract_points(None) == []
    assert isinstance(extract_points("\x00\xff\ufffd" * 1000), list)
