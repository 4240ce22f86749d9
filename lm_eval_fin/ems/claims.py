"""Claim-level precision, recall and F1 by entailment, as RAGChecker defines its overall
metrics (Ru et al. 2024, ``ragchecker/computation.py``).

* precision: the share of the answer's claims that the reference text entails;
* recall: the share of the reference's claims that the answer text entails;
* F1: their harmonic mean, 0 unless both are above 0.

A verdict is ``entailment``, ``neutral`` or ``contradiction``; only ``entailment`` counts. As
in RAGChecker, a side without claims has precision (or recall) 0, so two texts without claims
score 0, where EMS scores them 1. In fin_ems the claims are the EMS saliency points
(:mod:`lm_eval_fin.ems.pipeline` says where they differ from RAGChecker's).
"""

from __future__ import annotations

from collections.abc import Sequence

from lm_eval_fin.measures.prf import f1

ENTAILMENT = "entailment"


def entailed_share(verdicts: Sequence[str]) -> float:
    """The share of ``verdicts`` that are entailment; 0 for none.

    >>> entailed_share(["entailment", "neutral", "contradiction", "entailment"]), entailed_share([])
    (0.5, 0.0)
    """
    return sum(verdict == ENTAILMENT for verdict in verdicts) / len(verdicts) if verdicts else 0.0


def claim_scores(answer_verdicts: Sequence[str], reference_verdicts: Sequence[str]) -> tuple[float, float, float]:
    """(precision, recall, F1): ``answer_verdicts`` are the verdicts of the answer's claims
    against the reference, ``reference_verdicts`` those of the reference's claims against the
    answer.

    >>> claim_scores(["entailment", "neutral"], ["entailment", "neutral", "neutral", "entailment"])
    (0.5, 0.5, 0.5)
    >>> claim_scores([], ["entailment"])
    (0.0, 1.0, 0.0)
    """
    precision, recall = entailed_share(answer_verdicts), entailed_share(reference_verdicts)
    return precision, recall, f1(precision, recall) if precision > 0 and recall > 0 else 0.0
