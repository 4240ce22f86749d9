"""lm-eval adapters of fin_lfqa: the logic is in lm_eval_fin.benchmarks.fin_lfqa."""

from lm_eval_fin.benchmarks.fin_lfqa.task import (
    corpus_metric,
    doc_to_target,
    doc_to_text,
    doc_to_text_posthoc,
    load_iterative,
    load_posthoc,
    load_test,
    load_validation,
    process_results,
    total,
)

__all__ = [
    "corpus_metric", "doc_to_target", "doc_to_text", "doc_to_text_posthoc", "load_iterative", "load_posthoc",
    "load_test", "load_validation", "process_results", "total",
]
