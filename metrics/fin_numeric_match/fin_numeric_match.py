# Copyright 2026 The lm-eval-fin authors.
"""Numeric precision, recall and F1 of long-form financial answers (FinLFQA section 4.2)."""

import datasets
import evaluate

from lm_eval_fin.attribution import parse_answer
from lm_eval_fin.measures.numbers import numeric_prf
from lm_eval_fin.plumbing.paths import metric_path  # noqa: F401 - the examples load the module by path
from lm_eval_fin.text import citations
from lm_eval_fin.text.cleantext import WritableInputs

_CITATION = citations.FINLFQA

_DESCRIPTION = """\
How well the numbers stated in an answer agree with those of the reference, as FinLFQA
scores numerical reasoning. The values of each text are extracted as a set: thousands
separators, decimals, scientific notation, signs, accounting negatives "(1.2)", units (%,
x, -fold, bp/bps, pp), currency symbols and codes ("USD1.2bn") and scale words (thousand,
million, billion, trillion and k, m, mn, bn, b, tn, ...; "$1.5-billion") are understood, so
"3 million", "3,000 thousand" and "3,000,000" are one value; a range's dash is no minus sign
("10%-12%" is 10 and 12). Not values: dates (years 1900-2100, the day in "March 31"),
footnote markers ("million(1)"), clause enumerators ("1.", "2)"), citation markers ("[16]")
and pointers ("paragraph 16", "clause 2"). Parentheses holding a unit, "(25%)", or directly
after another figure, "25% ($25 million)", are not accounting negatives.

A prediction in the FinLFQA answer format is scored on its clause texts, as the fin_lfqa task
scores it: its Evidence, Code and Knowledge attributions (paragraph indices, the numbers in
code) are not statements of the answer. A prediction without attributions is scored whole.

Two values match when one, multiplied by a factor in {1, 100, 1000, 1e6, 0.01, 0.001, 1e-6},
is within relative tolerance 0.01 of the other (so 3.965 matches 3.97, and 5% matches 0.05).
Precision is the share of the answer's values that match some reference value, recall the
share of reference values matched by some answer value; F1 is their harmonic mean. Both
sides without numbers score 1; exactly one side without numbers scores 0. Scores are
averaged over examples.
"""

_KWARGS_DESCRIPTION = """
Computes mean numeric precision, recall and F1 over examples.
Args:
    predictions: list of answers (strings); None or "" is an answer without numbers. Answers
        in the FinLFQA clause format are scored on their clause texts.
    references: list of reference answers (strings), one per prediction.
Returns:
    "numeric_precision", "numeric_recall", "numeric_f1" (means over examples, in [0, 1])
    and "n_examples".
Examples:
    >>> metric = evaluate.load(metric_path("fin_numeric_match"))
    >>> results = metric.compute(
    ...     predictions=["Revenue was 3 million, up 3.965%.", "1. No figures here."],
    ...     references=["Revenue reached $3,000,000, growth of 3.97%.", "Margins were 12%."],
    ... )
    >>> print({name: round(value, 4) for name, value in results.items()})
    {'numeric_precision': 0.5, 'numeric_recall': 0.5, 'numeric_f1': 0.5, 'n_examples': 2}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class FinNumericMatch(WritableInputs, evaluate.Metric):
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
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
        )

    def _compute(self, predictions, references):
        # The task scores parse_answer(answer).text; the module must give the same numbers.
        scores = [numeric_prf(parse_answer(p).text, r) for p, r in zip(predictions, references)]
        n = len(scores)
        results = {
            name: (sum(s[i] for s in scores) / n if n else 0.0)
            for i, name in enumerate(("numeric_precision", "numeric_recall", "numeric_f1"))
        }
        results["n_examples"] = n
        return results
