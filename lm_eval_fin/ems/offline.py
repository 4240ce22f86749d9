"""Extraction and matching without a judge: the cheap EMS variant.

Extraction splits the text into bullets and sentences (the paper's sentence-splitter
alternative, which works best when the body is already a list) after setting aside headings
and the introductory and concluding summaries. Matching pairs each reference point with the
most similar answer point by content-word overlap.

Rules, so that results can be reproduced by hand:

* A bullet (``-``, ``*``, ``•``, ``1.``, ``1)``) is one point; a bullet of more than two
  sentences becomes points of two sentences each. Prose outside bullets gives one point per
  sentence. Repeated points are kept.
* Headings are not points: markdown ``#`` lines, lines that are only bold text, and short
  lines (at most :data:`HEADING_MAX_WORDS` words) that end with a colon.
* Introduction: the first paragraph, when more text follows it, and it ends with a colon or
  opens with a framing phrase ("Here is", "Below", "Sure", ...).
* Conclusion: the last paragraph, when text precedes it, if it opens with a summing-up phrase
  ("In summary", "Overall", "In conclusion", ...); in a single-paragraph answer, the last one
  or two sentences from such a phrase on.
* Matching: similarity is the F1 overlap of the two points' content words (lower-cased,
  Porter-stemmed, without stop words; numbers are words). A pair where both points state
  numbers but share none cannot match (numbers must agree, as the paper asks of the LLM
  matcher). A reference point matches its most similar answer point (the first on ties) if
  the similarity reaches :data:`MATCH_THRESHOLD`, else nothing (-1).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import Sequence

# Content-word F1 at or above which two points count as stating the same thing. Paraphrases
# of one fact score about 0.35-0.7 on earnings-call statements; different facts of the same
# call share topic words ("revenue", "quarter") and score about 0.05-0.25.
MATCH_THRESHOLD = 0.3
HEADING_MAX_WORDS = 8
MAX_SENTENCES_PER_POINT = 2

_BULLET = re.compile(r"^\s*(?:[-*•‣▪–—+]|\(?\d{1,2}[.)])\s+")
_MARKDOWN_HEADING = re.compile(r"^\s*#{1,6}\s")
_BOLD_ONLY = re.compile(r"^\s*(\*\*|__)[^*_]+\1\s*:?\s*$")
_EMPHASIS = re.compile(r"(\*\*|__|`)")
_INTRO_OPENER = re.compile(
    r"^(here(?:'s| is| are)|below\b|the following\b|following (?:is|are)\b|sure\b|certainly\b|"
    r"of course\b|absolutely\b|great question\b|let(?:'s| me| us)\b|in this (?:answer|response|analysis)\b)",
    re.IGNORECASE,
)
_SUMMARY_OPENER = re.compile(
    r"^(in (?:summary|conclusion|short|sum|closing)\b|overall\b|to (?:summari[sz]e|sum up|conclude)\b|"
    r"all in all\b|taken together\b|ultimately\b|in essence\b)",
    re.IGNORECASE,
)
# A sentence ends at . ! ? (optionally followed by a closing quote or bracket) before white
# space and a letter, digit, quote or bracket; the abbreviation check below vetoes the rest.
_SENTENCE_END = re.compile(r"[.!?][\"”’')\]]*\s+(?=[A-Za-z0-9\"“‘'(\[$])")
_ABBREVIATIONS = {
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "inc",
    "corp",
    "co",
    "ltd",
    "llc",
    "plc",
    "no",
    "vs",
    "etc",
    "e.g",
    "i.e",
    "approx",
    "est",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "fig",
    "st",
    "u.s",
    "u.k",
    "q",
    "fy",
}
_STOP_WORDS = frozenset(
    """a an the and or but nor so yet of in on at to for from by with about as into through over
    under between within without than then that this these those there here it its it's is are
    was were be been being has have had do does did will would shall should can could may might
    must which who whom whose what when where why how also not no very more most much many such
    their they them our we us you your he she his her i me my also both each other some any all
    just only while during per via up down out off again further once same own too""".split()
)
_WORD = re.compile(r"[a-z]+|\d+(?:\.\d+)?")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def _clean(line: str) -> str:
    return _EMPHASIS.sub("", line).strip()


def _is_heading(line: str) -> bool:
    stripped = line.strip()
    if _MARKDOWN_HEADING.match(stripped) or _BOLD_ONLY.match(stripped):
        return True
    return stripped.endswith(":") and len(stripped.split()) <= HEADING_MAX_WORDS


def split_sentences(text: str) -> list[str]:
    """Sentences of a prose passage (abbreviations, initials and decimals do not split).

    >>> split_sentences("Revenue was $94.9 billion, up 6%. Mr. Cook cited the U.S. market. Margins held.")
    ['Revenue was $94.9 billion, up 6%.', 'Mr. Cook cited the U.S. market.', 'Margins held.']
    """
    sentences, start = [], 0
    for boundary in _SENTENCE_END.finditer(text):
        words = text[start : boundary.start()].split()
        last = words[-1].lower().rstrip(".") if words else ""
        if text[boundary.start()] == "." and (last in _ABBREVIATIONS or re.fullmatch(r"[a-z]", last)):
            continue
        sentences.append(text[start : boundary.end()].strip())
        start = boundary.end()
    sentences.append(text[start:].strip())
    return [sentence for sentence in sentences if sentence]


def _paragraphs(text: str) -> list[list[str]]:
    """Blank-line separated paragraphs as lists of non-empty lines; a bullet line always
    starts a new line-group so that prose around a list stays apart from it."""
    paragraphs, current = [], []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line.strip():
            current.append(line)
        elif current:
            paragraphs.append(current)
            current = []
    if current:
        paragraphs.append(current)
    return paragraphs


def _units(paragraph: list[str]) -> list[tuple[str, bool]]:
    """(text, is_bullet) for each bullet or prose block of a paragraph, headings dropped."""
    units: list[tuple[str, bool]] = []
    prose: list[str] = []
    for line in paragraph:
        if _is_heading(line):
            continue
        if _BULLET.match(line):
            if prose:
                units.append((" ".join(prose), False))
                prose = []
            units.append((_clean(_BULLET.sub("", line, count=1)), True))
        elif units and units[-1][1] and not prose and line.startswith((" ", "\t")):
            units[-1] = (units[-1][0] + " " + _clean(line), True)  # a bullet's wrapped line
        else:
            prose.append(_clean(line))
    if prose:
        units.append((" ".join(prose), False))
    return [(text, bullet) for text, bullet in units if text]


def _points_of(unit: str, is_bullet: bool) -> list[str]:
    sentences = split_sentences(unit)
    if not is_bullet:
        return sentences
    step = MAX_SENTENCES_PER_POINT
    return [" ".join(sentences[i : i + step]) for i in range(0, len(sentences), step)]


def extract_points(text: str | None) -> list[str]:
    """Saliency points of ``text`` by the rules in the module docstring.

    >>> extract_points("Here is the summary:\\n\\n- Revenue rose 6% to $94.9 billion.\\n"
    ...                "- Services hit a record.\\n\\nIn summary, a strong quarter.")
    ['Revenue rose 6% to $94.9 billion.', 'Services hit a record.']
    """
    if not isinstance(text, str):
        return []
    paragraphs = [units for units in map(_units, _paragraphs(text)) if units]
    if len(paragraphs) > 1:
        first_text, first_is_bullet = paragraphs[0][0]
        if (
            len(paragraphs[0]) == 1
            and not first_is_bullet
            and (first_text.endswith(":") or _INTRO_OPENER.match(first_text))
        ):
            paragraphs = paragraphs[1:]
    if len(paragraphs) > 1:
        last_text, last_is_bullet = paragraphs[-1][0]
        if not last_is_bullet and _SUMMARY_OPENER.match(last_text):
            paragraphs = paragraphs[:-1]
    points = [point for units in paragraphs for unit in units for point in _points_of(*unit)]
    if len(paragraphs) == 1 and len(points) > 2:
        # one block of prose: a summing-up sentence among the last two closes it
        for position in (len(points) - 1, len(points) - 2):
            if _SUMMARY_OPENER.match(points[position]):
                points = points[:position]
                break
    return points


@functools.lru_cache(maxsize=1)
def _porter():
    from nltk.stem import porter  # installed with rouge-score

    return porter.PorterStemmer()


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _porter().stem(word)


def _normal_number(token: str) -> str:
    """ "1,200.50" -> "1200.5": no thousands commas, no trailing decimal zeros."""
    value = token.replace(",", "")
    return value.rstrip("0").rstrip(".") if "." in value else value


def content_words(text: str) -> Counter:
    """Stemmed content words of ``text`` with their counts; numbers are normalised words."""
    words = _WORD.findall(text.lower().replace(",", ""))
    return Counter(
        _normal_number(word) if word[0].isdigit() else _stem(word)
        for word in words
        if word not in _STOP_WORDS
    )


def numbers_in(text: str) -> frozenset[str]:
    """The numbers a point states, normalised ("1,200.50" and "1200.5" are one number)."""
    return frozenset(_normal_number(token) for token in _NUMBER.findall(text))


def similarity(reference_point: str, answer_point: str) -> float:
    """Content-word F1 of two points; 0 when both state numbers and share none."""
    ref_numbers, answer_numbers = numbers_in(reference_point), numbers_in(answer_point)
    if ref_numbers and answer_numbers and not ref_numbers & answer_numbers:
        return 0.0
    return _overlap_f1(content_words(reference_point), content_words(answer_point))


def _overlap_f1(a: Counter, b: Counter) -> float:
    common = sum((a & b).values())
    if common == 0:
        return 0.0
    precision, recall = common / sum(b.values()), common / sum(a.values())
    return 2 * precision * recall / (precision + recall)


def match_points(
    reference_points: Sequence[str], answer_points: Sequence[str], threshold: float = MATCH_THRESHOLD
) -> list[int]:
    """For each reference point, the index of its most similar answer point, or -1.

    >>> match_points(["Revenue rose 6% to $94.9 billion."],
    ...              ["Services hit a record.", "Revenue increased 6% to $94.9 billion."])
    [1]
    """
    answer_numbers = [numbers_in(point) for point in answer_points]
    answer_words = [content_words(point) for point in answer_points]
    alignment = []
    for reference_point in reference_points:
        ref_numbers, ref_words = numbers_in(reference_point), content_words(reference_point)
        best_index, best = -1, 0.0
        for index, (numbers, words) in enumerate(zip(answer_numbers, answer_words)):
            if ref_numbers and numbers and not ref_numbers & numbers:
                continue
            value = _overlap_f1(ref_words, words)
            if value > best:
                best_index, best = index, value
        alignment.append(best_index if best >= threshold else -1)
    return alignment
