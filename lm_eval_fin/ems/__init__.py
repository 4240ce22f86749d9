"""EMS: Extract, Match, and Score (Hu et al. 2025) for long answers about long documents.

* :mod:`~lm_eval_fin.ems.formulas`: equations 6-9 (:func:`ems_scores`).
* :mod:`~lm_eval_fin.ems.prompts` and :mod:`~lm_eval_fin.ems.parsing`: the judge's three
  stages (extract, match, score) and tolerant readers of its answers.
* :mod:`~lm_eval_fin.ems.offline`: extraction and matching without a judge.
* :mod:`~lm_eval_fin.ems.pipeline`: one batched pass over a run (:func:`run_ems`).

The lm-eval task ``fin_ems`` that scores with it is :mod:`lm_eval_fin.benchmarks.fin_ems`.
"""

from lm_eval_fin.ems.formulas import AlignmentError, ems_scores
from lm_eval_fin.ems.pipeline import SCORERS, DocumentEms, EmsRun, metric_names, run_ems

__all__ = ["AlignmentError", "DocumentEms", "EmsRun", "SCORERS", "ems_scores", "metric_names", "run_ems"]
