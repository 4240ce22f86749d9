"""Every fin_ems metric, declared once (:mod:`lm_eval_fin.harness.metrics`): the columns of the
EMS paper's Table 1, and what ``lm-eval-fin agreement`` compares the judged ones on.

People rate an answer ``ems``, 0..10 (how well it conveys the reference: every point, with its
details, and nothing the reference contradicts), read against the judge's EMS-F1 times 10; and
``points``, a 0..max_score rating per reference saliency point of how fully the answer conveys
it, read against the judge's score s_i of that point (0 for a point it matched to nothing). A
person's EMS-Recall, the mean of their point ratings over max_score (equation 6 of the EMS
paper), is read against the judge's (``recall``). Two judges are compared on EMS's and the
RAGChecker-style claim metrics (0..1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lm_eval_fin.agreement.criteria import Criterion, PointRatings, RatingScale
from lm_eval_fin.ems.pipeline import BERTSCORE, LLM, OFFLINE, PARTS, RAGCHECKER, ROUGE, SCORERS, metric_prefix
from lm_eval_fin.harness.metrics import (
    DEGENERATE_ANSWER,
    TRUNCATED_ANSWERS,
    JudgedMetric,
    Metric,
    agreement_family,
    truncated_documents,
)
from lm_eval_fin.measures.scales import SIMILARITY, Scale, share

TASK = "fin_ems"
_UNIT = RatingScale(0, 1)
_EMS_F1 = metric_prefix(LLM, LLM) + "_f1"
_MEASURES = {"precision": "Precision", "recall": "Recall", "f1": "F1"}
_CLAIMS = {"precision": "share of the answer's claims the reference entails",
           "recall": "share of the reference's claims the answer entails", "f1": "F1 of the two claim shares"}
# what people rate, per metric of the judge's EMS it is read against
_PEOPLE = {
    metric_prefix(LLM, LLM) + "_recall": Criterion(
        "recall", "", _UNIT, None, "EMS-Recall: the mean point rating over max_score; derived from points",
        asked=False, judges=False),
    _EMS_F1: Criterion(
        "ems", "", RatingScale(0, 10), RatingScale(0, 10, ordinal=True),
        "how well the answer conveys the reference: every point, with its details, and nothing it contradicts (0..10)",
        judge_factor=10.0, judges=False),
}


def _between_judges(name: str, description: str) -> Criterion:
    return Criterion(name, "", _UNIT, None, description, people=False)


def _ems(method: str, scorer: str) -> tuple[Metric, ...]:
    prefix = metric_prefix(method, scorer)
    if method == OFFLINE:
        return tuple(Metric(f"{prefix}_{part}", True, share("ems"), f"EMS-{_MEASURES[part]} of the offline extractor "
                            f"and matcher, scored by {scorer}, in a run without a judge") for part in PARTS)
    metrics = []
    for part in PARTS:
        name = f"{prefix}_{part}"
        compared = (_between_judges(name, f"EMS-{_MEASURES[part]} with the judge's scores"),) if scorer == LLM else ()
        metrics.append(JudgedMetric(
            name, True, share("ems"), f"EMS-{_MEASURES[part]} of the judge's extraction and matching, scored by "
            f"{scorer}; undefined where the judge left the document unjudged", criteria=(
                *((_PEOPLE[name],) if name in _PEOPLE else ()), *compared)))
    return tuple(metrics)


METRICS: tuple[Metric, ...] = (
    truncated_documents("transcripts cut to fit the model's context (the question is kept whole)"),
    *(Metric(f"rouge_l_{part}", True, share("text_overlap"), f"ROUGE-L {part} of the answer against the reference")
      for part in PARTS),
    Metric("bleu", True, share("text_overlap"), "sacrebleu's sentence BLEU of the answer divided by 100"),
    # cosine similarities of contextual embeddings, not rescaled against a baseline
    Metric("bertscore_f1", True, Scale(-1.0, 1.0, SIMILARITY, "embedding_similarity"),
           "BERTScore F1 of the whole answer; undefined where the BERTScore model could not be loaded"),
    # EMS before the claims: the order agreement compares two judges in
    *(metric for scorer in SCORERS for metric in _ems(LLM, scorer)),
    *(JudgedMetric(f"{RAGCHECKER}_{part}", True, share("claim_entailment"), f"RAGChecker-style claims: {text}",
                   criteria=(_between_judges(f"{RAGCHECKER}_{part}", text),)) for part, text in _CLAIMS.items()),
    *(metric for scorer in (ROUGE, BERTSCORE) for metric in _ems(OFFLINE, scorer)),
    JudgedMetric("judge_failure", False, share("failure_rate"),
                 "1 where the judge failed on a request of the document (transport, HTTP, timeout, refusal)"),
    JudgedMetric("judge_parse_failure", False, share("failure_rate"),
                 "1 where the judge answered unreadably after the re-asks"),
    DEGENERATE_ANSWER,
    TRUNCATED_ANSWERS,
)
HEADLINE = {TASK: (_EMS_F1, "ems_offline_bertscore_f1", "ems_offline_rouge_f1", "rouge_l_f1", "bertscore_f1")}


def point_top(settings: Mapping[str, Any]) -> int | None:
    """The top of the judge's 0..max_score point scale, from a logged run's settings."""
    value = (settings.get("values") or {}).get("max_score")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def point_scores(record: Mapping[str, Any], top: int) -> tuple[tuple[str, ...], tuple[float | None, ...]] | None:
    """The judge's reference points in a logged record and its score s_i of each on 0..top
    (None where it left a point unjudged); None where the record holds no points."""
    ems = record.get("ems")
    if not isinstance(ems, dict):
        return None
    points, scores = ems.get("reference_points"), (ems.get("scores") or {}).get(LLM)
    if not isinstance(points, list) or not isinstance(scores, list) or len(points) != len(scores):
        return None
    as_scale = [None if not isinstance(s, (int, float)) or isinstance(s, bool) else round(s * top, 6) for s in scores]
    return tuple(str(p) for p in points), tuple(as_scale)


AGREEMENT = agreement_family(TASK, METRICS, main="ems", main_judged=_EMS_F1, reference_field="reference",
                             points=PointRatings(point_top, point_scores))
