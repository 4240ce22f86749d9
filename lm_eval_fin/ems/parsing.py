"""Tolerant parsers of the judge outputs of the EMS pass: summary bounds, points, matches,
scores and claim verdicts.

Each returns None when the text cannot be read (the judge layer then retries, and the caller
counts what stays unreadable as a parse failure); none raises on any string. Each reads the
reply's answer part only (:func:`lm_eval_fin.text.replies.answer_part`), and a number that is one
end of a restated scale ("0-10", "between 0 and 10", ``<0-10>``) is never a value: a refusal
or a rubric echo is unreadable, not a score of 0 or a match with point 1. A number in prose is
read only under its key ("score: 7", "answer point 3"); a bare number only when it is the
whole reply.
"""

from __future__ import annotations

import math
import re
from typing import Any

from lm_eval_fin.text.jsontext import json_values
from lm_eval_fin.text.replies import answer_part, is_scale

_SIGNED = r"[-−]?\d+(?:\.\d+)?"
_NO_MATCH_WORDS = re.compile(r"\b(none|null|no match|no matching|not matched|nothing)\b", re.IGNORECASE)
# "answer point 3" names the match even after "reference point 1" ("Reference point 1
# matches answer point 3"); a mention of the reference point's own number is never the match.
_ANSWER_POINT = re.compile(
    rf"\banswer[\s_-]*point\s*(?:is|no\.?|number|[:=#])?\s*\[?\s*({_SIGNED})", re.IGNORECASE
)
_REFERENCE_POINT = re.compile(
    r"\breference[\s_-]*point\s*(?:no\.?|number|[:=#])?\s*\[?\s*\d+\]?", re.IGNORECASE
)
_KEYED_MATCH = re.compile(
    rf"\b(?:match|index|point)\b\s*(?:is|[:=#])?\s*\[?\s*({_SIGNED})", re.IGNORECASE
)
_KEYED_SCORE = re.compile(
    rf"\b(?:score|rating|rate)\b\s*(?:is|[:=]|of)?\s*({_SIGNED})(?:\s*(?:/|out of)\s*(\d+))?", re.IGNORECASE
)
_OUT_OF = re.compile(rf"({_SIGNED})\s*(?:/|out of)\s*(\d+)", re.IGNORECASE)
# A reply that is one number and nothing else (markdown emphasis, brackets, a full stop).
_ALONE = re.compile(rf"[\s*_`\[(]*({_SIGNED})[\s*_`\])]*\.?\s*")

_POINT_KEYS = ("point", "text", "content", "statement", "saliency_point")
_LIST_KEYS = ("points", "saliency_points", "key_points", "items", "list")
_MATCH_KEYS = ("match", "index", "best_match", "answer_point")
_SCORE_KEYS = ("score", "rating", "value")


def _as_point(item: Any) -> str | None:
    """The text of one list item: a string, or an object holding the point under a usual key."""
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        for key in _POINT_KEYS:
            if isinstance(item.get(key), str):
                return item[key]
    return None


def _as_point_list(value: Any) -> list[str] | None:
    """The points of a parsed value, or None if it is not a list of points."""
    if isinstance(value, dict):
        for key in _LIST_KEYS:
            if isinstance(value.get(key), list):
                return _as_point_list(value[key])
        return None
    if not isinstance(value, list):
        return None
    points = [_as_point(item) for item in value]
    texts = [point.strip() for point in points if point is not None]
    if len(texts) < len(points):  # an item that is no point
        return None
    return [text for text in texts if text]


def parse_points(text: str | None) -> list[str] | None:
    """The saliency points of an extraction output: a JSON list of strings.

    Also accepted: code fences, prose around the list, single quotes (a Python literal),
    ``{"points": [...]}`` and lists of ``{"point": ...}`` objects. Empty strings are dropped;
    ``[]`` is a valid, empty extraction.

    >>> parse_points('Here you go:\\n```json\\n["Revenue rose 6%.", "Margins fell."]\\n```')
    ['Revenue rose 6%.', 'Margins fell.']
    >>> parse_points("I cannot help with that.") is None
    True
    """
    if not isinstance(text, str):
        return None
    text = answer_part(text)
    for value in json_values(text, "[") + json_values(text, "{"):
        points = _as_point_list(value)
        if points is not None:
            return points
    return None


def _to_number(token: str) -> float:
    return float(token.replace("−", "-"))


def _keyed_value(text: str, keys: tuple[str, ...]) -> tuple[bool, Any]:
    """(found, value) for the first of ``keys`` in the first JSON object of ``text`` with one."""
    for value in json_values(text, "{"):
        if isinstance(value, dict):
            for key in keys:
                if key in value:
                    return True, value[key]
    return False, None


def _number_from(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):  # "7", not "<0-10>" or "0 to 10"
        found = _ALONE.fullmatch(value)
        return _to_number(found.group(1)) if found else None
    if isinstance(value, list) and len(value) == 1:
        return _number_from(value[0])
    return None


def _values(pattern: re.Pattern, text: str, group: int = 1) -> list[re.Match]:
    """The matches of ``pattern`` whose number (``group``) is a value, not a scale's end."""
    return [m for m in pattern.finditer(text) if not is_scale(text, m.start(group), m.end(group))]


def _alone(text: str) -> str | None:
    """The number ``text`` consists of, or None."""
    found = _ALONE.fullmatch(text)
    return found.group(1) if found else None


def _prose_match(text: str) -> str | None:
    """The match a prose reply names, as written: its "answer point N", else the number of
    "match: N", else the reply's only content if it is a number; "-1" for a reply that says
    there is none; None when it names nothing."""
    answer_point = _values(_ANSWER_POINT, text)
    if answer_point:
        return answer_point[0].group(1)
    rest = _REFERENCE_POINT.sub(" ", text)
    keyed = _values(_KEYED_MATCH, rest)
    if keyed:
        return keyed[0].group(1)
    alone = _alone(rest)
    if alone is not None:
        return alone
    return "-1" if _NO_MATCH_WORDS.search(text) else None


def parse_match_number(text: str | None) -> int | None:
    """The answer-point number a matching output names, as written (numbered from 1), or -1.

    Reads ``{"match": 3}``, "Answer point 3", "Match: [3]", a reply that is only a number;
    -1, "none", "null" or ``{"match": null}`` mean no match. "answer point N" wins over any
    other number, and the number of a "reference point N" is never read as the match
    ("Reference point 1 matches answer point 3" is 3). A number in other prose ("None of
    the 3 points match" is -1, "I cannot choose among 5 points" unreadable) is not the
    match. Non-integers and numbers below -1 or equal to 0 are unreadable (None). The range
    check against the number of answer points is :func:`answer_index`'s; :func:`parse_match`
    does both.

    >>> parse_match_number('Best match: {"match": 3}')
    3
    >>> parse_match_number("None of them; -1")
    -1
    """
    if not isinstance(text, str):
        return None
    text = answer_part(text)
    found, value = _keyed_value(text, _MATCH_KEYS)
    if found and value is None:  # {"match": null}
        return -1
    if not found or isinstance(value, str):
        value = _prose_match(value if found else text)
        if value is None:
            return None
    number = _number_from(value)
    if number is None or number != int(number) or not (number == -1 or number >= 1):
        return None
    return int(number)


def answer_index(number: int | None, n_answer_points: int) -> int | None:
    """The 0-based answer-point index for a parsed match number, -1 for no match, None when
    the number is not on the list (1..n)."""
    if number is None:
        return None
    if number == -1:
        return -1
    return number - 1 if 1 <= number <= n_answer_points else None


def parse_match(text: str | None, n_answer_points: int) -> int | None:
    """:func:`parse_match_number` and :func:`answer_index` in one step.

    >>> parse_match('{"match": 3}', 5)
    2
    >>> parse_match("No matching point: -1", 5)
    -1
    >>> parse_match('{"match": 9}', 5) is None
    True
    """
    return answer_index(parse_match_number(text), n_answer_points)


def _prose_score(text: str, max_score: int) -> float | None:
    """The score a prose reply gives on 0..``max_score``: "score: 7", else "7/10" or "7 out
    of 10", else the reply's only content if it is a number. A score on another scale
    ("score: 4/5" when the scale is 0..10) is unreadable."""
    keyed = _values(_KEYED_SCORE, text)
    if keyed:
        scale = keyed[0].group(2)
        return _to_number(keyed[0].group(1)) if scale is None or int(scale) == max_score else None
    out_of = _values(_OUT_OF, text)
    if out_of:
        return _to_number(out_of[0].group(1)) if int(out_of[0].group(2)) == max_score else None
    alone = _alone(text)
    return _to_number(alone) if alone is not None else None


def parse_score(text: str | None, max_score: int = 10) -> float | None:
    """A matched pair's score in [0, 1]: the judge's number 0..max_score over max_score.

    Reads ``{"score": 7}``, "Score: 7", "7/10", "7 out of 10" or a reply that is only a
    number. The scale is integer, as the prompt asks: a non-integer ("7.5"), a value outside
    0..max_score, a score on another scale ("4/5") or the scale restated ("Score: 0-10",
    ``{"score": "<0-10>"}``) is unreadable (None), so the judge is asked again.

    >>> parse_score('{"score": 7}', 10)
    0.7
    >>> parse_score("I would rate this 8/10.", 10)
    0.8
    >>> parse_score("eleven", 10) is None
    True
    >>> parse_score('{"score": 7.5}', 10) is None
    True
    >>> parse_score("I cannot score this pair (scale: 0-10).", 10) is None
    True
    """
    if not isinstance(text, str):
        return None
    text = answer_part(text)
    found, value = _keyed_value(text, _SCORE_KEYS)
    if not found:
        number = _prose_score(text, max_score)
    elif isinstance(value, str):
        number = _prose_score(value, max_score)
    else:
        number = _number_from(value)
    if number is None or number != int(number) or not 0 <= number <= max_score:
        return None
    return int(number) / max_score


_VERDICT_WORDS = {
    "entailment": "entailment", "entailed": "entailment", "entails": "entailment", "supported": "entailment",
    "neutral": "neutral", "not mentioned": "neutral", "unsupported": "neutral", "unknown": "neutral",
    "contradiction": "contradiction", "contradicted": "contradiction", "contradicts": "contradiction",
}
_OPENING_KEYS = ("opening", "intro", "introduction")
_CLOSING_KEYS = ("closing", "conclusion", "outro")


def _count(value: Any) -> int | None:
    number = _number_from(value)
    if number is None or number != int(number) or number < 0:
        return None
    return int(number)


def parse_summary_bounds(text: str | None, n_units: int) -> tuple[int, int] | None:
    """(opening, closing): how many leading and trailing units of an ``n_units`` answer are
    introduction and conclusion, from ``{"opening": 1, "closing": 0}``.

    Both must be non-negative integers that leave at least one unit of body; anything else is
    unreadable (None), so the judge is asked again.

    >>> parse_summary_bounds('```json\\n{"opening": 1, "closing": 2}\\n```', 6)
    (1, 2)
    >>> parse_summary_bounds('{"opening": 3, "closing": 3}', 6) is None  # nothing left
    True
    """
    if not isinstance(text, str):
        return None
    text = answer_part(text)
    found_opening, opening = _keyed_value(text, _OPENING_KEYS)
    found_closing, closing = _keyed_value(text, _CLOSING_KEYS)
    if not (found_opening and found_closing):
        return None
    opening, closing = _count(opening), _count(closing)
    if opening is None or closing is None or opening + closing >= n_units:
        return None
    return opening, closing


def _verdict(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    return _VERDICT_WORDS.get(" ".join(value.lower().replace("_", " ").split()).strip(" .!"))


def parse_verdicts(text: str | None, n_claims: int) -> list[str] | None:
    """One verdict per claim (``entailment``, ``neutral`` or ``contradiction``), from
    ``{"verdicts": [...]}`` or a bare JSON list; "entailed", "supported" and the like are read
    as their verdict. A list of another length, or with a word that is no verdict, is
    unreadable (None).

    >>> parse_verdicts('{"verdicts": ["Entailment", "neutral", "contradicted"]}', 3)
    ['entailment', 'neutral', 'contradiction']
    >>> parse_verdicts('{"verdicts": ["entailment"]}', 2) is None
    True
    """
    if not isinstance(text, str):
        return None
    text = answer_part(text)
    for value in json_values(text, "{") + json_values(text, "["):
        if isinstance(value, dict):
            value = next((value[key] for key in ("verdicts", "labels", "results") if key in value), None)
        if isinstance(value, list) and len(value) == n_claims:
            verdicts = [verdict for verdict in map(_verdict, value) if verdict]
            if len(verdicts) == len(value):  # every item a verdict
                return verdicts
    return None
