"""Attribution scores of one example (FinLFQA section 4.3): evidence P/R/F1, knowledge recall."""

from __future__ import annotations

from collections.abc import Iterable

from lm_eval_fin.attribution.values import Evidence
from lm_eval_fin.measures.prf import set_prf


def _normalise_evidence(pairs: Iterable[Evidence]) -> set[tuple[str, int]]:
    return {(str(company).strip().upper(), int(index)) for company, index in pairs}


def evidence_prf(
    predicted: Iterable[Evidence], reference: Iterable[Evidence]
) -> tuple[float, float, float]:
    """Evidence precision, recall, F1 over (company, paragraph) pairs of one example.

    >>> evidence_prf([("CWT", 16), ("awk", 3)], [("CWT", 16), ("CWT", 17)])
    (0.5, 0.5, 0.5)
    """
    return set_prf(_normalise_evidence(predicted), _normalise_evidence(reference))


def knowledge_recall(predicted: Iterable[int], reference: Iterable[int]) -> float | None:
    """Share of the reference's knowledge indices the answer cites; None when the reference
    cites none: recall is undefined there, and averages leave such examples out (never a
    free 1.0; a mean over them is NaN).

    >>> knowledge_recall([2, 9], [2, 5])
    0.5
    >>> knowledge_recall([1], []) is None
    True
    """
    reference = set(reference)
    if not reference:
        return None
    return len(set(predicted) & reference) / len(reference)
