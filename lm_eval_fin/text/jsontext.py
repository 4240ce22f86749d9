"""Tolerant reading of the JSON that models and judges write, for every parser of the package.

Models wrap JSON in code fences or prose, write Python literals with single quotes, leave
trailing commas, and an answer cut off by the token budget ends in the middle of a list. The
readers here never raise on any input and bound their work on junk:

* :func:`strip_fences` removes code-fence markers;
* :func:`json_values` finds every bracketed JSON (or Python-literal) value of one kind in a text;
* :func:`loads_lenient` reads a text that IS one JSON value (bare or in a ```json fence,
  trailing commas forgiven);
* :func:`parse_json_object` takes the first JSON object in a text, repairing a truncated one
  by cutting it back to its last complete value and closing the open brackets, so a judge's
  object that ran out of tokens still yields the fields it did write;
* :func:`field` looks a key up whatever its case, trying several spellings;
* the ``as_*`` helpers coerce the values a schema allows: integers, enums whatever their case
  or spelling, flags written as strings, shares clipped to [0, 1], ids written as
  "[Chunk Index 7]".
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

D = TypeVar("D")  # the default of a coercion, returned as is

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*")
_FENCED_BODY = re.compile(r"```(?:json|JSON|python)?\s*(.*?)```", re.DOTALL)
_JSON_FENCE = re.compile(r"```[ \t]*(?:json|JSON)[ \t]*\n(?P<body>.*?)(?:```|\Z)", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_DECODER = json.JSONDecoder()
# How many cut points of a truncated object to try, from the end backwards: enough for any
# real answer, and it bounds the work on megabytes of junk.
_MAX_REPAIR_TRIES = 64
_MAX_OPENINGS = 32
_MAX_DEPTH = 64


def strip_fences(text: str) -> str:
    """``text`` with its code-fence markers (```json, ```) turned into spaces."""
    return _FENCE.sub(" ", text)


def _balanced_spans(text: str, opener: str, closer: str, max_restarts: int = 4) -> list[str]:
    """Top-level substrings from an ``opener`` to its matching ``closer``, in order.

    Quotes are honoured only inside brackets (prose apostrophes before a list must not open a
    string). An opener that is never closed restarts the scan just after it, at most
    ``max_restarts`` times, so that junk input costs linear time.
    """
    spans: list[str] = []
    position, restarts = 0, 0
    while position < len(text):
        depth, quote, escaped, start = 0, None, False, -1
        for index in range(position, len(text)):
            char = text[index]
            if quote:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == quote:
                    quote = None
            elif depth and char in "\"'":
                quote = char
            elif char == opener:
                if depth == 0:
                    start = index
                depth += 1
            elif char == closer and depth:
                depth -= 1
                if depth == 0:
                    spans.append(text[start : index + 1])
        if depth == 0 or restarts >= max_restarts:
            break
        restarts += 1
        position = start + 1
    return spans


def _load_structured(span: str) -> Any:
    for loader in (json.loads, ast.literal_eval):
        try:
            return loader(span)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return None


def json_values(text: str, opener: str = "{") -> list[Any]:
    """Every JSON (or Python-literal) value opened by ``opener`` (``"{"`` or ``"["``) in
    ``text``, then in the bodies of its code fences, in order.

    >>> json_values('Sure: {"score": 7} and {bad}')
    [{'score': 7}]
    >>> json_values("```python\\n['a', 'b']\\n```", "[")
    [['a', 'b'], ['a', 'b']]
    """
    closer = {"{": "}", "[": "]"}[opener]
    values = []
    for candidate in (text, *(m.group(1) for m in _FENCED_BODY.finditer(text))):
        for span in _balanced_spans(candidate, opener, closer):
            value = _load_structured(span)
            if value is not None:
                values.append(value)
    return values


def loads_lenient(text: str) -> Any:
    """The JSON value ``text`` consists of (bare, or in a ```json fence; trailing commas, the
    slip models make most often in hand-written JSON, forgiven), else None.

    >>> loads_lenient('```json\\n{"a": [1, 2,],}\\n```')
    {'a': [1, 2]}
    >>> loads_lenient("The answer is 3.") is None
    True
    """
    fence = _JSON_FENCE.search(text)
    body = fence["body"] if fence else text.strip()
    if body[:1] not in ("{", "["):
        return None
    closing = "}" if body[0] == "{" else "]"
    body = body[: body.rfind(closing) + 1]
    for candidate in (body, _TRAILING_COMMA.sub(r"\1", body)):
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError):
            continue
    return None


def field(mapping: Mapping, names: Sequence[str]) -> tuple[Any, Any]:
    """``(key, value)`` of the first of ``names`` that ``mapping`` has, whatever the key's case;
    ``(None, None)`` when it has none.

    >>> field({"Question": "q", "ID": 7}, ("id", "qid"))
    ('ID', 7)
    """
    lowered = {str(key).lower(): key for key in mapping}
    for name in names:
        if name in lowered:
            return lowered[name], mapping[lowered[name]]
    return None, None


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
    text = strip_fences(text)
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


def as_int(value: Any) -> int | None:
    """An integer written as an int, an integral float or a string of digits; None otherwise.

    >>> as_int(7), as_int(3.0), as_int(" 12 "), as_int(True), as_int("7a")
    (7, 3, 12, None, None)
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def as_id(value: Any) -> int | None:
    """An integer id from an int, an integral float or the first integer in a string
    ("[Chunk Index 7]" -> 7); None otherwise.

    >>> as_id(7), as_id("[Chunk Index 12]"), as_id(3.0), as_id(True), as_id("none")
    (7, 12, 3, None, None)
    """
    if isinstance(value, str):
        match = _INTEGER.search(value)
        return int(match.group(0)) if match else None
    return as_int(value)
