"""FinCARDS query intent: what evidence a question needs, as structured fields (appendix B.2).

Fields: topic, entities, metrics, temporal scope (type, periods, granularity), whether numeric
evidence is required, the relation asked for (lookup, trend, comparison, explanation,
definition, policy) and up to eight keywords. Stage 2 shows the intent beside the question
and uses its relation to decide the coverage quotas; the audit trace matches it against each
card. The paper says stage 2 should use the intent; the public code computes intents but its
stage-2 prompt never reads them (quotas there come from keyword lists over the question), so
here we follow the paper. When the intent cannot be parsed, or names no relation we know
(the field is missing or holds a word outside the list), the quotas fall back to those keyword
lists, narrowed to the words that name a trend or a definition: an unknown relation is no
evidence that the question is a plain lookup.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lm_eval_fin.judge.base import JudgeRequest, chat_request
from lm_eval_fin.text.jsontext import as_enum, as_flag, as_strings, parse_json_object
from lm_eval_fin.text.replies import reply_answer

TOPICS = (
    "Revenue", "Costs/Expenses", "Profitability", "Liquidity", "Guidance/Outlook", "Risk", "ESG",
    "Market", "AccountingPolicy", "Legal", "MD&A", "FinancialStatements", "Other",
)
RELATIONS = ("lookup", "trend", "comparison", "explanation", "definition", "policy")
TEMPORAL_TYPES = ("explicit", "implicit", "none")
GRANULARITIES = ("year", "quarter", "month", "mixed", "none")

_LIST = {"type": "array", "items": {"type": "string"}, "maxItems": 8}
INTENT_SCHEMA: dict[str, Any] = {
    "title": "fincards_intent",
    "type": "object",
    "properties": {
        "topic": {"enum": list(TOPICS)},
        "entities": _LIST,
        "metrics": _LIST,
        "temporal": {
            "type": "object",
            "properties": {
                "type": {"enum": list(TEMPORAL_TYPES)},
                "periods": _LIST,
                "granularity": {"enum": list(GRANULARITIES)},
            },
            "required": ["type", "periods", "granularity"],
        },
        "numeric": {"type": "boolean"},
        "relation": {"enum": list(RELATIONS)},
        "keywords": _LIST,
    },
    "required": ["topic", "entities", "metrics", "temporal", "numeric", "relation", "keywords"],
}

_INSTRUCTIONS = f"""You read a question about a company filing and state what evidence it needs, as a JSON object. Do not answer the question.

Fields:
- topic: one of {", ".join(TOPICS)}.
- entities: companies, segments or products the question names (empty if none).
- metrics: the financial metrics it asks about (e.g. revenue, gross margin, free cash flow).
- temporal: type explicit when periods are named, implicit for phrases like "recently" or "last year", none otherwise; periods normalised (e.g. "FY2024", "Q2 2025"); granularity year, quarter, month, mixed or none.
- numeric: true when the answer needs figures (values, changes, ratios).
- relation: lookup (a value), trend (change over time), comparison (against another period or entity), explanation (drivers, causes, impact), definition (what something means or how it is measured), policy (accounting or corporate policy).
- keywords: up to eight salient words or phrases of the question.
Leave a field empty or "none"/"Other" when the question does not say; do not guess.

Answer with the JSON object only."""


def intent_request(question: str, max_tokens: int) -> JudgeRequest:
    return chat_request(
        _INSTRUCTIONS,
        f"Question: {question}\n\nIntent (JSON):",
        max_tokens=max_tokens,
        temperature=0.0,
        json_schema=INTENT_SCHEMA,
    )


def normalise_intent(raw: dict[str, Any]) -> dict[str, Any] | None:
    if not any(field in raw for field in INTENT_SCHEMA["properties"]):
        return None
    temporal = raw.get("temporal")
    if not isinstance(temporal, dict):
        temporal = {}
    return {
        "topic": as_enum(raw.get("topic"), TOPICS, "Other"),
        "entities": as_strings(raw.get("entities"), limit=8),
        "metrics": as_strings(raw.get("metrics"), limit=8),
        "temporal": {
            "type": as_enum(temporal.get("type"), TEMPORAL_TYPES, "none"),
            "periods": as_strings(temporal.get("periods"), limit=8, length=24),
            "granularity": as_enum(temporal.get("granularity"), GRANULARITIES, "none"),
        },
        "numeric": as_flag(raw.get("numeric")),
        "relation": as_enum(raw.get("relation"), RELATIONS, None),  # None: the keywords decide
        "keywords": as_strings(raw.get("keywords"), limit=8),
        "source": "judge",
    }


def parse_intent(text: object) -> dict[str, Any] | None:
    """The intent in a judge answer, normalised; None when there is none.

    >>> intent = parse_intent('{"relation": "Trend", "metrics": ["revenue"], "numeric": "true"}')
    >>> intent["relation"], intent["metrics"], intent["numeric"], intent["topic"]
    ('trend', ['revenue'], True, 'Other')
    """
    raw = parse_json_object(reply_answer(text))
    return normalise_intent(raw) if raw is not None else None


# ---------------------------------------------------------------------------------------------
# Coverage quotas: which kinds of evidence a question must not lose in stage 2

TREND = "trend"
DEFINITION = "definition"

# Fallback when no intent could be parsed: the public code's keyword lists, without its
# broadest words ("year", "quarter", "period", "across", "multiple"), which match nearly
# every question about a filing and would put every question under the trend quota.
_TREND_WORDS = re.compile(
    r"\b(trend|over time|compare[ds]?|comparison|change[ds]?|growth|grew|decline[ds]?|increase[ds]?|"
    r"decrease[ds]?|historical|previous|prior|consecutive|sequential|year[- ]over[- ]year)\b",
    re.IGNORECASE,
)
_DEFINITION_WORDS = re.compile(
    r"\b(what (?:is|are) the definition|define[ds]?|definition|meaning|how (?:is|are) .{0,40}"
    r"(?:measured|calculated|defined|determined)|measurement|accounting (?:policy|method)|methodology|policy)\b",
    re.IGNORECASE,
)


def coverage_quotas(intent: Mapping[str, Any] | None, question: str) -> list[str]:
    """The quotas that apply to a question: ``trend`` for trend and comparison questions,
    ``definition`` for definition and policy questions (from the intent's relation, or from
    keywords of the question when there is no intent or it names no relation).

    >>> coverage_quotas({"relation": "comparison"}, "")
    ['trend']
    >>> coverage_quotas(None, "How is adjusted EBITDA calculated?")
    ['definition']
    >>> coverage_quotas({"relation": None}, "How did revenue change?")
    ['trend']
    """
    relation = intent.get("relation") if intent is not None else None
    if relation is not None:
        quotas = []
        if relation in ("trend", "comparison"):
            quotas.append(TREND)
        if relation in ("definition", "policy"):
            quotas.append(DEFINITION)
        return quotas
    quotas = []
    if _TREND_WORDS.search(question):
        quotas.append(TREND)
    if _DEFINITION_WORDS.search(question):
        quotas.append(DEFINITION)
    return quotas
