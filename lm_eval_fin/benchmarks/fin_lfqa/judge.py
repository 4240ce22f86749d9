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

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_fin.judge import ParsedAnswer, chat_request, complete_parsed_answers, prompt_hash
from lm_eval_fin.text.jsontext import json_values
from lm_eval_fin.text.replies import answer_part, is_scale

JUDGE_CRITERIA = ("accuracy", "numerical_correctness", "evidence_entailment")
JUDGE_MAX_TOKENS = 128  # the reply is a short JSON object; judge_max_tokens overrides it
JUDGE_SCHEMA: dict[str, Any] = {
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


# The names a judge writes each criterion under, as a JSON key or a "Name: 4" line.
_CRITERION_NAMES = {
    "accuracy": r"accuracy",
    "numerical_correctness": r"numerical(?:[ _-]?(?:correctness|accuracy))?",
    "evidence_entailment": r"evidence(?:[ _-]?entailment)?",
}
_KEY_NAMES = {name: re.compile(pattern, re.IGNORECASE) for name, pattern in _CRITERION_NAMES.items()}
_NAMED_VALUE = re.compile(
    r"(?<![A-Za-z_])(?P<name>" + "|".join(f"(?:{p})" for p in _CRITERION_NAMES.values()) + r")(?![A-Za-z_])"
    r"[\"'*]*\s*(?:\([^()\n]{0,20}\)\s*)?[\"'*]*\s*[:=]\s*[\"'*]*\s*"
    r"(?P<value>[-−+]?\d+(?:\.\d+)?)(?:\s*(?:/|out of)\s*(?P<scale>\d+))?",
    re.IGNORECASE,
)
_VALUE_TEXT = re.compile(r"\s*(\d+)(?:\.0+)?\s*(?:(?:/|out of)\s*(\d+)\s*)?", re.IGNORECASE)
SCALE = (1, 5)


def _criterion(key: object) -> str | None:
    name = str(key).strip()
    return next((c for c, pattern in _KEY_NAMES.items() if pattern.fullmatch(name)), None)


def _grade(value: object, scale: str | None = None) -> int | None:
    """An integer 1..5 written as a number, "4", "4.0", "4/5" or "4 out of 5"; None for
    anything else (a range, a placeholder, another scale, a fraction)."""
    if isinstance(value, str):
        written = _VALUE_TEXT.fullmatch(value)
        if written is None:
            return None
        value, scale = float(written.group(1)), written.group(2) or scale
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    if scale is not None and int(scale) != SCALE[1]:
        return None
    return int(value) if value == int(value) and SCALE[0] <= value <= SCALE[1] else None


def _objects(value: object) -> list[dict]:
    """A parsed JSON object and the objects directly inside it ({"scores": {...}})."""
    if not isinstance(value, dict):
        return []
    return [value, *(inner for inner in value.values() if isinstance(inner, dict))]


def _verdict_of(grades: dict[str, list[int | None]]) -> JudgeVerdict | None:
    """The verdict when every criterion has a grade, each in range and, where written twice,
    the same; else None."""
    scores: dict[str, int] = {}
    for name in JUDGE_CRITERIA:
        given = set(grades.get(name, ()))
        grade = given.pop() if len(given) == 1 else None
        if grade is None:
            return None
        scores[name] = grade
    return JudgeVerdict(**scores)


def parse_verdict(text: str | None) -> JudgeVerdict | None:
    """The three scores from a judge's reply, or None when the reply is not a verdict.

    Read from the answer part only (:func:`lm_eval_fin.text.replies.answer_part`): the last JSON
    object naming a criterion decides; without one, "accuracy: 4" style lines. Every
    criterion must be there, an integer 1..5 ("4/5" reads as 4); a value out of range, of
    another scale or given twice differently makes the reply unreadable, and a restated
    rubric ("accuracy: 1-5", ``<1-5>``) is no value, so a refusal that restates the scale is
    a parse failure (re-asked, then counted), never three 1s.

    >>> parse_verdict('```json\\n{"accuracy": 4, "numerical_correctness": 3, "evidence_entailment": 5}\\n```')
    JudgeVerdict(accuracy=4, numerical_correctness=3, evidence_entailment=5)
    >>> parse_verdict("Accuracy: 6") is None
    True
    >>> parse_verdict("I cannot grade this. Scale: accuracy: 1-5, numerical_correctness: 1-5, "
    ...               "evidence_entailment: 1-5.") is None
    True
    """
    if not isinstance(text, str):
        return None
    answer = answer_part(text)
    named = [obj for value in json_values(answer, "{") for obj in _objects(value) if any(map(_criterion, obj))]
    grades: dict[str, list[int | None]] = {}
    if named:
        for key, value in named[-1].items():
            criterion = _criterion(key)
            if criterion is not None:
                grades.setdefault(criterion, []).append(_grade(value))
        return _verdict_of(grades)
    for match in _NAMED_VALUE.finditer(answer):
        if is_scale(answer, match.start("value"), match.end("value")):
            continue  # the rubric restated
        value = float(match.group("value").replace("−", "-"))
        criterion = _criterion(match.group("name"))  # always one: the same patterns found the name
        if criterion is not None:
            grades.setdefault(criterion, []).append(_grade(value, match.group("scale")))
    return _verdict_of(grades)


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


def judge_details(answer: ParsedAnswer | None, spec: str | None, error: str | None = None) -> dict[str, Any]:
    """The judge part of a document's record: which judge and prompts, its reply, why it
    failed, and the scores when it gave a readable verdict. No judge configured: ``spec``
    None. ``error`` without an answer: the judge could not be used for the run."""
    verdict = answer.value if answer is not None else None
    return {
        "spec": spec,
        "prompt_version": JUDGE_PROMPTS_HASH if spec is not None else None,
        "reply": answer.text if answer is not None else None,
        "error": answer.error if answer is not None else error,
        "scores": dataclasses.asdict(verdict) if verdict is not None else None,
    }


def judge_values(details: Mapping[str, Any] | None) -> dict[str, float | None]:
    """The judge metrics of one document from its record's judge part: the three criteria
    (1..5) and their sum (3..15) where the judge gave a verdict, else None; whether the judge
    failed (``judge_failure``), answered unreadably (``judge_parse_failure``) or was not
    configured (``judge_skipped``, the other figures then undefined)."""
    if not details or details.get("spec") is None:
        return {**dict.fromkeys(JUDGE_METRICS), "judge_skipped": 1.0}
    scores = details.get("scores")
    failed = details.get("error") is not None
    return {
        "judge_score": None if scores is None else float(sum(scores[name] for name in JUDGE_CRITERIA)),
        "judge_accuracy": None if scores is None else float(scores["accuracy"]),
        "judge_numerical": None if scores is None else float(scores["numerical_correctness"]),
        "judge_entailment": None if scores is None else float(scores["evidence_entailment"]),
        "judge_failure": float(failed),
        "judge_parse_failure": float(scores is None and not failed),
        "judge_skipped": 0.0,
    }
