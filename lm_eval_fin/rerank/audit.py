"""The audit trace's explanations: which card fields match a question, and why a chunk sits
where it does in a final ranking.

Card matching is deliberately plain (word overlap and shared years), so a reader can check
it by eye: it says which of the question's metrics, entities, keywords and periods a card
names, whether the card has the figures a numeric question needs, which coverage quota it
could fill, and flags a period mismatch (the question names years and the card names only
others), the error the paper finds cards most useful against. A section 3.2 card is matched
field by field (intent metrics against the card's metrics, entities against its entities,
periods against its period), as the paper's alignment core is meant to be; a B.1 card,
which has no such fields, by the words of its sketch, topics and scope.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lm_eval_fin.rerank import screening, tournament
from lm_eval_fin.rerank.bm25 import tokenize
from lm_eval_fin.rerank.cardview import fills_quota
from lm_eval_fin.rerank.intent import coverage_quotas
from lm_eval_fin.rerank.rules import years as _years

# Words too common in questions about filings to say anything about a match.
_COMMON = frozenset(
    "the and for what was were how did does with from that this which its their company "
    "companies year years fiscal quarter report reported filing during over into about".split()
)


def _named(term: str, card_words: set[str]) -> bool:
    words = [w for w in tokenize(term) if w not in _COMMON]
    return bool(words) and all(w in card_words for w in words)


def _card_words(card: Mapping[str, Any]) -> tuple[set[str], list[str]]:
    """The words a card names for matching, and the texts its periods come from."""
    if card["kind"] == "core":
        texts = [card.get("summary", ""), *card.get("metrics", []), *card.get("entities", [])]
        scope = card.get("aux", {}).get("scope") or {}
        texts += scope.get("regions", [])
        return set(tokenize(" ".join(texts))), [card.get("period", ""), card.get("summary", "")]
    scope = card.get("scope") or {"segments": [], "geography": []}
    words = set(tokenize(" ".join([card["sketch"], *card.get("topics", []), *scope["segments"], *scope["geography"]])))
    return words, [*(card.get("temporal") or {}).get("periods", []), card["sketch"]]


def _has_figures(card: Mapping[str, Any]) -> bool:
    return bool(card.get("numeric_spans")) if card["kind"] == "core" else bool(card["verifiability"]["numeric_claim"])


def card_matches(card: Mapping[str, Any], question: str, intent: Mapping[str, Any] | None = None) -> list[str]:
    """The card fields that match the question, as short labels.

    >>> from lm_eval_fin.rerank.corecard import fallback_card
    >>> card = fallback_card("Revenue for fiscal 2025 was $1,240.5 million, driven by pump volumes.")
    >>> card_matches(card, "What was revenue in 2025?", {"metrics": ["revenue"], "entities": [], "keywords": [],
    ...              "temporal": {"periods": ["FY2025"]}, "numeric": True, "relation": "lookup"})
    ['metric:revenue', 'period:2025', 'figures']
    """
    card_words, period_texts = _card_words(card)
    labels: list[str] = []
    if intent is not None:
        for field, label in (("metrics", "metric"), ("entities", "entity"), ("keywords", "keyword")):
            for term in intent.get(field, []):
                tag = f"{label}:{term.lower()}"
                if _named(term, card_words) and not any(t.endswith(f":{term.lower()}") for t in labels):
                    labels.append(tag)
        wanted_years = _years([*intent.get("temporal", {}).get("periods", []), question])
        numeric = bool(intent.get("numeric"))
    else:
        terms = dict.fromkeys(w for w in tokenize(question) if len(w) > 3 and w not in _COMMON and not w.isdigit())
        labels.extend(f"term:{w}" for w in terms if w in card_words)
        wanted_years = _years([question])
        numeric = False
    card_years = _years(period_texts)
    shared = sorted(wanted_years & card_years)
    labels.extend(f"period:{year}" for year in shared)
    if wanted_years and card_years and not shared:
        labels.append(f"period mismatch (asks {', '.join(sorted(wanted_years))}; card {', '.join(sorted(card_years))})")
    if numeric and _has_figures(card):
        labels.append("figures")
    # the quotas stage 2 applied, so the label agrees with the keyword fallback too
    labels.extend(f"fits {quota} quota" for quota in coverage_quotas(intent, question) if fills_quota(card, quota))
    return labels


def fill_ranking(head: Sequence[int], order: Sequence[int]) -> list[int]:
    """A full ranking: ``head`` (a stage's output), then every other chunk in ``order``
    (BM25 order), so the output ranks all chunks of the filing.

    >>> fill_ranking([4, 1], [1, 2, 3, 4])
    [4, 1, 2, 3]
    """
    placed = set(head)
    return [*head, *(chunk for chunk in order if chunk not in placed)]


# ---------------------------------------------------------------------------------------------
# The trace of stages 2 and 3


def stage2_audit(groups, picks_per_group, kept) -> dict[str, Any]:
    """Each stage-2 group with what was kept, its score, reason and how it got there."""
    return {
        "groups": [
            {
                "group": gi,
                "chunks": group,
                "kept": [{"id": p.chunk, "score": p.score, "reason": p.reason, "via": p.via} for p in picks],
            }
            for gi, (group, picks) in enumerate(zip(groups, picks_per_group))
        ],
        "kept": [p.chunk for p in kept],
    }


def stage3_audit(t: tournament.Tournament) -> dict[str, Any]:
    """Each stage-3 round, the stop reason, the aggregate and the rank variance."""
    return {
        "candidates": len(t.prior),
        "group_size": t.size,
        "rounds": [
            # top_k: the round's own ranking; running_top_k: the aggregate after the round,
            # which the stop rule (jaccard) and the rank variance look at
            {"groups": groups, "top_k": order[: t.top_k], "running_top_k": running[: t.top_k], "jaccard": similarity}
            for groups, order, running, similarity in zip(t.rounds, t.round_orders, t.running_orders, t.similarities)
        ],
        "stopped": t.stopped,
        "aggregation": t.aggregation,
        "regroup": t.regroup,
        "points": {str(c): round(p, 4) for c, p in t.points().items()},
        "rank_variance": t.rank_variance(),
        "rank_variance_measured": t.variance_measured,
    }


_AGGREGATE_LABEL = {"borda": "Borda", "mean_rank": "minus mean rank", "votes": "votes"}


def why_placed(head: Sequence[int], kept: Sequence[screening.Pick], t: tournament.Tournament | None) -> dict[int, str]:
    """Why each chunk of a stage's output is where it is: its Borda points and per-round
    ranks (stage 3), its stage-2 score, group, reason and whether a quota added it."""
    stage2 = {p.chunk: p for p in kept}
    points = t.points() if t is not None else {}
    reasons = {}
    for position, chunk in enumerate(head, start=1):
        parts = []
        if t is not None:
            rounds = ", ".join(map(str, t.round_positions(chunk)))
            running = ", ".join(map(str, t.running_positions(chunk)))
            parts.append(
                f"{_AGGREGATE_LABEL[t.aggregation]} {points[chunk]:.2f} over {len(t.rounds)} rounds "
                f"(round ranks {rounds}; running ranks {running})"
            )
        if chunk in stage2:
            pick = stage2[chunk]
            note = f"stage-2 score {pick.score:g} in group {pick.group}"
            if pick.via != "judge":
                note += f" [{pick.via}]"
            if pick.reason:
                note += f": {pick.reason}"
            parts.append(note)
        reasons[chunk] = "; ".join(parts) or f"position {position}"
    return reasons
