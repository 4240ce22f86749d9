"""The FinCARDS card of section 3.2: an alignment core written by the judge, the rest by rules.

Core fields (the judge writes them from the chunk alone, JSON, temperature 0):

* ``topic``: one label of the intent's topic list (so card and intent share it);
* ``entities``: companies, segments, products and regions the chunk names;
* ``metrics``: the financial metrics it states or discusses;
* ``numeric_spans``: up to 8 figures copied verbatim with their units. Each is checked
  against the chunk: a span that does not occur in it as written (runs of whitespace aside),
  or holds no digit, is dropped and counted (``checks.spans_dropped``), so no figure the
  judge made up or reformatted reaches a later stage or the audit;
* ``period``: the fiscal period or interval the chunk speaks of, normalised ("FY2025",
  "Q3 FY2025", "FY2024-FY2025"); empty when it names none;
* ``section``: the part of the filing. A chunk whose own first line is an ``Item N.``
  heading or a standard section title gets that section by rule (``section_from:
  "heading"``); otherwise the judge's reading;
* ``summary``: one sentence (Table 2's "only summary" card shows nothing else).

Derived by rule, never asked of the judge:

* ``triple``: the entity-metric-period triple: the first entity, the first metric, the period;
* ``evidence``: where each entity, metric, numeric span and the period's years occur in the
  chunk (character offsets): the links from the fields to the text that the audit trace
  shows. A value found nowhere is listed in ``checks.unlinked``;
* ``aux``: the auxiliary fields of section 3.2: the table signature (is there a table, its
  period columns, change column, total row), scope descriptors (segment / subsidiary /
  consolidated wording and regions), the boilerplate flag, plus whether the chunk defines a
  metric and whether it is a bare heading (for the coverage quotas and the audit).

A card the judge could not write is built from the same rules (``source: "fallback"``): a
lexicon of common metrics, the periods and figures the text names, the first 25 words as
the summary. Cards are shown to the judge in stages 2 and 3 as one line each; the numeric
spans appear there as a count and their kinds (currency, percent), not as figures: the paper
finds quantitative evidence identifiable "even without exposing raw numbers", and stage 3
must not calculate. The figures stay in the card for the audit and the numeric match.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lm_eval_fin.judge.base import JudgeRequest, chat_request
from lm_eval_fin.rerank import rules
from lm_eval_fin.rerank.intent import TOPICS
from lm_eval_fin.text.cleantext import as_text
from lm_eval_fin.text.jsontext import as_enum, as_strings, parse_json_object
from lm_eval_fin.text.replies import reply_answer

KIND = "core"
SECTIONS = rules.SECTIONS
MAX_SPANS = 8

_LIST = {"type": "array", "items": {"type": "string"}, "maxItems": 6}
CORE_SCHEMA: dict[str, Any] = {
    "title": "fincards_core_card",
    "type": "object",
    "properties": {
        "topic": {"enum": list(TOPICS)},
        "metrics": _LIST,
        "period": {"type": "string"},
        "entities": _LIST,
        "section": {"enum": list(SECTIONS)},
        "summary": {"type": "string"},
        "numeric_spans": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_SPANS},
    },
    "required": ["topic", "metrics", "period", "entities", "section", "summary", "numeric_spans"],
}
CORE_FIELDS = tuple(CORE_SCHEMA["properties"])

_INSTRUCTIONS = f"""You turn one chunk of a company filing into an evidence card: the facts a reviewer needs to match the chunk against a question, in fixed fields. Describe the chunk; do not answer any question. Read only the chunk.

Fields:
- topic: one of {", ".join(TOPICS)}.
- metrics: the financial metrics the chunk states or discusses, as short names (e.g. "revenue", "diluted EPS", "free cash flow").
- period: the fiscal period its statements refer to, normalised as "FY2025", "Q3 FY2025" or an interval "FY2024-FY2025"; "" when it names none.
- entities: the companies, segments, products and regions it names.
- section: where in the filing it comes from: one of {", ".join(SECTIONS)}.
- summary: one sentence of at most 25 words on what the chunk states.
- numeric_spans: up to {MAX_SPANS} figures copied exactly as they are written in the chunk, with their units (e.g. "$1,240.5 million", "8.2%"). Copy; never compute, round or reformat. [] when the chunk states no figure.

Answer with the JSON object only."""

_SECTION_SYNONYMS = {
    "md_a": "MD&A", "mda": "MD&A", "management's_discussion_and_analysis": "MD&A",
    "management_discussion_and_analysis": "MD&A", "notes_to_financial_statements": "Notes",
    "risk": "Risk Factors", "legal": "Legal Proceedings", "compensation": "Executive Compensation",
}


def card_request(chunk_text: str, max_tokens: int) -> JudgeRequest:
    """The card request of one chunk: the chunk and nothing else, so the judge cache keys it
    by content and every query on the filing shares it."""
    return chat_request(
        _INSTRUCTIONS,
        f"Chunk:\n{chunk_text}\n\nEvidence card (JSON):",
        max_tokens=max_tokens,
        temperature=0.0,
        json_schema=CORE_SCHEMA,
    )


def _period(value: Any) -> str:
    if isinstance(value, list):
        value = "-".join(str(v) for v in value[:2] if isinstance(v, (str, int)))
    text = as_text(value).strip() if isinstance(value, (str, int)) else ""
    return "" if text.lower() in ("", "none", "null", "n/a", "unknown") else text[:40]


def _checked_spans(values: Any, chunk_text: str) -> tuple[list[str], list[str]]:
    """(kept, dropped): a span is kept when it holds a digit and occurs in the chunk verbatim."""
    kept: list[str] = []
    dropped: list[str] = []
    for span in as_strings(values, limit=3 * MAX_SPANS, length=80):
        if rules.has_digit(span) and rules.verbatim(span, chunk_text):
            if span not in kept and len(kept) < MAX_SPANS:
                kept.append(span)
        else:
            dropped.append(span)
    return kept, dropped


def derive(card: dict[str, Any], chunk_text: str) -> dict[str, Any]:
    """Add the rule-derived fields to a card holding the core fields (see the module doc)."""
    heading_section = rules.section(chunk_text)
    if heading_section is not None:
        card["section"], card["section_from"] = heading_section, "heading"
    else:
        card.setdefault("section_from", card["source"])
    card["triple"] = {
        "entity": card["entities"][0] if card["entities"] else "",
        "metric": card["metrics"][0] if card["metrics"] else "",
        "period": card["period"],
    }
    evidence, unlinked = [], []
    for name in ("entities", "metrics", "numeric_spans"):
        for value in card[name]:
            where = rules.locate(value, chunk_text)
            if where is None:
                unlinked.append(f"{name}:{value}")
            else:
                evidence.append({"field": name, "value": value, "span": list(where)})
    if card["period"]:
        cues = sorted(rules.years([card["period"]])) or [card["period"]]
        where = next((w for w in (rules.locate(cue, chunk_text) for cue in cues) if w is not None), None)
        if where is None:
            unlinked.append(f"period:{card['period']}")
        else:
            evidence.append({"field": "period", "value": card["period"], "span": list(where)})
    card["evidence"] = evidence
    card["checks"]["unlinked"] = unlinked
    card["aux"] = {
        "table": rules.table_signature(chunk_text),
        "scope": rules.scope(chunk_text),
        "boilerplate": rules.boilerplate(chunk_text),
        "defines_metric": rules.defines_metric(chunk_text),
        "heading": rules.heading(chunk_text),
    }
    return card


def normalise_card(raw: dict[str, Any], chunk_text: str) -> dict[str, Any] | None:
    """A full core card from what the judge wrote, with the spans checked and the rule fields
    derived; None when ``raw`` holds no core field (the judge wrote some other object)."""
    if not any(name in raw for name in CORE_FIELDS):
        return None
    kept, dropped = _checked_spans(raw.get("numeric_spans"), chunk_text)
    card = {
        "kind": KIND,
        "topic": as_enum(raw.get("topic"), TOPICS, "Other"),
        "metrics": as_strings(raw.get("metrics"), limit=6, length=60),
        "period": _period(raw.get("period")),
        "entities": as_strings(raw.get("entities"), limit=6, length=60),
        "section": as_enum(raw.get("section"), SECTIONS, "Other", _SECTION_SYNONYMS),
        "summary": as_text(raw.get("summary") if isinstance(raw.get("summary"), str) else "").strip()[:300],
        "numeric_spans": kept,
        "checks": {"spans_dropped": dropped},
        "source": "judge",
    }
    return derive(card, chunk_text)


def parse_card(text: object, chunk_text: str) -> dict[str, Any] | None:
    """The core card in a judge answer for ``chunk_text``; None when there is none.

    >>> card = parse_card('{"metrics": ["revenue"], "period": "FY2025", "numeric_spans": ["$5 million", "$6 million"]}',
    ...                   "Revenue was $5 million in fiscal 2025.")
    >>> card["numeric_spans"], card["checks"]["spans_dropped"], card["triple"]
    (['$5 million'], ['$6 million'], {'entity': '', 'metric': 'revenue', 'period': 'FY2025'})
    >>> parse_card('{"answer": 42}', "text") is None
    True
    """
    raw = parse_json_object(reply_answer(text))
    return normalise_card(raw, chunk_text) if raw is not None else None


def fallback_card(chunk_text: str) -> dict[str, Any]:
    """A core card read off the text by the rules alone (the judge could not write one)."""
    found = rules.periods(chunk_text)
    card = {
        "kind": KIND,
        "topic": "Other",
        "metrics": rules.metrics(chunk_text),
        "period": found[0] if found else "",
        "entities": rules.scope(chunk_text)["regions"],
        "section": "Other",
        "summary": " ".join(chunk_text.split()[:25]),
        "numeric_spans": rules.numeric_spans(chunk_text, MAX_SPANS),
        "checks": {"spans_dropped": []},
        "source": "fallback",
    }
    return derive(card, chunk_text)


# ---------------------------------------------------------------------------------------------
# How a card is shown to the judge, and what it can fill


def figure_kinds(spans: list[str]) -> list[str]:
    """Kinds of the figures: currency, percent, other.

    >>> figure_kinds(["$5 million", "8.2%", "4,100", "$2.41"])
    ['currency', 'percent', 'other']
    """
    kinds = []
    for span in spans:
        if re.search(r"[$€£¥]", span):
            kinds.append("currency")
        elif re.search(r"%|percent|bps|basis points", span, re.IGNORECASE):
            kinds.append("percent")
        else:
            kinds.append("other")
    return list(dict.fromkeys(kinds))


def render(chunk_id: int, card: Mapping[str, Any]) -> str:
    """One line per card, with whatever fields the card (after an ablation) still has.

    >>> print(render(7, fallback_card("Pumps segment revenue | 2025 | 2024\\nEurope | $820.1 | $760.3\\nTotal | 1,240 | 1,146")))
    [7] topic=Other; section=Other; summary: Pumps segment revenue | 2025 | 2024 Europe | $820.1 | $760.3 Total | 1,240 | 1,146; metrics: revenue; period: FY2025; entities: Europe; triple: Europe | revenue | FY2025; figures: 4 (currency, other); table (periods FY2025, FY2024; total row); scope: segment (Europe)
    """
    parts = [f"[{chunk_id}] topic={card['topic']}", f"section={card['section']}"]
    if card.get("summary"):
        parts.append(f"summary: {card['summary']}")
    if card.get("metrics"):
        parts.append("metrics: " + ", ".join(card["metrics"]))
    if card.get("period"):
        parts.append(f"period: {card['period']}")
    if card.get("entities"):
        parts.append("entities: " + ", ".join(card["entities"]))
    triple = card.get("triple") or {}
    slots = [triple.get(slot) for slot in ("entity", "metric", "period") if slot in triple]
    if any(slots):
        parts.append("triple: " + " | ".join(s or "?" for s in slots))
    if card.get("numeric_spans"):
        parts.append(f"figures: {len(card['numeric_spans'])} ({', '.join(figure_kinds(card['numeric_spans']))})")
    aux = card.get("aux", {})
    table = aux.get("table")
    if table and table["present"]:
        cues = []
        if table.get("periods"):
            cues.append("periods " + ", ".join(table["periods"][:4]))
        if table.get("change_column"):
            cues.append("change column")
        if table.get("total_row"):
            cues.append("total row")
        parts.append("table" + (f" ({'; '.join(cues)})" if cues else ""))
    scope = aux.get("scope")
    if scope and (scope["level"] != "unknown" or scope["regions"]):
        parts.append(f"scope: {scope['level']}" + (f" ({', '.join(scope['regions'])})" if scope["regions"] else ""))
    for flag, label in (("boilerplate", "boilerplate"), ("defines_metric", "defines a metric"), ("heading", "heading")):
        if aux.get(flag):
            parts.append(label)
    return "; ".join(parts)


def fills_quota(card: Mapping[str, Any], quota: str) -> bool:
    """Trend: a table with a time dimension (two period columns, or a change column).
    Definition: the chunk defines a metric or states a measurement or accounting policy."""
    aux = card.get("aux", {})
    if quota == "trend":
        table = aux.get("table")
        return bool(table and table["present"] and (len(table.get("periods", [])) >= 2 or table.get("change_column")))
    if quota == "definition":
        return bool(aux.get("defines_metric"))
    raise ValueError(f"unknown quota {quota!r}")
