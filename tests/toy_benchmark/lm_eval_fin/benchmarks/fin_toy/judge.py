"""The fin_toy judge: is the candidate answer correct, given the question and the reference?
One request per document, all in one batch; an unreadable reply is asked again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lm_eval_fin.judge import ParsedAnswer, chat_request, complete_parsed_answers, prompt_hash
from lm_eval_fin.text.jsontext import json_values

JUDGE_MAX_TOKENS = 32
JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"correct": {"type": "integer", "enum": [0, 1]}},
    "required": ["correct"],
    "additionalProperties": False,
}
JUDGE_SYSTEM = "You check short answers against a reference answer. You reply with JSON only."
JUDGE_USER = (
    "Question: {question}\nReference answer: {reference}\nCandidate answer: {answer}\n\n"
    'Is the candidate answer correct? Reply with JSON only: {{"correct": 1}} or {{"correct": 0}}'
)
JUDGE_PROMPTS_HASH = prompt_hash(JUDGE_SYSTEM, JUDGE_USER, JUDGE_SCHEMA)


def parse_verdict(text: str) -> int | None:
    """1 or 0 from the last JSON object naming ``correct``; None for anything else.

    >>> parse_verdict('{"correct": 1}'), parse_verdict('```json\\n{"correct": 0}\\n```'), parse_verdict("yes")
    (1, 0, None)
    """
    named = [value for value in json_values(text, "{") if isinstance(value, dict) and "correct" in value]
    verdict = named[-1]["correct"] if named else None
    return verdict if verdict in (0, 1) and not isinstance(verdict, bool) else None


def judge_answers(docs: Sequence[Mapping[str, Any]], answers: Sequence[str], judge: Any,
                  max_attempts: int) -> list[ParsedAnswer[int]]:
    requests = [
        chat_request(JUDGE_SYSTEM, JUDGE_USER.format(question=doc["question"], reference=doc["reference"],
                                                     answer=answer.strip() or "(empty)"),
                     max_tokens=JUDGE_MAX_TOKENS, json_schema=JUDGE_SCHEMA)
        for doc, answer in zip(docs, answers)
    ]
    return complete_parsed_answers(judge, requests, parse_verdict, desc="fin_toy judge", max_attempts=max_attempts)


def judge_details(answer: ParsedAnswer[int] | None, spec: str | None, error: str | None = None) -> dict[str, Any]:
    """The judge part of a document's record: which judge and prompts, its reply and verdict."""
    return {
        "spec": spec,
        "prompt_version": JUDGE_PROMPTS_HASH if spec is not None else None,
        "reply": answer.text if answer is not None else None,
        "error": answer.error if answer is not None else error,
        "correct": answer.value if answer is not None else None,
    }
