"""The judge every backend sits behind: cache first, one batched backend call for the rest.

:meth:`CachedJudge.complete` takes a whole batch (thousands of requests) and returns the
responses in order:

1. Each request is resolved against the judge's options: ``max_tokens``, ``temperature`` and
   ``seed`` left as None take ``JudgeOptions`` (greedy, seed 0 by default). A request with
   ``attempt > 0`` (a retry of an unparsable answer, see :func:`complete_parsed`) gets the
   seed ``seed + attempt`` and, where it would be greedy, ``RETRY_TEMPERATURE``: a greedy
   retry would only repeat the unparsable text.
2. The cache is looked up for the whole batch at once (see :mod:`lm_eval_fin.judge.cache`
   for the key). Identical requests within the batch are sent once. A request with
   ``refresh`` set is sent again when the option ``retry_unparsable`` is on and its cached
   answer is older than the judge (stored by an earlier run); an answer stored during this
   run, by this judge or by another process working beside it, is not sent twice.
3. The misses are claimed in the cache (see there), so that another process judging the same
   data does not send them too, and go to the backend in one call; the backend hands back
   each answer as it finishes, and it is written to the cache right away, so a run killed
   half way keeps it. Misses another live process had claimed are then waited for and read
   from the cache (``extra["answered_by_other_process"]``), or sent here if that process
   died or failed them.
4. A summary (requests, cache hits, model calls, tokens, retries, failures, wall time) is
   logged, kept in ``judge.last_batch`` and added to ``judge.stats``. A tqdm bar shows
   progress on batches with at least ``PROGRESS_MIN_REQUESTS`` model calls.

A response with ``text=None`` is a definitive failure of that request (``error`` says why,
with escape sequences and control characters of server text removed); the others are
unaffected. A reply that is empty (or only whitespace) is such a failure too, whatever the
backend, and so is one longer than the ``max_reply_bytes`` option (never cached). With ``batch_deadline_s`` set, what is not finished that long after the call began
fails with an error that says so (the backends check it; requests waited for from another
process too). Exceptions from a backend propagate: :class:`~lm_eval_fin.judge.base.JudgeConfigError`
(a server without the model, a refused API key, a model that will not load) and others (vLLM
missing, a constraint vLLM cannot enforce); the requests of the batch not finished by then get
that message as their error, and whatever finished before is already in the cache. A cache
file that cannot be used raises :class:`~lm_eval_fin.judge.cache.JudgeCacheError`.

:func:`complete_parsed` adds the parse step every caller needs: it parses each text with
the caller's tolerant parser, re-sends only the unparsable ones with ``attempt + 1`` up to
``max_attempts``, and counts what stayed unparsable as parse failures. An unparsable answer
that an earlier run left in the cache is first sent again as it was (``refresh``), when the
judge's ``retry_unparsable`` option is on: it may come from a judge that has been fixed since.
:func:`complete_parsed_answers` does the same and keeps, per request, the last raw reply and
the error of a request that failed for good, so a caller can tell a judge that did not answer
(a failure) from an answer it could not read (a parse failure).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from lm_eval_fin.judge.base import BatchStats, Judge, JudgeRequest, JudgeResponse, RequestUsage
from lm_eval_fin.judge.cache import CachedAnswer, Claimant, JudgeCache, JudgeCacheError, cache_key, oversized_reply
from lm_eval_fin.judge.options import JUDGE_ENV, JudgeOptions, resolve_options
from lm_eval_fin.judge.spec import JudgeSpec, backend_kind, parse_spec
from lm_eval_fin.text.cleantext import one_line

logger = logging.getLogger("lm_eval_fin.judge")

T = TypeVar("T")

RETRY_TEMPERATURE = 0.7
PROGRESS_MIN_REQUESTS = 8
# waiting for answers another process claimed: first and longest pause between looks
_POLL_FIRST_S, _POLL_MAX_S = 0.05, 0.5
EMPTY_REPLY = "the judge returned an empty reply"


class ResultSink(Protocol):
    """What a backend reports to while it works through a batch.

    ``deadline`` is the batch deadline as a ``time.monotonic()`` value, or None; a backend
    that can stop between requests (or chunks) checks :meth:`expired` and fails the rest
    with :meth:`deadline_error`."""

    deadline: float | None

    def done(self, index: int, response: JudgeResponse) -> None: ...

    def done_many(self, items: Sequence[tuple[int, JudgeResponse]]) -> None: ...

    def retried(self) -> None: ...

    def note(self, key: str, count: int = 1) -> None: ...

    def expired(self) -> bool: ...

    def deadline_error(self) -> str: ...


class Backend(Protocol):
    """A model behind the judge. ``run`` must report every request (by its index in
    ``requests``) to ``sink`` exactly once, as soon as it is finished."""

    def run(self, requests: Sequence[JudgeRequest], sink: ResultSink) -> None: ...

    def close(self) -> None: ...


def validate_request(index: int, request: JudgeRequest) -> None:
    """Caller mistakes fail loudly, before anything is sent."""
    if not isinstance(request, JudgeRequest):
        raise TypeError(f"judge request {index}: expected JudgeRequest, got {type(request).__name__}")
    if not request.messages:
        raise ValueError(f"judge request {index}: no messages")
    for message in request.messages:
        if not isinstance(message.get("role"), str) or not isinstance(message.get("content"), str):
            raise ValueError(f"judge request {index}: each message needs string 'role' and 'content'")
    constraints = [c for c in (request.json_schema, request.regex, request.choice) if c is not None]
    if len(constraints) > 1:
        raise ValueError(f"judge request {index}: set at most one of json_schema, regex, choice")
    if request.choice is not None and not request.choice:
        raise ValueError(f"judge request {index}: choice needs at least one option")


def resolve_request(request: JudgeRequest, options: JudgeOptions) -> JudgeRequest:
    """Fill in decoding parameters from the options (see the module docstring)."""
    temperature = options.temperature if request.temperature is None else request.temperature
    seed = options.seed if request.seed is None else request.seed
    if request.attempt > 0:
        seed += request.attempt
        if temperature == 0:
            temperature = RETRY_TEMPERATURE
    return dataclasses.replace(
        request,
        messages=tuple(dict(message) for message in request.messages),
        max_tokens=options.max_tokens if request.max_tokens is None else request.max_tokens,
        temperature=float(temperature),
        seed=int(seed),
        choice=None if request.choice is None else tuple(request.choice),
    )


@dataclass
class _Miss:
    """A request not answered from the cache, and the batch positions it answers."""

    key: str
    request: JudgeRequest
    positions: list[int]


class _BatchRecorder:
    """The outcome of one ``complete`` call: fills responses, writes the cache, counts."""

    def __init__(self, judge: CachedJudge, responses: list[JudgeResponse | None], stats: BatchStats,
                 progress, deadline: float | None, claimant: Claimant):
        self.judge, self.responses, self.stats, self.progress = judge, responses, stats, progress
        self.deadline, self.claimant = deadline, claimant
        self.reported: set[str] = set()
        self.first_error: str | None = None

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def deadline_error(self) -> str:
        return (f"not finished within the batch deadline of {self.judge.options.batch_deadline_s:g}s "
                "(--judge_batch_deadline); finished answers are cached, a re-run sends the rest")

    def done_many(self, items: Sequence[tuple[_Miss, JudgeResponse]]) -> None:
        finished, failed = [], []
        for miss, response in items:
            if miss.key in self.reported:
                continue
            self.reported.add(miss.key)
            self.stats.prompt_tokens += response.prompt_tokens
            self.stats.completion_tokens += response.completion_tokens
            if response.text is not None and not response.text.strip():
                response = dataclasses.replace(response, text=None, error=EMPTY_REPLY)
            elif response.text is not None:
                oversized = oversized_reply(response.text, self.judge.options.max_reply_bytes)
                if oversized is not None:  # never stored, never scored: a failure of this request
                    response = dataclasses.replace(response, text=None, error=oversized)
                    self.note("oversized_replies", len(miss.positions))
            if response.text is None:
                response = dataclasses.replace(response, error=one_line(response.error or "no answer", 500))
                self.stats.failures += len(miss.positions)
                self.first_error = self.first_error or response.error
                failed.append(miss.key)
            else:
                finished.append(
                    (miss.key, CachedAnswer(response.text, response.prompt_tokens, response.completion_tokens))
                )
            for rank, position in enumerate(miss.positions):
                self.responses[position] = dataclasses.replace(response, cached=False, duplicate=rank > 0)
        self.judge.cache.put_many(self.judge.spec, finished, self.claimant)
        if failed:  # let a process waiting for these send them itself
            self.judge.cache.release(self.claimant, failed)
        if self.progress is not None:
            self.progress.update(len(items))

    def from_cache(self, miss: _Miss, answer: CachedAnswer) -> None:
        """``miss`` answered by another process through the cache."""
        self.reported.add(miss.key)
        for position in miss.positions:
            self.responses[position] = JudgeResponse(
                answer.text, cached=True, prompt_tokens=answer.prompt_tokens, completion_tokens=answer.completion_tokens
            )
        self.stats.cache_hits += len(miss.positions)
        self.note("answered_by_other_process")
        if self.progress is not None:
            self.progress.update(1)

    def fail_unreported(self, misses: Sequence[_Miss], error: str) -> None:
        self.done_many([(miss, JudgeResponse(None, error=error)) for miss in misses if miss.key not in self.reported])

    def note(self, key: str, count: int = 1) -> None:
        self.stats.extra[key] = self.stats.extra.get(key, 0) + count


class _RoundSink:
    """The :class:`ResultSink` of one backend call: maps the backend's indices to misses."""

    def __init__(self, recorder: _BatchRecorder, misses: Sequence[_Miss]):
        self.recorder, self.misses = recorder, misses
        self.deadline = recorder.deadline

    def done(self, index: int, response: JudgeResponse) -> None:
        self.recorder.done_many([(self.misses[index], response)])

    def done_many(self, items: Sequence[tuple[int, JudgeResponse]]) -> None:
        self.recorder.done_many([(self.misses[index], response) for index, response in items])

    def retried(self) -> None:
        self.recorder.stats.retries += 1

    def note(self, key: str, count: int = 1) -> None:
        self.recorder.note(key, count)

    def expired(self) -> bool:
        return self.recorder.expired()

    def deadline_error(self) -> str:
        return self.recorder.deadline_error()


class CachedJudge(Judge):
    """A backend behind the persistent cache. Load it with :func:`load_judge`."""

    def __init__(self, spec: JudgeSpec, backend: Backend, options: JudgeOptions,
                 cache: JudgeCache | None = None):
        self.parsed_spec = spec
        self.spec = str(spec)
        self.backend = backend
        self.options = options
        self.cache = cache if cache is not None else JudgeCache()
        self.stats = BatchStats()
        self.last_batch = BatchStats()
        self.last_error: str | None = None  # the first error of the latest batch with failures
        # answers stored since are of this run: a refresh does not send them again
        self.started_wall = time.time()

    def complete(self, requests: Sequence[JudgeRequest], desc: str = "judge") -> list[JudgeResponse]:
        started = time.perf_counter()
        requests = list(requests)
        for index, request in enumerate(requests):
            validate_request(index, request)
        resolved = [resolve_request(request, self.options) for request in requests]
        keys = [cache_key(self.spec, request) for request in resolved]
        stats = BatchStats(requests=len(requests))
        deadline = None
        if self.options.batch_deadline_s is not None:
            deadline = time.monotonic() + self.options.batch_deadline_s
        responses, misses = self._from_cache(keys, resolved, stats)

        progress = None
        if len(misses) >= PROGRESS_MIN_REQUESTS:
            from tqdm.auto import tqdm

            # redraw often on a terminal, seldom in a log file (TQDM_DISABLE=1 turns it off)
            interval = 0.1 if sys.stderr.isatty() else 10.0
            progress = tqdm(total=len(misses), desc=desc, unit="req", file=sys.stderr, mininterval=interval)
        claimant = Claimant.here()
        recorder = _BatchRecorder(self, responses, stats, progress, deadline, claimant)
        stop_error, stopped, interrupted = "the backend returned no answer", False, False
        try:
            if misses:
                self._send(misses, recorder, claimant)
        except BaseException as exc:
            stop_error, stopped = f"the judge stopped: {one_line(exc, 500) or type(exc).__name__}", True
            # Ctrl-C or SIGTERM: the command's one line says what is kept, no failure count
            interrupted = not isinstance(exc, Exception)
            raise
        finally:
            if progress is not None:
                progress.close()
            try:
                # a backend bug or an exception half way: never a silent hole
                recorder.fail_unreported(misses, stop_error)
                if misses:
                    self.cache.release(claimant)
            except JudgeCacheError:
                if not stopped:
                    raise  # else the exception under way already says what went wrong
            stats.wall_time_s = time.perf_counter() - started
            self.last_batch = stats
            self.stats.add(stats)
            if not interrupted:
                logger.info("%s [%s]: %s", desc, self.spec, stats.summary())
            if stats.failures and not interrupted:
                self.last_error = recorder.first_error
                logger.warning(
                    "%s: %d of %d judge requests failed for good; first error: %s",
                    desc, stats.failures, stats.requests, recorder.first_error,
                )
        filled = [response for response in responses if response is not None]
        assert len(filled) == len(responses), "fail_unreported above fills every slot left"
        return filled

    def _from_cache(self, keys: list[str], resolved: list[JudgeRequest],
                    stats: BatchStats) -> tuple[list[JudgeResponse | None], list[_Miss]]:
        """Responses filled from the cache; the misses, each once, with the batch positions
        it answers (identical requests in one batch are sent once). A refresh request is a miss
        unless its answer was stored during this run (by this judge or another process)."""
        hits = self.cache.get_many(keys)
        responses: list[JudgeResponse | None] = [None] * len(keys)
        misses: dict[str, _Miss] = {}
        for position, (key, request) in enumerate(zip(keys, resolved)):
            answer = hits.get(key)
            if answer is not None and self._stale(request, answer):
                answer = None
            if answer is not None:
                responses[position] = JudgeResponse(
                    answer.text, cached=True,
                    prompt_tokens=answer.prompt_tokens, completion_tokens=answer.completion_tokens,
                )
                stats.cache_hits += 1
            elif key in misses:
                misses[key].positions.append(position)
                stats.cache_hits += 1
            else:
                misses[key] = _Miss(key, request, [position])
        return responses, list(misses.values())

    def _stale(self, request: JudgeRequest, answer: CachedAnswer) -> bool:
        """A cached answer a refresh request asks to replace: one stored before this run."""
        return request.refresh and self.options.retry_unparsable and answer.created < self.started_wall

    def _send(self, misses: list[_Miss], recorder: _BatchRecorder, claimant: Claimant) -> None:
        """Claim the misses, send those this process holds, wait for those another holds;
        again until each is answered, failed, or the deadline has passed."""
        pending = {miss.key: miss for miss in misses}
        poll = _POLL_FIRST_S
        while pending:
            mine = set(self.cache.claim(list(pending), claimant))
            # answered between our lookup and our claim by a process that just finished them
            self._take_answered([pending[key] for key in mine], recorder)
            batch = [miss for key, miss in pending.items() if key in mine and key not in recorder.reported]
            if batch:
                recorder.stats.model_calls += len(batch)
                self.backend.run([miss.request for miss in batch], _RoundSink(recorder, batch))
                recorder.fail_unreported(batch, "the backend returned no answer")
                poll = _POLL_FIRST_S
            pending = {key: miss for key, miss in pending.items() if key not in recorder.reported}
            if not pending:
                return
            if recorder.expired():
                recorder.fail_unreported(list(pending.values()), recorder.deadline_error())
                return
            time.sleep(poll)
            poll = min(_POLL_MAX_S, poll * 2)
            self._take_answered(list(pending.values()), recorder)
            pending = {key: miss for key, miss in pending.items() if key not in recorder.reported}

    def _take_answered(self, misses: Sequence[_Miss], recorder: _BatchRecorder) -> None:
        """Record the misses whose answer is in the cache now (for a refresh: stored during
        this run, not the stale answer it replaces)."""
        if not misses:
            return
        found = self.cache.get_many([miss.key for miss in misses])
        for miss in misses:
            answer = found.get(miss.key)
            if answer is not None and not self._stale(miss.request, answer):
                recorder.from_cache(miss, answer)

    def close(self) -> None:
        self.backend.close()
        self.cache.close()

    def __enter__(self) -> CachedJudge:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CachedJudge({self.spec!r}, cache={str(self.cache.path)!r})"


def _safe_parse(parse: Callable[[str], T | None], text: str) -> T | None:
    """A parser that raises counts as a parse failure, never as a crash."""
    try:
        return parse(text)
    except Exception as exc:  # noqa: BLE001 - any parser bug must not end the run
        logger.debug("judge answer parser %r raised %r", getattr(parse, "__name__", parse), exc)
        return None


@dataclass
class ParsedAnswer(Generic[T]):
    """The outcome of one request of :func:`complete_parsed_answers`.

    ``value`` is the parsed answer, or None. ``text`` is the last raw reply (None when the
    request failed for good); ``error`` says why it failed for good (None when the judge
    answered, readable or not). So ``error`` set is a judge failure, and ``value`` None with
    ``error`` None a parse failure.
    """

    value: T | None
    text: str | None = None
    error: str | None = None
    usage: RequestUsage = field(default_factory=RequestUsage)

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def unparsed(self) -> bool:
        return self.value is None and self.error is None


def complete_parsed(
    judge: Judge,
    requests: Sequence[JudgeRequest],
    parse: Callable[[str], T | None] | Sequence[Callable[[str], T | None]],
    desc: str = "judge",
    max_attempts: int = 3,
) -> list[T | None]:
    """Complete ``requests`` and parse each answer; re-ask only the unparsable ones.

    ``parse`` is one parser for every answer, or one per request when what counts as a
    readable answer depends on the request (a match index must lie within that request's
    list, for instance), so such an answer is re-asked too.

    Returns the parsed values in order, None where the request failed or its answer stayed
    unparsable after ``max_attempts`` (:func:`complete_parsed_answers` tells the two apart).
    Those parse failures are added to ``judge.stats``;
    ``judge.last_batch`` becomes the sum over the attempts, with ``parse_failures`` and
    ``extra["parse_retries"]`` (requests re-sent because their answer did not parse).
    Works with any object that has ``complete`` (a test double needs no stats).
    """
    return [answer.value for answer in complete_parsed_answers(judge, requests, parse, desc, max_attempts)]


def complete_parsed_answers(
    judge: Judge,
    requests: Sequence[JudgeRequest],
    parse: Callable[[str], T | None] | Sequence[Callable[[str], T | None]],
    desc: str = "judge",
    max_attempts: int = 3,
    retry_unparsable: bool | None = None,
) -> list[ParsedAnswer[T]]:
    """:func:`complete_parsed`, with the raw reply and the error of each request kept.

    ``retry_unparsable`` None takes the judge's option (``JudgeOptions.retry_unparsable``,
    on by default): an unparsable answer that came from the cache is sent again as it was,
    before any re-ask, and the new answer replaces the cached one, unless it was stored
    during this run (``extra["unparsable_resent"]`` counts those sent)."""
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    if retry_unparsable is None:
        retry_unparsable = getattr(getattr(judge, "options", None), "retry_unparsable", True)
    requests = list(requests)
    parsers = [parse] * len(requests) if callable(parse) else list(parse)
    if len(parsers) != len(requests):
        raise ValueError(f"{len(parsers)} parsers for {len(requests)} requests")
    results: list[ParsedAnswer[T]] = [ParsedAnswer(None) for _ in requests]
    usage = [RequestUsage() for _ in requests]
    total = BatchStats()
    pending = list(range(len(requests)))
    parse_retries = resent = 0

    def ask(batch: list[JudgeRequest], desc: str) -> list[JudgeResponse]:
        responses = judge.complete(batch, desc=desc)
        last = getattr(judge, "last_batch", None)
        if isinstance(last, BatchStats):
            total.add(last)
        else:
            total.requests += len(batch)
        return responses

    for attempt in range(max_attempts):
        if not pending:
            break
        batch = [dataclasses.replace(requests[i], attempt=requests[i].attempt + attempt) for i in pending]
        if attempt:
            parse_retries += len(batch)
        responses = ask(batch, desc if attempt == 0 else f"{desc} (re-ask {attempt})")
        for index, response in zip(pending, responses):
            usage[index].count(response)
        values = [None if response.text is None else _safe_parse(parsers[index], response.text)
                  for index, response in zip(pending, responses)]
        if retry_unparsable:
            stale = [j for j, (response, value) in enumerate(zip(responses, values))
                     if response.cached and response.text is not None and value is None]
            if stale:
                again = ask([dataclasses.replace(batch[j], refresh=True) for j in stale],
                            f"{desc} (re-send cached unparsable)")
                for j, response in zip(stale, again):
                    usage[pending[j]].count(response)
                    resent += not response.cached
                    responses[j] = response
                    values[j] = None if response.text is None else _safe_parse(parsers[pending[j]], response.text)
        unparsed = []
        for index, response, value in zip(pending, responses, values):
            if response.text is None:
                # a transport failure, retried by the backend already: failed for good
                results[index] = ParsedAnswer(None, None, response.error or "the judge returned no answer",
                                              usage[index])
                continue
            results[index] = ParsedAnswer(value, response.text, usage=usage[index])
            if value is None:
                unparsed.append(index)
        pending = unparsed
    total.parse_failures = len(pending)
    total.extra["parse_retries"] = parse_retries
    total.extra["unparsable_resent"] = resent
    stats = getattr(judge, "stats", None)
    if isinstance(stats, BatchStats):
        stats.add(BatchStats(parse_failures=total.parse_failures,
                             extra={"parse_retries": parse_retries, "unparsable_resent": resent}))
    try:
        judge.last_batch = total
    except AttributeError:
        pass
    if parse_retries or resent or total.parse_failures:
        parsed = sum(result.value is not None for result in results)
        logger.info("%s: parsed %d of %d; %s", desc, parsed, len(requests), total.summary())
    return results


def _ensure_visible_logging() -> None:
    """Batch summaries are INFO records of ``lm_eval_fin.judge``. lm-eval configures only its
    own logger, so without this they would vanish; an application that configured logging
    (a handler on the root or on ``lm_eval_fin``) keeps full control."""
    package_logger = logging.getLogger("lm_eval_fin")
    if package_logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-8s [%(name)s] %(message)s", "%H:%M:%S"))
    package_logger.addHandler(handler)
    package_logger.setLevel(logging.INFO)
    package_logger.propagate = False


def load_judge(spec: str | None = None, options: JudgeOptions | None = None) -> CachedJudge | None:
    """The judge named by ``spec`` (else ``$LM_EVAL_FIN_JUDGE``); None if neither is set.
    ``options`` left as None are ``$LM_EVAL_FIN_JUDGE_OPTIONS`` over the defaults.

    Nothing heavy happens here: the model is loaded (or the server first contacted) on the
    first batch with a cache miss, so a re-run on a warm cache never starts an engine.
    A malformed spec raises :class:`~lm_eval_fin.judge.spec.JudgeSpecError` (a
    :class:`~lm_eval_fin.judge.base.JudgeConfigError`), malformed options a ValueError.
    """
    if spec is None:
        spec = os.environ.get(JUDGE_ENV)
    if spec is None or not spec.strip():
        return None
    parsed = parse_spec(spec)
    options = options or resolve_options()
    _ensure_visible_logging()
    return CachedJudge(parsed, backend_kind(parsed.backend).build(parsed, options), options)
