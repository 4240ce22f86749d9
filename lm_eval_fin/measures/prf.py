"""Precision, recall and F1: the one definition every metric of the package uses.

The empty-set convention is the papers' and the README's (Metric definitions): a prediction and a reference that are
both empty agree completely (1, 1, 1); one empty side shares nothing with the other (0, 0, 0).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable


def f1(precision: float, recall: float) -> float:
    """The harmonic mean of precision and recall; 0 when both are 0.

    >>> f1(0.5, 1.0)
    0.6666666666666666
    >>> f1(0.0, 0.0)
    0.0
    """
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def prf(
    predicted_hits: float, predicted: int, reference_hits: float, reference: int
) -> tuple[float, float, float]:
    """(P, R, F1) from counts: ``predicted_hits`` of ``predicted`` items found in the reference,
    ``reference_hits`` of ``reference`` items found in the prediction (the two differ when
    matching is not one to one, as with numbers under a tolerance).

    >>> prf(1, 2, 1, 1)
    (0.5, 1.0, 0.6666666666666666)
    >>> prf(0, 0, 0, 0), prf(0, 0, 0, 3)
    ((1.0, 1.0, 1.0), (0.0, 0.0, 0.0))
    """
    if not predicted and not reference:
        return 1.0, 1.0, 1.0
    if not predicted or not reference:
        return 0.0, 0.0, 0.0
    precision, recall = predicted_hits / predicted, reference_hits / reference
    return precision, recall, f1(precision, recall)


def set_prf(predicted: Iterable[Hashable], reference: Iterable[Hashable]) -> tuple[float, float, float]:
    """(P, R, F1) of two sets of items.

    >>> set_prf({"a", "b"}, {"a"})
    (0.5, 1.0, 0.6666666666666666)
    """
    predicted, reference = set(predicted), set(reference)
    hits = len(predicted & reference)
    return prf(hits, len(predicted), hits, len(reference))
