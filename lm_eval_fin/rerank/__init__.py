"""FinCARDS (Zhou et al., 2026): card-based tournament reranking of one filing's chunks.

Stages, one module each:

* :mod:`~lm_eval_fin.rerank.bm25`: stage 1, BM25 within the filing, length-adaptive K;
* :mod:`~lm_eval_fin.rerank.corecard`: one evidence card per chunk, section 3.2's (the judge
  writes the core, :mod:`~lm_eval_fin.rerank.rules` derive the rest); :mod:`~lm_eval_fin.rerank.cards`
  the appendix B.1 card; :mod:`~lm_eval_fin.rerank.cardview` which card, which of its fields
  (Table 2) and what of it the judge sees;
* :mod:`~lm_eval_fin.rerank.intent`: the query intent and the coverage quotas it implies;
* :mod:`~lm_eval_fin.rerank.screening`: stage 2, round-robin group screening from cards;
* :mod:`~lm_eval_fin.rerank.tournament`: stage 3, bootstrap listwise rounds with Borda votes;
* :mod:`~lm_eval_fin.rerank.zeroshot`: the zero-shot listwise baseline on raw text;
* :mod:`~lm_eval_fin.rerank.audit`, :mod:`~lm_eval_fin.rerank.cost`: the audit trace and
  the cost accounting;
* :mod:`~lm_eval_fin.rerank.doctype`: which kind of filing a query is about (10-K, 10-Q, ...);
* :mod:`~lm_eval_fin.rerank.pipeline`: the five variants of the paper's ablation end to end.

``lm-eval-fin rerank`` runs it on FinAgentBench's chunk files
(:mod:`lm_eval_fin.benchmarks.fin_agentbench.rerank`).

Every judge-facing format has a tolerant parser (:mod:`lm_eval_fin.text.jsontext`) and a
fallback, so an unparsable answer is counted and never ends a run; a request the judge failed
leaves the variants that needed it without a score. Each module's docstring
says where we follow the paper and where its public code, when the two differ.
"""

from lm_eval_fin.rerank.pipeline import (
    VARIANTS,
    FinCardsConfig,
    Query,
    RunResult,
    VariantResult,
    run_fincards,
)

__all__ = [
    "VARIANTS",
    "FinCardsConfig",
    "Query",
    "RunResult",
    "VariantResult",
    "run_fincards",
]
