"""The only code that knows lm-evaluation-harness: its calling conventions and its files.

* :mod:`~lm_eval_fin.harness.settings`: what a task reads from lm-eval's ``metadata`` and the
  environment, checked once when its dataset loads (a bad judge spec fails before generation);
* :mod:`~lm_eval_fin.harness.task`: documents as an lm-eval dataset, shared aggregations;
* :mod:`~lm_eval_fin.harness.corpus`: corpus-level metrics as one memoised pass over a run,
  one judge per spec for the life of the process, the run's judge failures;
* :mod:`~lm_eval_fin.harness.fitting`: prompts fitted to the model's context;
* :mod:`~lm_eval_fin.harness.taskfiles`: the task YAMLs read as data;
* :mod:`~lm_eval_fin.harness.samples`: what ``--log_samples`` wrote;
* :mod:`~lm_eval_fin.harness.outputs`: where tasks write beside lm-eval's output;
* :mod:`~lm_eval_fin.harness.benchmark`: what a benchmark tells the harness about itself;
* :mod:`~lm_eval_fin.harness.rescore`: ``lm-eval-fin score``;
* :mod:`~lm_eval_fin.harness.run` and :mod:`~lm_eval_fin.harness.demo`: ``lm-eval-fin run``
  and ``lm-eval-fin demo``;
* :mod:`~lm_eval_fin.harness.engines`: lm-eval's own vLLM engine shut down before a ``vllm:``
  judge's starts in the same process (imported here: a judge started from any harness code
  finds the hook registered).
"""

from lm_eval_fin.harness import engines  # noqa: F401 - registers the engine hand-over with the vllm judge

