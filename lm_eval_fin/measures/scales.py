"""What a metric's values can be: its bounds, unit and family, and whether an LLM judge made it.

lm-eval reports a figure and, in the task's ``metric_list``, whether higher is better; nothing
says that a judge score runs 3..15 or that ``truncated_answers`` is a count. Each benchmark
states that once, beside its metric definitions, in ``lm_eval_fin/benchmarks/<name>/scales.py``:
a table from metric-name patterns (first full match wins) to :class:`Scale`, and the headline
metrics a model card shows. ``lm-eval-fin export`` writes them into Every Eval Ever records and
model-card results; a metric no table names is exported without bounds, never with a guess.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PROPORTION = "proportion"
POINTS = "points"
COUNT = "count"
SIMILARITY = "cosine similarity"


@dataclass(frozen=True)
class Scale:
    """``low``..``high`` (``math.inf``: no ceiling) of the run's figure. ``item``: the scale
    of one document's value where it differs from the figure's (a run total of 0/1 flags).
    ``judged``: the value comes from the LLM judge's replies, so the judge belongs with it."""

    low: float
    high: float
    unit: str
    kind: str  # the metric family, for aggregating like with like (f1, ranking, llm_judge_rating, ...)
    judged: bool = False
    item: Scale | None = None

    @property
    def per_document(self) -> Scale:
        return self.item or self

    def best(self, higher_is_better: bool) -> float:
        return self.high if higher_is_better else self.low


def share(kind: str, judged: bool = False) -> Scale:
    """A value in 0..1: a share, a rate or a score normalised to 1."""
    return Scale(0.0, 1.0, PROPORTION, kind, judged)


def count(kind: str = COUNT, judged: bool = False) -> Scale:
    """A non-negative count (or a mean of counts), with no ceiling."""
    return Scale(0.0, math.inf, COUNT, kind, judged)


def total(kind: str) -> Scale:
    """A run's total of one 0/1 flag per document."""
    return Scale(0.0, math.inf, COUNT, kind, item=share(kind))


def precision_recall_f1(prefix: str, kind: str | None = None, judged: bool = False) -> dict[str, Scale]:
    """``<prefix>_precision``, ``_recall`` and ``_f1``, each a share; ``kind`` (default: the
    measure itself) names their family."""
    return {f"{prefix}_{measure}": share(kind or measure, judged) for measure in ("precision", "recall", "f1")}


def scale_of(metric: str, table: Mapping[str, Scale]) -> Scale | None:
    """The scale of the first pattern of ``table`` that matches all of ``metric``; None when
    none does.

    >>> scale_of("ndcg@5", {r"(ndcg|mrr)@\\d+": share("ranking")}).kind
    'ranking'
    """
    return next((scale for pattern, scale in table.items() if re.fullmatch(pattern, metric)), None)


def matching(metrics: Iterable[str], patterns: Iterable[str]) -> list[str]:
    """The ``metrics`` that match one of ``patterns``, in the patterns' order (each once).

    >>> matching(["b", "a1", "a2"], [r"b", r"a\\d"])
    ['b', 'a1', 'a2']
    """
    metrics = list(metrics)
    found: list[str] = []
    for pattern in patterns:
        found += [m for m in metrics if re.fullmatch(pattern, m) and m not in found]
    return found
