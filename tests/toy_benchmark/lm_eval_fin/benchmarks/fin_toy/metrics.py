"""Every fin_toy metric, declared once (:mod:`lm_eval_fin.harness.metrics`): exact match of the
answer against the reference, and the judge's verdict that the answer is correct, which
``lm-eval-fin agreement`` compares with people's 0/1 labels of the same answers."""

from __future__ import annotations

from lm_eval_fin.agreement.criteria import Criterion, RatingScale
from lm_eval_fin.harness.metrics import JudgedMetric, Metric, agreement_family
from lm_eval_fin.measures.scales import share

# a person's label and the judge's verdict alike: 0 (wrong) or 1 (correct)
CORRECT = RatingScale(0, 1, ordinal=True)

METRICS: tuple[Metric, ...] = (
    Metric("exact_match", True, share("accuracy"), "1 where the answer, normalised, is the reference"),
    JudgedMetric("judge_correct", True, share("accuracy"), "the judge's verdict: 1 where it finds the answer correct",
                 criteria=(Criterion("correct", "", CORRECT, CORRECT, "is the answer correct (0 or 1)"),)),
)
HEADLINE = ("exact_match", "judge_correct")
AGREEMENT = agreement_family("fin_toy", METRICS, main="correct", main_judged="correct", reference_field="reference")
