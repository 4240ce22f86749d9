"""The benchmarks, one package each, all built the same way:

    data.py     the dataset's format and reader, and our task documents
    prompt.py   what the model sees (and fitting it to the context, where prompts run long)
    score.py    the scores of an answer, and of a run where a metric needs the run at once
    judge.py    the judge's prompt, reply parser and summary (benchmarks with a judge)
    metrics.py  every metric, declared once (:mod:`lm_eval_fin.harness.metrics`): name,
                direction, scale, aggregation; judged ones with what agreement compares them
                on; the headline metrics (the task YAMLs' ``metric_list`` is checked against it)
    task.py     the functions the task YAMLs name, and the benchmark's :class:`Benchmark`;
                a judged benchmark's filter stage hands its judge work to
                :func:`lm_eval_fin.harness.stage.judge_stage`

A new benchmark is a new package here whose ``task`` module defines ``BENCHMARK``
(:func:`all_benchmarks` finds it; no list to edit), and a task folder ``tasks/<name>/``
whose ``utils.py`` re-exports its ``task`` module. Its demo sample, if it has one, is the
package's ``demo`` folder (:func:`demo_data`; packaging ships every package's ``demo`` folder).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from pathlib import Path

from lm_eval_fin.harness.benchmark import Benchmark
from lm_eval_fin.plumbing import paths


def all_benchmarks() -> tuple[Benchmark, ...]:
    """Every benchmark: the ``BENCHMARK`` of each package here that has a ``task`` module
    defining one, in the order of the packages' names (so runs, reports and exports list them
    the same way on every machine). A task module that fails to import raises: a benchmark is
    never left out in silence."""
    found = []
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        task_name = f"{__name__}.{module.name}.task"
        if not module.ispkg or importlib.util.find_spec(task_name) is None:
            continue
        benchmark = getattr(importlib.import_module(task_name), "BENCHMARK", None)
        if benchmark is not None:
            found.append(benchmark)
    return tuple(found)


def demo_data(package: str, *parts: str) -> Path:
    """The demo sample shipped in the benchmark package ``package`` (``fin_ems``): its
    ``demo`` folder, or a file or folder in it (``demo_data("fin_lfqa", "finlfqa_demo.jsonl")``)."""
    return paths.demo_path(f"{__name__}.{package}", *parts)
