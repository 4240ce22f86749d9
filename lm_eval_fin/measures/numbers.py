"""Numbers in financial prose, and FinLFQA's numeric precision / recall / F1 (paper section 4.2).

Extraction turns a text into the set of values it states:

* thousands separators, decimals, scientific notation (``1.5e6``), signs (``-`` and the
  Unicode minus), currency symbols (``$ € £ ¥ ₹``, ``US$``) and ISO codes before the figure,
  glued or not (``USD1.2bn``, ``EUR 5m``);
* units are read as the bare number, since matching absorbs the factor between them (5% vs
  0.05): ``%`` / ``percent`` / ``per cent``, ``x`` multiples, ``-fold`` (``3.5-fold`` is 3.5),
  basis points ``bp`` / ``bps`` / ``basis point(s)`` and percentage points ``pp`` / ``ppt`` /
  ``percentage point(s)`` (50 bps is 50, which matches 0.5% through the factor 100; 1.5pp is
  1.5, the same number as 1.5%), points; a unit may be joined by a hyphen, as in a compound
  adjective (``a 0.75-point gain``, ``a 25-basis-point cut``, ``a 1.5-percentage-point rise``,
  ``a 50-bp move``);
* scale words multiply: thousand, million, billion, trillion (also plural, also after a
  hyphen: ``$1.5-billion``) and the short forms k, m/mm/mn/mln/mil, b/bn/bln, t/tn/trn, glued
  or after one space, in any case; so "3 million", "3,000 thousand" and "3,000,000" are one
  value;
* ranges: a dash straight after a figure (its unit included) and before the next one is a
  range's dash, not a minus sign: ``10%-12%`` is 10 and 12, ``50bps-75bps`` 50 and 75,
  ``2.5x-3.0x`` 2.5 and 3.0 (a scale word is not shared: ``1.2-1.5 billion`` is 1.2 and 1.5e9);
* a number is read whole or not at all: a decimal followed by something unexpected
  (``1.5zz``) states no value, never its integer part;
* accounting negatives: ``(1.2)``, ``($1.2)``, ``$(1.2)``, ``(1.2) bn``, ``(2.5)%`` -> negative,
  as in a table cell (``| (1,234) |``) or after a label (``Net loss (1.2)``). Parentheses
  make a negative only when they hold nothing but an optional currency sign, the number and
  an optional scale word. Not negatives: a unit inside the parentheses (``(25%)``,
  ``(2.5x)``, ``(50 bps)``), which is how prose writes an aside; and a figure directly after
  another figure (``rose 25% ($25 million)``, ``1,234 (567)``), an aside that restates or
  converts it. The match rule is unchanged: signs still matter there.

Not values (they state when or where, not how much):

* dates: a year (a bare four-digit integer from 1900 to 2100, with no currency, sign,
  separator, decimals, scale or unit: "Q1 2024", "fiscal 2025", "(2023)"), the day in a date
  ("March 31, 2024", "31 March", "Mar. 31st") and numeric dates ("3/31/2024", "2024-03-31").
  "$2024", "2,024" and "2024 million" are amounts;
* footnote markers: a parenthesised number of one or two digits glued to a word or figure
  ("$1.2 million(1)", "Revenue(2)"), and citation markers in brackets ("[16]", "[CWT 16,
  AWK 3]", "[]"); superscript digits are never read;
* clause enumerators at the start of a line ("1.", "2)", "(3)", also inline "(1) the ...");
* pointers into the documents ("paragraph 16", "clause 2", "Item 2", "Note 5", "page 12");
* numbers glued to letters ("Q3", "FY2023", "10-Q", "3rd", "COVID-19", "5-year").

Matching (README, "Metric definitions"): two values match when one, multiplied by some factor in
:data:`SCALE_FACTORS`, is within relative tolerance 0.01 of the other (``math.isclose``
semantics: the tolerance is relative to the larger magnitude). The relation is symmetric, so
a predicted value counts as matched when it matches *any* reference value, and a reference
value counts as recalled when *any* predicted value matches it (not a one-to-one
assignment). Values are sets: a value stated twice counts once.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable, Sequence

from lm_eval_fin.measures.prf import prf
from lm_eval_fin.text.cleantext import read_answer

RELATIVE_TOLERANCE = 0.01
SCALE_FACTORS: tuple[float, ...] = (1.0, 100.0, 1000.0, 1e6, 0.01, 0.001, 1e-6)
YEARS = (1900, 2100)  # a bare four-digit integer in this range is a year, not a value

_SCALE_WORDS = {
    "thousand": 1e3, "thousands": 1e3, "k": 1e3,
    "million": 1e6, "millions": 1e6, "m": 1e6, "mm": 1e6, "mn": 1e6, "mln": 1e6, "mil": 1e6,
    "billion": 1e9, "billions": 1e9, "b": 1e9, "bn": 1e9, "bln": 1e9,
    "trillion": 1e12, "trillions": 1e12, "t": 1e12, "tn": 1e12, "trn": 1e12,
}
_SCALE_ALTERNATION = "|".join(sorted(_SCALE_WORDS, key=len, reverse=True))
# The scale words and units a hyphen may join to the figure ("$1.5-billion", "a 0.75-point
# gain", "a 25-basis-point cut"); not the short scale forms, or "10-K" would read as ten
# thousand, and no other word ("5-year" states a duration).
_HYPHEN_WORDS = (
    r"(?:thousand|million|billion|trillion)s?|fold|percent|points?|basis-points?|percentage-points?|bps?|pp|ppts?"
)
_CURRENCY_CODES = "USD|EUR|GBP|JPY|CNY|RMB|CAD|AUD|CHF|INR|HKD|SGD|KRW"
_CURRENCY = rf"(?:US\$|[$€£¥₹]|(?:{_CURRENCY_CODES})(?![A-Za-z]))"
_UNIT = (
    r"%|percent\b|per[ \t]cent\b|bps?\b|basis[ \t]points?\b|pp\b|ppts?\b|percentage[ \t]points?\b"
    r"|fold\b|[x×](?![A-Za-z0-9_])"
)

# One number with everything around it that changes its value. Groups: open/close (accounting
# parentheses), cur/cur2 (currency), sign, digits, scale, unit. The look-behinds keep numbers
# glued to a word ("Q3", "FY2023", "COVID-19") or to a decimal point out; the look-aheads
# after the number keep "3rd", "10-Q" and "5km" out, and keep a number from being read in part
# ("1.5zz" is not 1, "1,234zz" not 1), while letting the scale word and unit through.
_NUMBER = re.compile(
    rf"""
    (?=[-+(\u2212$€£¥₹.0-9]|US\$|{_CURRENCY_CODES})  # only these can start a number: rejects most positions fast
    (?<![\w.])(?<![A-Za-z]-)
    (?P<open>\(\s*)?
    (?P<cur>{_CURRENCY})?\s?
    (?P<sign>[-+\u2212])?
    (?P<cur2>{_CURRENCY})?
    (?:(?<={_CURRENCY_CODES})|(?<![\w.]))  # a word starts here, or a currency code ends (codes: 3 letters)
    (?P<digits>[0-9]{{1,3}}(?:,[0-9]{{3}})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?|\.[0-9]+)
    (?P<exponent>[eE][-+]?[0-9]{{1,3}})?
    (?![0-9])(?!\.[0-9])(?!,[0-9]{{3}}(?![0-9]))
    (?!-(?!(?:{_HYPHEN_WORDS})\b)[A-Za-z])
    (?:(?:[ \t]|-(?=(?:{_HYPHEN_WORDS})\b))?(?P<scale>{_SCALE_ALTERNATION})(?![A-Za-z0-9_&'])(?!-[A-Za-z]))?
    (?:(?:[ \t]|-(?=(?:percent|fold)\b))?(?P<unit>{_UNIT}))?
    (?![A-Za-z0-9_])
    (?:(?P<close>\s*\))(?:[ \t]?(?P<scale_after>{_SCALE_ALTERNATION})(?![A-Za-z0-9_&'])(?!-[A-Za-z]))?)?
    """,
    re.VERBOSE | re.IGNORECASE,
)

_MONTH = (
    r"(?-i:January|February|March|April|May|June|July|August|September|October|November|December"
    r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.?"
)

# Spans that contain digits but state no value of the answer; blanked before extraction.
_NOT_VALUES = re.compile(
    rf"""
    # clause enumerators at the start of a line: "1.", "2)", "(3)", "**4.**", "- 5)"
    ^[ \t>#*\-•]*(?:\*\*|__)?(?:[0-9]{{1,2}}[.)]|\([0-9]{{1,2}}\))(?:\*\*|__)?(?=\s|$)
    # inline enumerators "(1) the ...", unless a scale word makes them an amount
    # (after a currency symbol it is an accounting negative: "$(8) and")
    | (?<![$€£¥₹])\([0-9]{{1,2}}\)(?=[ \t]+[A-Za-z])(?![ \t]+(?:{_SCALE_ALTERNATION}|percent)\b)
    # footnote markers glued to a word or figure: "million(1)", "Revenue(2)", "25%(3)"
    | (?<=[A-Za-z0-9%])\([0-9]{{1,2}}\)
    # citation markers: "[16]", "[]", "[CWT 16]", "[CWT: 16, AWK: 3]", "[1-3]"
    | \[\s*(?:(?:[A-Za-z][\w.&]*\s*(?:[:#-]\s*)?)?[0-9]{{1,4}}
        (?:\s*[-–,;]\s*(?:[A-Za-z][\w.&]*\s*(?:[:#-]\s*)?)?[0-9]{{1,4}})*\s*)?\]
    # pointers into the documents: "paragraph 16", "paragraphs 3 and 4", "clause 2", "Item 2"
    | \b(?:paragraphs?|paras?|clauses?|items?|notes?|pages?|sections?|knowledge)[ \t]*(?:\#[ \t]*)?
      [0-9]{{1,4}}(?![0-9]|[.,][0-9])
      (?:[ \t]*(?:,|and|&|to|-|–)[ \t]*[0-9]{{1,4}}(?![0-9]|[.,][0-9]))*
    | [¶§][ \t]*[0-9]{{1,4}}
    # dates: the day of "March 31", "Mar. 31st", "31 March"; numeric dates "3/31/2024", "2024-03-31"
    | \b{_MONTH}[ \t]+[0-9]{{1,2}}(?:st|nd|rd|th)?\b(?!\.[0-9]|,[0-9]{{3}})
    | \b[0-9]{{1,2}}(?:st|nd|rd|th)?[ \t]+{_MONTH}\b
    | \b[0-9]{{1,2}}/[0-9]{{1,2}}/(?:[0-9]{{4}}|[0-9]{{2}})\b
    | \b[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}\b
    """,
    re.VERBOSE | re.IGNORECASE | re.MULTILINE,
)

# The dash of a range: right after a figure (and its unit or scale, glued or after a space:
# "10%-", "50bps-", "2.5x-", "3 million-") and right before the next figure. Read as " to ",
# so the upper bound is positive. Not the exponent of "2e-3".
_RANGE_DASH = re.compile(
    rf"(?<=[0-9%×])(?![eE]-)([A-Za-z]{{0,8}}|[ \t](?:{_SCALE_ALTERNATION}|percent|bps?|pp|ppts?|fold|x))"
    r"[-–—\u2212](?=(?:US\$|[$€£¥₹])?\.?[0-9])"
)


def _is_year(match: re.Match) -> bool:
    """A bare four-digit integer in :data:`YEARS`: nothing around it makes it an amount."""
    digits = match["digits"]
    return (
        len(digits) == 4 and digits.isdigit() and YEARS[0] <= int(digits) <= YEARS[1]
        and not (match["cur"] or match["cur2"] or match["sign"] or match["exponent"])
        and not (match["scale"] or match["unit"] or match["scale_after"])
    )


def _is_accounting_negative(match: re.Match, follows_a_figure: bool) -> bool:
    """Whether parentheses around the number make it negative (rule in the module docstring)."""
    parenthesised = match["open"] is not None and match["close"] is not None
    return parenthesised and not match["unit"] and not follows_a_figure


def _value(match: re.Match) -> float:
    value = float(match["digits"].replace(",", "") + (match["exponent"] or ""))
    scale = match["scale"] or (match["open"] is not None and match["scale_after"])
    return value * _SCALE_WORDS[scale.lower()] if scale else value


def extract_numbers(text: str | None) -> list[float]:
    """The distinct values stated in ``text``, in order of first appearance.

    >>> extract_numbers("Revenue rose 5% to $3 million in 2023, vs 3,000 thousand [16].")
    [5.0, 3000000.0]
    >>> extract_numbers("1. Net loss was (1.2) bn in Q3; margins of 10%-12%.")
    [-1200000000.0, 10.0, 12.0]
    """
    text = _NOT_VALUES.sub(" ", read_answer(text)[0])
    text = _RANGE_DASH.sub(r"\1 to ", text)
    values: list[float] = []
    seen: set[float] = set()
    bare_figure_end = None  # where the last figure outside parentheses ended
    for match in _NUMBER.finditer(text):
        follows_a_figure = bare_figure_end is not None and not text[bare_figure_end:match.start()].strip()
        bare_figure_end = match.end() if match["open"] is None else None
        if _is_year(match):
            continue
        value = _value(match)
        if match["sign"] in ("-", "\u2212") or _is_accounting_negative(match, follows_a_figure):
            value = -value
        if math.isfinite(value) and value not in seen:
            seen.add(value)
            values.append(value)
    return values


class _SortedValues:
    """Values kept sorted, so "is any value close to x" is a binary search, not a scan."""

    def __init__(self, values: Iterable[float]):
        self.values = sorted(values)

    def has_close(self, x: float) -> bool:
        # Whether g is within the tolerance of x is monotone in g on each side of x (and
        # never true across zero), so only the nearest value on each side can decide.
        values = self.values
        i = bisect.bisect_left(values, x)
        return (i < len(values) and math.isclose(x, values[i], rel_tol=RELATIVE_TOLERANCE, abs_tol=0.0)) or (
            i > 0 and math.isclose(x, values[i - 1], rel_tol=RELATIVE_TOLERANCE, abs_tol=0.0)
        )

    def matches(self, value: float) -> bool:
        return any(self.has_close(value * factor) for factor in SCALE_FACTORS)


def matched(values: Iterable[float], against: Iterable[float]) -> list[bool]:
    """For each of ``values``, whether some value of ``against`` matches it (within the
    relative tolerance, at one of the :data:`SCALE_FACTORS`).

    >>> matched([3.965, 7.0, 5.0], [3_970_000.0, 7000.0, 5.2])
    [True, True, False]
    """
    index = _SortedValues(against)
    return [index.matches(value) for value in values]


def prf_of_values(predicted: Sequence[float], reference: Sequence[float]) -> tuple[float, float, float]:
    """Precision, recall, F1 of two value sets; both empty gives (1, 1, 1), one empty (0, 0, 0)."""
    predicted_set, reference_set = set(predicted), set(reference)
    return prf(sum(matched(predicted_set, reference_set)), len(predicted_set),
               sum(matched(reference_set, predicted_set)), len(reference_set))


def numeric_prf(prediction: str | None, reference: str | None) -> tuple[float, float, float]:
    """FinLFQA numeric precision, recall and F1 of one answer against its reference.

    >>> numeric_prf("It grew 3.965%.", "growth of 3.97%")
    (1.0, 1.0, 1.0)
    >>> numeric_prf("3 million and 7", "3,000,000")
    (0.5, 1.0, 0.6666666666666666)
    """
    return prf_of_values(extract_numbers(prediction), extract_numbers(reference))
