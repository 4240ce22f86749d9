"""The scale of every FinLFQA metric (:mod:`lm_eval_fin.measures.scales`): the
paper's metrics (section 4), the judge's first."""

from __future__ import annotations

from lm_eval_fin.benchmarks.fin_lfqa.judge import JUDGE_CRITERIA, JUDGE_SCHEMA
from lm_eval_fin.measures.scales import POINTS, SIMILARITY, Scale, count, precision_recall_f1, share, total

# each criterion an integer on the judge's scale; the judge score is their sum
_CRITERION = JUDGE_SCHEMA["properties"][JUDGE_CRITERIA[0]]
CRITERION = Scale(float(_CRITERION["minimum"]), float(_CRITERION["maximum"]), POINTS, "llm_judge_rating", judged=True)
JUDGE_SCORE = Scale(CRITERION.low * len(JUDGE_CRITERIA), CRITERION.high * len(JUDGE_CRITERIA), POINTS,
                    "llm_judge_rating", judged=True)

SCALES: dict[str, Scale] = {
    **precision_recall_f1("numeric"),
    **precision_recall_f1("evidence"),
    "knowledge_recall": share("recall"),
    "knowledge_skipped": total("skipped"),
    "code_exec_rate": share("execution_rate"),
    "code_per_answer": count(),
    r"code_\w+": share("failure_rate"),  # code_<failure category>: shares of an answer's snippets, averaged
    "rouge_l": share("text_overlap"),
    # cosine similarities of contextual embeddings, not rescaled against a baseline
    "bertscore_f1": Scale(-1.0, 1.0, SIMILARITY, "embedding_similarity"),
    "judge_score": JUDGE_SCORE,
    r"judge_(accuracy|numerical|entailment)": CRITERION,
    r"judge_(failure|parse_failure|skipped)": share("failure_rate", judged=True),
    r"parse_failure|degenerate_answer": share("failure_rate"),
    "index_base": Scale(0.0, 1.0, "index", "setting"),  # not a score: where the run's numbering starts
    r"truncated_(documents|answers)": total("truncation"),
    "refine_rounds": count(),
    "refine_done": share("completion_rate"),
}
