"""The only code that knows lm-evaluation-harness: its calling conventions and its files.

* :mod:`~lm_eval_fin.harness.settings`: what a task reads from lm-eval's ``metadata`` (its
  section of it, in a run of several benchmarks) and the environment, checked once when its
  dataset loads (a bad judge spec fails before generation);
* :mod:`~lm_eval_fin.harness.compat`: lm-eval's internals (not its public API), each with a
  fallback where a release lacks it;
* :mod:`~lm_eval_fin.harness.task`: documents as an lm-eval dataset, the per-document metric
  values of ``process_results``, the aggregations;
* :mod:`~lm_eval_fin.harness.samples`: the column types of lm-eval's samples files, for
  ``datasets``;
* :mod:`~lm_eval_fin.harness.stage`: lm-eval's filter stage for our tasks (one batched pass over
  a task's answers: judge rounds, BERTScore, the sandbox), the judge pool, the run's judge
  failures;
* :mod:`~lm_eval_fin.harness.fitting`: prompts fitted to the model's context;
* :mod:`~lm_eval_fin.harness.taskfiles`: the task YAMLs read as data;
* :mod:`~lm_eval_fin.harness.benchmark`: what a benchmark tells the harness about itself;
* :mod:`~lm_eval_fin.harness.multistep`: ``--model fin-refine``, multi-step generation;
* :mod:`~lm_eval_fin.harness.replay` and :mod:`~lm_eval_fin.harness.rescore`: ``lm-eval-fin
  score``, logged answers replayed through lm-eval;
* :mod:`~lm_eval_fin.harness.run` and :mod:`~lm_eval_fin.harness.demo`: ``lm-eval-fin run``
  and ``lm-eval-fin demo``; :mod:`~lm_eval_fin.harness.startchecks`: what lm-eval would find
  only after loading the model, found before ``run`` hands over to it;
* :mod:`~lm_eval_fin.harness.engines`: lm-eval's own vLLM engine shut down before a ``vllm:``
  judge's starts in the same process (imported here: a judge started from any harness code
  finds the hook registered).
"""

from lm_eval_fin.harness import engines  # noqa: F401 - registers the engine hand-over with the vllm judge

