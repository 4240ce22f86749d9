"""The EMS formulas (Hu et al. 2025, equations 6 to 9).

A reference answer has N saliency points, the answer under evaluation M. Matching gives, for
every reference point i, ``a_i``: the index (0-based) of the answer point it matches, or -1.
Scoring gives ``s_i`` in [0, 1] for each matched pair (0 where ``a_i == -1``).

* EMS-Recall    = sum_i s_i / N
* EMS-Precision = sum_j max{s_i : a_i = j} / M   (an answer point no reference point matched
  adds 0; when several reference points match one answer point it counts once, with the best
  of their scores)
* EMS-F1        = 2PR / (P + R), 0 when P + R = 0

Degenerate cases (0/0 is not a number the paper defines, so we fix it here, following the
convention of the numeric metric, README "Metric definitions"):

* N = 0 and M = 0 (neither side states anything): P = R = F1 = 1.
* N = 0 and M > 0: nothing to recall, and no answer point is supported: P = R = F1 = 0.
* N > 0 and M = 0: every a_i must be -1: P = R = F1 = 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from lm_eval_fin.measures.prf import f1

NO_MATCH = -1


class AlignmentError(ValueError):
    """An alignment or score list that the formulas cannot be applied to."""


def check_alignment(alignment: Sequence[int], scores: Sequence[float], n_answer_points: int) -> None:
    """Raise AlignmentError unless the inputs describe a valid matching."""
    if isinstance(n_answer_points, bool) or not isinstance(n_answer_points, int) or n_answer_points < 0:
        raise AlignmentError(f"n_answer_points must be a non-negative integer, got {n_answer_points!r}")
    if len(alignment) != len(scores):
        raise AlignmentError(
            f"alignment has {len(alignment)} entries but scores has {len(scores)}: one per reference point"
        )
    for i, (index, score) in enumerate(zip(alignment, scores)):
        if isinstance(index, bool) or not isinstance(index, int):
            raise AlignmentError(f"alignment[{i}] = {index!r} is not an integer")
        if index != NO_MATCH and not 0 <= index < n_answer_points:
            raise AlignmentError(
                f"alignment[{i}] = {index} is neither -1 nor an answer point index in [0, {n_answer_points})"
            )
        if (
            isinstance(score, bool)
            or not isinstance(score, (int, float))
            or math.isnan(score)
            or not 0 <= score <= 1
        ):
            raise AlignmentError(f"scores[{i}] = {score!r} is not a number in [0, 1]")


def ems_scores(
    alignment: Sequence[int], scores: Sequence[float], n_answer_points: int
) -> tuple[float, float, float]:
    """(EMS-Precision, EMS-Recall, EMS-F1) of one answer; see the module docstring.

    The score of an unmatched reference point is ignored (taken as 0), so callers may pass
    whatever their scorer produced for it.

    >>> ems_scores([1, 0, -1], [0.5, 1.0, 0.0], n_answer_points=4)
    (0.375, 0.5, 0.42857142857142855)
    """
    check_alignment(alignment, scores, n_answer_points)
    n_reference_points = len(alignment)
    if n_reference_points == 0 and n_answer_points == 0:
        return 1.0, 1.0, 1.0
    if n_reference_points == 0 or n_answer_points == 0:
        return 0.0, 0.0, 0.0
    matched = [(index, float(score)) for index, score in zip(alignment, scores) if index != NO_MATCH]
    recall = sum(score for _, score in matched) / n_reference_points
    best_per_answer_point: dict[int, float] = {}
    for index, score in matched:
        best_per_answer_point[index] = max(score, best_per_answer_point.get(index, 0.0))
    precision = sum(best_per_answer_point.values()) / n_answer_points
    return precision, recall, f1(precision, recall)
