"""The scored-answer record: what a task's filter stage hands ``process_results`` and what
lm-eval logs as the sample's filtered response.

Every fin_ task runs one batched pass over all of its answers in lm-eval's filter stage
(judge rounds, BERTScore, the code sandbox; :mod:`lm_eval_fin.harness.stage`). Its outcome
for one document travels as a JSON object, written as text because lm-eval turns every
filtered response into a string before it logs it:

    {"format": "lm-eval-fin/1", "answer": "<the answer as scored>", ...benchmark details}

``answer`` is the model's answer as the parsers read it (printable, at most
:data:`~lm_eval_fin.text.cleantext.MAX_ANSWER_CHARS` characters). The other keys belong to the
benchmark (EMS points and alignments, claim verdicts, sandbox outcomes, the judge's reply and
scores, refinement steps). One key is shared: ``judge_usage``, the judge work the document
cost where a judge was asked (``requests``, ``model_calls``, ``prompt_tokens``,
``completion_tokens``; :class:`lm_eval_fin.judge.RequestUsage`), summed by the report's cost
column. Records are strict JSON: a value that is not a finite number is written as null.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

FORMAT = "lm-eval-fin/1"
JUDGE_USAGE = "judge_usage"  # the record key of a document's judge work (see above)


def strict(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, inf) replaced by None, tuples as lists,
    recursively: what strict JSON can hold.

    >>> strict({"a": [1.0, float("nan")], "b": (float("inf"),)})
    {'a': [1.0, None], 'b': [None]}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(key): strict(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(item) for item in value]
    return value


def encode(answer: str, details: Mapping[str, Any] | None = None) -> str:
    """The record of one scored answer as JSON text (``format`` and ``answer`` first)."""
    record = {"format": FORMAT, "answer": answer, **strict(dict(details or {}))}
    return json.dumps(record, ensure_ascii=False, allow_nan=False)


def decode(value: Any) -> dict[str, Any]:
    """The record in a filtered response; a response that is not one (a plain answer, as
    lm-eval's own filters leave it, or what ``--predict_only`` logged) becomes
    ``{"answer": <its text>}``.

    >>> decode(encode("x", {"score": 1}))["score"], decode("plain answer")
    (1, {'answer': 'plain answer'})
    """
    while isinstance(value, list) and value:
        value = value[0]
    if not isinstance(value, str):
        return {"answer": ""}
    if value.startswith('{"format": "lm-eval-fin/'):
        try:
            record = json.loads(value)
        except json.JSONDecodeError:
            record = None
        if isinstance(record, dict) and isinstance(record.get("answer"), str):
            return record
    return {"answer": value}


def is_record(value: Any) -> bool:
    """Whether a filtered response is a scored-answer record (not a bare answer)."""
    return "format" in decode(value)
