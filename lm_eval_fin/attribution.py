"""Attributed answers (FinLFQA): parse a model's answer into clauses with their evidence, code
and knowledge attributions, and score the attributions (paper section 4.3).

The format the FinLFQA prompt asks for (``tasks/finlfqa/README.md`` shows it to users)::

    1. <clause: one claim, in prose>
    Evidence: CWT [3, 16]; AWK [2]
    Code:
    ```python
    def cwt_interest_growth():
        return (125 - 100) / 100 * 100
    ```
    Knowledge: [4]
    2. <next clause>
    Evidence: inferred from clause 1
    Code: none
    Knowledge: []

:func:`parse_answer` also reads what models drift into: markdown headings, bullets and bold
labels (``**Evidence:**``), ``Clause 1:`` headers, attributes on the clause's own line,
``Evidence: CWT: [16], AWK: []``, ``paragraph 16 of CWT``, multi-line evidence lists, code
with or without fences (fences nested in an outer fence, or left unclosed), ``inferred from
clause 2`` (no evidence), and JSON answers (``{"clauses": [{"text": ..., "evidence": {...},
"code": ..., "knowledge": [...]}]}``, optionally in a ```json fence). An answer with no
attribution at all (no Evidence / Code / Knowledge label, and no JSON clause with an
evidence, code or knowledge key: a JSON list of bare claims is no more attributed than
"1. A claim.\n2. Another.") is a parse failure: it keeps its text for the text metrics but
has no clauses and no attributions. Snippets are dedented, so code indented under a list
item runs. Nothing here raises on any input.

Scores, per example (the task averages them over examples):

* evidence precision / recall / F1 over the sets of (company, paragraph index) pairs cited
  in all clauses; companies compare case-insensitively; a citation without a company
  (``Evidence: [3]``) keeps company ``""`` and so never matches a reference pair;
* knowledge recall over the sets of knowledge indices, 1 when the reference cites none
  (recall has nothing to miss; DESIGN.md defines no knowledge precision);
* evidence's empty cases follow the numeric metric's convention: both sides empty scores 1,
  exactly one side empty scores 0.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from lm_eval_fin.jsontext import as_int, field, loads_lenient
from lm_eval_fin.prf import set_prf

Evidence = tuple[str, int]

# A range like "3-7" expands to its members; longer spans are typos, not citations.
_MAX_RANGE = 50


@dataclass(frozen=True)
class Clause:
    text: str
    evidence: tuple[Evidence, ...] = ()
    code: tuple[str, ...] = ()
    knowledge: tuple[int, ...] = ()
    inferred_from: tuple[int, ...] = ()  # clause numbers named by "inferred from clause N"


@dataclass(frozen=True)
class ParsedAnswer:
    clauses: tuple[Clause, ...]
    parse_failure: bool
    raw_text: str = ""

    @property
    def text(self) -> str:
        """The answer's prose: the clause texts, or the whole answer when parsing failed."""
        if self.parse_failure:
            return self.raw_text.strip()
        return "\n".join(clause.text for clause in self.clauses if clause.text)

    @property
    def evidence(self) -> frozenset[Evidence]:
        return frozenset(pair for clause in self.clauses for pair in clause.evidence)

    @property
    def knowledge(self) -> frozenset[int]:
        return frozenset(index for clause in self.clauses for index in clause.knowledge)

    @property
    def code(self) -> tuple[str, ...]:
        return tuple(snippet for clause in self.clauses for snippet in clause.code)


# --------------------------------------------------------------------------- attribute values

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


def _snippet(code: str) -> str:
    """Code as it will run: dedented, since code indented under a list item or after "Code:"
    would otherwise fail with IndentationError, and without blank lines around it."""
    return textwrap.dedent(code).strip("\n").rstrip()


def _fence_opening(line: str) -> re.Match | None:
    """The code fence a line (or a Code value) opens; None for ```code``` closed on the line."""
    opening = _FENCE.match(line)
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
    if _says_no_code(value) or _fence_opening(value):
        return None
    match = _INLINE_CODE.search(value)
    if match:
        code = re.sub(r"^(?:python3?|py)\b", "", match["code"].strip(), flags=re.IGNORECASE).strip()
        return code or None
    if _LOOKS_LIKE_CODE.search(value):
        return value
    return None


# ------------------------------------------------------------------------------- JSON answers

_TEXT_KEYS = ("text", "clause", "content", "statement", "claim", "sentence", "answer")
_EVIDENCE_KEYS = ("evidence", "evidences", "citations", "citation", "sources", "references")
_CODE_KEYS = ("code", "python", "program", "codes")
_KNOWLEDGE_KEYS = ("knowledge", "knowledges", "professional_knowledge", "knowledge_indices")
_ATTRIBUTION_KEYS = frozenset(_EVIDENCE_KEYS + _CODE_KEYS + _KNOWLEDGE_KEYS)
_CLAUSE_LIST_KEYS = ("clauses", "answer", "answers", "response", "claims")


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
                elif as_int(indices) is not None:
                    pairs.append((name, as_int(indices)))
                elif isinstance(indices, str):
                    pairs.extend((name, n) for n in parse_indices(indices))
    elif isinstance(value, (list, tuple)):
        for item in value:
            if (
                isinstance(item, (list, tuple)) and len(item) == 2
                and isinstance(item[0], str) and as_int(item[1]) is not None
            ):
                pairs.append((known.get(item[0].upper(), item[0].strip()), as_int(item[1])))
            elif as_int(item) is not None:
                pairs.append(("", as_int(item)))
            else:
                pairs.extend(evidence_from_json(item, companies))
    return tuple(dict.fromkeys(pairs))


def code_from_json(value: Any) -> tuple[str, ...]:
    """Snippets in a JSON code value: fenced blocks, else the whole string when it reads like
    code (as :func:`inline_code` decides), else nothing ("None needed", "N/A")."""
    if isinstance(value, str):
        fenced = _FENCED_BLOCK.findall(value)
        if fenced:
            return tuple(_snippet(code) for code in fenced if code.strip())
        if _says_no_code(value):
            return ()
        if _LOOKS_LIKE_CODE.search(value):
            return (_snippet(value),)
        inline = inline_code(value)
        return (inline,) if inline else ()
    if isinstance(value, (list, tuple)):
        return tuple(snippet for item in value for snippet in code_from_json(item))
    return ()


def knowledge_from_json(value: Any) -> tuple[int, ...]:
    if value is None or isinstance(value, bool):
        return ()
    if as_int(value) is not None:
        return (as_int(value),)
    if isinstance(value, str):
        return parse_indices(value)
    if isinstance(value, (list, tuple)):
        return tuple(dict.fromkeys(n for item in value for n in knowledge_from_json(item)))
    return ()


def _has_attribution(item: Any) -> bool:
    """Whether a JSON clause carries an attribution key (its value may be empty, as "Code:
    none" is still a label in a text answer)."""
    return isinstance(item, dict) and any(str(key).lower() in _ATTRIBUTION_KEYS for key in item)


def clause_from_json(item: Any, companies: Iterable[str] = ()) -> Clause | None:
    if isinstance(item, str):
        return Clause(text=item.strip())
    if not isinstance(item, dict):
        return None
    text = field(item, _TEXT_KEYS)[1]
    if not isinstance(text, str):
        return None
    evidence_value = field(item, _EVIDENCE_KEYS)[1]
    return Clause(
        text=text.strip(),
        evidence=evidence_from_json(evidence_value, companies),
        code=code_from_json(field(item, _CODE_KEYS)[1]),
        knowledge=knowledge_from_json(field(item, _KNOWLEDGE_KEYS)[1]),
        inferred_from=inferred_clauses(evidence_value) if isinstance(evidence_value, str) else (),
    )


def _clauses_from_json(value: Any, companies: Sequence[str]) -> tuple[Clause, ...]:
    """The clauses of a JSON answer; none unless some clause has an attribution key, so that
    a list of bare claims is a parse failure as "1. A claim.\n2. Another." is in text."""
    if isinstance(value, dict):
        value = field(value, _CLAUSE_LIST_KEYS)[1]
    if not isinstance(value, list) or not any(_has_attribution(item) for item in value):
        return ()
    clauses = [clause_from_json(item, companies) for item in value]
    return tuple(c for c in clauses if c is not None)


# ------------------------------------------------------------------------------- text answers

_FENCED_BLOCK = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.DOTALL)
_FENCE = re.compile(r"^[ \t>]*(?P<ticks>`{3,}|~{3,})[ \t]*(?P<lang>[\w+\-]*)[ \t]*(?P<rest>.*)$")
_CLAUSE_HEADER = re.compile(
    r"^[ \t>]*(?:#{1,6}[ \t]*)?(?:[-*+•][ \t]+)?(?:\*\*|__)?"
    r"(?:clause[ \t]*#?(?P<named>[0-9]{1,2})(?:\*\*|__)?[ \t]*[.):\-–]?"
    r"|\(?(?P<number>[0-9]{1,2})[.)](?:\*\*|__)?)"
    r"(?:\*\*|__)?(?:[ \t]+(?P<rest>.*))?$",
    re.IGNORECASE,
)
_LABELS = {
    "evidence": "evidence", "evidences": "evidence", "supporting evidence": "evidence",
    "sources": "evidence", "source": "evidence", "citations": "evidence", "citation": "evidence",
    "code": "code", "python code": "code", "python": "code", "calculation code": "code",
    "knowledge": "knowledge", "professional knowledge": "knowledge", "knowledge used": "knowledge",
    "knowledge indices": "knowledge",
}
_LABEL_ALTERNATION = "|".join(sorted((re.escape(k) for k in _LABELS), key=len, reverse=True))
# A label starting a line (markdown allowed around it; ":" "-" "=" after it), or one inside a
# line after a separator, capitalised or bold, with a colon.
_LINE_LABEL = re.compile(
    rf"^[ \t>]*(?:#{{1,6}}[ \t]*)?(?:[-*+•][ \t]+)?(?:\*\*|__|\*|_)?[\[\"']?(?P<label>{_LABEL_ALTERNATION})"
    rf"[\"']?(?:\*\*|__|\*|_)?[ \t]*(?:[:：]|[=\-–](?=[ \t])|(?:\*\*|__)?[ \t]*:)(?:\*\*|__|\*|_)?[ \t]*",
    re.IGNORECASE,
)
_INLINE_LABEL = re.compile(
    rf"(?:(?<=[\s.;|,(\[])|(?<=\*\*)|(?<=__))(?:\*\*|__|\*|_)?\[?"
    rf"(?P<label>(?:{'|'.join(w.capitalize() for w in ('evidence', 'code', 'knowledge', 'professional knowledge'))}|EVIDENCE|CODE|KNOWLEDGE))"
    rf"(?:\*\*|__|\*|_)?[ \t]*[:：](?:\*\*|__|\*|_)?[ \t]*"
)
# Inside an unclosed fence, these lines end it: the model went back to writing its answer.
_FENCE_BREAKER = re.compile(r"^[ \t]*(?:\*\*)?(?:evidence|knowledge|clause[ \t]*[0-9])\b", re.IGNORECASE)
_CODE_LINE = re.compile(r"^(?:[ \t]+\S|(?:def|import|from|return|class|@|#)\b|[)\]}])")
_LIST_CONTINUATION = re.compile(r"^[ \t]*(?:[-*+•][ \t]+|\[|\{|[A-Z][A-Z0-9.&\-]{0,9}[ \t]*[:\[(])")


class _ClauseBuilder:
    def __init__(self, text: str = ""):
        self.text_lines: list[str] = [text] if text else []
        self.evidence_values: list[str] = []
        self.knowledge_values: list[str] = []
        self.code: list[str] = []
        self.last_label: str | None = None
        self.labelled = False

    def add_label(self, label: str, value: str) -> None:
        self.labelled = True
        self.last_label = label
        if label == "evidence":
            self.evidence_values.append(value)
        elif label == "knowledge":
            self.knowledge_values.append(value)
        else:
            snippet = inline_code(value)
            if snippet:
                self.code.append(snippet)

    def build(self, companies: Sequence[str]) -> Clause:
        evidence = " ; ".join(self.evidence_values)
        text = " ".join(line.strip() for line in self.text_lines if line.strip())
        return Clause(
            text=_strip_markdown(text),
            evidence=parse_evidence(evidence, companies),
            code=tuple(self.code),
            knowledge=parse_indices(" , ".join(self.knowledge_values)),
            inferred_from=inferred_clauses(evidence),
        )


def _strip_markdown(text: str) -> str:
    return re.sub(r"\*\*|__|`", "", text).strip()


def _split_labels(line: str) -> tuple[str, list[tuple[str, str]]]:
    """A line's leading prose and its (label, value) segments, in order."""
    head = _LINE_LABEL.match(line)
    if head:
        prose, rest, first_label = "", line[head.end():], head["label"]
    else:
        first = _INLINE_LABEL.search(line)
        if not first:
            return line, []
        prose, rest, first_label = line[: first.start()], line[first.end():], first["label"]
    segments: list[tuple[str, str]] = []
    label = _LABELS[first_label.lower()]
    while True:
        following = _INLINE_LABEL.search(rest)
        if not following:
            segments.append((label, rest.strip().rstrip(".;,|")))
            break
        segments.append((label, rest[: following.start()].strip().rstrip(".;,|")))
        label, rest = _LABELS[following["label"].lower()], rest[following.end():]
    return prose, segments


def _unwrap_outer_fence(text: str) -> str:
    """An answer wrapped whole in a ```markdown (or bare) fence, with fences inside it."""
    lines = text.strip().split("\n")
    if len(lines) >= 2:
        opening = _FENCE.match(lines[0])
        if (
            opening and opening["lang"].lower() in ("", "markdown", "md", "text", "txt")
            and not opening["rest"] and lines[-1].strip() == opening["ticks"]
            and any(_LINE_LABEL.match(line) for line in lines[1:-1])
        ):
            return "\n".join(lines[1:-1])
    return text


def _parse_text(text: str, companies: Sequence[str]) -> tuple[tuple[Clause, ...], bool]:
    """Clauses of a free-text answer and whether any attribution label was seen."""
    builders: list[_ClauseBuilder] = []
    preamble = _ClauseBuilder()
    fence: str | None = None  # the opening ticks while inside a fence
    fence_is_code = False
    fence_lines: list[str] = []
    unfenced_code: list[str] | None = None

    def current() -> _ClauseBuilder:
        return builders[-1] if builders else preamble

    def open_fence(opening: re.Match) -> None:
        nonlocal fence, fence_is_code
        close_unfenced()
        fence, fence_lines[:] = opening["ticks"], []
        fence_is_code = opening["lang"].lower() in ("", "python", "py", "python3")
        if opening["rest"].strip():
            fence_lines.append(opening["rest"])

    def close_fence() -> None:
        nonlocal fence
        code = "\n".join(fence_lines)
        if fence_is_code and code.strip():
            current().code.append(_snippet(code))
        fence = None
        fence_lines.clear()

    def close_unfenced() -> None:
        nonlocal unfenced_code
        if unfenced_code and "\n".join(unfenced_code).strip():
            current().code.append(_snippet("\n".join(unfenced_code)))
        unfenced_code = None

    for line in _unwrap_outer_fence(text).split("\n"):
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and not stripped.lstrip(fence[0]).strip():
                close_fence()
                continue
            if not _FENCE_BREAKER.match(line):
                fence_lines.append(line)
                continue
            close_fence()  # an unclosed fence: the answer resumes on this line
        opening = _fence_opening(line)  # ```code``` on one line is inline code, read below
        if opening:
            open_fence(opening)
            continue
        if unfenced_code is not None:
            if line.strip() == "" or _CODE_LINE.match(line):
                unfenced_code.append(line)
                continue
            close_unfenced()
        header = _CLAUSE_HEADER.match(line)
        if header:
            builders.append(_ClauseBuilder())
            line = header["rest"] or ""
        prose, segments = _split_labels(line)
        builder = current()
        if prose.strip():
            if builder.labelled and builder.last_label in ("evidence", "knowledge") and (
                _LIST_CONTINUATION.match(prose)
            ):
                builder.add_label(builder.last_label, prose)
            else:
                builder.text_lines.append(prose)
        for label, value in segments:
            builder.add_label(label, value)
        if segments and segments[-1][0] == "code":
            opening = _fence_opening(segments[-1][1])
            if opening:
                open_fence(opening)  # "Code: ```python": the fenced code follows
            elif not segments[-1][1].strip():
                unfenced_code = []  # "Code:" alone on its line: the code may follow unfenced
    if fence is not None:
        close_fence()
    close_unfenced()

    labelled = preamble.labelled or any(b.labelled for b in builders)
    if not builders:
        builders = [preamble]  # attributes without numbered clauses: one clause
    elif preamble.code:
        builders[0].code[:0] = preamble.code
    return tuple(b.build(companies) for b in builders), labelled


def _as_text(text: object) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        return text.decode("utf-8", errors="replace")
    return text if isinstance(text, str) else str(text)


def parse_answer(text: str | None, companies: Sequence[str] = ()) -> ParsedAnswer:
    """Parse a FinLFQA answer (see the module docstring for the formats read).

    ``companies`` are the example's tickers; naming them lets the parser map "cwt" or "CWT's"
    to "CWT". Never raises; an answer without attributions is a parse failure.

    >>> answer = parse_answer("1. CWT's interest rose 25%.\\n**Evidence:** CWT [16], AWK []\\n"
    ...                       "Code: none\\nKnowledge: []")
    >>> answer.parse_failure, answer.evidence, answer.text
    (False, frozenset({('CWT', 16)}), "CWT's interest rose 25%.")
    """
    raw = _as_text(text).replace("\r\n", "\n").replace("\x00", "")
    companies = list(companies)
    as_json = loads_lenient(raw)
    if as_json is not None:
        clauses = _clauses_from_json(as_json, companies)
        if clauses:
            return ParsedAnswer(clauses=clauses, parse_failure=False, raw_text=raw)
    clauses, labelled = _parse_text(raw, companies)
    if not labelled:
        return ParsedAnswer(clauses=(), parse_failure=True, raw_text=raw)
    return ParsedAnswer(clauses=clauses, parse_failure=False, raw_text=raw)


# ---------------------------------------------------------------------------------- scores


def _normalise_evidence(pairs: Iterable[Evidence]) -> set[tuple[str, int]]:
    return {(str(company).strip().upper(), int(index)) for company, index in pairs}


def evidence_prf(
    predicted: Iterable[Evidence], reference: Iterable[Evidence]
) -> tuple[float, float, float]:
    """Evidence precision, recall, F1 over (company, paragraph) pairs of one example.

    >>> evidence_prf([("CWT", 16), ("awk", 3)], [("CWT", 16), ("CWT", 17)])
    (0.5, 0.5, 0.5)
    """
    return set_prf(_normalise_evidence(predicted), _normalise_evidence(reference))


def knowledge_recall(predicted: Iterable[int], reference: Iterable[int]) -> float:
    """Share of the reference's knowledge indices the answer cites; 1 when the reference
    cites none, whatever the answer cites: there is nothing to recall, and recall does not
    judge what the answer adds (DESIGN.md defines knowledge by recall alone).

    >>> knowledge_recall([2, 9], [2, 5])
    0.5
    >>> knowledge_recall([1], [])
    1.0
    """
    reference = set(reference)
    if not reference:
        return 1.0
    return len(set(predicted) & reference) / len(reference)
