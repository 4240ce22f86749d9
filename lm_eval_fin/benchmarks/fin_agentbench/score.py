"""FinAgentBench scores of one answer: the model's ranking, read tolerantly, against the grades."""

from __future__ import annotations

import json
from typing import Any

from lm_eval_fin.ranking import parse_ranking, rank_metrics


class UngradedError(ValueError):
    """A record of an eval file: it has no grades to score against."""


def score_answer(doc: dict[str, Any], answer: str, k: int, gain: str) -> dict[str, float]:
    """nDCG, MAP and MRR at ``k`` of one answer, and whether it was a parse failure (an
    unparsable answer is an empty ranking: every score 0)."""
    if not doc["qrel"]:
        raise UngradedError(
            f"record {doc['id']} has no 'qrel' (an eval file without grades): it cannot be "
            "scored; run it with --predict_only --log_samples to collect the rankings"
        )
    labels = {int(key): label for key, label in json.loads(doc["labels"]).items()}
    ranking = parse_ranking(answer, doc["candidates"], labels=labels)
    scores = rank_metrics(ranking, json.loads(doc["qrel"]), k=k, gain=gain)
    return {
        f"ndcg@{k}": scores["ndcg"],
        f"map@{k}": scores["map"],
        f"mrr@{k}": scores["mrr"],
        "parse_failure": float(ranking is None),
    }
