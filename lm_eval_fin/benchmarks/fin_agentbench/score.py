"""FinAgentBench scores of one answer: the model's ranking, read tolerantly, against the grades."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lm_eval_fin.measures.ranking import parse_ranking, rank_metrics

# Both depths for both tasks: FinAgentBench's tables and the challenge use @5, FinCARDS @10.
DEPTHS = (5, 10)


def read_ranking(doc: dict[str, Any], answer: str) -> list[int] | None:
    """The candidate ids of the answer in its order (None: no ranking could be read)."""
    labels = {int(key): label for key, label in json.loads(doc["labels"]).items()}
    return parse_ranking(answer, doc["candidates"], labels=labels)


def gold_ranking(doc: dict[str, Any]) -> list[int]:
    """The candidates of a graded document, best grade first (ties in candidate order): the
    task's target, and a perfect answer."""
    qrel = {int(key): float(grade) for key, grade in json.loads(doc["qrel"] or "{}").items()}
    return sorted(qrel, key=lambda candidate: (-qrel[candidate], candidate))


def score_ranking(
    doc: dict[str, Any], ranking: Sequence[int] | None, gain: str, depths: Sequence[int] = DEPTHS
) -> dict[str, float]:
    """nDCG, MAP (trec_eval's ``map``, FinAgentBench's, and FinCARDS' ``map_hits``, see :mod:`lm_eval_fin.measures.ranking`)
    and MRR at each depth of a ranking, and whether it was a parse failure (an
    unreadable answer is an empty ranking: every score 0)."""
    qrel = json.loads(doc["qrel"])
    scores: dict[str, float] = {}
    for k in depths:
        at_k = rank_metrics(ranking, qrel, k=k, gain=gain)
        scores.update({f"{name}@{k}": value for name, value in at_k.items()})
    scores["parse_failure"] = float(ranking is None)
    return scores
