"""Tolerant reading of the JSON objects the judge writes at every FinCARDS stage.

Judges wrap JSON in code fences or prose, and an answer cut off by the token budget ends in
the middle of a list. :func:`parse_json_object` takes the first JSON object in the text; when
that one was cut off it is repaired, by cutting it back to the last complete value and closing
the open brackets, so a card or a selection that ran out of tokens still yields the fields it
did write (the complete objects nested inside it do not win over it; a stray brace in prose
before the answer does not win over the answer). No JSON object at all is None (a parse
failure).

The ``as_*`` helpers then coerce the values a schema allows: enums whatever their case or
spelling, flags written as strings, shares clipped to [0, 1], ids written as "[Chunk Index 7]".
Nothing here raises on junk; the stages decide what a missing value means.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, TypeVar

D = TypeVar("D")  # the default of a coercion, returned as is

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*")
_DECODER = json.JSONDecoder()
# How many cut points of a truncated object to try, from the end backwards: enough for any
# real answer, and it bounds the work on megabytes of junk.
_MAX_REPAIR_TRIES = 64
_MAX_OPENINGS = 32
_MAX_DEPTH = 64


def parse_json_object(text: object) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (repairing a truncated one), or None.

    >>> parse_json_object('Sure! ```json\\n{"ranking": [3, 1]}\\n```')
    {'ranking': [3, 1]}
    >>> parse_json_object('{"selected": [{"id": 4, "score": 90}, {"id": 7, "sc')
    {'selected': [{'id': 4, 'score': 90}, {'id': 7}]}
    >>> parse_json_object('I guess {"a": 1 ... no. Answer: {"ranking": [2]}')
    {'ranking': [2]}
    >>> parse_json_object("no JSON here") is None
    True
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        return None
    text = _FENCE.sub(" ", text)
    openings = [m.start() for m in re.finditer(r"\{", text)][:_MAX_OPENINGS]
    if not openings:
        return None
    complete = None
    for start in openings:
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(value, dict):
            complete = (start, value)
            break
    if complete is not None and complete[0] == openings[0]:
        return complete[1]
    # The first object is broken. Repaired, it wins when it encloses the first complete one
    # (a truncated list of objects); prose with a stray brace before the answer does not.
    repaired = _repair_truncated(text[openings[0] :])
    if repaired is not None:
        value, end = repaired
        if complete is None or complete[0] < openings[0] + end:
            return value
    return complete[1] if complete is not None else None


def _repair_truncated(text: str) -> tuple[dict[str, Any], int] | None:
    """Close a JSON object that was cut off: scan once, remembering after every complete value
    which brackets were open, then try those cut points from the last one backwards.
    Returns the object and where in ``text`` the cut was made.

    The open brackets are a linked stack ``(closer, parent)``, so remembering them at a cut
    costs nothing; nesting deeper than ``_MAX_DEPTH`` is junk, not a judge's answer."""
    stack: tuple | None = None  # (closer, parent) or None
    depth = 0
    cuts: list[tuple[int, tuple | None]] = []
    in_string = escaped = False
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                cuts.append((i + 1, stack))
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
            if depth > _MAX_DEPTH:
                return None
            stack = ("}" if char == "{" else "]", stack)
        elif char in "}]":
            if stack is None or stack[0] != char:
                break  # malformed rather than truncated: stop at what was well formed
            stack, depth = stack[1], depth - 1
            cuts.append((i + 1, stack))
            if stack is None:
                break
        elif char.isalnum() and i + 1 < len(text) and not (text[i + 1].isalnum() or text[i + 1] in ".+-"):
            # the end of a number or of true/false/null (a token cut by the budget is not)
            cuts.append((i + 1, stack))
    for end, open_brackets in reversed(cuts[-_MAX_REPAIR_TRIES:]):
        closers = []
        while open_brackets is not None:
            closers.append(open_brackets[0])
            open_brackets = open_brackets[1]
        try:
            value = json.loads(text[:end].rstrip() + "".join(closers))
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(value, dict):
            return value, end
    return None


# ---------------------------------------------------------------------------------------------
# Values of a parsed object, coerced to what a schema allows (a wrong value becomes a default)


def _enum_key(text: str) -> str:
    return text.strip().lower().replace("-", "_").replace(" ", "_")


def as_enum(value: Any, allowed: tuple[str, ...], default: D, synonyms: Mapping[str, str] | None = None) -> str | D:
    """``value`` as one of ``allowed`` (case, spaces and hyphens ignored; ``synonyms`` maps
    other spellings), else ``default``.

    >>> as_enum("Non GAAP", ("GAAP", "non-GAAP"), "unknown")
    'non-GAAP'
    """
    if not isinstance(value, str):
        return default
    key = _enum_key(value)
    key = _enum_key((synonyms or {}).get(key, key))
    for option in allowed:
        if _enum_key(option) == key:
            return option
    return default


def as_flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1")
    return bool(value) if isinstance(value, (bool, int, float)) else False


def as_share(value: Any) -> float:
    """A number clipped to [0, 1]; anything else (or NaN) is 0."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return min(max(number, 0.0), 1.0) if number == number else 0.0


def as_strings(value: Any, limit: int = 6, length: int = 80) -> list[str]:
    """Up to ``limit`` non-empty strings of at most ``length`` characters (a lone string is a
    list of one)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    kept = [str(v).strip()[:length] for v in value if isinstance(v, (str, int, float)) and not isinstance(v, bool)]
    return [v for v in kept if v][:limit]


_INTEGER = re.compile(r"-?\d+")


def as_id(value: Any) -> int | None:
    """An integer id from an int, an integral float or the first integer in a string
    ("[Chunk Index 7]" -> 7); None otherwise.

    >>> as_id(7), as_id("[Chunk Index 12]"), as_id(3.0), as_id(True), as_id("none")
    (7, 12, 3, None, None)
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        match = _INTEGER.search(value)
        return int(match.group(0)) if match else None
    return None
