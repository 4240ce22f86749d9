"""The FinLFQA judge (the paper's LLM-as-judge, section 4.1, in our own words).

The judge reads what the paper gives GPT-4o: the two reports, the question, the candidate
answer and the ground truth (the expert's reference answer); no knowledge list. It rates the
candidate on the paper's three criteria, each an integer 1..5: accuracy (it addresses the
question correctly and agrees with the ground truth), numerical correctness (every value
and calculation is exact) and evidence entailment (every claim is substantiated by the
reports); the judge score is their sum (3..15). One request per document, all in one batch;
unreadable replies are asked again.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_fin.judge import ParsedAnswer, chat_request, complete_parsed_answers, prompt_hash

JUDGE_CRITERIA = ("accuracy", "numerical_correctness", "evidence_entailment")
JUDGE_MAX_TOKENS = 128  # the reply is a short JSON object; judge_max_tokens overrides it
JUDGE_SCHEMA = {
    "type": "object",
    "properties": {name: {"type": "integer", "minimum": 1, "maximum": 5} for name in JUDGE_CRITERIA},
    "required": list(JUDGE_CRITERIA),
    "additionalProperties": False,
}

JUDGE_SYSTEM = (
    "You grade answers to financial analysis questions about company reports, against the ground "
    "truth: a reference answer written by an expert. You reply with JSON only."
)
JUDGE_USER = (
    "Below are excerpts of the quarterly reports of two companies, a question about them, the "
    "ground truth (the expert's reference answer) and a candidate answer. Both answers are "
    "written as numbered clauses; the lines under a clause (Evidence, Code, Knowledge) are its "
    "attributions.\n\n"
    "{reports}\n\nQuestion: {question}\n\n=== Ground truth ===\n{reference_answer}\n\n"
    "=== Candidate answer ===\n{answer}\n\n"
    "Rate the candidate answer on three criteria, each an integer from 1 (worst) to 5 (best):\n"
    "- accuracy: does it address the question correctly and agree with the ground truth?\n"
    "- numerical_correctness: are all its values and calculations exact and correct?\n"
    "- evidence_entailment: is every claim it makes substantiated by information in the reports?\n"
    'Reply with JSON only: {{"accuracy": <1-5>, "numerical_correctness": <1-5>, '
    '"evidence_entailment": <1-5>}}'
)
JUDGE_PROMPTS_HASH = prompt_hash(JUDGE_SYSTEM, JUDGE_USER, JUDGE_SCHEMA)

JUDGE_METRICS = (
    "judge_score", "judge_accuracy", "judge_numerical", "judge_entailment",
    "judge_parse_failure", "judge_failure", "judge_skipped",
)


@dataclass(frozen=True)
class JudgeVerdict:
    accuracy: int
    numerical_correctness: int
    evidence_entailment: int

    @property
    def total(self) -> int:
        return self.accuracy + self.numerical_correctness + self.evidence_entailment


def judge_prompt(data: Mapping[str, Any]) -> str:
    """The user turn for one answered document (:func:`~lm_eval_fin.benchmarks.fin_lfqa.score.answer_data`):
    the paper's judge inputs, so not its knowledge list."""
    return JUDGE_USER.format(
        reports=data["reports"], question=data["question"],
        reference_answer=data["reference_answer"], answer=data["answer"].strip() or "(empty)",
    )


_SCORE_PATTERNS = {
    name: re.compile(
        rf"(?<![A-Za-z_]){pattern}[\"'*]*\s*[:=]\s*(?:[\"']\s*)?([1-5])(?:\.0+)?(?![0-9.])", re.IGNORECASE
    )
    for name, pattern in {
        "accuracy": r"accuracy",
        "numerical_correctness": r"numerical[ _]?(?:correctness|accuracy)?",
        "evidence_entailment": r"evidence[ _]?(?:entailment)?",
    }.items()
}


def parse_verdict(text: str | None) -> JudgeVerdict | None:
    """The three scores from a judge's reply (JSON, or "accuracy: 4" style lines); None
    when any is missing or outside 1..5.

    >>> parse_verdict('```json\\n{"accuracy": 4, "numerical_correctness": 3, "evidence_entailment": 5}\\n```')
    JudgeVerdict(accuracy=4, numerical_correctness=3, evidence_entailment=5)
    >>> parse_verdict("Accuracy: 6") is None
    True
    """
    if not isinstance(text, str):
        return None
    scores = {}
    for name, pattern in _SCORE_PATTERNS.items():
        match = pattern.search(text)
        if match is None:
            return None
        scores[name] = int(match.group(1))
    return JudgeVerdict(**scores)


def judge_answers(
    datas: Sequence[Mapping[str, Any]], judge: Any, max_tokens: int = JUDGE_MAX_TOKENS, max_attempts: int = 3
) -> list[ParsedAnswer]:
    """One batched judge pass over all documents (re-asking only unparsable replies): one
    :class:`~lm_eval_fin.judge.ParsedAnswer` per document, its value a :class:`JudgeVerdict`."""
    requests = [
        chat_request(JUDGE_SYSTEM, judge_prompt(data), max_tokens=max_tokens, json_schema=JUDGE_SCHEMA)
        for data in datas
    ]
    return complete_parsed_answers(judge, requests, parse_verdict, desc="FinLFQA judge", max_attempts=max_attempts)


def summarise_verdicts(
    verdicts: Sequence[JudgeVerdict | None], errors: Sequence[str | None] | None = None
) -> dict[str, float]:
    """Means over the documents the judge scored. Over all documents: ``judge_failure``, the
    share whose judge request failed for good (``errors``, one per document, None where the
    judge answered), and ``judge_parse_failure``, the share it answered unreadably."""
    errors = list(errors) if errors is not None else [None] * len(verdicts)
    scored = [v for v in verdicts if v is not None]
    failed = sum(error is not None for error in errors)

    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else math.nan

    def rate(count: int) -> float:
        return count / len(verdicts) if verdicts else math.nan

    return {
        "judge_score": mean([v.total for v in scored]),
        "judge_accuracy": mean([v.accuracy for v in scored]),
        "judge_numerical": mean([v.numerical_correctness for v in scored]),
        "judge_entailment": mean([v.evidence_entailment for v in scored]),
        "judge_parse_failure": rate(sum(v is None and e is None for v, e in zip(verdicts, errors))),
        "judge_failure": rate(failed),
        "judge_skipped": 0.0,
    }


def summarise_answers(answers: Sequence[ParsedAnswer]) -> dict[str, float]:
    """:func:`summarise_verdicts` of the answers of :func:`judge_answers`."""
    return summarise_verdicts([a.value for a in answers], [a.error for a in answers])


SKIPPED_JUDGE = {**dict.fromkeys(JUDGE_METRICS, math.nan), "judge_skipped": 1.0}
