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
  opens with a framing phrase ("Here is", "Below", "Sure", ...); and a first prose block that
  ends with a colon and is followed by bullets, blank line or not ("Apple's key drivers
  were:" over a numbered list).
* Conclusion: the last prose block, when other text precedes it, if it is a summing-up
  sentence (the whole last paragraph goes when its first block is one); in a
  single-paragraph answer, the last one or two sentences from such a sentence on. A
  summing-up sentence opens with a summing-up phrase ("In summary", "Overall", "In
  conclusion", "In short", "All told", ...), or opens by referring back to what was said
  ("These elements", "This", "Together, these", "Collectively", ...) and goes on to judge or
  sum it ("position", "underscore", "highlight", "demonstrate", "reflect", ...) without stating
  a number: "These elements position Apple well for growth." is a summary, "These investments
  total $5 billion." and "This quarter revenue grew 5%." are points.
* Matching: similarity is the F1 overlap of the two points' content words (lower-cased,
  Porter-stemmed, without stop words; numbers are words). A pair where both points state
  numbers but none of them agree in context cannot match (numbers must agree, as the paper
  asks of the LLM matcher). A number's context is its unit: percent ("35%", "35 percent"),
  basis points, an amount (a currency sign or word, and a scale word such as "billion"; "$25
  billion" and "25 billion dollars" agree, "$25 billion" and "$25 million" do not) or else
  the word after it ("35 people"); two numbers agree when their values are equal and their
  contexts are equal or one of them has none ("in 2024," has none). So "Revenue grew 35%"
  and "The team added 35 people" share no number. A reference point matches its most similar
  answer point (the first on ties) if the similarity reaches :data:`MATCH_THRESHOLD`, else
  nothing (-1).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Sequence

from lm_eval_fin.measures.prf import f1

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
    r"^(in (?:summary|conclusion|short|sum|closing|brief|all)\b|overall\b|to (?:summari[sz]e|sum up|"
    r"conclude|wrap up)\b|all in all\b|all told\b|taken together\b|ultimately\b|in essence\b|"
    r"on balance\b|the bottom line\b|bottom line\b|altogether\b)",
    re.IGNORECASE,
)
# A closing sentence that refers back to the answer ("These elements ...", "This ...",
# "Together, these ...") and judges it; see _is_summary.
_BACK_REFERENCE = re.compile(
    r"^(?:(?:together|collectively|combined|taken as a whole|as a whole),?\s+|all of (?:this|these|that)\b|"
    r"(?:these|this|those|such)\b)",
    re.IGNORECASE,
)
_SUMMING_VERB = re.compile(
    r"\b(?:position|positions|positioned|underscore|underscores|highlight|highlights|demonstrate|"
    r"demonstrates|show|shows|reflect|reflects|suggest|suggests|indicate|indicates|signal|signals|"
    r"illustrate|illustrates|reinforce|reinforces|point to|points to|bode|bodes|set the stage|"
    r"sets the stage|leave|leaves|paint|paints|support|supports|strengthen|strengthens)\b",
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
# A stated number for matching: not glued to a word before it ("Q3", "FY2024"), with its unit.
_STATED_NUMBER = re.compile(
    r"(?<![A-Za-z0-9_.])(?P<currency>[$€£¥₹]\s?)?"
    r"(?P<value>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![\d])"
)
_UNIT_AFTER = re.compile(
    r"(?P<percent>\s?%|\s?(?:percent|per cent|pct|percentage points?)\b)"
    r"|(?P<bps>\s?(?:bps|basis points?)\b)"
    r"|(?P<multiple>[x×]\b|\s?times\b)"
    r"|(?:(?P<scale>\s?(?:thousand|million|billion|trillion)s?\b|\s?(?:bn|mn|mm|bln|mln|tn)\b|[kmbt]\b)"
    r"(?P<currency_word>\s+(?:dollars?|usd|euros?|pounds?|yen)\b)?)"
    r"|(?P<currency_only>\s+(?:dollars?|usd|euros?|pounds?|yen)\b)"
    r"|\s+(?P<word>[A-Za-z][A-Za-z'-]*)(?:\s+(?P<word2>[A-Za-z][A-Za-z'-]*))?",
    re.IGNORECASE,
)
# Words between a count and what it counts ("1,000 new stores"): the next word is the context.
_COUNT_MODIFIERS = frozenset(
    "new additional more fewer less net total other extra further consecutive straight full "
    "roughly approximately about nearly over under some".split()
)
_SCALE_NAMES = {
    "k": "thousand", "m": "million", "mm": "million", "mn": "million", "mln": "million",
    "b": "billion", "bn": "billion", "bln": "billion", "t": "trillion", "tn": "trillion",
}


def _clean(line: str) -> str:
    return _EMPHASIS.sub("", line).strip()


def _is_heading(line: str) -> bool:
    stripped = line.strip()
    if _MARKDOWN_HEADING.match(stripped) or _BOLD_ONLY.match(stripped):
        return True
    return stripped.endswith(":") and len(stripped.split()) <= HEADING_MAX_WORDS


def _is_summary(sentence: str) -> bool:
    """A summing-up sentence (see the module docstring): a summing-up opener, or a reference
    back to the answer with a judging verb and no number."""
    if _SUMMARY_OPENER.match(sentence):
        return True
    return bool(
        _BACK_REFERENCE.match(sentence) and _SUMMING_VERB.search(sentence) and not _NUMBER.search(sentence)
    )


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
    if paragraphs and len(paragraphs[0]) > 1:
        # a lead-in ending with a colon right above its list: "Apple's drivers were:\n1. ..."
        (first_text, first_is_bullet), (_, next_is_bullet) = paragraphs[0][:2]
        if not first_is_bullet and next_is_bullet and first_text.endswith(":"):
            paragraphs[0] = paragraphs[0][1:]
    if len(paragraphs) > 1:
        last_text, last_is_bullet = paragraphs[-1][0]
        if not last_is_bullet and _is_summary(last_text):
            paragraphs = paragraphs[:-1]
    if sum(map(len, paragraphs)) > 1:
        # a closing block right under a list, without a blank line: "- ...\nThese elements ..."
        last_text, last_is_bullet = paragraphs[-1][-1]
        if not last_is_bullet and any(bullet for units in paragraphs for _, bullet in units):
            if _is_summary(last_text):
                paragraphs[-1] = paragraphs[-1][:-1]
                paragraphs = [units for units in paragraphs if units]
    points = [point for units in paragraphs for unit in units for point in _points_of(*unit)]
    if len(paragraphs) == 1 and len(points) > 2:
        # one block of prose: a summing-up sentence among the last two closes it
        for position in (len(points) - 1, len(points) - 2):
            if _is_summary(points[position]):
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


def _unit(text: str, match: re.Match) -> str | None:
    """The context of one stated number (see the module docstring): "%", "bps", "x",
    "amount:<scale>", "word:<stem>", or None."""
    value = match.group("value")
    after = _UNIT_AFTER.match(text, match.end())
    currency = bool(match.group("currency"))
    if after is not None:
        if after.group("percent"):
            return "%"
        if after.group("bps"):
            return "bps"
        if after.group("multiple"):
            return "x"
        if after.group("scale"):
            word = after.group("scale").strip().lower()
            return "amount:" + _SCALE_NAMES.get(word, word.rstrip("s"))
        if after.group("currency_only"):
            return "amount:"
    if currency:
        return "amount:"
    if re.fullmatch(r"(?:19|20)\d\d", value):
        return None  # a year: its neighbour says nothing about what it counts
    if after is not None and after.group("word"):
        word = after.group("word").lower()
        if word in _COUNT_MODIFIERS and after.group("word2"):
            word = after.group("word2").lower()
        if word not in _STOP_WORDS and word not in _COUNT_MODIFIERS:
            return "word:" + _stem(word)
    return None


def numbers_in(text: str) -> frozenset[tuple[str, str | None]]:
    """The numbers a point states, each with its context (see the module docstring):
    ``("35", "%")``, ``("94.9", "amount:billion")``, ``("35", "word:peopl")``, ``("2024", None)``.
    Values are normalised ("1,200.50" and "1200.5" are one number)."""
    return frozenset(
        (_normal_number(match.group("value")), _unit(text, match)) for match in _STATED_NUMBER.finditer(text)
    )


def numbers_agree(a: frozenset[tuple[str, str | None]], b: frozenset[tuple[str, str | None]]) -> bool:
    """Whether two points' numbers allow a match: one of them states none, or some number
    of one equals some number of the other in value and context (a number without context
    agrees with any context of its value)."""
    if not a or not b:
        return True
    return any(
        value == other and (unit == other_unit or unit is None or other_unit is None)
        for value, unit in a
        for other, other_unit in b
    )


def similarity(reference_point: str, answer_point: str) -> float:
    """Content-word F1 of two points; 0 when both state numbers and none agree in context."""
    if not numbers_agree(numbers_in(reference_point), numbers_in(answer_point)):
        return 0.0
    return _overlap_f1(content_words(reference_point), content_words(answer_point))


def _overlap_f1(a: Counter, b: Counter) -> float:
    common = sum((a & b).values())
    if common == 0:
        return 0.0
    return f1(common / sum(b.values()), common / sum(a.values()))


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
            if not numbers_agree(ref_numbers, numbers):
                continue
            value = _overlap_f1(ref_words, words)
            if value > best:
                best_index, best = index, value
        alignment.append(best_index if best >= threshold else -1)
    return alignment
