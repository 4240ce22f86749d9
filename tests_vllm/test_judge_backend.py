"""Our ``vllm:`` judge backend on a real vLLM engine (the embedded SmolLM2-135M, CPU): every
output constraint enforced by structured outputs, chunked batches, the sqlite cache (a warm
re-run makes no engine call), prompts too long for the engine, and a run killed mid-batch
that resumes from the cache. One engine, in this process, serves the whole module."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from lm_eval_fin.judge import JudgeOptions, JudgeRequest, load_judge, vllm_backend
from lm_eval_fin.judge.cache import JudgeCache
from tests_vllm import figures

HERE = Path(__file__).resolve().parent
# judge options of this module (and of its killed child): they name the engine and the cache keys
OPTIONS = {"max_tokens": 16, "max_model_len": 2048}
BATCH = 3

SCORE_SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5}, "verdict": {"enum": ["pass", "fail"]}},
    "required": ["score", "verdict"],
    "additionalProperties": False,
}
SCORE_REGEX = r"Score: [1-5]/5"
CHOICES = ("supported", "contradicted", "not mentioned")


def ask(content: str, **fields) -> JudgeRequest:
    return JudgeRequest(messages=({"role": "system", "content": "You grade answers about company filings."},
                                  {"role": "user", "content": content}), **fields)


CONSTRAINED = [
    # room for the whitespace the model may put between JSON tokens
    ask("Grade: 'Revenue rose 8% to $1.24bn.' Reference: revenue $1.24bn, up 8%. Reply as JSON.",
        json_schema=SCORE_SCHEMA, max_tokens=40),
    ask("Grade: 'Net income fell.' Reference: net income rose to $96m. Reply as JSON.",
        json_schema=SCORE_SCHEMA, max_tokens=40),
    ask("How well does 'margin 34.5%' match 'gross margin 34.5%'? Write the score.", regex=SCORE_REGEX),
    ask("How well does 'capex $52m' match 'capital expenditures $52.1 million'? Write the score.", regex=SCORE_REGEX),
    ask("Claim: the dividend is $0.35. Filing: a quarterly dividend of $0.35 per share. Label the claim.", choice=CHOICES),
    ask("Claim: debt doubled. Filing: cash from operations was $148.7m. Label the claim.", choice=CHOICES),
    ask("In a few words, what is gross margin?"),
]


@pytest.fixture(scope="module")
def cache_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("vllm_judge") / "judge.sqlite"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LM_EVAL_FIN_CACHE", str(path))
        yield path


@pytest.fixture(scope="module")
def engine_calls():
    """Every ``LLM.chat`` call of the module's engine (its conversations), recorded by wrapping
    the real method once the engine exists."""
    return []


class _Messages(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture(scope="module")
def judge(cache_path, judge_spec, engine_calls):
    judge = load_judge(judge_spec, JudgeOptions(batch_size=BATCH, **OPTIONS))
    assert judge.backend.llm is None  # lazy: nothing starts before a cache miss
    messages, logger = _Messages(), logging.getLogger("lm_eval_fin.judge")
    level = logger.level
    logger.addHandler(messages)
    logger.setLevel(logging.INFO)
    try:
        judge.complete([ask("Reply with one word: ready?", max_tokens=2)], desc="warm-up")
    finally:
        logger.removeHandler(messages)
        logger.setLevel(level)
    (engine_s,) = figures.judge_engine_starts("\n".join(messages.lines))
    figures.record("judge engine start, in-process (s)", f"{engine_s:.1f}")
    llm = judge.backend.llm
    assert llm is not None and vllm_backend.current_engine() is llm
    chat = llm.chat

    def recorded_chat(conversations, *args, **kwargs):
        engine_calls.append([c[-1]["content"] for c in conversations])
        return chat(conversations, *args, **kwargs)

    llm.chat = recorded_chat
    yield judge
    judge.close()
    assert vllm_backend.current_engine() is None  # closing the judge released its engine


def test_every_constraint_is_enforced_in_one_chunked_batch(judge, engine_calls):
    del engine_calls[:]
    responses = judge.complete(CONSTRAINED)
    texts = [response.text for response in responses]
    assert all(text is not None for text in texts), [r.error for r in responses]
    for text in texts[0:2]:
        jsonschema.validate(json.loads(text), SCORE_SCHEMA)
    for text in texts[2:4]:
        assert re.fullmatch(SCORE_REGEX, text), text
    for text in texts[4:6]:
        assert text in CHOICES
    assert texts[6].strip()
    stats = judge.last_batch
    assert (stats.requests, stats.model_calls, stats.cache_hits, stats.failures) == (7, 7, 0, 0)
    assert stats.prompt_tokens > 7 * 20 and stats.completion_tokens >= 7
    # --judge_batch_size 3: the seven requests went to LLM.chat in chunks of 3, 3 and 1
    assert [len(call) for call in engine_calls] == [3, 3, 1]
    assert [content for call in engine_calls for content in call] == [r.messages[-1]["content"] for r in CONSTRAINED]


def test_a_warm_rerun_makes_no_engine_call(judge, judge_spec, engine_calls):
    first = [response.text for response in judge.complete(CONSTRAINED)]  # cached by the test above or now
    del engine_calls[:]
    again = judge.complete(CONSTRAINED)
    assert [response.text for response in again] == first and all(response.cached for response in again)
    assert (judge.last_batch.model_calls, judge.last_batch.cache_hits) == (0, 7)
    assert engine_calls == []
    # a judge that would need an engine of its own (another context length) answers from the
    # cache without building one: the engine held is untouched
    engine = vllm_backend.current_engine()
    other = load_judge(judge_spec, JudgeOptions(batch_size=BATCH, max_tokens=16, max_model_len=1024))
    assert [response.text for response in other.complete(CONSTRAINED)] == first
    assert other.last_batch.model_calls == 0 and other.backend.llm is None
    assert vllm_backend.current_engine() is engine and engine_calls == []


def test_a_prompt_too_long_for_the_engine_fails_alone(judge, engine_calls):
    del engine_calls[:]
    long_prompt = "Revenue grew in every segment. " * 400  # ~2,800 tokens > max_model_len 2048
    requests = [ask("Say yes."), ask(long_prompt), ask("Say no.")]
    responses = judge.complete(requests)
    assert responses[0].text is not None and responses[2].text is not None
    assert responses[1].text is None and "max_model_len is 2048" in responses[1].error
    assert responses[1].prompt_tokens > 2048
    assert judge.last_batch.failures == 1
    assert [len(call) for call in engine_calls] == [2]  # never sent


def test_a_request_the_engine_rejects_fails_alone(judge, engine_calls):
    """A regex xgrammar cannot compile makes vLLM reject the request, and ``LLM.chat`` raise
    for its whole chunk: the chunk is sent again one request at a time, so only that one fails."""
    del engine_calls[:]
    requests = [ask("Answer yes or no: is 8% growth?"), ask("Write the score.", regex="Score: ([1-5]"), ask("Name a month.")]
    responses = judge.complete(requests)
    assert responses[0].text is not None and responses[2].text is not None
    assert responses[1].text is None and responses[1].error.startswith("vLLM: ")
    assert judge.last_batch.failures == 1
    # the chunk of three raised before generating; then one by one, the bad one raising again
    assert [len(call) for call in engine_calls] == [3, 1, 1, 1]


def _cache_rows(path: Path) -> int:
    cache = JudgeCache(path)
    try:
        return len(cache)
    finally:
        cache.close()


def test_a_run_killed_mid_batch_resumes_from_the_cache(judge, judge_spec, cache_path, tmp_path, engine_calls):
    """A child process sends 8 requests in chunks of 2 and is killed (SIGKILL, with its
    whole process group) once the first chunk is in the cache; the same batch then asks the
    engine only for what the child had not finished."""
    contents = [f"Summarise in one sentence: quarter {q} revenue was ${100 + 7 * q} million." for q in range(8)]
    requests = [ask(content) for content in contents]
    rows_before = _cache_rows(cache_path)
    child = subprocess.Popen(
        [sys.executable, str(HERE / "judge_child.py"), judge_spec, json.dumps({**OPTIONS, "batch_size": 2}),
         json.dumps(contents)],
        env={**os.environ, "LM_EVAL_FIN_CACHE": str(cache_path)}, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    deadline = time.monotonic() + 900
    try:
        while _cache_rows(cache_path) < rows_before + 2:
            assert child.poll() is None, f"the child ended before its first chunk:\n{child.stdout.read()[-3000:]}"
            assert time.monotonic() < deadline, "no chunk finished in 900 s"
            time.sleep(0.1)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        output = child.communicate()[0]
    assert child.returncode == -signal.SIGKILL
    finished = _cache_rows(cache_path) - rows_before
    assert 2 <= finished < 8, output[-3000:]  # killed mid-batch: some chunks done, not all
    started = re.findall(r"engine of \S+ started in ([\d.]+) s", output)
    figures.record("judge engine start, killed child process (s)", started[0] if started else "?")

    del engine_calls[:]
    responses = judge.complete(requests, desc="resume")
    assert all(response.text for response in responses)
    assert sum(response.cached for response in responses) == judge.last_batch.cache_hits == finished
    assert judge.last_batch.model_calls == 8 - finished
    resent = [content for call in engine_calls for content in call]
    assert sorted(resent) == sorted(c for c, r in zip(contents, responses) if not r.cached)
