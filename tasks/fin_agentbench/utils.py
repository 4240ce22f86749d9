"""lm-eval adapters of fin_agentbench: the logic is in lm_eval_fin.benchmarks.fin_agentbench."""

from lm_eval_fin.benchmarks.fin_agentbench.task import (
    doc_to_target,
    load_chunk_ranking,
    load_document_ranking,
    process_results,
    score_answers,
    total,
)

__all__ = ["doc_to_target", "load_chunk_ranking", "load_document_ranking", "process_results", "score_answers", "total"]
