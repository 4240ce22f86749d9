"""``openai:<base url>[,<base url>...]#<model>``: any OpenAI-compatible chat-completions server.

``vllm serve``, SGLang, TGI, llama.cpp's server and OpenAI itself. The official ``openai``
``AsyncOpenAI`` client sends the batch with at most ``concurrency`` requests in flight per
endpoint; the API key is ``$OPENAI_API_KEY``, else ``"EMPTY"`` (what local servers expect).
Several base URLs are endpoints of one model (one ``vllm serve`` per node): each request goes
to one of them, and an endpoint that fails is taken out for a while and its request re-sent
to another (:mod:`lm_eval_fin.judge.endpoints`).

Time. The client's own timeout is per read (httpx's connect/read/write/pool timeouts), so
a server that sends a byte now and then would hold a request for ever; each attempt is
therefore also bounded as a whole by ``asyncio.wait_for``: ``timeout_s`` from the start of
the attempt to the last byte of the reply. With ``batch_deadline_s`` (a deadline of the
sink), an attempt is also cut at the batch deadline, no retry waits past it, and a request
not started by then is not sent; each such request fails with an error that says so.

Failures. The client's own retries are off; ours are visible in the stats. A request that
times out, cannot connect, gets 408/409/429/5xx or a reply that is not a well-formed chat
completion is re-sent up to ``max_retries`` times, waiting ``backoff_s * 2**k`` seconds
(capped at ``backoff_max_s``) before retry ``k + 1``; after a 429 or 503 with a
``Retry-After`` header (seconds, or an HTTP date; ``retry-after-ms`` too) the wait is what
the server asked for, also capped at ``backoff_max_s``. Other HTTP errors (400, 422, ...) are
not retried: the same request would fail again. Nor is a reply without text: a refusal
(the message's ``refusal`` field) or an empty reply. After that the request's response has
``text=None`` and an ``error`` naming the cause and the number of attempts; the other
requests go on. When ``max(8, 2 * concurrency * endpoints)`` requests in a row have failed for good
after their retries (a server that went away or is overwhelmed), the rest of the batch is
not sent but failed at once with that reason, and requests in flight are not retried again,
instead of each waiting through its own retries; a re-run sends only what is not in the
cache. Only such retryable failures count towards that stop: a request the server rejected
on its own merits (HTTP 400 for a prompt too long, a refusal) shows the server is there, and
resets the count.

Configuration errors. A redirect (3xx: no redirect is followed, so prompts never reach a host
the spec does not name), HTTP 401 and 403 (the API key), and 404 (a model the server does not
serve, or a base URL that is not an OpenAI API) would fail every request alike: the first
one stops the whole batch with one :class:`~lm_eval_fin.judge.base.JudgeConfigError` that
says what to fix (for a 404, with the models the server lists at ``GET /models``).

Text from the server (error bodies, refusals) reaches errors only through
:func:`~lm_eval_fin.text.cleantext.one_line`: no escape sequences or control characters.

Constraints. A JSON schema goes through the standard ``response_format={"type":
"json_schema", ...}``. Regex and choice constraints have no standard field; they are sent
as vLLM's ``structured_outputs`` extra body (``{"regex": ...}`` / ``{"choice": [...]}``,
vLLM >= 0.11). A server that does not know the field may reject the request (a clear
error) or ignore it; either way the caller's parser still checks every answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import json
import os
import time
import urllib.error
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from lm_eval_fin.judge.base import JudgeConfigError, JudgeRequest, JudgeResponse
from lm_eval_fin.judge.endpoints import Endpoint, EndpointPool
from lm_eval_fin.judge.options import JudgeOptions
from lm_eval_fin.judge.preflight import SCORE_LATER, served_models
from lm_eval_fin.judge.spec import BackendKind, JudgeSpec, register_backend
from lm_eval_fin.text.cleantext import one_line

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 429})
RETRY_AFTER_STATUS = frozenset({429, 503})
CONFIG_STATUS = frozenset({401, 403, 404})
# how long listing the server's models may take when explaining a 404
_MODELS_TIMEOUT_S = 10.0


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
    """Text and token counts of a chat completion; :class:`MalformedReply` if it is not one.
    A refusal, a reply without text (a tool call) and an empty reply are failures."""
    try:
        choice = completion.choices[0]
        message = choice.message
        text = message.content
    except (AttributeError, IndexError, KeyError, TypeError) as exc:
        raise MalformedReply(f"no choices[0].message ({type(completion).__name__})") from exc
    usage = getattr(completion, "usage", None)
    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    refusal = getattr(message, "refusal", None)
    finish = getattr(choice, "finish_reason", None)
    if refusal:
        error = f"the judge refused: {one_line(refusal, 200)} (not retried)"
    elif not isinstance(text, str):
        error = f"the reply has no text (finish_reason={one_line(finish, 40)}; not retried)"
    elif not text.strip():
        error = f"the judge returned an empty reply (finish_reason={one_line(finish, 40)}; not retried)"
    else:
        return JudgeResponse(text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    # asking again would get the same, so none of these is retried
    return JudgeResponse(None, error=error, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


def retry_after_seconds(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, else ``Retry-After`` as seconds or
    as an HTTP date; None when absent or unreadable. Never negative."""
    if not headers:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def status_detail(exc) -> str:
    """The server's own words of an HTTP error (the body's ``message``, as OpenAI and vLLM
    send it), on one printable line; else the client's message."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    message = body.get("message") if isinstance(body, dict) else None
    return one_line(message if isinstance(message, str) and message.strip() else exc.message, 300)


def classify_error(exc: BaseException, timeout_s: float) -> tuple[bool, str, float | None]:
    """(retry it?, what went wrong, the wait the server asked for) for an exception raised by
    one request. Configuration errors (401/403/404) are the caller's to handle first."""
    import openai

    if isinstance(exc, (openai.APITimeoutError, asyncio.TimeoutError)):
        return True, f"timed out after {timeout_s:g}s", None
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return True, f"connection failed: {type(cause).__name__}: {one_line(cause, 200)}", None
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retry_after = retry_after_seconds(exc.response.headers) if status in RETRY_AFTER_STATUS else None
        retryable = status in RETRYABLE_STATUS or status >= 500
        return retryable, f"HTTP {status}: {status_detail(exc)}", retry_after
    if isinstance(exc, (MalformedReply, openai.APIResponseValidationError, json.JSONDecodeError, UnicodeDecodeError)):
        return True, f"malformed reply: {one_line(exc, 300)}", None
    if isinstance(exc, openai.OpenAIError):
        return True, f"{type(exc).__name__}: {one_line(exc, 300)}", None
    raise exc


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
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


class _Deadline(Exception):
    """The batch deadline passed during an attempt."""


class OpenAIBackend:
    def __init__(self, spec: JudgeSpec, options: JudgeOptions):
        self.spec = spec
        self.options = options
        if options.concurrency < 1:
            raise ValueError("judge concurrency must be at least 1")

    def run(self, requests: Sequence[JudgeRequest], sink) -> None:
        run_sync(self._run_all(requests, sink))

    async def _run_all(self, requests: Sequence[JudgeRequest], sink) -> None:
        from openai import AsyncOpenAI, DefaultAsyncHttpxClient

        api_key = os.environ.get("OPENAI_API_KEY") or "EMPTY"
        # no redirect is followed: a server that redirects is a configuration error, never a
        # second host that receives the prompts (redirect_problem)
        clients = [AsyncOpenAI(base_url=url, api_key=api_key, timeout=self.options.timeout_s, max_retries=0,
                               http_client=DefaultAsyncHttpxClient(follow_redirects=False))
                   for url in self.spec.base_urls]
        pool = EndpointPool(self.spec.base_urls, self.options.concurrency, self.options.backoff_s, clients)
        total = self.options.concurrency * len(clients)
        semaphore = asyncio.Semaphore(total)
        breaker = _Breaker(max(8, 2 * total))
        deadline = getattr(sink, "deadline", None)
        stop: list[JudgeConfigError] = []

        async def one(index: int, request: JudgeRequest) -> None:
            async with semaphore:
                if stop:
                    return  # the batch ends with the configuration error
                if breaker.open:
                    response = JudgeResponse(
                        None,
                        error=f"not sent: the {breaker.consecutive} requests before it failed for good "
                        f"(last error: {breaker.last_error}); re-run to send it",
                    )
                elif deadline is not None and time.monotonic() >= deadline:
                    response = JudgeResponse(None, error=f"not sent: {sink.deadline_error()}")
                else:
                    try:
                        response, retryable = await self._complete_one(pool, request, sink, breaker, deadline)
                    except JudgeConfigError as exc:
                        if not stop:
                            stop.append(exc)
                            for task in tasks:
                                if task is not asyncio.current_task():
                                    task.cancel()
                        return
                    breaker.record(response, retryable)
                sink.done(index, response)

        tasks = [asyncio.ensure_future(one(index, request)) for index, request in enumerate(requests)]
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
            for task in tasks:
                error = None if task.cancelled() else task.exception()
                if error is not None:
                    raise error
            if stop:
                raise stop[0]
        finally:
            for task in tasks:
                task.cancel()
            if pool.outages:
                sink.note("endpoint_outages", pool.outages)
            for client in clients:
                await client.close()

    async def _attempt(self, pool: EndpointPool, payload: dict[str, Any], deadline: float | None):
        """One HTTP request to an endpoint of the pool, bounded as a whole by ``timeout_s`` and
        by the batch deadline; (the completion or the exception raised, the endpoint)."""
        try:
            endpoint = await pool.acquire(deadline)
        except TimeoutError:
            raise _Deadline from None
        try:
            return await self._request(endpoint.client, payload, deadline), endpoint
        except _Deadline:
            raise
        except Exception as exc:  # noqa: BLE001 - the caller classifies it, with the endpoint
            return exc, endpoint
        finally:
            await pool.release(endpoint)

    async def _request(self, client, payload: dict[str, Any], deadline: float | None):
        budget, cut_by_deadline = self.options.timeout_s, False
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Deadline
            if remaining < budget:
                budget, cut_by_deadline = remaining, True
        try:
            return await asyncio.wait_for(client.chat.completions.create(**payload, timeout=budget), budget)
        except asyncio.TimeoutError:  # noqa: UP041 - not the builtin TimeoutError before Python 3.11
            if cut_by_deadline:
                raise _Deadline from None
            raise
        except Exception as exc:
            import openai

            if cut_by_deadline and isinstance(exc, openai.APITimeoutError):
                raise _Deadline from None
            raise

    async def _complete_one(self, pool: EndpointPool, request: JudgeRequest, sink, breaker: _Breaker,
                            deadline: float | None) -> tuple[JudgeResponse, bool]:
        """The response, and whether a failure was of the retryable kind (the server away or
        overwhelmed) rather than the server rejecting this request."""
        import openai

        payload = request_payload(self.spec.model, request)
        attempts = self.options.max_retries + 1
        reason, wait = "not attempted", 0.0
        for attempt in range(attempts):
            if attempt:
                if breaker.open:
                    return JudgeResponse(None, error=f"{reason} (after {attempt} attempts; not retried: the "
                                         f"{breaker.consecutive} requests before it failed for good)"), True
                if deadline is not None and time.monotonic() + wait >= deadline:
                    return JudgeResponse(None, error=f"{reason} (after {attempt} attempts; not retried: "
                                         f"{sink.deadline_error()})"), False
                sink.retried()
                await asyncio.sleep(wait)
            try:
                outcome, endpoint = await self._attempt(pool, payload, deadline)
            except _Deadline:
                return JudgeResponse(None, error=sink.deadline_error()), False
            if not isinstance(outcome, Exception):
                try:
                    response = read_completion(outcome)
                except MalformedReply as exc:
                    outcome = exc
                else:
                    pool.answered(endpoint)
                    return response, False
            if isinstance(outcome, openai.APIStatusError) and 300 <= outcome.status_code < 400:
                raise JudgeConfigError(redirect_problem(self.spec, endpoint.url, outcome.status_code,
                                                        outcome.response.headers.get("location"))) from outcome
            if isinstance(outcome, openai.APIStatusError) and outcome.status_code in CONFIG_STATUS:
                raise await self._config_error(endpoint, outcome) from outcome
            retryable, reason, retry_after = classify_error(outcome, self.options.timeout_s)
            if not retryable:
                pool.answered(endpoint)  # it answered: the request is what it rejected
                return JudgeResponse(None, error=f"{reason} (not retried)"), False
            if pool.several:
                reason = f"{endpoint.url}: {reason}"
            if not isinstance(outcome, MalformedReply):
                pool.failed(endpoint, reason, retry_after)
            if pool.another_in_service(endpoint):
                wait = 0.0  # the retry goes to another endpoint at once
            elif retry_after is None:
                wait = min(self.options.backoff_max_s, self.options.backoff_s * 2**attempt)
            else:
                wait = min(self.options.backoff_max_s, retry_after)
                sink.note("retry_after_waits")
        return JudgeResponse(None, error=f"{reason} (after {attempts} attempts)"), True

    async def _config_error(self, endpoint: Endpoint, exc) -> JudgeConfigError:
        """One line for a 401, 403 or 404: what is wrong, and what to change."""
        where = f"the server at {endpoint.url}"
        status, detail = exc.status_code, status_detail(exc)
        if status == 401:
            return JudgeConfigError(f"{where} refused the API key (HTTP 401: {detail}); set OPENAI_API_KEY to a "
                                    "key it accepts")
        if status == 403:
            return JudgeConfigError(f"{where} denied access (HTTP 403: {detail}); check that the key in "
                                    f"OPENAI_API_KEY may use the model '{one_line(self.spec.model)}'")
        models = await self._served_models(endpoint.client)
        if models is not None and self.spec.model not in models:
            return JudgeConfigError(
                f"{where} has no model '{one_line(self.spec.model)}'; models it serves: {models} (GET /models); "
                "name one of them after '#' in the judge spec"
            )
        return JudgeConfigError(
            f"{where} answered HTTP 404 to a chat completion for the model '{one_line(self.spec.model)}' "
            f"({detail}); check the base URL (an OpenAI-compatible API, usually ending in /v1) and the model name"
        )

    async def _served_models(self, client) -> list[str] | None:
        """The model ids ``GET /models`` lists, or None when the server does not say."""
        try:
            page = await asyncio.wait_for(client.models.list(timeout=_MODELS_TIMEOUT_S), _MODELS_TIMEOUT_S)
            return [one_line(model.id, 200) for model in page.data][:20]
        except Exception:  # noqa: BLE001 - the listing only helps the message
            return None

    def close(self) -> None:
        pass


# ------------------------------------------------------------------------------ the spec kind


def parse_openai(rest: str) -> JudgeSpec | None:
    """``<base url>[,<base url>...]#<model>``: endpoints that serve one model."""
    where, _, model = rest.partition("#")
    urls = sorted({url.strip().rstrip("/") for url in where.split(",")})
    if not model.strip() or not all(url.startswith(("http://", "https://")) for url in urls):
        return None
    return JudgeSpec("openai", model.strip(), base_urls=tuple(urls))


def redirect_problem(spec: JudgeSpec, url: str, status: int, location: str | None) -> str:
    """A server that answers with a redirect: the judge follows none (prompts and the API key
    go only to the address the spec names, and answers are kept under that address)."""
    to = f" to {one_line(location, 200)}" if location else ""
    return (f"judge {spec}: the server at {url} redirects{to} (HTTP {status}); the judge follows no redirect, so "
            "prompts go only where the spec says: name the address it should use in the judge spec")


def openai_problem(spec: JudgeSpec) -> str | None:
    """Every endpoint must answer and list the model (a server without a model list passes:
    its first request will tell)."""
    for url in spec.base_urls:
        try:
            served = served_models(url, os.environ.get("OPENAI_API_KEY"))
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                return redirect_problem(spec, url, exc.code, exc.headers.get("Location"))
            if exc.code in (401, 403):
                return f"judge {spec}: the server at {url} refused the API key (HTTP {exc.code}); set OPENAI_API_KEY"
            continue
        except (OSError, ValueError) as exc:
            return (
                f"judge {spec}: no answer from {url} ({one_line(exc, 160)}); check the address (http or https, "
                f"host, port) and start the server first{SCORE_LATER}"
            )
        if served and spec.model not in served:
            return f"judge {spec}: the server at {url} has no model {spec.model!r}; it serves {', '.join(served[:10])}"
    return None


register_backend(BackendKind(
    name="openai",
    form="openai:<base url>[,<base url>...]#<model>",
    example="openai:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-7B-Instruct",
    parse=parse_openai,
    build=OpenAIBackend,
    problem=openai_problem,
    ready="the server lists the model",
))
