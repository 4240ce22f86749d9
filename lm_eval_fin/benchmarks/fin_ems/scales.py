"""The scale of every fin_ems metric (:mod:`lm_eval_fin.scales`) and the headline ones: the
columns of the EMS paper's Table 1, F1 first."""

from __future__ import annotations

from lm_eval_fin.ems.pipeline import BERTSCORE, LLM, OFFLINE, RAGCHECKER, ROUGE, SCORERS, USAGE_FIELDS, metric_prefix
from lm_eval_fin.scales import SIMILARITY, Scale, count, precision_recall_f1, share, total

SCALES: dict[str, Scale] = {
    **precision_recall_f1("rouge_l", "text_overlap"),
    "bleu": share("text_overlap"),  # sacrebleu's corpus BLEU divided by 100
    # cosine similarities of contextual embeddings, not rescaled against a baseline
    "bertscore_f1": Scale(-1.0, 1.0, SIMILARITY, "embedding_similarity"),
    # EMS with the judge's extraction and matching (each scorer) and without a judge
    **{name: scale for scorer in SCORERS
       for name, scale in precision_recall_f1(metric_prefix(LLM, scorer), "ems", judged=True).items()},
    **{name: scale for scorer in (ROUGE, BERTSCORE)
       for name, scale in precision_recall_f1(metric_prefix(OFFLINE, scorer), "ems").items()},
    **precision_recall_f1(RAGCHECKER, "claim_entailment", judged=True),
    r"judge_(parse_)?failure": share("failure_rate", judged=True),
    "ems_judge_rounds": count(judged=True),
    **{f"ems_judge_{name}": count(judged=True) for name in USAGE_FIELDS},
    r"truncated_(documents|answers)": total("truncation"),
}

HEADLINE = (
    r"ems_llm_f1", r"ems_bertscore_f1", r"ems_rouge_f1", r"ems_offline_bertscore_f1", r"ems_offline_rouge_f1",
    r"ragchecker_f1", r"rouge_l_f1", r"bleu", r"bertscore_f1",
)

