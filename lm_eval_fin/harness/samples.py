"""The column types of lm-eval's samples files, for reading several runs as one ``datasets`` set.

``datasets.load_dataset("json", data_files=[...])`` types every column by its first file and
casts the others to it: a metric that the first run leaves out of every line (a judge metric in
a run without a judge) or an all-null column then stops the load (``Couldn't cast array of type
double to null``). With the types declared, ``datasets`` adds a column a file lacks as nulls::

    files = [...]  # samples_<task>_<date>.jsonl of several runs of one task
    datasets.load_dataset("json", data_files=files, features=samples_features(files))

lm-eval's per-sample table builders (W&B's ``WandbLogger.log_eval_samples``, Zeno's
``scripts/zeno_visualize.py``) read every metric of the task's ``metric_list`` from every sample
(``x[metric]``) and stop on the first one missing. ``process_results`` leaves an undefined metric
out, so that lm-eval's ``mean`` runs over the documents where it is defined (a None there would
stop lm-eval 0.4 and 0.5 alike, both add the values up): :func:`with_every_metric` writes it as
null in the samples once lm-eval has aggregated them, before its loggers and writers read them
(``lm-eval-fin run`` does, through :func:`lm_eval_fin.harness.compat.samples_before_output`).
lm-eval's own ``metrics`` field of a sample still names the metrics defined for it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

METRIC_TYPE = "float64"  # process_results gives floats (a bool counts 1.0 or 0.0)


def samples_features(paths: Sequence[str | Path]) -> Any:
    """``datasets.Features`` of the union of the files' columns: each metric a line names in
    lm-eval's ``metrics`` field as float64, every other column as the first file that holds a
    value in it types it."""
    import datasets
    import pyarrow.json

    metrics: set[str] = set()
    columns: dict[str, Any] = {}
    for path in paths:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    metrics.update(json.loads(line).get("metrics") or [])
        for name, feature in datasets.Features.from_arrow_schema(pyarrow.json.read_json(path).schema).items():
            if name not in columns or _is_null(columns[name]):
                columns[name] = feature
    return datasets.Features({name: datasets.Value(METRIC_TYPE) if name in metrics else feature
                              for name, feature in columns.items()})


def _is_null(feature: Any) -> bool:
    return getattr(feature, "dtype", None) == "null"


def with_every_metric(results: Mapping[str, Any], tasks: Collection[str]) -> None:
    """Every metric of each of ``tasks``' ``metric_list`` in each of its samples in ``results``
    (what ``lm_eval.simple_evaluate`` returns, samples logged), None where the sample has none.
    Other tasks' samples are left as they are."""
    samples = results.get("samples") or {}
    configs = results.get("configs") or {}
    for task, lines in samples.items():
        if task not in tasks or task not in configs:
            continue
        listed = [entry["metric"] for entry in configs[task].get("metric_list") or [] if isinstance(entry, dict)]
        for line in lines:
            for metric in listed:
                line.setdefault(metric, None)
