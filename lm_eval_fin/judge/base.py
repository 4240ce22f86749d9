"""The judge contract: what every caller (EMS, FinLFQA judge, builders, FinCARDS) relies on.

A judge is an LLM that is not the model under test. Callers build every request of a stage
first and hand the whole batch to :meth:`Judge.complete`, which returns responses in order.
Backends (vllm, openai-compatible, hf) and the persistent cache live beside this module.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


class JudgeConfigError(ValueError):
    """The judge cannot work as configured: a server that does not serve the named model, an
    API key it refuses, a model that cannot be loaded, a malformed spec. Retrying cannot help,
    so the whole batch stops at once; the message is one line that names the fix."""


@dataclass(frozen=True)
class JudgeRequest:
    """One chat completion to make.

    ``messages`` are OpenAI-style dicts (``{"role": ..., "content": ...}``). At most one
    output constraint is set: ``json_schema`` (a JSON Schema dict), ``regex`` or ``choice``.
    ``max_tokens``, ``temperature`` and ``seed`` left as None take the judge's options
    (``--judge_max_tokens`` etc.); a value set here wins, because the caller knows how long
    its answers are.
    ``attempt`` is part of the cache key, so a retry of an unparsable answer is a new request
    (with a derived seed, and sampled rather than greedy) rather than the same cached text.
    ``refresh`` is not part of the key: it asks for a new answer even when one is cached from
    an earlier run (stored before the judge was loaded), and the new answer replaces it.
    :func:`~lm_eval_fin.judge.core.complete_parsed` sets it to re-send a cached answer its
    parser rejects; a judge whose ``retry_unparsable`` option is off ignores it.
    """

    messages: tuple[dict[str, str], ...]
    max_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None
    json_schema: dict[str, Any] | None = None
    regex: str | None = None
    choice: tuple[str, ...] | None = None
    attempt: int = 0
    refresh: bool = False

    @property
    def constraint(self) -> dict[str, Any] | None:
        """The output constraint as ``{"json_schema": ...}``, ``{"regex": ...}`` or
        ``{"choice": [...]}``, or None."""
        if self.json_schema is not None:
            return {"json_schema": self.json_schema}
        if self.regex is not None:
            return {"regex": self.regex}
        if self.choice is not None:
            return {"choice": list(self.choice)}
        return None


def chat_request(
    system: str, user: str, examples: Sequence[tuple[str, str]] = (), **fields: Any
) -> JudgeRequest:
    """A request of a system prompt, in-context examples as (user, assistant) turns, and the
    user turn; ``fields`` are the other :class:`JudgeRequest` fields (``max_tokens``,
    ``json_schema``, ...).

    >>> [m["role"] for m in chat_request("Grade.", "Q?", examples=[("Q1?", "7")]).messages]
    ['system', 'user', 'assistant', 'user']
    """
    messages = [{"role": "system", "content": system}]
    for example_user, example_reply in examples:
        messages += [{"role": "user", "content": example_user}, {"role": "assistant", "content": example_reply}]
    messages.append({"role": "user", "content": user})
    return JudgeRequest(messages=tuple(messages), **fields)


def prompt_hash(*templates: object) -> str:
    """Short content hash of prompt templates (system prompts, examples, user turns, output
    schemas), recorded as provenance next to results: two runs with the same hash asked the
    judge the same way.

    >>> prompt_hash("Grade 0-10.") == prompt_hash("Grade 0-10."), len(prompt_hash("x"))
    (True, 12)
    """
    blob = json.dumps(templates, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


@dataclass
class JudgeResponse:
    """The answer to one request. ``text`` is None when the judge failed it for good (``error``
    says why: transport, HTTP error, timeout, a refusal, an empty reply); finished responses
    are never lost to a later failure. A reply with text that the caller cannot read is not a
    failure here but a parse failure of :func:`~lm_eval_fin.judge.core.complete_parsed`."""

    text: str | None
    error: str | None = None
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # answered by an identical request earlier in the same batch: sent once, counted there
    duplicate: bool = False


@dataclass
class RequestUsage:
    """The judge work one request cost, re-asks and re-sends included: ``requests`` asked,
    ``model_calls`` of them sent to the model (not answered by the cache or by an identical
    request of the same batch) and the tokens the backend reported for those."""

    requests: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def count(self, response: JudgeResponse) -> None:
        self.requests += 1
        if not response.cached and not response.duplicate:
            self.model_calls += 1
            self.prompt_tokens += response.prompt_tokens
            self.completion_tokens += response.completion_tokens

    def add(self, other: RequestUsage) -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


@dataclass
class BatchStats:
    """Summary of one ``complete`` call (also accumulated on the judge over its life).

    ``requests`` counts what the caller asked for; ``cache_hits`` those answered from the
    cache (or by an identical request earlier in the same batch); ``model_calls`` those sent
    to the backend. Token counts are those the backend reported for this call's model calls.
    ``retries`` are transport retries (timeouts, 429, 5xx, refused connections); ``failures``
    are requests that still had no text after them (or whose reply was a refusal or empty);
    ``parse_failures`` are answers the caller's parser rejected on every attempt (counted by
    ``complete_parsed``). ``extra`` holds counts of rarer events: ``parse_retries`` (re-asks
    of unparsable answers), ``unparsable_resent`` (cached unparsable answers sent again under
    ``retry_unparsable``), ``answered_by_other_process`` (answers another process sharing the
    cache was already fetching), ``retry_after_waits`` (retries timed by a ``Retry-After``).
    """

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

    def add(self, other: BatchStats) -> None:
        """Accumulate ``other`` into this one (numeric ``extra`` entries are summed)."""
        for f in dataclasses.fields(self):
            if f.name != "extra":
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        for key, value in other.extra.items():
            if isinstance(value, (int, float)) and isinstance(self.extra.get(key, 0), (int, float)):
                self.extra[key] = self.extra.get(key, 0) + value
            else:
                self.extra[key] = value

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def summary(self) -> str:
        line = (
            f"{self.requests} requests, {self.cache_hits} cache hits, {self.model_calls} model calls, "
            f"{self.prompt_tokens} prompt + {self.completion_tokens} completion tokens, "
            f"{self.retries} retries, {self.failures} failures, {self.parse_failures} parse failures, "
            f"{self.wall_time_s:.1f}s"
        )
        extras = ", ".join(f"{key}={value}" for key, value in sorted(self.extra.items()))
        return f"{line} ({extras})" if extras else line


def failure_phrase(failed: int, unparsed: int, documents: int, first_error: str | None) -> str:
    """What the judge left undone in a task, in words: only the counts that are not zero, and
    the first error only when a request failed (an unreadable answer has none).

    >>> failure_phrase(0, 2, 5, None)
    'the judge answered unreadably on 2 of 5 documents'
    >>> failure_phrase(1, 1, 5, "HTTP 500")
    'the judge failed on 1 and answered unreadably on 1 of 5 documents (first error: HTTP 500)'
    """
    parts = [f"failed on {failed}" if failed else "", f"answered unreadably on {unparsed}" if unparsed else ""]
    phrase = f"the judge {' and '.join(p for p in parts if p)} of {documents} documents"
    return phrase + (f" (first error: {first_error})" if failed and first_error else "")


class Judge:
    """Interface. ``spec`` is the user-facing name, e.g. ``openai:http://127.0.0.1:8000/v1#m``."""

    spec: str
    stats: BatchStats
    last_batch: BatchStats

    def complete(self, requests: Sequence[JudgeRequest], desc: str = "judge") -> list[JudgeResponse]:
        raise NotImplementedError
