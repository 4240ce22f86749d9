"""Pieces every task's glue uses: documents as an lm-eval dataset, the per-document metric
values ``process_results`` returns, and the aggregations the YAMLs name.

Documents must be flat and typed alike across records (``datasets`` infers one schema), so
nested values travel as JSON text. Every document carries the run's settings
(:meth:`~lm_eval_fin.harness.settings.RunSettings.to_json`) under ``settings``: the only way
they reach the filter stage and ``process_results``.

``process_results`` returns every metric of the task's ``metric_list`` for every document, a
number or None where the metric is undefined for it (a judge that could not judge it, a
reference that cites no knowledge); lm-eval logs those values per sample. Aggregations:
lm-eval's ``mean`` for metrics defined on every document (lm-eval adds its standard error);
:func:`mean_defined` where a value can be undefined (lm-eval computes no standard error for a
function it does not know; the report bootstraps the logged values); :func:`total` for counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from lm_eval_fin import records
from lm_eval_fin.harness import taskfiles
from lm_eval_fin.harness.settings import RunSettings, SettingsError


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
    degenerate (:mod:`lm_eval_fin.degenerate`), else 0.0."""
    return float(bool(record.get("degenerate")))


def metric_values(settings: RunSettings, values: Mapping[str, Any]) -> dict[str, float | None]:
    """Every metric of the task's ``metric_list``, in its order: the value given (a finite
    number, else None), None for a metric not given. A name the YAML does not list is a bug
    (lm-eval would aggregate it with ``mean``), so it raises."""
    listed = taskfiles.metric_names(settings.task)
    unknown = sorted(set(values) - set(listed))
    if unknown:
        raise KeyError(f"{settings.task}: process_results gave metrics its YAML does not list: {unknown}")
    return {name: _number(values.get(name)) for name in listed}


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def mean_defined(items: Sequence[float | None]) -> float | None:
    """Aggregation: the mean over the documents where the metric is defined; None (null in
    the results) where it is defined on none.

    >>> mean_defined([1.0, None, 0.0]), mean_defined([None])
    (0.5, None)
    """
    defined = [item for item in items if item is not None]
    return sum(defined) / len(defined) if defined else None


def total(items: Sequence[float | None]) -> float:
    """Aggregation: the sum (a count of documents or of things in them).

    >>> total([1.0, None, 2.0])
    3.0
    """
    return float(sum(item for item in items if item is not None))
