"""Numbers in financial prose, and FinLFQA's numeric precision / recall / F1 (paper section 4.2).

Extraction turns a text into the set of values it states:

* thousands separators, decimals, signs (``-`` and the Unicode minus), ``%`` / ``percent``,
  currency symbols (``$ € £ ¥ ₹``, ``US$``), ``x`` multiples and ``bps`` are read as the bare
  number (5% -> 5; matching absorbs the factor 100 between 5% and 0.05);
* accounting negatives: ``(1.2)``, ``($1.2)``, ``$(1.2)``, ``(1.2) bn``, ``(2.5)%`` -> negative,
  as in a table cell (``| (1,234) |``) or after a label (``Net loss (1.2)``). Parentheses
  make a negative only when they hold nothing but an optional currency sign, the number and
  an optional scale word. Not negatives: a year (``(2023)``); a unit inside the parentheses
  (``(25%)``, ``(2.5x)``, ``(50 bps)``), which is how prose writes an aside; and a figure
  directly after another figure (``rose 25% ($25 million)``, ``1,234 (567)``), an aside that
  restates or converts it. The match rule is unchanged: signs still matter there;
* scale words multiply: thousand, million, billion, trillion (also plural) and the short
  forms k, m/mm/mn/mln/mil, b/bn/bln, t/tn/trn, glued or after one space, in any case;
  so "3 million", "3,000 thousand" and "3,000,000" are one value;
* not values: clause enumerators at the start of a line ("1.", "2)", "(3)", also inline
  "(1) the ..."), citation markers in brackets ("[16]", "[CWT 16, AWK 3]", "[]"), pointers
  into the documents ("paragraph 16", "clause 2", "Item 2", "Note 5", "page 12"), and
  numbers glued to letters ("Q3", "FY2023", "10-Q", "3rd", "COVID-19").

Matching (DESIGN.md "Numbers"): two values match when one, multiplied by some factor in
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

from lm_eval_fin.cleantext import read_answer
from lm_eval_fin.prf import prf

RELATIVE_TOLERANCE = 0.01
SCALE_FACTORS: tuple[float, ...] = (1.0, 100.0, 1000.0, 1e6, 0.01, 0.001, 1e-6)

_SCALE_WORDS = {
    "thousand": 1e3, "thousands": 1e3, "k": 1e3,
    "million": 1e6, "millions": 1e6, "m": 1e6, "mm": 1e6, "mn": 1e6, "mln": 1e6, "mil": 1e6,
    "billion": 1e9, "billions": 1e9, "b": 1e9, "bn": 1e9, "bln": 1e9,
    "trillion": 1e12, "trillions": 1e12, "t": 1e12, "tn": 1e12, "trn": 1e12,
}
_SCALE_ALTERNATION = "|".join(sorted(_SCALE_WORDS, key=len, reverse=True))

# One number with everything around it that changes its value. Groups: open/close (accounting
# parentheses), sign, digits, scale. The look-behinds keep numbers glued to a word ("Q3",
# "FY2023", "COVID-19") or to a decimal point out; the look-aheads after the number keep
# "3rd", "10-Q" and "5km" out while letting the scale word and suffixes through.
_NUMBER = re.compile(
    rf"""
    (?=[-+(\u2212$€£¥₹.0-9]|US\$)  # only these can start a number: rejects most positions fast
    (?<![\w.])(?<![A-Za-z]-)
    (?P<open>\(\s*)?
    (?:US)?[$€£¥₹]?\s?
    (?P<sign>[-+\u2212])?
    (?:US)?[$€£¥₹]?
    (?<![\w.])
    (?P<digits>[0-9]{{1,3}}(?:,[0-9]{{3}})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?|\.[0-9]+)
    (?![0-9])(?!-[A-Za-z])
    (?:[ \t]?(?P<scale>{_SCALE_ALTERNATION})(?![A-Za-z0-9_&'])(?!-[A-Za-z]))?
    (?:[ \t]?(?P<unit>%|percent\b|per[ \t]cent\b|bps\b|basis[ \t]points\b|[x×](?![A-Za-z0-9_])))?
    (?![A-Za-z0-9_])
    (?:(?P<close>\s*\))(?:[ \t]?(?P<scale_after>{_SCALE_ALTERNATION})(?![A-Za-z0-9_&'])(?!-[A-Za-z]))?)?
    """,
    re.VERBOSE | re.IGNORECASE,
)

# Spans that contain digits but state no value of the answer; blanked before extraction.
_NOT_VALUES = re.compile(
    rf"""
    # clause enumerators at the start of a line: "1.", "2)", "(3)", "**4.**", "- 5)"
    ^[ \t>#*\-•]*(?:\*\*|__)?(?:[0-9]{{1,2}}[.)]|\([0-9]{{1,2}}\))(?:\*\*|__)?(?=\s|$)
    # inline enumerators "(1) the ...", unless a scale word makes them an amount
    # (after a currency symbol it is an accounting negative: "$(8) and")
    | (?<![$€£¥₹])\([0-9]{{1,2}}\)(?=[ \t]+[A-Za-z])(?![ \t]+(?:{_SCALE_ALTERNATION}|percent)\b)
    # citation markers: "[16]", "[]", "[CWT 16]", "[CWT: 16, AWK: 3]", "[1-3]"
    | \[\s*(?:(?:[A-Za-z][\w.&]*\s*(?:[:#-]\s*)?)?[0-9]{{1,4}}
        (?:\s*[-–,;]\s*(?:[A-Za-z][\w.&]*\s*(?:[:#-]\s*)?)?[0-9]{{1,4}})*\s*)?\]
    # pointers into the documents: "paragraph 16", "paragraphs 3 and 4", "clause 2", "Item 2"
    | \b(?:paragraphs?|paras?|clauses?|items?|notes?|pages?|sections?|knowledge)[ \t]*(?:\#[ \t]*)?
      [0-9]{{1,4}}(?![0-9]|[.,][0-9])
      (?:[ \t]*(?:,|and|&|to|-|–)[ \t]*[0-9]{{1,4}}(?![0-9]|[.,][0-9]))*
    | [¶§][ \t]*[0-9]{{1,4}}
    """,
    re.VERBOSE | re.IGNORECASE | re.MULTILINE,
)


def _is_year(digits: str) -> bool:
    return len(digits) == 4 and digits.isdigit() and 1900 <= int(digits) <= 2100


def _is_accounting_negative(match: re.Match, follows_a_figure: bool) -> bool:
    """Whether parentheses around the number make it negative (rule in the module docstring)."""
    parenthesised = match["open"] is not None and match["close"] is not None
    return parenthesised and not match["unit"] and not follows_a_figure and not _is_year(match["digits"])


def extract_numbers(text: str | None) -> list[float]:
    """The distinct values stated in ``text``, in order of first appearance.

    >>> extract_numbers("Revenue rose 5% to $3 million (2023), vs 3,000 thousand [16].")
    [5.0, 3000000.0, 2023.0]
    >>> extract_numbers("1. Net loss was (1.2) bn in Q3.")
    [-1200000000.0]
    """
    text = _NOT_VALUES.sub(" ", read_answer(text)[0])
    values: list[float] = []
    seen: set[float] = set()
    bare_figure_end = None  # where the last figure outside parentheses ended
    for match in _NUMBER.finditer(text):
        digits = match["digits"]
        value = float(digits.replace(",", ""))
        scale = match["scale"] or (match["open"] is not None and match["scale_after"])
        if scale:
            value *= _SCALE_WORDS[scale.lower()]
        follows_a_figure = bare_figure_end is not None and not text[bare_figure_end:match.start()].strip()
        if match["sign"] in ("-", "\u2212") or _is_accounting_negative(match, follows_a_figure):
            value = -value
        bare_figure_end = match.end() if match["open"] is None else None
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


def prf_of_values(predicted: Sequence[float], reference: Sequence[float]) -> tuple[float, float, float]:
    """Precision, recall, F1 of two value sets; both empty gives (1, 1, 1), one empty (0, 0, 0)."""
    predicted, reference = set(predicted), set(reference)
    reference_index, predicted_index = _SortedValues(reference), _SortedValues(predicted)
    return prf(
        sum(reference_index.matches(m) for m in predicted), len(predicted),
        sum(predicted_index.matches(g) for g in reference), len(reference),
    )


def numeric_prf(prediction: str | None, reference: str | None) -> tuple[float, float, float]:
    """FinLFQA numeric precision, recall and F1 of one answer against its reference.

    >>> numeric_prf("It grew 3.965%.", "growth of 3.97%")
    (1.0, 1.0, 1.0)
    >>> numeric_prf("3 million and 7", "3,000,000")
    (0.5, 1.0, 0.6666666666666666)
    """
    return prf_of_values(extract_numbers(prediction), extract_numbers(reference))
