"""Which kind of filing a chunk-ranking query is about (10-K, 10-Q, 8-K, DEF14A, Earnings).

FinCARDS evaluates intra-document ranking on FinAgentBench's 10-K and 10-Q queries. The
challenge's chunk-ranking records carry no document-type field (``uuid``/``_id``, one user
message, ``qrel``), so the type is read from the first of these that names one:

1. ``field``: a field of the record (``doc_type``, ``document_type``, ``form_type``,
   ``filing_type`` or ``form``), for files that were annotated;
2. ``prompt``: the form named in the prompt outside the chunks (the instruction and the
   question, "According to the 10-Q, ..."), when it names exactly one;
3. ``cover page``: the filing's own cover wording in its chunks. Filings mention other forms
   all the time ("our Annual Report on Form 10-K" is in every 10-Q), so only the upper-case
   cover lines count ("FORM 10-Q", "QUARTERLY REPORT PURSUANT TO SECTION 13 OR 15(d)",
   "SCHEDULE 14A", ...), then the cover's period line ("For the quarterly period ended" /
   "For the fiscal year ended"), and for earnings calls an operator turn together with
   "earnings call" or "conference call". Cues for two forms at once decide nothing.

Otherwise the type is undetermined (None).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

FORMS = ("10-K", "10-Q", "8-K", "DEF14A", "Earnings")
FIELDS = ("doc_type", "document_type", "form_type", "filing_type", "form")

_SPELLINGS = {
    "10k": "10-K", "10-k": "10-K", "form10-k": "10-K", "annualreport": "10-K",
    "10q": "10-Q", "10-q": "10-Q", "form10-q": "10-Q", "quarterlyreport": "10-Q",
    "8k": "8-K", "8-k": "8-K", "form8-k": "8-K",
    "def14a": "DEF14A", "def-14a": "DEF14A", "proxy": "DEF14A", "proxystatement": "DEF14A",
    "earnings": "Earnings", "earningscall": "Earnings", "earningstranscript": "Earnings", "transcript": "Earnings",
}


def normalise_form(value: Any) -> str | None:
    """A form name in any common spelling, as one of :data:`FORMS`; None otherwise.

    >>> [normalise_form(v) for v in ("10K", "Form 10-Q", "DEF 14A", "earnings call", "S-1", 7)]
    ['10-K', '10-Q', 'DEF14A', 'Earnings', None, None]
    """
    if not isinstance(value, str):
        return None
    key = re.sub(r"[\s_]+", "", value.strip().lower())
    return _SPELLINGS.get(key)


_PROMPT_FORMS = (
    (re.compile(r"\b10-?K\b", re.I), "10-K"),
    (re.compile(r"\b10-?Q\b", re.I), "10-Q"),
    (re.compile(r"\b8-K\b", re.I), "8-K"),
    (re.compile(r"\bDEF\s?14A\b|\bproxy statement\b", re.I), "DEF14A"),
    (re.compile(r"\bearnings (?:call|transcript)\b", re.I), "Earnings"),
)

_COVER = (
    (re.compile(r"\bFORM\s+10-K\b(?!/)|ANNUAL REPORT PURSUANT TO SECTION 13"), "10-K"),
    (re.compile(r"\bFORM\s+10-Q\b(?!/)|QUARTERLY REPORT PURSUANT TO SECTION 13"), "10-Q"),
    (re.compile(r"\bFORM\s+8-K\b|CURRENT REPORT PURSUANT TO SECTION 13"), "8-K"),
    (re.compile(r"\bSCHEDULE\s+14A\b|DEFINITIVE PROXY STATEMENT"), "DEF14A"),
)
_PERIOD_LINE = (
    (re.compile(r"for the fiscal year ended", re.I), "10-K"),
    (re.compile(r"for the quarterly period ended", re.I), "10-Q"),
)
_OPERATOR = re.compile(r"^\s*Operator\s*[:\-]?\s*$|^\s*Operator:", re.MULTILINE)
_CALL = re.compile(r"\b(?:earnings|conference) call\b", re.I)


def _one(found: Iterable[str]) -> str | None:
    forms = set(found)
    return forms.pop() if len(forms) == 1 else None


def form_in_prompt(preamble: str) -> str | None:
    """The one form named in the prompt outside the chunks; None for none or several.

    >>> form_in_prompt("Question: What did the 10-Q say about backlog?"), form_in_prompt("Compare the 10-K and 10-Q")
    ('10-Q', None)
    """
    return _one(form for pattern, form in _PROMPT_FORMS if pattern.search(preamble))


def form_from_cover(chunks: Iterable[str]) -> str | None:
    """The form a filing's cover wording names (see the module doc); None when it names
    none, or cues of two forms are found at the same level.

    >>> form_from_cover(["UNITED STATES SECURITIES AND EXCHANGE COMMISSION", "FORM 10-Q", "our Form 10-K"])
    '10-Q'
    >>> form_from_cover(["For the fiscal year ended December 31, 2025"]), form_from_cover(["Revenue rose."])
    ('10-K', None)
    """
    texts = list(chunks)
    for rules in (_COVER, _PERIOD_LINE):
        found = [form for pattern, form in rules if any(pattern.search(t) for t in texts)]
        if found:
            return _one(found)
    if any(_OPERATOR.search(t) for t in texts) and any(_CALL.search(t) for t in texts):
        return "Earnings"
    return None


def document_type(record: Mapping[str, Any], preamble: str, chunks: Iterable[str]) -> tuple[str | None, str]:
    """(form, where it was read: "field", "prompt", "cover page" or "undetermined").

    >>> document_type({"doc_type": "10k"}, "", [])
    ('10-K', 'field')
    >>> document_type({}, "Rank the chunks of a filing.", ["Revenue rose."])
    (None, 'undetermined')
    """
    for name in FIELDS:
        form = normalise_form(record.get(name))
        if form is not None:
            return form, "field"
    form = form_in_prompt(preamble)
    if form is not None:
        return form, "prompt"
    form = form_from_cover(chunks)
    if form is not None:
        return form, "cover page"
    return None, "undetermined"


def parse_doc_types(text: str) -> tuple[str, ...] | None:
    """``--doc_types``: a comma-separated list of forms, or "all" (no filter: None).

    >>> parse_doc_types("10-K,10q"), parse_doc_types("all")
    (('10-K', '10-Q'), None)
    """
    if text.strip().lower() in ("all", "any", ""):
        return None
    forms = []
    for part in text.split(","):
        form = normalise_form(part)
        if form is None:
            raise ValueError(f"unknown document type {part.strip()!r}; choose from {', '.join(FORMS)} or 'all'")
        forms.append(form)
    return tuple(dict.fromkeys(forms))
