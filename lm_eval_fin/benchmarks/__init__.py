"""The benchmarks, one package each, all built the same way:

    data.py     the dataset's format and reader, and our task documents
    prompt.py   what the model sees (and fitting it to the context, where prompts run long)
    score.py    the scores of an answer, and of a run where a metric needs the run at once
    judge.py    the judge's prompt, reply parser and summary (benchmarks with a judge)
    task.py     the functions the task YAMLs name, and the benchmark's :class:`Benchmark`

A new benchmark is a new package here, listed in :func:`all_benchmarks`, and a task folder
``tasks/<name>/`` whose ``utils.py`` re-exports its ``task`` module.
"""

from __future__ import annotations

from lm_eval_fin.harness.benchmark import Benchmark


def all_benchmarks() -> tuple[Benchmark, ...]:
    from lm_eval_fin.benchmarks.fin_agentbench.task import BENCHMARK as fin_agentbench
    from lm_eval_fin.benchmarks.fin_ems.task import BENCHMARK as fin_ems
    from lm_eval_fin.benchmarks.fin_lfqa.task import BENCHMARK as fin_lfqa

    return fin_agentbench, fin_ems, fin_lfqa
