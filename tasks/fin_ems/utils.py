"""lm-eval adapters of fin_ems: the logic is in lm_eval_fin.benchmarks.fin_ems."""

from lm_eval_fin.benchmarks.fin_ems.task import corpus_metric, doc_to_text, load_dataset, process_results, total

__all__ = ["corpus_metric", "doc_to_text", "load_dataset", "process_results", "total"]
