# Copyright 2026 The lm-eval-fin authors.
"""Evidence precision / recall / F1 and knowledge recall of attributed answers (FinLFQA 4.3)."""

import math
import warnings

import datasets
import evaluate

from lm_eval_fin.attribution import evidence_prf, knowledge_recall, parse_answer
from lm_eval_fin.plumbing.paths import metric_path  # noqa: F401 - the examples load the module by path
from lm_eval_fin.text import citations
from lm_eval_fin.text.cleantext import WritableInputs

_CITATION = citations.FINLFQA

_DESCRIPTION = """\
Attribution quality of answers written as numbered clauses with Evidence, Code and Knowledge
attributes (the FinLFQA answer format; see lm_eval_fin.attribution). Each answer is parsed
with a tolerant parser (markdown, bold labels, code fences, "inferred from clause 2", JSON
answers); an answer without any attribution is a parse failure and cites nothing.

- Evidence precision / recall / F1: over the set of (company, paragraph index) pairs cited in
  all clauses of the answer against those of the reference. Companies compare
  case-insensitively; "inferred from clause N" is no evidence.
- Knowledge recall: the share of the reference's knowledge indices the answer cites, averaged
  over the examples whose reference cites knowledge (recall is undefined for the others,
  which are left out and counted); NaN, with a warning, when no reference cites any.

For evidence, both sides empty scores 1 and exactly one side empty scores 0. Evidence scores
are averaged over all examples.
"""

_KWARGS_DESCRIPTION = """
Computes mean evidence precision, recall, F1 and knowledge recall over examples.
Args:
    predictions: list of answers (strings) in the FinLFQA answer format.
    references: list of dicts, one per prediction, with parallel lists "companies" (tickers)
        and "paragraphs" (paragraph indices) giving the cited (company, paragraph) pairs, and
        "knowledge" (knowledge indices).
Returns:
    "evidence_precision", "evidence_recall", "evidence_f1" (means over examples, in [0, 1]),
    "knowledge_recall" (mean over the "knowledge_examples" whose reference cites knowledge;
    NaN when there are none), "parse_failure_rate" and "n_examples".
Examples:
    >>> metric = evaluate.load(metric_path("evidence_f1"))
    >>> answer = "1. CWT's interest rose 25%.\\nEvidence: CWT [16], AWK [3]\\nCode: none\\nKnowledge: [2]"
    >>> results = metric.compute(
    ...     predictions=[answer, "I do not know."],
    ...     references=[
    ...         {"companies": ["CWT", "CWT"], "paragraphs": [16, 17], "knowledge": [2, 5]},
    ...         {"companies": ["AWK"], "paragraphs": [1], "knowledge": []},
    ...     ],
    ... )
    >>> print({name: round(value, 4) for name, value in results.items()})
    {'evidence_precision': 0.25, 'evidence_recall': 0.25, 'evidence_f1': 0.25, 'knowledge_recall': 0.5, 'knowledge_examples': 1, 'parse_failure_rate': 0.5, 'n_examples': 2}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class EvidenceF1(WritableInputs, evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            homepage="https://arxiv.org/abs/2510.06426",
            codebase_urls=["https://github.com/yitaoLong/FinLFQA"],
            reference_urls=["https://arxiv.org/abs/2510.06426"],
            license="MIT",
            features=datasets.Features(
                {
                    "predictions": datasets.Value("string"),
                    "references": {
                        "companies": datasets.Sequence(datasets.Value("string")),
                        "paragraphs": datasets.Sequence(datasets.Value("int64")),
                        "knowledge": datasets.Sequence(datasets.Value("int64")),
                    },
                }
            ),
        )

    def _compute(self, predictions, references):
        totals = dict.fromkeys(("evidence_precision", "evidence_recall", "evidence_f1"), 0.0)
        recalls = []
        failures = 0
        for answer, reference in zip(predictions, references):
            if len(reference["companies"]) != len(reference["paragraphs"]):
                raise ValueError("each reference needs as many paragraphs as companies")
            gold = list(zip(reference["companies"], reference["paragraphs"]))
            parsed = parse_answer(answer, companies=sorted(set(reference["companies"])))
            failures += parsed.parse_failure
            precision, recall, f1 = evidence_prf(parsed.evidence, gold)
            totals["evidence_precision"] += precision
            totals["evidence_recall"] += recall
            totals["evidence_f1"] += f1
            knowledge = knowledge_recall(parsed.knowledge, reference["knowledge"])
            if knowledge is not None:  # undefined where the reference cites no knowledge
                recalls.append(knowledge)
        n = len(predictions)
        results = {name: (total / n if n else 0.0) for name, total in totals.items()}
        if n and not recalls:
            warnings.warn("evidence_f1: no reference cites knowledge, so knowledge_recall is NaN", stacklevel=2)
        results["knowledge_recall"] = sum(recalls) / len(recalls) if recalls else math.nan
        results["knowledge_examples"] = len(recalls)
        results["parse_failure_rate"] = failures / n if n else 0.0
        results["n_examples"] = n
        return results
