"""A whole attributed answer: numbered clauses, each with its Evidence, Code and Knowledge,
written as text in the prompt's format (or what models drift into) or as JSON."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_fin.attribution.values import (
    FENCE,
    Evidence,
    clean_snippet,
    code_from_json,
    evidence_from_json,
    fence_opening,
    inferred_clauses,
    inline_code,
    knowledge_from_json,
    parse_evidence,
    parse_indices,
)
from lm_eval_fin.text.cleantext import read_answer
from lm_eval_fin.text.jsontext import field, loads_lenient

_TEXT_KEYS = ("text", "clause", "content", "statement", "claim", "sentence", "answer")
_EVIDENCE_KEYS = ("evidence", "evidences", "citations", "citation", "sources", "references")
_CODE_KEYS = ("code", "python", "program", "codes")
_KNOWLEDGE_KEYS = ("knowledge", "knowledges", "professional_knowledge", "knowledge_indices")
_ATTRIBUTION_KEYS = frozenset(_EVIDENCE_KEYS + _CODE_KEYS + _KNOWLEDGE_KEYS)
_CLAUSE_LIST_KEYS = ("clauses", "answer", "answers", "response", "claims")


@dataclass(frozen=True)
class Clause:
    text: str
    evidence: tuple[Evidence, ...] = ()
    code: tuple[str, ...] = ()
    knowledge: tuple[int, ...] = ()
    inferred_from: tuple[int, ...] = ()  # clause numbers named by "inferred from clause N"
    number: int | None = None  # the number the answer wrote before the clause (None: unnumbered)


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


# ------------------------------------------------------------------------------- JSON answers


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
    def __init__(self, text: str = "", number: int | None = None):
        self.number = number
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
            number=self.number,
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


# A Markdown bullet at the left margin, and an attribute label on an indented line under one.
_TOP_BULLET = re.compile(r"^[-*+•][ \t]+(?P<rest>\S.*)$")
_NESTED = re.compile(r"^[ \t]+\S")


def _bulleted_clauses(lines: Sequence[str]) -> bool:
    """Whether the answer lists its clauses as Markdown bullets with their attributes on
    indented lines below them ("- Clause.\\n  - Evidence: ..."): no numbered clause, some
    label on an indented line and some bullet at the margin that is not a label. Then each
    such bullet starts a clause; otherwise a bullet after an attribute continues its list."""
    if any(_CLAUSE_HEADER.match(line) for line in lines):
        return False
    nested_label = any(_NESTED.match(line) and _LINE_LABEL.match(line) for line in lines)
    return nested_label and any(_TOP_BULLET.match(line) and not _LINE_LABEL.match(line) for line in lines)


def _unwrap_outer_fence(text: str) -> str:
    """An answer wrapped whole in a ```markdown (or bare) fence, with fences inside it."""
    lines = text.strip().split("\n")
    if len(lines) >= 2:
        opening = FENCE.match(lines[0])
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
            current().code.append(clean_snippet(code))
        fence = None
        fence_lines.clear()

    def close_unfenced() -> None:
        nonlocal unfenced_code
        if unfenced_code and "\n".join(unfenced_code).strip():
            current().code.append(clean_snippet("\n".join(unfenced_code)))
        unfenced_code = None

    lines = _unwrap_outer_fence(text).split("\n")
    bullet_clauses = _bulleted_clauses(lines)
    for line in lines:
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and not stripped.lstrip(fence[0]).strip():
                close_fence()
                continue
            if not _FENCE_BREAKER.match(line):
                fence_lines.append(line)
                continue
            close_fence()  # an unclosed fence: the answer resumes on this line
        opening = fence_opening(line)  # ```code``` on one line is inline code, read below
        if opening:
            open_fence(opening)
            continue
        if unfenced_code is not None:
            if line.strip() == "" or _CODE_LINE.match(line):
                unfenced_code.append(line)
                continue
            close_unfenced()
        header = _CLAUSE_HEADER.match(line)
        bullet = _TOP_BULLET.match(line) if bullet_clauses and not header else None
        if header:
            builders.append(_ClauseBuilder(number=int(header["named"] or header["number"])))
            line = header["rest"] or ""
        elif bullet and not _LINE_LABEL.match(line):
            builders.append(_ClauseBuilder())  # "- a clause" with its attributes on nested lines
            line = bullet["rest"]
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
            opening = fence_opening(segments[-1][1])
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


def parse_answer(text: str | None, companies: Sequence[str] = ()) -> ParsedAnswer:
    """Parse a FinLFQA answer (see the module docstring for the formats read).

    ``companies`` are the example's tickers; naming them lets the parser map "cwt" or "CWT's"
    to "CWT". Never raises; an answer without attributions is a parse failure.

    >>> answer = parse_answer("1. CWT's interest rose 25%.\\n**Evidence:** CWT [16], AWK []\\n"
    ...                       "Code: none\\nKnowledge: []")
    >>> answer.parse_failure, answer.evidence, answer.text
    (False, frozenset({('CWT', 16)}), "CWT's interest rose 25%.")
    """
    raw = read_answer(text)[0].replace("\r\n", "\n")
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
