"""Pieces every task's glue uses: documents as an lm-eval dataset, the ``total`` aggregation.

Documents must be flat and typed alike across records (``datasets`` infers one schema), so
nested values travel as JSON text. Every document carries the run's settings
(:meth:`~lm_eval_fin.harness.settings.RunSettings.to_json`) under ``settings``: the only way
they reach ``process_results`` and the aggregations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lm_eval_fin.cleantext import read_answer
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


def model_answer(results: Sequence[Any]) -> tuple[str, float]:
    """The answer lm-eval hands ``process_results``, as the parsers read it (printable, its
    first :data:`~lm_eval_fin.cleantext.MAX_ANSWER_CHARS` characters), and 1.0 when it was cut
    there (summed in ``truncated_answers``).

    >>> model_answer(["ok\\x00"]), model_answer([])
    (('ok', 0.0), ('', 0.0))
    """
    text, cut = read_answer(results[0] if results else "")
    return text, float(cut)


def total(items: Sequence[float]) -> float:
    """Aggregation: the sum (a count of documents)."""
    return float(sum(items))
