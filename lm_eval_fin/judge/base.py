"""The judge contract: what every caller (EMS, FinLFQA judge, builders, FinCARDS) relies on.

A judge is an LLM that is not the model under test. Callers build every request of a stage
first and hand the whole batch to :meth:`Judge.complete`, which returns responses in order.
Backends (vllm, openai-compatible, hf) and the persistent cache live beside this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence


@dataclass(frozen=True)
class JudgeRequest:
    """One chat completion to make.

    ``messages`` are OpenAI-style dicts (``{"role": ..., "content": ...}``). At most one
    output constraint is set: ``json_schema`` (a JSON Schema dict), ``regex`` or ``choice``.
    ``attempt`` is part of the cache key, so a retry of an unparsable answer is a new request
    (with a derived seed) rather than the same cached text.
    """

    messages: tuple[dict[str, str], ...]
    max_tokens: int = 512
    temperature: float = 0.0
    seed: int = 0
    json_schema: dict[str, Any] | None = None
    regex: str | None = None
    choice: tuple[str, ...] | None = None
    attempt: int = 0


@dataclass
class JudgeResponse:
    """The answer to one request. ``text`` is None when the backend failed for good
    (``error`` says why); finished responses are never lost to a later failure."""

    text: str | None
    error: str | None = None
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class BatchStats:
    """Summary of one ``complete`` call (also accumulated on the judge over its life)."""

    requests: int = 0
    cache_hits: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    failures: int = 0
    parse_failures: int = 0
    wall_time_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


class Judge:
    """Interface. ``spec`` is the user-facing name, e.g. ``openai:http://127.0.0.1:8000/v1#m``."""

    spec: str

    def complete(self, requests: Sequence[JudgeRequest], desc: str = "judge") -> list[JudgeResponse]:
        raise NotImplementedError
