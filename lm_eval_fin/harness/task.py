"""Pieces every task's glue uses: documents as an lm-eval dataset, the per-document metric
values ``process_results`` returns, and the aggregations the YAMLs name.

Documents must be flat and typed alike across records (``datasets`` infers one schema), so
nested values travel as JSON text. Every document carries the run's settings
(:meth:`~lm_eval_fin.harness.settings.RunSettings.to_json`) under ``settings``: the only way
they reach the filter stage and ``process_results``.

``process_results`` returns, for each document, the metrics of the task's ``metric_list`` that
are defined for it; a metric undefined for the document (a judge that could not judge it, a
reference that cites no knowledge, a run without a judge) is left out, so lm-eval's own ``mean``
runs over the documents where it is defined and a metric defined on none is absent from the
results: never a None for lm-eval to add up (0.5 bootstraps a standard error for every
aggregation but ``mean``), and ``aggregation: mean`` in the YAML, which readers of lm-eval's
folders (Zeno registers only those metrics) take for a mean. lm-eval logs the values per sample.
:func:`total` aggregates counts (defined on every document).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from lm_eval_fin.harness import taskfiles
from lm_eval_fin.harness.settings import RunSettings, SettingsError
from lm_eval_fin.outputs import records


def as_dataset(split: str, documents: Sequence[dict[str, Any]], settings: RunSettings) -> dict:
    """``{split: datasets.Dataset}`` of ``documents``, each with the run's settings."""
    import datasets

    settings_json = settings.to_json()
    return {split: datasets.Dataset.from_list([{**doc, "settings": settings_json} for doc in documents])}


def require_data_path(settings: RunSettings, hint: str) -> str:
    """The run's ``data_path``; a benchmark without a hub copy cannot run without one."""
    if not settings["data_path"]:
        raise SettingsError(
            f"{settings.task} needs its data: pass --metadata '{{\"data_path\": \"...\"}}' with {hint}"
        )
    return settings["data_path"]


def scored_record(results: Sequence[Any]) -> dict[str, Any]:
    """The scored-answer record lm-eval hands ``process_results`` (one request per document)."""
    return records.decode(results[0] if results else "")


def degenerate_answer(record: Mapping[str, Any]) -> float:
    """``degenerate_answer`` of a document: 1.0 where its record says why its answer is
    degenerate (:mod:`lm_eval_fin.measures.degenerate`), else 0.0."""
    return float(bool(record.get("degenerate")))


def metric_values(settings: RunSettings, values: Mapping[str, Any]) -> dict[str, float]:
    """The metrics of the task's ``metric_list`` defined for one document, in the list's order:
    each given value that is a finite number (a bool counts 1 or 0); None, NaN or a metric not
    given is left out. A name the YAML does not list is a bug (lm-eval would aggregate it with
    ``mean``), so it raises."""
    listed = taskfiles.metric_names(settings.task)
    unknown = sorted(set(values) - set(listed))
    if unknown:
        raise KeyError(f"{settings.task}: process_results gave metrics its YAML does not list: {unknown}")
    numbers = {name: _number(values.get(name)) for name in listed}
    return {name: number for name, number in numbers.items() if number is not None}


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def total(items: Sequence[float]) -> float:
    """Aggregation: the sum (a count of documents or of things in them).

    >>> total([1.0, 0.0, 2.0])
    3.0
    """
    return float(sum(items))
