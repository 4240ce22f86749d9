# Copyright 2026 The lm-eval-fin authors.
"""nDCG@k, MAP@k (two conventions) and MRR@k for graded reranking (FinAgentBench conventions)."""

import datasets
import evaluate

from lm_eval_fin.measures.ranking import GAINS, rank_metrics
from lm_eval_fin.plumbing.paths import metric_path  # noqa: F401 - the examples load the module by path
from lm_eval_fin.text import citations
from lm_eval_fin.text.cleantext import WritableInputs

_CITATION = citations.FINAGENTBENCH
ID_TYPES = ("string", "int64")

_DESCRIPTION = """\
Ranking quality of a model's ordering of candidates against graded relevance judgements, as
used by FinAgentBench (document-type and chunk ranking). For each query:

- nDCG@k: DCG = sum over ranks i <= k of gain(grade) / log2(i + 1), divided by the DCG of all
  relevant candidates of the query sorted by grade and cut at k. Gain is 2^g - 1
  (exponential, default) or g (linear, as trec_eval's ndcg_cut) for a relevant candidate, 0
  for any other. A query with no relevant item scores 0.
- MAP@k: sum of precision@i at each relevant rank i <= k, divided by the number of relevant
  candidates of the query (trec_eval's map_cut).
- MAP_hits@k: the same sum divided by the number of relevant candidates found within the top
  k (0 when none is): the convention the FinCARDS tables imply. Equal to MAP@k when every
  relevant candidate is within the top k, higher otherwise.
- MRR@k: 1 / rank of the first relevant candidate within k, else 0.

Relevant means grade >= 1, for all three metrics and fractional grades included: a
candidate graded 0.5 brings no gain, and a query whose candidates are all graded below 1
scores 0. A candidate repeated in a ranking counts once (first occurrence). Ids are strings
or integers (3 and "3" are the same candidate). Scores are averaged over queries.
"""

_KWARGS_DESCRIPTION = """
Computes mean nDCG@k, MAP@k (trec_eval's and over the hits) and MRR@k over queries.
Args:
    predictions: list of rankings, one per query; each a list of candidate ids (strings or
        integers), best first. An empty list is an empty ranking (all scores 0).
    references: list of relevance judgements, one per query; each a dict with "ids" (list of
        candidate ids, strings or integers) and "grades" (list of numbers >= 0, same length).
        Ids not listed have grade 0.
    k: cut-off depth (default 10).
    gain: "exponential" (2^g - 1, default) or "linear" (g).
Returns:
    "ndcg@k", "map@k", "map_hits@k", "mrr@k" (means over queries, in [0, 1]) and "n_queries".
Examples:
    >>> metric = evaluate.load(metric_path("ndcg_rerank"))
    >>> results = metric.compute(
    ...     predictions=[["2", "0", "1"], ["1", "0"]],
    ...     references=[{"ids": ["0", "1", "2"], "grades": [1, 0, 2]}, {"ids": ["0", "1", "2"], "grades": [1, 0, 1]}],
    ...     k=3,
    ...     gain="linear",
    ... )
    >>> print({name: round(value, 4) for name, value in results.items()})
    {'ndcg@3': 0.6934, 'map@3': 0.625, 'map_hits@3': 0.75, 'mrr@3': 0.75, 'n_queries': 2}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class NdcgRerank(WritableInputs, evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            homepage="https://arxiv.org/abs/2508.14052",
            codebase_urls=["https://github.com/usnistgov/trec_eval"],
            reference_urls=["https://arxiv.org/abs/2508.14052"],
            license="MIT",
            # ids are strings or integers, on either side: ids compare by their string form
            features=[
                datasets.Features(
                    {
                        "predictions": datasets.Sequence(datasets.Value(predicted)),
                        "references": {
                            "ids": datasets.Sequence(datasets.Value(judged)),
                            "grades": datasets.Sequence(datasets.Value("float64")),
                        },
                    }
                )
                for predicted in ID_TYPES
                for judged in ID_TYPES
            ],
        )

    def _compute(self, predictions, references, k=10, gain="exponential"):
        if gain not in GAINS:
            raise ValueError(f"gain must be one of {GAINS}, got {gain!r}")
        totals = {"ndcg": 0.0, "map": 0.0, "map_hits": 0.0, "mrr": 0.0}
        for ranking, judged in zip(predictions, references):
            if len(judged["ids"]) != len(judged["grades"]):
                raise ValueError("each reference needs as many grades as ids")
            scores = rank_metrics(ranking, dict(zip(judged["ids"], judged["grades"])), k=k, gain=gain)
            for name in totals:
                totals[name] += scores[name]
        n = len(predictions)
        results = {f"{name}@{k}": (total / n if n else 0.0) for name, total in totals.items()}
        results["n_queries"] = n
        return results
