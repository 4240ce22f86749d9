"""Every FinLFQA metric, declared once (:mod:`lm_eval_fin.harness.metrics`): the paper's
metrics (section 4), the judge's first, and what ``lm-eval-fin agreement`` compares the
judge on: its three criteria, integers 1..5 (section 4.1 of the paper), and ``overall``,
their sum 3..15 (the paper's "overall score"), rated by people and by other judges alike.
"""

from __future__ import annotations

from lm_eval_fin.agreement.criteria import Criterion, RatingScale
from lm_eval_fin.benchmarks.fin_lfqa.judge import JUDGE_CRITERIA, JUDGE_SCHEMA
from lm_eval_fin.harness.metrics import (
    DEGENERATE_ANSWER,
    PARSE_FAILURE,
    TOTAL,
    TRUNCATED_ANSWERS,
    JudgedMetric,
    Metric,
    agreement_family,
    truncated_documents,
)
from lm_eval_fin.measures.scales import POINTS, SIMILARITY, Scale, count, share, total
from lm_eval_fin.sandbox import FAILURE_CATEGORIES

ITERATIVE = "fin_lfqa-iterative"
# each criterion an integer on the judge's scale; the judge score is their sum
_CRITERION = JUDGE_SCHEMA["properties"][JUDGE_CRITERIA[0]]
CRITERION = Scale(float(_CRITERION["minimum"]), float(_CRITERION["maximum"]), POINTS, "llm_judge_rating")
JUDGE_SCORE = Scale(CRITERION.low * len(JUDGE_CRITERIA), CRITERION.high * len(JUDGE_CRITERIA), POINTS,
                    "llm_judge_rating")
_RATING = RatingScale(CRITERION.low, CRITERION.high, ordinal=True)
_SUM = RatingScale(JUDGE_SCORE.low, JUDGE_SCORE.high, ordinal=True)


def _criterion(metric: str, name: str, description: str) -> JudgedMetric:
    return JudgedMetric(metric, True, CRITERION, f"the judge's {name} rating", criteria=(
        Criterion(name, "", _RATING, _RATING, f"{description} (1..5)"),))


def _triple(prefix: str, what: str) -> tuple[Metric, ...]:
    return tuple(Metric(f"{prefix}_{part}", True, share(part), f"{what}: {part}")
                 for part in ("f1", "precision", "recall"))


CODE_FAILURES = tuple(
    Metric(f"code_{category}", False, share("failure_rate"), f"share of the answer's snippets that failed: {category}")
    for category in FAILURE_CATEGORIES
)
JUDGE_METRICS: tuple[JudgedMetric, ...] = (
    _criterion("judge_accuracy", "accuracy",
               "does the answer reach the reference's conclusions and answer the question fully"),
    _criterion("judge_numerical", "numerical_correctness", "are its numbers and calculations correct"),
    _criterion("judge_entailment", "evidence_entailment", "do the report paragraphs it cites support what it says"),
    JudgedMetric("judge_score", True, JUDGE_SCORE, "the sum of the judge's three criteria (3..15)", criteria=(
        Criterion("overall", "", _SUM, _SUM, "the sum of the three (3..15); derived from them when they are given",
                  asked=False),)),
    JudgedMetric("judge_parse_failure", False, share("failure_rate"), "1 where the judge answered unreadably"),
    JudgedMetric("judge_failure", False, share("failure_rate"), "1 where the judge failed for good"),
    JudgedMetric("judge_skipped", False, share("failure_rate"), "1 where no judge was configured"),
)
METRICS: tuple[Metric, ...] = (
    *_triple("numeric", "the numbers of the answer against the reference's"),
    *_triple("evidence", "the report paragraphs the answer cites against the reference's"),
    Metric("knowledge_recall", True, share("recall"),
           "share of the reference's knowledge entries the answer cites; undefined where it cites none"),
    Metric("knowledge_skipped", False, total("skipped"), "1 where the reference cites no knowledge", TOTAL),
    Metric("code_exec_rate", True, share("execution_rate"),
           "share of the answer's snippets that ran in the sandbox; undefined without code"),
    *CODE_FAILURES,
    Metric("code_per_answer", True, count(), "how many snippets the answer holds"),
    Metric("rouge_l", True, share("text_overlap"), "ROUGE-L F1 of the answer against the reference"),
    # cosine similarities of contextual embeddings, not rescaled against a baseline
    Metric("bertscore_f1", True, Scale(-1.0, 1.0, SIMILARITY, "embedding_similarity"),
           "BERTScore F1 of the answer's clauses; undefined where the BERTScore model could not be loaded"),
    *JUDGE_METRICS,
    PARSE_FAILURE,
    # not a score: where the run's numbering starts
    Metric("index_base", True, Scale(0.0, 1.0, "index", "setting"),
           "the index the run gave the first paragraph and knowledge entry"),
    Metric("refine_rounds", False, count(), "feedback rounds used; undefined for an answer lm-eval's cache served", tasks=(ITERATIVE,)),
    Metric("refine_done", True, share("completion_rate"), "1 where the model declared the answer done before max_rounds ran out",
           tasks=(ITERATIVE,)),
    DEGENERATE_ANSWER,
    truncated_documents("report excerpts cut to fit the model's context (prompt.fit_reports)"),
    TRUNCATED_ANSWERS,
)
HEADLINE = ("judge_score", "numeric_f1", "evidence_f1", "code_exec_rate", "knowledge_recall", "rouge_l")
AGREEMENT = agreement_family("fin_lfqa", METRICS, main="overall", main_judged="overall",
                             reference_field="reference_clauses", total="overall")
