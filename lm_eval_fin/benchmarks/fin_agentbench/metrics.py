"""Every FinAgentBench metric, declared once (:mod:`lm_eval_fin.harness.metrics`): nDCG, MAP
and MRR at each cut-off (FinAgentBench's and the challenge's @5, FinCARDS's @10; README.md,
"Scoring"), of the ranking read from each answer against the record's grades."""

from __future__ import annotations

from lm_eval_fin.harness.metrics import (
    DEGENERATE_ANSWER,
    PARSE_FAILURE,
    TRUNCATED_ANSWERS,
    Metric,
    truncated_documents,
)
from lm_eval_fin.measures.scales import share

CUTOFFS = (5, 10)
CHUNK_TASK = "fin_agentbench_chunk"


def at(k: int) -> tuple[Metric, ...]:
    return (
        Metric(f"ndcg@{k}", True, share("ndcg"), f"nDCG of the ranking's top {k}"),
        Metric(f"map@{k}", True, share("map"), f"average precision at {k} over every relevant candidate"),
        Metric(f"map_hits@{k}", True, share("map"),
               f"average precision at {k} over the relevant candidates within the top {k} (FinCARDS' convention)"),
        Metric(f"mrr@{k}", True, share("mrr"), f"reciprocal rank of the first relevant candidate within the top {k}"),
    )


METRICS: tuple[Metric, ...] = (
    *(metric for k in CUTOFFS for metric in at(k)),
    PARSE_FAILURE,
    truncated_documents("chunks dropped from the end of the list to fit the model's context", (CHUNK_TASK,)),
    DEGENERATE_ANSWER,
    TRUNCATED_ANSWERS,
)
HEADLINE = {
    "fin_agentbench_doc": ("ndcg@5", "map@5", "map_hits@5", "mrr@5", "parse_failure"),
    CHUNK_TASK: ("ndcg@10", "map@10", "map_hits@10", "mrr@10", "parse_failure"),
}
