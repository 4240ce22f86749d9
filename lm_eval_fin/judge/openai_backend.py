"""``openai:<base url>#<model>``: any OpenAI-compatible chat-completions server.

``vllm serve``, SGLang, TGI, llama.cpp's server and OpenAI itself. The official ``openai``
``AsyncOpenAI`` client sends the batch with at most ``concurrency`` requests in flight
(``asyncio.Semaphore``); the API key is ``$OPENAI_API_KEY``, else ``"EMPTY"`` (what local
servers expect).

Failures. The client's own retries are off; ours are visible in the stats. A request that
times out (``timeout_s``), cannot connect, gets 408/409/429/5xx or a reply that is not a
well-formed chat completion is re-sent up to ``max_retries`` times, waiting
``backoff_s * 2**k`` seconds (capped at ``backoff_max_s``) before retry ``k + 1``. Other
HTTP errors (400, 401, 404, ...) are not retried: the same request would fail again. After
that the request's response has ``text=None`` and an ``error`` naming the cause and the
number of attempts; the other requests go on. When ``max(8, 2 * concurrency)`` requests in a
row have failed for good after their retries (a server that went away or is overwhelmed), the
rest of the batch is not sent but failed at once with that reason, instead of each waiting
through its own retries; a re-run sends only what is not in the cache. Only such retryable
failures count towards that stop: a request the server rejected on its own merits (HTTP 400
for a prompt too long, a reply without text) shows the server is there, and resets the count.

Constraints. A JSON schema goes through the standard ``response_format={"type":
"json_schema", ...}``. Regex and choice constraints have no standard field; they are sent
as vLLM's ``structured_outputs`` extra body (``{"regex": ...}`` / ``{"choice": [...]}``,
vLLM >= 0.11). A server that does not know the field may reject the request (a clear
error) or ignore it; either way the caller's parser still checks every answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
from typing import Any, Sequence

from lm_eval_fin.judge.base import JudgeRequest, JudgeResponse
from lm_eval_fin.judge.options import JudgeOptions
from lm_eval_fin.judge.spec import JudgeSpec

RETRYABLE_STATUS = frozenset({408, 409, 429})


class MalformedReply(ValueError):
    """The server answered 2xx with something that is not a chat completion."""


def request_payload(model: str, request: JudgeRequest) -> dict[str, Any]:
    """Keyword arguments of ``client.chat.completions.create`` for one resolved request."""
    payload: dict[str, Any] = {
        "model": model,
        "messages": [dict(message) for message in request.messages],
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "seed": request.seed,
    }
    if request.json_schema is not None:
        payload["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "judge_answer", "schema": request.json_schema},
        }
    elif request.regex is not None:
        payload["extra_body"] = {"structured_outputs": {"regex": request.regex}}
    elif request.choice is not None:
        payload["extra_body"] = {"structured_outputs": {"choice": list(request.choice)}}
    return payload


def read_completion(completion: Any) -> JudgeResponse:
    """Text and token counts of a chat completion; :class:`MalformedReply` if it is not one."""
    try:
        message = completion.choices[0].message
        text = message.content
    except (AttributeError, IndexError, KeyError, TypeError) as exc:
        raise MalformedReply(f"malformed reply: no choices[0].message ({type(completion).__name__})") from exc
    usage = getattr(completion, "usage", None)
    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    if not isinstance(text, str):
        # a refusal or a tool call: asking again would get the same, so it is no retry
        refusal = getattr(message, "refusal", None)
        finish = getattr(completion.choices[0], "finish_reason", None)
        return JudgeResponse(None, error=f"the reply has no text (finish_reason={finish}, refusal={refusal})",
                             prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    return JudgeResponse(text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


def classify_error(exc: BaseException, timeout_s: float) -> tuple[bool, str]:
    """(retry it?, what went wrong) for an exception raised by one request."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return True, f"timed out after {timeout_s:g}s"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return True, f"connection failed: {type(cause).__name__}: {cause}"
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = " ".join(str(exc.message).split())[:300]
        return status in RETRYABLE_STATUS or status >= 500, f"HTTP {status}: {detail}"
    if isinstance(exc, (MalformedReply, openai.APIResponseValidationError, json.JSONDecodeError, UnicodeDecodeError)):
        return True, f"malformed reply: {exc}"[:400]
    if isinstance(exc, openai.OpenAIError):
        return True, f"{type(exc).__name__}: {exc}"[:400]
    raise exc


def run_sync(coroutine):
    """Run a coroutine to completion from synchronous code, also inside a running event
    loop (a notebook, an async caller), where ``asyncio.run`` is not allowed."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


class _Breaker:
    """Counts requests that failed for good after their retries since the server last
    answered (with text, or with a non-retryable rejection); trips at ``threshold``."""

    def __init__(self, threshold: int):
        self.threshold = threshold
        self.consecutive = 0
        self.last_error: str | None = None

    @property
    def open(self) -> bool:
        return self.consecutive >= self.threshold

    def record(self, response: JudgeResponse, retryable: bool) -> None:
        if response.text is None and retryable:
            self.consecutive += 1
            self.last_error = response.error
        else:
            self.consecutive = 0


class OpenAIBackend:
    def __init__(self, spec: JudgeSpec, options: JudgeOptions):
        self.spec = spec
        self.options = options
        if options.concurrency < 1:
            raise ValueError("judge concurrency must be at least 1")

    def run(self, requests: Sequence[JudgeRequest], sink) -> None:
        run_sync(self._run_all(requests, sink))

    async def _run_all(self, requests: Sequence[JudgeRequest], sink) -> None:
        from openai import AsyncOpenAI

        client = AsyncOpenAI(
            base_url=self.spec.base_url,
            api_key=os.environ.get("OPENAI_API_KEY") or "EMPTY",
            timeout=self.options.timeout_s,
            max_retries=0,
        )
        semaphore = asyncio.Semaphore(self.options.concurrency)
        breaker = _Breaker(max(8, 2 * self.options.concurrency))

        async def one(index: int, request: JudgeRequest) -> None:
            async with semaphore:
                if breaker.open:
                    response = JudgeResponse(
                        None,
                        error=f"not sent: the {breaker.consecutive} requests before it failed for good "
                        f"(last error: {breaker.last_error}); re-run to send it",
                    )
                else:
                    response, retryable = await self._complete_one(client, request, sink)
                    breaker.record(response, retryable)
                sink.done(index, response)

        try:
            await asyncio.gather(*(one(index, request) for index, request in enumerate(requests)))
        finally:
            await client.close()

    async def _complete_one(self, client, request: JudgeRequest, sink) -> tuple[JudgeResponse, bool]:
        """The response, and whether a failure was of the retryable kind (the server away or
        overwhelmed) rather than the server rejecting this request."""
        payload = request_payload(self.spec.model, request)
        attempts = self.options.max_retries + 1
        reason = "not attempted"
        for attempt in range(attempts):
            if attempt:
                sink.retried()
                delay = min(self.options.backoff_max_s, self.options.backoff_s * 2 ** (attempt - 1))
                await asyncio.sleep(delay)
            try:
                completion = await client.chat.completions.create(**payload)
                return read_completion(completion), False
            except Exception as exc:  # noqa: BLE001 - classify_error re-raises what is not a request failure
                retryable, reason = classify_error(exc, self.options.timeout_s)
                if not retryable:
                    return JudgeResponse(None, error=f"{reason} (not retried)"), False
        return JudgeResponse(None, error=f"{reason} (after {attempts} attempts)"), True

    def close(self) -> None:
        pass
