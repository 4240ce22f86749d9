"""The appendix B.1 card (``--cards b1``): one structured card per chunk, written by the judge.

The default card is section 3.2's (:mod:`~lm_eval_fin.rerank.corecard`); this one follows
the card prompt of the paper's appendix B.1 and is kept as a variant. It says under which
conditions a chunk can serve as evidence:
its role, evidence type, answerability profile, temporal anchor, scope, measurement basis,
verifiability (numbers, units, comparisons and table cues), risk signals and a one-line
sketch. Stages 2 and 3 judge chunks from their cards alone, never from the raw text.

A card depends on the chunk text only: the request holds the text and nothing about the
question, the filing or the chunk's position, so the judge cache keys it by chunk content and
judge, and every query on the same filing (and every later run) shares it. The pipeline asks
for each distinct chunk once per run.

Where we differ from the public code: the code sends the chunk id and asks the model to echo
the full text and identity fields back, at temperature 0.1; we send the text only (so the
cache key is the content) and decode at temperature 0 with a JSON schema. The sketch comes
right after role and type, so a card cut short by the token budget still carries its gist.
A card the judge could not write (parse failure after retries) is replaced by a fallback
card read off the text with regular expressions (``source: "fallback"``), so later stages
always have a card to show.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from lm_eval_fin.judge.base import JudgeRequest, chat_request
from lm_eval_fin.rerank import rules
from lm_eval_fin.text.jsontext import as_enum, as_flag, as_share, as_strings, parse_json_object
from lm_eval_fin.text.replies import reply_answer

ROLES = ("primary_evidence", "supporting_context", "definition", "caveat", "boilerplate", "heading")
EVIDENCE_TYPES = ("table_numeric", "narrative_numeric", "qualitative", "policy_text", "guidance", "none")
QUESTION_KINDS = ("single_fact", "comparison", "trend", "aggregation", "attribution")
ANCHORS = ("explicit", "implicit", "none")
GRANULARITIES = ("year", "quarter", "month", "none")
ENTITY_SCOPES = ("consolidated", "segment", "subsidiary", "unknown")
BASES = ("GAAP", "non-GAAP", "adjusted", "reported", "unknown")
COMPARISONS = ("yoy", "qoq", "period_vs_period", "none")
LIMITATIONS = ("no_numbers", "no_period", "forward_looking_only", "partial_scope", "definition_only", "no_content")
TABLE_CUES = ("present", "time_columns", "change_columns", "total_row")
KIND = "b1"

# Spellings of the public code and common paraphrases, mapped onto our enums.
_SYNONYMS = {
    "structural_heading": "heading",
    "qualitative_explanation": "qualitative",
    "period_over_period": "period_vs_period",
}

_STRING_LIST = {"type": "array", "items": {"type": "string"}, "maxItems": 6}
CARD_SCHEMA: dict[str, Any] = {
    "title": "fincards_card",
    "type": "object",
    "properties": {
        "role": {"enum": list(ROLES)},
        "evidence_type": {"enum": list(EVIDENCE_TYPES)},
        "sketch": {"type": "string"},
        "topics": _STRING_LIST,
        "temporal": {
            "type": "object",
            "properties": {
                "anchor": {"enum": list(ANCHORS)},
                "periods": _STRING_LIST,
                "granularity": {"enum": list(GRANULARITIES)},
            },
            "required": ["anchor", "periods", "granularity"],
        },
        "verifiability": {
            "type": "object",
            "properties": {
                "numeric_claim": {"type": "boolean"},
                "units": _STRING_LIST,
                "comparison": {"enum": list(COMPARISONS)},
                "table": {
                    "type": "object",
                    "properties": {cue: {"type": "boolean"} for cue in TABLE_CUES},
                    "required": list(TABLE_CUES),
                },
            },
            "required": ["numeric_claim", "units", "comparison", "table"],
        },
        "scope": {
            "type": "object",
            "properties": {
                "entity": {"enum": list(ENTITY_SCOPES)},
                "segments": _STRING_LIST,
                "geography": _STRING_LIST,
            },
            "required": ["entity", "segments", "geography"],
        },
        "measurement": {
            "type": "object",
            "properties": {"basis": {"enum": list(BASES)}, "definition_present": {"type": "boolean"}},
            "required": ["basis", "definition_present"],
        },
        "answerability": {
            "type": "object",
            "properties": {kind: {"type": "number", "minimum": 0, "maximum": 1} for kind in QUESTION_KINDS},
            "required": list(QUESTION_KINDS),
        },
        "risk": {
            "type": "object",
            "properties": {
                "boilerplate": {"type": "number", "minimum": 0, "maximum": 1},
                "limitations": {"type": "array", "items": {"enum": list(LIMITATIONS)}},
            },
            "required": ["boilerplate", "limitations"],
        },
    },
    "required": [
        "role", "evidence_type", "sketch", "topics", "temporal", "verifiability",
        "scope", "measurement", "answerability", "risk",
    ],
}

_INSTRUCTIONS = """You describe one chunk of a company filing (10-K, 10-Q, 8-K, proxy or earnings call) as an evidence card: a record of what kind of evidence the chunk is and which questions it could support. You describe; you do not answer any question. Read only the chunk.

Fields:
- role: primary_evidence (states facts or figures itself), supporting_context, definition, caveat, boilerplate (standard legal or cautionary text), or heading (a title or table header with no content).
- evidence_type: table_numeric, narrative_numeric (figures in sentences), qualitative, policy_text (accounting or governance policy), guidance (forward-looking targets), or none (headings only).
- sketch: one sentence of at most 30 words saying what the chunk is about, in your own words; name metrics and periods but copy no figures.
- topics: three to six concepts the chunk is about (e.g. "gross margin", "share repurchase").
- temporal: anchor is explicit when periods are named, implicit when only "this year"-style phrases appear, else none; periods as written normalised (e.g. "FY2024", "Q3 2025"); granularity year, quarter, month or none.
- verifiability: numeric_claim true when the chunk states financial figures; units such as USD, %, shares; comparison yoy, qoq, period_vs_period or none; table cues: present (the chunk is or holds a table), time_columns (columns or rows are periods), change_columns (change or % change shown), total_row (a total row or column).
- scope: entity consolidated, segment, subsidiary or unknown; the segments or products and the geography named.
- measurement: basis GAAP, non-GAAP, adjusted, reported or unknown; definition_present true when the chunk defines a metric or explains how it is measured.
- answerability: from 0 to 1, how well the chunk could support a single_fact, comparison, trend, aggregation or attribution (cause and driver) question. A heading scores 0 everywhere.
- risk: boilerplate likelihood from 0 to 1; limitations among no_numbers, no_period, forward_looking_only, partial_scope, definition_only, no_content.

Answer with the JSON object only."""


def chunk_key(text: str) -> str:
    """Content key of a chunk: chunks with equal text share one card."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def card_request(chunk_text: str, max_tokens: int) -> JudgeRequest:
    """The card request of one chunk; it holds nothing but the chunk (see the module doc)."""
    return chat_request(
        _INSTRUCTIONS,
        f"Chunk:\n{chunk_text}\n\nEvidence card (JSON):",
        max_tokens=max_tokens,
        temperature=0.0,
        json_schema=CARD_SCHEMA,
    )


# ---------------------------------------------------------------------------------------------
# Tolerant normalisation of what the judge wrote


def _section(raw: dict, name: str) -> dict:
    value = raw.get(name)
    return value if isinstance(value, dict) else {}


def normalise_card(raw: dict[str, Any]) -> dict[str, Any] | None:
    """A card with every field present and every value within its enum or range, or None
    when ``raw`` holds none of the card's fields (the judge wrote some other object)."""
    if not any(field in raw for field in CARD_SCHEMA["properties"]):
        return None
    temporal = _section(raw, "temporal")
    verifiability = _section(raw, "verifiability")
    table = _section(verifiability, "table")
    scope = _section(raw, "scope")
    measurement = _section(raw, "measurement")
    answerability = _section(raw, "answerability")
    risk = _section(raw, "risk")
    return {
        "role": as_enum(raw.get("role"), ROLES, "supporting_context", _SYNONYMS),
        "evidence_type": as_enum(raw.get("evidence_type"), EVIDENCE_TYPES, "qualitative", _SYNONYMS),
        "sketch": str(raw.get("sketch") or "").strip()[:300],
        "topics": as_strings(raw.get("topics")),
        "temporal": {
            "anchor": as_enum(temporal.get("anchor"), ANCHORS, "none"),
            "periods": as_strings(temporal.get("periods"), limit=8, length=24),
            "granularity": as_enum(temporal.get("granularity"), GRANULARITIES, "none"),
        },
        "verifiability": {
            "numeric_claim": as_flag(verifiability.get("numeric_claim")),
            "units": as_strings(verifiability.get("units"), limit=6, length=16),
            "comparison": as_enum(verifiability.get("comparison"), COMPARISONS, "none", _SYNONYMS),
            "table": {cue: as_flag(table.get(cue)) for cue in TABLE_CUES},
        },
        "scope": {
            "entity": as_enum(scope.get("entity"), ENTITY_SCOPES, "unknown"),
            "segments": as_strings(scope.get("segments")),
            "geography": as_strings(scope.get("geography")),
        },
        "measurement": {
            "basis": as_enum(measurement.get("basis"), BASES, "unknown"),
            "definition_present": as_flag(measurement.get("definition_present")),
        },
        "answerability": {kind: as_share(answerability.get(kind)) for kind in QUESTION_KINDS},
        "risk": {
            "boilerplate": as_share(risk.get("boilerplate")),
            "limitations": [
                item for item in (as_enum(v, LIMITATIONS, "") for v in as_strings(risk.get("limitations"))) if item
            ],
        },
        "kind": KIND,
        "source": "judge",
    }


def parse_card(text: object) -> dict[str, Any] | None:
    """The card in a judge answer, normalised; None when there is none (a parse failure).

    >>> card = parse_card('{"role": "structural_heading", "sketch": "Income statement header"}')
    >>> card["role"], card["evidence_type"], card["temporal"]["anchor"]
    ('heading', 'qualitative', 'none')
    >>> parse_card('{"answer": 42}') is None
    True
    """
    raw = parse_json_object(reply_answer(text))
    return normalise_card(raw) if raw is not None else None


# ---------------------------------------------------------------------------------------------
# Fallback card when the judge could not write one

def fallback_card(chunk_text: str) -> dict[str, Any]:
    """A card read off the text by the rules of :mod:`~lm_eval_fin.rerank.rules`: the first
    30 words as the sketch, the periods and figures named, the table signature."""
    periods = rules.periods(chunk_text)
    table = rules.table_signature(chunk_text)
    figures = bool(rules.numeric_spans(chunk_text, limit=1))
    card = normalise_card({"sketch": " ".join(chunk_text.split()[:30])})
    assert card is not None
    card["evidence_type"] = "table_numeric" if table["present"] else ("narrative_numeric" if figures else "qualitative")
    card["temporal"] = {
        "anchor": "explicit" if periods else "none",
        "periods": periods,
        "granularity": "quarter" if any(p.startswith("Q") for p in periods) else ("year" if periods else "none"),
    }
    card["verifiability"]["numeric_claim"] = figures
    card["verifiability"]["table"] = {
        "present": table["present"],
        "time_columns": table["present"] and len(table["periods"]) >= 2,
        "change_columns": table["change_column"],
        "total_row": table["total_row"],
    }
    card["measurement"]["definition_present"] = rules.defines_metric(chunk_text)
    card["role"] = "heading" if rules.heading(chunk_text) else "supporting_context"
    card["risk"]["boilerplate"] = 1.0 if rules.boilerplate(chunk_text) else 0.0
    card["source"] = "fallback"
    return card


# ---------------------------------------------------------------------------------------------
# How a card is shown to the judge in stages 2 and 3


def render_card(chunk_id: int, card: Mapping[str, Any]) -> str:
    """One compact line per card: the fields that carry signal (those an ablation left in
    the card), none of the chunk's text.

    >>> print(render_card(7, fallback_card("Revenue was $5 million in FY2024.")))
    [7] role=supporting_context; type=narrative_numeric; sketch: Revenue was $5 million in FY2024.; period: explicit FY2024 (year); numbers: yes
    """
    verif = card["verifiability"]
    parts = [f"[{chunk_id}] role={card['role']}", f"type={card['evidence_type']}"]
    if card["sketch"]:
        parts.append(f"sketch: {card['sketch']}")
    if card.get("topics"):
        parts.append("topics: " + ", ".join(card["topics"]))
    temporal = card.get("temporal")
    if temporal and (temporal["anchor"] != "none" or temporal["periods"]):
        periods = ", ".join(temporal["periods"])
        parts.append(f"period: {temporal['anchor']} {periods} ({temporal['granularity']})".replace("  ", " "))
    if verif["numeric_claim"]:
        units = f" [{', '.join(verif['units'])}]" if verif["units"] else ""
        comparison = f", {verif['comparison']}" if verif["comparison"] != "none" else ""
        parts.append(f"numbers: yes{units}{comparison}")
    table = verif.get("table")
    if table and table["present"]:
        cues = [name.replace("_", " ") for name in TABLE_CUES[1:] if table[name]]
        parts.append("table" + (f" ({', '.join(cues)})" if cues else ""))
    scope = card.get("scope")
    if scope and (scope["entity"] != "unknown" or scope["segments"] or scope["geography"]):
        named = ", ".join(scope["segments"] + scope["geography"])
        parts.append(f"scope: {scope['entity']}" + (f" ({named})" if named else ""))
    measurement = card["measurement"]
    if measurement["basis"] != "unknown" or measurement["definition_present"]:
        parts.append(
            f"basis: {measurement['basis']}" + (", defines a metric" if measurement["definition_present"] else "")
        )
    strong = [kind for kind in QUESTION_KINDS if card["answerability"][kind] >= 0.5]
    if strong:
        parts.append("answers: " + ", ".join(strong))
    risk = card["risk"]
    if risk["boilerplate"] >= 0.5 or risk["limitations"]:
        parts.append(f"boilerplate {risk['boilerplate']:.1f}" + "".join(f", {x}" for x in risk["limitations"]))
    return "; ".join(parts)


def fills_quota(card: Mapping[str, Any], quota: str) -> bool:
    """Whether a card can fill a coverage quota.

    * trend: a table with a time dimension: time columns, or at least two named periods, or
      a year-over-year / period comparison (the code asks for "table-based chunks with clear
      temporal dimensions");
    * definition: the card's role is a definition, it defines a metric, or it is policy text.
    """
    if quota == "trend":
        verif = card["verifiability"]
        table = verif.get("table") or {}
        periods = (card.get("temporal") or {}).get("periods", [])
        timed = table.get("time_columns") or len(periods) >= 2 or verif["comparison"] != "none"
        return bool(table.get("present") and timed)
    if quota == "definition":
        return (
            card["role"] == "definition"
            or card["measurement"]["definition_present"]
            or card["evidence_type"] == "policy_text"
        )
    raise ValueError(f"unknown quota {quota!r}")
