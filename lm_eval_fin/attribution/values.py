"""One attribute's value in an attributed answer: an evidence citation, an index list, a code
snippet, written as text ("CWT [3, 16]; AWK [2]", "[4]", a fenced block) or as JSON."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable
from typing import Any

from lm_eval_fin.text.jsontext import as_int, field

Evidence = tuple[str, int]

# A range like "3-7" expands to its members; longer spans are typos, not citations.
_MAX_RANGE = 50

# A fenced code block (an unclosed one runs to the end), and a line that opens or closes one.
FENCED_BLOCK = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.DOTALL)
FENCE = re.compile(r"^[ \t>]*(?P<ticks>`{3,}|~{3,})[ \t]*(?P<lang>[\w+\-]*)[ \t]*(?P<rest>.*)$")

_INFERRED = re.compile(
    r"\b(?:inferred|derived|follows?|deduced|computed|calculated|based)\s+(?:directly\s+)?"
    r"(?:from|on)\s+(?:the\s+)?(?:(?:previous|prior|above|earlier|preceding)\s+)?"
    r"clauses?\s*(?P<numbers>[0-9]+(?:\s*(?:,|and|&|-|–)\s*[0-9]+)*)?"
    r"|\b(?:inferred|derived)\s+from\s+(?:the\s+)?(?:previous|prior|above|earlier|preceding)\s+clauses?",
    re.IGNORECASE,
)
_CLAUSE_REFERENCE = re.compile(r"\bclauses?\s*(?:#\s*)?[0-9]+(?:\s*(?:,|and|&|-|–)\s*[0-9]+)*", re.IGNORECASE)
# A word is followed by its cue when it is used as a label: "CWT [", "CWT:", "CWT 16", "CWT-16".
_EVIDENCE_TOKEN = re.compile(
    r"(?P<range>[0-9]+\s*[-–]\s*[0-9]+)(?![0-9.])|(?P<number>[0-9]+)(?![0-9]|\.[0-9])"
    r"|(?P<word>[A-Za-z](?:[A-Za-z0-9.&'’]|-(?=[A-Za-z]))*)"
    r"(?P<cue>(?=[ \t]*(?:[\[:(#=\"']|-[ \t]*[0-9]|[0-9])))?"
)
# Numbers on an Evidence line that are not paragraph indices: document names and numbers glued
# to letters ("10-Q", "3rd", "125m"), years, amounts ("$125 million", "25%", "1.5"), and
# pointers to things that are not paragraphs ("Table 3", "page 12", "Note 5"). A paragraph
# index is a small bare integer, so these are blanked before the line is read.
_NOT_INDICES = re.compile(
    r"[$€£¥₹][ \t]?[0-9][0-9,.]*(?:[ \t]?(?:thousand|million|billion|trillion)\b)?"
    r"|(?<![0-9])[0-9][0-9,]*(?:\.[0-9]+)?[ \t]?(?:%|percent\b|thousand\b|million\b|billion\b|trillion\b)"
    r"|(?<![0-9])[0-9]+\.[0-9]+"
    r"|(?<![0-9])(?:19|20)[0-9]{2}(?![0-9])"
    r"|(?<![0-9])[0-9]+-?(?=[A-Za-z])"
    r"|\b(?:tables?|pages?|notes?|items?|exhibits?|figures?|charts?)[ \t]*#?[ \t]*[0-9]+(?:[ \t]*[-–][ \t]*[0-9]+)?",
    re.IGNORECASE,
)
_BRACKETED = re.compile(r"\[[^\[\]]*\]")
# Indices stated as such: in square brackets, or after "paragraph" ("paragraphs 3 and 4").
_EXPLICIT_INDICES = re.compile(
    r"\[[^\[\]]*\]|(?:\b(?:paragraphs?|paras?)\b\.?|¶)[ \t]*#?[ \t]*[0-9]+"
    r"(?:[ \t]*(?:,|and|&|to|-|–)[ \t]*[0-9]+(?![0-9]))*",
    re.IGNORECASE,
)
# After a number, the company it belongs to: "16 (CWT)", "3 and 4 of AWK", "3-4 of the AWK".
# The run of numbers it looks across is bounded, or each number of a long list would rescan
# the rest of it (quadratic time on a hostile answer).
_OWNER_AFTER = re.compile(
    r"(?:[ \t]*(?:,|and|&)[ \t]*[0-9]+(?:[ \t]*[-–][ \t]*[0-9]+)?){0,10}"
    r"[ \t]*(?:(?P<paren>\()[ \t]*|of[ \t]+(?:the[ \t]+)?)(?=[A-Za-z])",
    re.IGNORECASE,
)
# Words an evidence line uses that are not companies.
_NOT_COMPANIES = frozenset(
    "PARAGRAPH PARAGRAPHS PARA PARAS P PP AND OR OF FROM IN THE NONE NA N/A NO NOT ANY "
    "EVIDENCE SEE ALSO INDEX INDICES IDX REPORT REPORTS FOR TO NULL NIL NOTHING Q K QTR "
    "FY ITEM NOTE PAGE TABLE ID".split()
)
_TICKER_SHAPE = re.compile(r"[A-Z][A-Z.&\-]{0,9}")


def _numbers_in(token: str) -> list[int]:
    """"16" -> [16]; "3-5" -> [3, 4, 5] (spans longer than _MAX_RANGE keep their ends)."""
    parts = [int(p) for p in re.split(r"\s*[-–]\s*", token) if p]
    if len(parts) == 2 and 0 <= parts[1] - parts[0] <= _MAX_RANGE:
        return list(range(parts[0], parts[1] + 1))
    return parts


def inferred_clauses(value: str) -> tuple[int, ...]:
    numbers: list[int] = []
    for match in _INFERRED.finditer(value):
        if match["numbers"]:
            numbers.extend(int(n) for n in re.findall(r"[0-9]+", match["numbers"]))
    return tuple(numbers)


def _company(word: str, used_as_label: bool, companies: dict[str, str]) -> str | None:
    """The ticker a word names: one of ``companies`` (matched case-insensitively, possessive
    and trailing dots dropped), else an upper-case ticker-shaped word used as a label
    ("XYZ [3]", "XYZ: 3", "XYZ 3"), else None."""
    word = re.sub(r"(?:'s|’s|['’.&])+$", "", word)
    if not word:
        return None
    known = companies.get(word.upper())
    if known:
        return known
    if used_as_label and _TICKER_SHAPE.fullmatch(word) and word not in _NOT_COMPANIES:
        return word
    return None


def _blank(match: re.Match) -> str:
    return " " * len(match.group())


def _index_candidates(value: str) -> str:
    """``value`` with every number that cannot be a paragraph index blanked (see
    :data:`_NOT_INDICES`). When some square brackets hold a number, the model put its indices
    there, so other numbers are blanked too ("CWT [16], 2 tables"), except those after
    "paragraph", which say what they are."""
    value = _NOT_INDICES.sub(_blank, value)
    if not any(re.search(r"[0-9]", b.group()) for b in _BRACKETED.finditer(value)):
        return value
    kept, start = [], 0
    for explicit in _EXPLICIT_INDICES.finditer(value):
        kept.append(re.sub(r"[0-9]", " ", value[start:explicit.start()]))
        kept.append(explicit.group())
        start = explicit.end()
    kept.append(re.sub(r"[0-9]", " ", value[start:]))
    return "".join(kept)


def _company_named_after(value: str, position: int, companies: dict[str, str]) -> str | None:
    """The company a number ending at ``position`` is attributed to by what follows it:
    "16 (CWT)", "3 and 4 of AWK"; None when what follows names no company."""
    link = _OWNER_AFTER.match(value, position)
    if not link:
        return None
    word = _EVIDENCE_TOKEN.match(value, link.end())
    if not word or not word["word"]:
        return None
    if link["paren"] and not re.match(r"[ \t]*\)", value[word.end():word.end() + 20]):
        return None  # "CWT: 16 (AWK: 3)" opens AWK's own list; only "16 (AWK)" names an owner
    return _company(word["word"], word["cue"] is not None, companies)


def parse_evidence(value: str, companies: Iterable[str] = ()) -> tuple[Evidence, ...]:
    """(company, paragraph) pairs named in an Evidence value.

    Numbers belong to the company named before them ("CWT [3, 16]; AWK [2]", "CWT: 3, AWK: 5",
    "CWT-16"), unless the company follows them directly ("paragraph 3 (AWK)", "paragraph 3 of
    AWK"); numbers before any company go to the first company named after them ("paragraph 16
    of CWT"); without any company they keep company "". "inferred from clause 2", "none" and
    "[]" name no evidence. Numbers that cannot be paragraph indices (years, amounts, "10-Q",
    "Table 3") are not read, and when square brackets hold numbers only those are read.

    >>> parse_evidence("CWT [16], AWK []")
    (('CWT', 16),)
    >>> parse_evidence("paragraphs 3-4 of cwt; AWK: 7", companies=["CWT", "AWK"])
    (('CWT', 3), ('CWT', 4), ('AWK', 7))
    >>> parse_evidence("Paragraph 16 (CWT), paragraph 3 (AWK) of the 10-Q", companies=["CWT", "AWK"])
    (('CWT', 16), ('AWK', 3))
    """
    known = {c.upper(): c for c in companies}
    value = _index_candidates(_CLAUSE_REFERENCE.sub(" ", _INFERRED.sub(" ", value or "")))
    pairs: list[Evidence] = []
    current: str | None = None
    pending: list[int] = []
    for token in _EVIDENCE_TOKEN.finditer(value):
        if token["word"]:
            company = _company(token["word"], token["cue"] is not None, known)
            if company is None:
                continue
            current = company
            pairs.extend((company, n) for n in pending)
            pending = []
        else:
            numbers = _numbers_in(token["range"] or token["number"])
            if current is None or _company_named_after(value, token.end(), known) not in (None, current):
                pending.extend(numbers)
            else:
                pairs.extend((current, n) for n in numbers)
    pairs.extend(("", n) for n in pending)
    return tuple(dict.fromkeys(pairs))


_INDEX = r"[0-9]+(?:[ \t]*[-–][ \t]*[0-9]+)?"
# An index list in brackets: "[3]", "[2, 5]", "(1-3)", "[K2 and K4]"; "[ROE * 100]" is not one.
_INDEX_GROUP = re.compile(
    rf"[\[(][ \t]*(?:[Kk#][ \t]*)?{_INDEX}"
    rf"(?:[ \t]*(?:,|;|and|&)[ \t]*(?:[Kk#][ \t]*)?{_INDEX})*[ \t]*[\])]"
)
_INDEX_TOKEN = re.compile(_INDEX)
# Elsewhere only the index an item of the list starts with counts ("2 (ROE formula), K7",
# "paragraph 16"): the numbers inside a formula or a description are not indices.
_LIST_ITEM = re.compile(r"\band\b|[^,;\n&]+?(?=[,;\n&]|\band\b|$)", re.IGNORECASE)
_LEADING_INDEX = re.compile(
    rf"[ \t\[(*_:]*(?:(?:knowledge|entry|entries|paragraphs?|paras?|items?|no\.?|[k#¶])[ \t]*[:#.]?[ \t]*)?"
    rf"(?P<index>{_INDEX})(?![0-9]|[.,][0-9]|-?[A-Za-z]|[ \t]*[%*/+=^])",
    re.IGNORECASE,
)


def parse_indices(value: str) -> tuple[int, ...]:
    """Knowledge indices in a value (ranges expanded, clause references out): the integers of
    bracketed index lists, and the index each item of the list starts with; the numbers
    of a formula or description ("[3] ROE = NI / equity * 100") are not indices.

    >>> parse_indices("[2, 5] (ROE formula), K7")
    (2, 5, 7)
    >>> parse_indices("[3] ROE = net income / equity * 100")
    (3,)
    """
    value = _CLAUSE_REFERENCE.sub(" ", value or "")
    found: list[tuple[int, str]] = [
        (index.start() + group.start(), index.group())
        for group in _INDEX_GROUP.finditer(value)
        for index in _INDEX_TOKEN.finditer(group.group())
    ]
    rest = _INDEX_GROUP.sub(_blank, value)
    for item in _LIST_ITEM.finditer(rest):
        leading = _LEADING_INDEX.match(item.group())
        if leading:
            found.append((item.start() + leading.start("index"), leading["index"]))
    numbers = [n for _, token in sorted(found) for n in _numbers_in(token)]
    return tuple(dict.fromkeys(numbers))


# What a Code value says when there is no code, once punctuation around it is stripped.
_NO_CODE = re.compile(
    r"(?:none|n/?a|null|nil|no|no(?:ne)?\s+code\b.*|not\s+(?:applicable|needed|required)\b.*)",
    re.IGNORECASE | re.DOTALL,
)
_PUNCTUATION = " \t\n-–—*_`'\"[](){}.:;,!"
_INLINE_CODE = re.compile(r"`{1,3}(?P<code>[^`]+)`{1,3}")


def clean_snippet(code: str) -> str:
    """Code as it will run: dedented, since code indented under a list item or after "Code:"
    would otherwise fail with IndentationError, and without blank lines around it."""
    return textwrap.dedent(code).strip("\n").rstrip()


def fence_opening(line: str) -> re.Match | None:
    """The code fence a line (or a Code value) opens; None for ```code``` closed on the line."""
    opening = FENCE.match(line)
    if opening and opening["rest"].rstrip().endswith(opening["ticks"]):
        return None
    return opening


def _says_no_code(value: str) -> bool:
    core = value.strip(_PUNCTUATION)
    return not core or _NO_CODE.fullmatch(core) is not None


# Without backticks or a fence, a value is code only if it reads like code: prose such as
# "None needed" or "see the table" is not a snippet to run.
_LOOKS_LIKE_CODE = re.compile(r"\bdef\s+\w+\s*\(|\breturn\b|\blambda\b")


def inline_code(value: str) -> str | None:
    """A snippet written on the Code line itself, or None ("none", "N/A", "see below", and
    a fence opened on the line, "```python", whose code follows on the next lines)."""
    value = value.strip()
    if _says_no_code(value) or fence_opening(value):
        return None
    match = _INLINE_CODE.search(value)
    if match:
        code = re.sub(r"^(?:python3?|py)\b", "", match["code"].strip(), flags=re.IGNORECASE).strip()
        return code or None
    if _LOOKS_LIKE_CODE.search(value):
        return value
    return None


def evidence_from_json(value: Any, companies: Iterable[str] = ()) -> tuple[Evidence, ...]:
    """Evidence in any JSON shape a model or the dataset uses: ``{"CWT": [16], "AWK": []}``,
    ``[["CWT", 16]]``, ``["CWT 16"]``, ``[{"company": "CWT", "paragraph": 16}]``, a string."""
    companies = list(companies)
    known = {c.upper(): c for c in companies}
    if value is None:
        return ()
    if isinstance(value, str):
        return parse_evidence(value, companies)
    pairs: list[Evidence] = []
    if isinstance(value, dict):
        company = field(value, ("company", "ticker", "doc", "document", "source"))[1]
        if company is not None:
            indices = field(value, ("paragraph", "paragraphs", "index", "indices", "idx", "id", "ids"))[1]
            indices = indices if isinstance(indices, list) else [indices]
            name = known.get(str(company).upper(), str(company).strip())
            pairs.extend((name, n) for n in map(as_int, indices) if n is not None)
        else:
            for key, indices in value.items():
                name = known.get(str(key).upper(), str(key).strip())
                if isinstance(indices, (list, tuple)):
                    pairs.extend((name, n) for n in map(as_int, indices) if n is not None)
                elif (index := as_int(indices)) is not None:
                    pairs.append((name, index))
                elif isinstance(indices, str):
                    pairs.extend((name, n) for n in parse_indices(indices))
    elif isinstance(value, (list, tuple)):
        for item in value:
            if (
                isinstance(item, (list, tuple)) and len(item) == 2
                and isinstance(item[0], str) and (index := as_int(item[1])) is not None
            ):
                pairs.append((known.get(item[0].upper(), item[0].strip()), index))
            elif (index := as_int(item)) is not None:
                pairs.append(("", index))
            else:
                pairs.extend(evidence_from_json(item, companies))
    return tuple(dict.fromkeys(pairs))


def code_from_json(value: Any) -> tuple[str, ...]:
    """Snippets in a JSON code value: fenced blocks, else the whole string when it reads like
    code (as :func:`inline_code` decides), else nothing ("None needed", "N/A")."""
    if isinstance(value, str):
        fenced = FENCED_BLOCK.findall(value)
        if fenced:
            return tuple(clean_snippet(code) for code in fenced if code.strip())
        if _says_no_code(value):
            return ()
        if _LOOKS_LIKE_CODE.search(value):
            return (clean_snippet(value),)
        inline = inline_code(value)
        return (inline,) if inline else ()
    if isinstance(value, (list, tuple)):
        return tuple(snippet for item in value for snippet in code_from_json(item))
    return ()


def knowledge_from_json(value: Any) -> tuple[int, ...]:
    if value is None or isinstance(value, bool):
        return ()
    if (index := as_int(value)) is not None:
        return (index,)
    if isinstance(value, str):
        return parse_indices(value)
    if isinstance(value, (list, tuple)):
        return tuple(dict.fromkeys(n for item in value for n in knowledge_from_json(item)))
    return ()
