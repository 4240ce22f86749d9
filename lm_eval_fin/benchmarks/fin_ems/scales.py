"""The scale of every fin_ems metric (:mod:`lm_eval_fin.measures.scales`): the
columns of the EMS paper's Table 1, F1 first."""

from __future__ import annotations

from lm_eval_fin.ems.pipeline import BERTSCORE, LLM, OFFLINE, RAGCHECKER, ROUGE, SCORERS, metric_prefix
from lm_eval_fin.measures.scales import SIMILARITY, Scale, precision_recall_f1, share, total

SCALES: dict[str, Scale] = {
    **precision_recall_f1("rouge_l", "text_overlap"),
    "bleu": share("text_overlap"),  # sacrebleu's sentence BLEU divided by 100, averaged
    # cosine similarities of contextual embeddings, not rescaled against a baseline
    "bertscore_f1": Scale(-1.0, 1.0, SIMILARITY, "embedding_similarity"),
    # EMS with the judge's extraction and matching (each scorer) and without a judge
    **{name: scale for scorer in SCORERS
       for name, scale in precision_recall_f1(metric_prefix(LLM, scorer), "ems", judged=True).items()},
    **{name: scale for scorer in (ROUGE, BERTSCORE)
       for name, scale in precision_recall_f1(metric_prefix(OFFLINE, scorer), "ems").items()},
    **precision_recall_f1(RAGCHECKER, "claim_entailment", judged=True),
    r"judge_(parse_)?failure": share("failure_rate", judged=True),
    "degenerate_answer": share("failure_rate"),
    r"truncated_(documents|answers)": total("truncation"),
}

