"""lm-eval adapters of fin_lfqa: the logic is in lm_eval_fin.benchmarks.fin_lfqa."""

from lm_eval_fin.benchmarks.fin_lfqa.task import (
    doc_to_target,
    doc_to_text,
    doc_to_text_posthoc,
    load_iterative,
    load_posthoc,
    load_test,
    load_validation,
    process_results,
    score_answers,
    total,
)

__all__ = [
    "doc_to_target", "doc_to_text", "doc_to_text_posthoc", "load_iterative", "load_posthoc", "load_test",
    "load_validation", "process_results", "score_answers", "total",
]
