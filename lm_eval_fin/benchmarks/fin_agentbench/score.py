"""FinAgentBench scores of one answer: the model's ranking, read tolerantly, against the grades."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lm_eval_fin.ranking import parse_ranking, rank_metrics

# Both depths for both tasks: FinAgentBench's tables and the challenge use @5, FinCARDS @10.
DEPTHS = (5, 10)


class UngradedError(ValueError):
    """A record of an eval file: it has no grades to score against."""


def score_answer(doc: dict[str, Any], answer: str, gain: str, depths: Sequence[int] = DEPTHS) -> dict[str, float]:
    """nDCG, MAP (trec_eval's ``map`` and the papers' ``map_hits``, see :mod:`lm_eval_fin.ranking`)
    and MRR at each depth of one answer, and whether it was a parse failure (an unparsable
    answer is an empty ranking: every score 0)."""
    if not doc["qrel"]:
        raise UngradedError(
            f"record {doc['id']} has no 'qrel' (an eval file without grades): it cannot be "
            "scored; run it with --predict_only --log_samples to collect the rankings"
        )
    labels = {int(key): label for key, label in json.loads(doc["labels"]).items()}
    ranking = parse_ranking(answer, doc["candidates"], labels=labels)
    qrel = json.loads(doc["qrel"])
    scores: dict[str, float] = {}
    for k in depths:
        at_k = rank_metrics(ranking, qrel, k=k, gain=gain)
        scores.update({f"{name}@{k}": value for name, value in at_k.items()})
    scores["parse_failure"] = float(ranking is None)
    return scores
