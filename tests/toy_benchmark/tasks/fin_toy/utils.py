"""lm-eval adapters of fin_toy: the logic is in lm_eval_fin.benchmarks.fin_toy."""

from lm_eval_fin.benchmarks.fin_toy.task import load_dataset, process_results, score_answers

__all__ = ["load_dataset", "process_results", "score_answers"]
