"""Number extraction and FinLFQA numeric P/R/F1 (README, "Metric definitions"), hand-computed."""

import math
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lm_eval_fin.measures.numbers import extract_numbers, numeric_prf, prf_of_values


@pytest.mark.parametrize(
    "text, values",
    [
        ("3 million", [3e6]),
        ("3,000 thousand", [3e6]),
        ("3,000,000", [3e6]),
        ("$1.2bn and 4k and 5 mn and 2 trillion and 7 B", [1.2e9, 4000, 5e6, 2e12, 7e9]),
        ("-5, −6, +7, -$8, $-9", [-5, -6, 7, -8, -9]),
        ("a loss of (1.2) and ($3.4) and $(5) billion", [-1.2, -3.4, -5e9]),
        ("growth of 12.5% or 12.5 percent, 2.5x, 50 bps", [12.5, 2.5, 50]),
        ("€1,234.56 and £7 and US$9", [1234.56, 7, 9]),
        ("1. Revenue rose 5%.\n2) Costs fell 3%.\n(3) Margin 40%.", [5, 3, 40]),
        ("Revenue [16] rose 5% [CWT 3, AWK 4] [] [1-3]", [5]),
        ("as paragraph 16 and clause 2 show, Item 2 and Note 5 on page 12: 8", [8]),
        ("Q3 FY2023 10-Q 3rd COVID-19 revenue 9", [9]),
        ("compared with last year (2023), 2019-2020, fiscal 2025", []),  # years are dates, not values
        ("(1) the revenue rose", []),
        ("5 and 5.0 and 5.00", [5]),  # a set: a value stated twice counts once
        ("", []),
    ],
)
def test_extraction(text, values):
    assert extract_numbers(text) == pytest.approx(values)


@pytest.mark.parametrize(
    "text, values",
    [
        ("Net loss (1.2)", [-1.2]),  # after a label: an accounting negative
        ("| Net income | (1,234) | 567 |", [-1234, 567]),  # a table cell
        ("(1.2) (3.4) and (2.5)%", [-1.2, -3.4, -2.5]),  # a unit outside the parentheses
        ("rose 25% ($25 million)", [25, 25e6]),  # an aside restating a figure
        ("revenue of $1,234 million ($1.2 billion)", [1.234e9, 1.2e9]),
        ("margin (25%), leverage (2.5x), spread (50 bps)", [25, 2.5, 50]),  # a unit inside
    ],
)
def test_which_parentheses_are_accounting_negatives(text, values):
    assert extract_numbers(text) == pytest.approx(values)


@pytest.mark.parametrize(
    "text, values",
    [
        # issue 16, point 5: each was read wrong (value after the arrow in the comment)
        ("grew 3.5-fold", [3.5]),  # was 3
        ("a $1.5-billion loan", [1.5e9]),  # was 1
        ("margin up 1.5pp", [1.5]),  # was 1
        ("notional of 1.5e6", [1.5e6]),  # was 1
        ("guidance of 10%-12%", [10, 12]),  # was 10 and -12
        ("spread of 50bps-75bps", [50, 75]),  # was 50 (75 dropped)
        ("leverage of 2.5x-3.0x", [2.5, 3.0]),  # was 2.5 (3.0 dropped)
        ("raised USD1.2bn", [1.2e9]),  # was nothing
        # neighbours of those cases
        ("10% - 12% and 10% to -12%", [10, 12, -12]),  # a spaced minus or "to -" is a sign
        ("1.5-2.0 and 1,234-5,678 and 3−4", [1.5, 2.0, 1234, 5678, 3, 4]),
        ("USD 1.2bn, EUR5m, GBP 7, US$9, USDA 3", [1.2e9, 5e6, 7, 9, 3]),
        ("a 2-fold rise, 5-percent growth, 3.5 fold", [2, 5, 3.5]),
        ("1.2-1.5 billion", [1.2, 1.5e9]),  # a scale word is not shared across a range
        ("50 bp, 25 basis point, 1 percentage point, 2 ppt", [50, 25, 1, 2]),
        ("2e-3 and 1E3", [0.002, 1000]),
        # issue 23: a unit joined by a hyphen, as in a compound adjective (each read nothing)
        ("a 0.75-point gain", [0.75]),
        ("a 25-basis-point cut and a 1.5-percentage-point rise", [25, 1.5]),
        ("a 50-bp move, a 2-points drop, a 0.5-pp widening", [50, 2, 0.5]),
        ("a 0.75-pointed tip and a 10-K and a 5-year note", []),  # other words after a hyphen still are not units
        # a number is read whole or not at all
        ("1.5zz and 1,234zz and 3.5-year and 5-year", []),
        ("2023,2024", []),  # two years, not 2023 then 024
    ],
)
def test_number_forms(text, values):
    assert extract_numbers(text) == pytest.approx(values)


@pytest.mark.parametrize(
    "text, values",
    [
        # years: a bare four-digit integer in 1900..2100 is a date
        ("Q1 2024 revenue 5", [5]),
        ("(2023) and 1899 and 2101", [1899, 2101]),
        ("$2024, 2,024, 2024 million, 2024.5, -2024", [2024, 2024e6, 2024.5, -2024]),
        # the day of a date
        ("As of March 31, 2024, cash was 7", [7]),
        ("on 31 March 2024 and Mar. 1st: 8", [8]),
        ("on 3/31/2024 and 2024-03-31: 9", [9]),
        ("in May 2024 revenue may 5 percent", [5]),  # "may" (lower case) is no month
        # footnote markers glued to a word or figure
        ("revenue of $1.2 million(1), Revenue(2) and 25%(3)", [1.2e6, 25]),
        ("$(5) and (6) million", [-5, -6e6]),  # not glued: accounting negatives
    ],
)
def test_dates_and_footnote_markers_are_not_values(text, values):
    assert extract_numbers(text) == pytest.approx(values)


def test_units_match_through_the_scale_factors():
    # 50 bps = 0.5%: the factor 100 between them; 1.5pp is 1.5, as 1.5%
    assert numeric_prf("widened 50 bps", "widened 0.5%") == (1.0, 1.0, 1.0)
    assert numeric_prf("up 1.5pp", "up 1.5 percentage points to 12%") == pytest.approx((1.0, 0.5, 2 / 3))
    # a hyphenated unit: "a 0.75-point gain" states 0.75 (issue 23: it stated nothing)
    assert numeric_prf("a 0.75-point gain in margin", "margin rose 0.75 percentage points") == (1.0, 1.0, 1.0)
    assert numeric_prf("a 25-basis-point cut", "cut by 0.25%") == (1.0, 1.0, 1.0)
    # a range's bounds match the reference's bounds; the old reading (-12) missed one
    assert numeric_prf("between 10%-12%", "10% to 12%") == (1.0, 1.0, 1.0)


def test_an_aside_does_not_turn_a_match_into_a_miss():
    # was {25, -25e6} against {25, 25e6}: P = R = 1/2
    assert numeric_prf("Interest rose 25% ($25 million).", "up 25%, or $25 million") == (1.0, 1.0, 1.0)


def test_papers_scale_and_rounding_examples():
    # "3 million" = "3,000 thousand" = "3,000,000"; 3.965 matches 3.97.
    assert numeric_prf("3 million", "3,000 thousand") == (1.0, 1.0, 1.0)
    assert numeric_prf("3,000,000", "3 million") == (1.0, 1.0, 1.0)
    assert numeric_prf("3.965", "3.97") == (1.0, 1.0, 1.0)
    assert prf_of_values([3.965], [3.97]) == (1.0, 1.0, 1.0)


@pytest.mark.parametrize(
    "a, b, match",
    [
        (5, 0.05, True),  # factor 100: 5% vs 0.05
        (3.2e9, 3200, True),  # factor 1e6: dollars vs millions
        (25, 25000, True),  # factor 1000
        (1.0, 1.0101, True),  # within 1% of the larger value
        (1.0, 1.0102, False),  # just outside
        (-5, 5, False),  # signs matter
        (0, 0, True),
        (0, 1e-9, False),
        (7, 70, False),  # 10 is not a scale factor
    ],
)
def test_value_matching(a, b, match):
    expected = (1.0, 1.0, 1.0) if match else (0.0, 0.0, 0.0)
    assert prf_of_values([a], [b]) == expected
    assert prf_of_values([b], [a]) == expected  # symmetric


def test_precision_recall_f1_by_hand():
    # answer {3e6, 7, 12}: 3e6 matches 3,000 thousand, 7 matches nothing, 12 matches 0.12 -> P = 2/3
    # reference {3e6, 0.12, 99}: 99 unmatched -> R = 2/3
    p, r, f1 = numeric_prf("Sales of $3 million, 7 stores, margin 12%.", "3,000 thousand; 0.12; 99")
    assert (p, r, f1) == pytest.approx((2 / 3, 2 / 3, 2 / 3))
    # matching is not one-to-one: both answer values match the single reference value
    assert numeric_prf("3.97 and 3.965", "3.97") == (1.0, 1.0, 1.0)
    assert numeric_prf("3 million and 7", "3,000,000") == pytest.approx((0.5, 1.0, 2 / 3))


@pytest.mark.parametrize(
    "prediction, reference, expected",
    [
        ("no numbers", "none either", (1.0, 1.0, 1.0)),
        ("", None, (1.0, 1.0, 1.0)),
        ("5 units", "", (0.0, 0.0, 0.0)),
        (None, "5 units", (0.0, 0.0, 0.0)),
    ],
)
def test_empty_cases(prediction, reference, expected):
    assert numeric_prf(prediction, reference) == expected


def test_bytes_are_decoded():
    assert extract_numbers(b"revenue 5 million \xff") == [5e6]


JUNK = st.one_of(
    st.none(),
    st.text(max_size=300),
    st.binary(max_size=300),
    st.text(alphabet="0123456789.,-+()$%[]kmbKMB \n", max_size=200),
)


@settings(max_examples=200, deadline=None)
@given(JUNK, JUNK)
def test_never_crashes_and_stays_in_range(prediction, reference):
    p, r, f1 = numeric_prf(prediction, reference)
    assert all(0.0 <= x <= 1.0 for x in (p, r, f1))
    assert all(isinstance(v, float) for v in extract_numbers(prediction))


@pytest.mark.parametrize(
    "text",
    [
        "1,234.5 million (6) [7] " * 40_000,  # 1 MB of numbers
        "(" + " " * 1_000_000 + "x",  # long runs after an opener must not backtrack quadratically
        "[A" + " " * 1_000_000 + "x",
        "paragraph" + " " * 1_000_000 + "5",
        "9" * 1_000_000,  # one huge number: infinite, dropped
    ],
)
def test_one_megabyte_inputs(text):
    values = extract_numbers(text)
    assert all(v == v and abs(v) != float("inf") for v in values)


SCALES = (1.0, 1e3, 1e6, 1e9, 1e12)
DECIMALS = st.decimals(min_value="0.01", max_value="999999.99", places=2).filter(lambda d: d % 1 != 0)
NO_DIGITS = st.text(alphabet=string.ascii_letters + string.punctuation + " ×−–", max_size=10)


@settings(max_examples=300, deadline=None)
@given(DECIMALS, NO_DIGITS, NO_DIGITS)
def test_a_decimal_is_read_whole_or_not_at_all(number, before, after):
    """Whatever surrounds it (no other digits), a decimal yields its own value (scaled, signed)
    or nothing: never its integer part."""
    x = float(number)
    for value in extract_numbers(f"{before} {number}{after}"):
        assert any(math.isclose(abs(value), x * s, rel_tol=1e-9) for s in SCALES), (value, x)


UNITS = st.sampled_from(["", "%", "x", "bps", "bp", "pp", "m", "bn", "k", " million", " bps", " fold"])


@settings(max_examples=300, deadline=None)
@given(DECIMALS, DECIMALS, UNITS, st.sampled_from(["-", "–", "—", "\u2212"]))
def test_a_ranges_upper_bound_is_positive(low, high, unit, dash):
    values = extract_numbers(f"a range of {low}{unit}{dash}{high}{unit} this year")
    assert values and all(v > 0 for v in values), values
    assert any(math.isclose(v, float(high) * s, rel_tol=1e-9) for v in values for s in SCALES), values
