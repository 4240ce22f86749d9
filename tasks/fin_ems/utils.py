"""lm-eval adapters of fin_ems: the logic is in lm_eval_fin.benchmarks.fin_ems."""

from lm_eval_fin.benchmarks.fin_ems.task import (
    doc_to_text,
    load_dataset,
    process_results,
    score_answers,
    total,
)

__all__ = ["doc_to_text", "load_dataset", "process_results", "score_answers", "total"]
