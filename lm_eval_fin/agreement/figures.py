"""The figures file of ``lm-eval-fin agreement`` (``agreement.json``), read back per judged metric:
what the report shows next to each metric a judge gives.

A comparison in the file is about criteria of one family (FinLFQA's ``accuracy`` ... ``overall``,
EMS's ``ems``, two judges' ``ems_llm_f1`` ...); each criterion is read from one per-sample metric
of the judged run (:mod:`lm_eval_fin.agreement.criteria`), so the figures land on that metric.
People's per-point ratings (``points``) have no metric of their own and stay in the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_fin.agreement.criteria import Family, family_of

OUTPUT_NAME = "agreement.json"
FORMAT = "lm-eval-fin/agreement-1"


class AgreementFileError(ValueError):
    """An agreement file that cannot be read; the message names the file."""


@dataclass(frozen=True)
class Estimate:
    """A statistic, its bootstrap interval and (for correlations) scipy's two-sided p-value."""

    value: float | None
    low: float | None = None
    high: float | None = None
    p_value: float | None = None

    def as_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "p_value": self.p_value}


@dataclass(frozen=True)
class MetricAgreement:
    """One comparison's figures on one judged metric. ``kind``: "judge vs people", "judge vs
    judge", "judge vs itself" ...; ``judged`` and ``reference``: the two raters; ``correlation``:
    Pearson (for a judge with itself: runs 1 and 2); ``identical``: for a judge with itself, the
    share of answers given the same value in every run."""

    family: str
    metric: str
    criterion: str
    kind: str
    judged: str
    reference: str
    n: int
    correlation: Estimate | None = None
    kappa: Estimate | None = None
    identical: Estimate | None = None
    source: str = ""


def judged_metrics(task: str, families: Sequence[Family]) -> tuple[str, ...]:
    """The per-sample metrics of ``task`` that agreement compares a judge on (empty for a task
    of no family of ``families``)."""
    family = family_of(task, families)
    if family is None:
        return ()
    return tuple(dict.fromkeys(c.metric for c in (*family.criteria, *family.judge_criteria)))


def _estimate(found: Any) -> Estimate | None:
    if not isinstance(found, Mapping) or not isinstance(found.get("value"), (int, float)):
        return None
    low, high = found.get("low"), found.get("high")
    return Estimate(float(found["value"]), float(low) if isinstance(low, (int, float)) else None,
                    float(high) if isinstance(high, (int, float)) else None)


def _metric(family: Family, criterion: str) -> str | None:
    try:
        return family.criterion_named(criterion).metric
    except StopIteration:  # people's per-point ratings: no per-sample metric of their own
        return None


def _entries(comparison: Mapping[str, Any], source: str, families: Sequence[Family]) -> Iterable[MetricAgreement]:
    family = next((f for f in families if f.name == comparison.get("family")), None)
    if family is None:
        return
    kind, judged, reference = (str(comparison.get(key, "")) for key in ("kind", "judged", "reference"))
    for criterion, figures in (comparison.get("criteria") or {}).items():
        metric = _metric(family, criterion)
        if metric is None or not isinstance(figures, Mapping):
            continue
        yield MetricAgreement(metric=metric, criterion=criterion, n=int(figures.get("n") or 0),
                              correlation=_estimate(figures.get("pearson")), kappa=_estimate(figures.get("kappa")),
                              family=family.name, kind=kind, judged=judged, reference=reference, source=source)
    for criterion, found in (comparison.get("stability") or {}).items():
        metric = _metric(family, criterion)
        if metric is None or not isinstance(found, Mapping):
            continue
        first = (found.get("pairs") or {}).get("1-2") or {}
        yield MetricAgreement(metric=metric, criterion=criterion, n=int(found.get("n") or 0),
                              correlation=_estimate(first.get("pearson")), kappa=_estimate(first.get("kappa")),
                              identical=_estimate(found.get("identical")), family=family.name, kind=kind,
                              judged=judged, reference=reference, source=source)


def read_agreement(path: str | os.PathLike, families: Sequence[Family]) -> list[MetricAgreement]:
    """The figures of an ``agreement.json`` (or of the folder holding one), per judged metric
    (comparisons of a family not among ``families`` are left out)."""
    file = Path(path).expanduser()
    if file.is_dir():
        file = file / OUTPUT_NAME
    try:
        document = json.loads(file.read_text(encoding="utf-8"),
                              parse_constant=lambda name: _refuse(f"{name} is not JSON"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise AgreementFileError(f"{file}: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise AgreementFileError(f"{file}: not an `lm-eval-fin agreement` figures file (no \"format\": \"{FORMAT}\")")
    comparisons = document.get("comparisons")
    if not isinstance(comparisons, list):
        raise AgreementFileError(f"{file}: \"comparisons\" is not a list")
    return [entry for comparison in comparisons if isinstance(comparison, Mapping)
            for entry in _entries(comparison, str(file), families)]


def _refuse(message: str) -> Any:
    raise ValueError(message)
