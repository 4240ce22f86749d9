"""lm-eval adapters of fin_agentbench: the logic is in lm_eval_fin.benchmarks.fin_agentbench."""

from lm_eval_fin.benchmarks.fin_agentbench.task import (
    load_chunk_ranking,
    load_document_ranking,
    process_results_chunk,
    process_results_doc,
    total,
)

__all__ = ["load_chunk_ranking", "load_document_ranking", "process_results_chunk", "process_results_doc", "total"]
