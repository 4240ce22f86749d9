"""Which card a run writes and what of it the judge sees: card kinds, field ablations, views.

Card kinds (``--cards``):

* ``core`` (default): section 3.2's card (:mod:`~lm_eval_fin.rerank.corecard`): the judge
  writes the alignment core, rules derive the triple, evidence spans and auxiliary fields;
* ``b1``: the appendix B.1 card (:mod:`~lm_eval_fin.rerank.cards`), written whole by the judge.

Field ablations (``--card_without``, the paper's Table 2): a group removed from the card is
gone for every later stage: the judge does not see it, and the coverage quotas and the audit
cannot use it.

=========== ============================================= ==========================================
group       core card                                     B.1 card
=========== ============================================= ==========================================
temporal    period, the triple's period, table periods    temporal (anchor, periods, granularity)
metrics     metrics, the triple's metric                  topics (its metric anchors)
tables      the table signature                           verifiability.table
scope       entities, the triple's entity, scope          scope (entity scope, segments, geography)
=========== ============================================= ==========================================

Views (``--card_view``): ``card`` (the card's line), ``summary`` (Table 2 "only summary": the
card's summary or sketch alone) and ``raw`` (Table 2 "raw chunks (no card)": the chunk's text,
cut to ``raw_chars``; no card is asked of the judge, and the quotas and the audit read cards
built by the rules alone).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from lm_eval_fin.judge.base import JudgeRequest
from lm_eval_fin.rerank import cards as b1
from lm_eval_fin.rerank import corecard
from lm_eval_fin.rerank.zeroshot import clip

KINDS = ("core", "b1")
VIEWS = ("card", "summary", "raw")
GROUPS = ("temporal", "metrics", "tables", "scope")
RAW_CHARS = 600

# group -> paths removed from the card (a path is a tuple of keys)
_ABLATED: dict[str, dict[str, tuple[tuple[str, ...], ...]]] = {
    "core": {
        "temporal": (("period",), ("triple", "period"), ("aux", "table", "periods")),
        "metrics": (("metrics",), ("triple", "metric")),
        "tables": (("aux", "table"),),
        "scope": (("entities",), ("triple", "entity"), ("aux", "scope")),
    },
    "b1": {
        "temporal": (("temporal",),),
        "metrics": (("topics",),),
        "tables": (("verifiability", "table"),),
        "scope": (("scope",),),
    },
}


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown card kind {kind!r}; choose from {list(KINDS)}")
    return kind


def card_request(kind: str, chunk_text: str, max_tokens: int) -> JudgeRequest:
    return (corecard.card_request if check_kind(kind) == "core" else b1.card_request)(chunk_text, max_tokens)


def card_parser(kind: str, chunk_text: str) -> Callable[[str], dict | None]:
    """The parser of one chunk's card answer (a core card checks its spans against the chunk)."""
    return partial(corecard.parse_card, chunk_text=chunk_text) if check_kind(kind) == "core" else b1.parse_card


def fallback_card(kind: str, chunk_text: str) -> dict[str, Any]:
    return (corecard.fallback_card if check_kind(kind) == "core" else b1.fallback_card)(chunk_text)


def without(card: Mapping[str, Any], groups: Sequence[str]) -> dict[str, Any]:
    """A copy of ``card`` with the fields of ``groups`` removed (see the module table).

    >>> card = corecard.fallback_card("Revenue was $5 million in fiscal 2025.")
    >>> trimmed = without(card, ["temporal"])
    >>> "period" in trimmed, trimmed["triple"], card["period"]
    (False, {'entity': '', 'metric': 'revenue'}, 'FY2025')
    """
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise ValueError(f"unknown card field group(s) {unknown}; choose from {list(GROUPS)}")
    trimmed = copy.deepcopy(dict(card))
    for group in groups:
        for path in _ABLATED[trimmed["kind"]][group]:
            holder: object = trimmed
            for key in path[:-1]:
                holder = holder.get(key) if isinstance(holder, dict) else None
            if isinstance(holder, dict):
                holder.pop(path[-1], None)
    if groups:
        trimmed["without"] = list(groups)
    return trimmed


def summary_of(card: Mapping[str, Any]) -> str:
    return card.get("summary", "") if card["kind"] == "core" else card.get("sketch", "")


def show(chunk_id: int, card: Mapping[str, Any], chunk_text: str, view: str, raw_chars: int = RAW_CHARS) -> str:
    """How a candidate is shown to the judge in stages 2 and 3, one line.

    >>> card = corecard.fallback_card("Net income was $96.3 million in fiscal 2025.")
    >>> show(2, card, "Net income was $96.3 million in fiscal 2025.", "summary")
    '[2] summary: Net income was $96.3 million in fiscal 2025.'
    >>> show(2, card, "Net income was $96.3 million in fiscal 2025.", "raw", raw_chars=20)
    '[2] Net income was …'
    """
    if view == "raw":
        return f"[{chunk_id}] " + clip(" ".join(chunk_text.split()), raw_chars)
    if view == "summary":
        return f"[{chunk_id}] summary: {summary_of(card) or '(none)'}"
    if view != "card":
        raise ValueError(f"unknown card view {view!r}; choose from {list(VIEWS)}")
    return corecard.render(chunk_id, card) if card["kind"] == "core" else b1.render_card(chunk_id, card)


def fills_quota(card: Mapping[str, Any], quota: str) -> bool:
    """Whether a card (after any ablation) can fill a coverage quota; see the card modules."""
    return (corecard.fills_quota if card["kind"] == "core" else b1.fills_quota)(card, quota)
