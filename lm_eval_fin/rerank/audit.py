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
