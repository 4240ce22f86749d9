"""Adapters between lm-eval and lm_eval_fin for fin_ems; the logic is in lm_eval_fin.ems.harness."""

from lm_eval_fin.ems.harness import corpus_metric, doc_to_text, load_dataset, process_results, total

__all__ = ["corpus_metric", "doc_to_text", "load_dataset", "process_results", "total"]
