"""The openai backend against real HTTP servers on 127.0.0.1 (tests/openai_server.py): one
serving the embedded model (in a thread), echo servers (child processes) with injected faults, a refused port, a server
killed half way through a batch, and a judge process killed half way through a run."""

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from lm_eval_fin.judge import JudgeOptions, JudgeRequest, complete_parsed, load_judge
from lm_eval_fin.judge.cache import JudgeCache
from tests.openai_server import ServerProcess, ServerThread, closed_port

# short waits so the fault tests stay fast; the logic is the same with the defaults
FAST = {"timeout_s": 1.5, "max_retries": 2, "backoff_s": 0.01, "backoff_max_s": 0.05, "concurrency": 4}


def ask(content, **fields):
    return JudgeRequest(messages=({"role": "user", "content": content},), **fields)


def parse_score(text):
    """A tolerant parser of a 1..5 score: JSON {"score": n} or the first digit 1..5."""
    try:
        value = json.loads(text)
        if isinstance(value, dict) and isinstance(value.get("score"), int) and 1 <= value["score"] <= 5:
            return value["score"]
    except ValueError:
        pass
    digits = [c for c in text if c in "12345"]
    return int(digits[0]) if digits else None


@pytest.fixture(scope="module")
def echo_server():
    """One instant echo server for the tests that count calls as differences."""
    with ServerProcess() as server:
        yield server


@pytest.fixture
def one_torch_thread():
    """Generation on one thread: on a small shared CI machine OpenMP threads spin against
    each other (and the client), which costs far more than they bring for a 135M model."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_model_server_round_trip(embedded_model_dir, judge_cache, one_torch_thread):
    requests = [
        ask("Rate from 1 to 5 how correct this is: 'Net income rose 5%.' Reply with JSON {\"score\": n}."),
        ask("Give one number from 1 to 5."),
    ]
    with ServerThread(model_dir=embedded_model_dir) as server:
        judge = load_judge(f"openai:{server.base_url}#smollm2", JudgeOptions(max_tokens=8, timeout_s=120))
        scores = complete_parsed(judge, requests, parse_score, max_attempts=2)
        first = judge.stats.model_calls
        calls = server.stats()["calls"]

        # every answer is a real generation, parsed or counted as a parse failure
        assert len(scores) == 2 and all(s is None or 1 <= s <= 5 for s in scores)
        assert judge.last_batch.parse_failures == sum(s is None for s in scores)
        assert judge.stats.prompt_tokens > 0 and judge.stats.completion_tokens > 0
        assert first == calls == 2 + judge.last_batch.extra["parse_retries"]

        unparsable = judge.last_batch.extra["parse_retries"] + judge.last_batch.parse_failures

        # warm re-run keeping cached answers: same answers, zero model calls
        keep = load_judge(f"openai:{server.base_url}#smollm2",
                          JudgeOptions(max_tokens=8, timeout_s=120, retry_unparsable=False))
        assert complete_parsed(keep, requests, parse_score, max_attempts=2) == scores
        assert keep.stats.model_calls == 0 and server.stats()["calls"] == calls

        # the same judge (this run) does not send its own answers again
        assert complete_parsed(judge, requests, parse_score, max_attempts=2) == scores
        assert judge.stats.model_calls == first and server.stats()["calls"] == calls

        # the next run, by default, sends a cached answer that does not parse again (this greedy
        # server repeats it); everything else comes from the cache
        rerun = load_judge(f"openai:{server.base_url}#smollm2", JudgeOptions(max_tokens=8, timeout_s=120))
        assert complete_parsed(rerun, requests, parse_score, max_attempts=2) == scores
        assert rerun.last_batch.extra["unparsable_resent"] == unparsable
        assert server.stats()["calls"] - calls == rerun.stats.model_calls == unparsable


def test_requests_carry_decoding_and_constraints(echo_server, judge_cache):
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
    requests = [ask("json", json_schema=schema), ask("choice", choice=("yes", "no")),
                ask("regex", regex="[1-5]"), ask("plain", max_tokens=7, seed=3)]
    judge = load_judge(f"openai:{echo_server.base_url}#judge-model", JudgeOptions(max_tokens=99, **FAST))
    judge.complete(requests)
    bodies = {body["messages"][0]["content"]: body for body in echo_server.stats()["bodies"]}
    assert bodies["json"]["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "judge_answer", "schema": schema}}
    assert bodies["choice"]["structured_outputs"] == {"choice": ["yes", "no"]}
    assert bodies["regex"]["structured_outputs"] == {"regex": "[1-5]"}
    assert {b["model"] for b in bodies.values()} == {"judge-model"}
    assert (bodies["json"]["max_tokens"], bodies["json"]["temperature"], bodies["json"]["seed"]) == (99, 0.0, 0)
    assert (bodies["plain"]["max_tokens"], bodies["plain"]["seed"]) == (7, 3)
    assert "response_format" not in bodies["plain"] and "structured_outputs" not in bodies["plain"]


def test_identical_requests_in_a_batch_are_sent_once(echo_server, judge_cache):
    judge = load_judge(f"openai:{echo_server.base_url}#m", JudgeOptions(**FAST))
    before = echo_server.stats()["calls"]
    texts = [r.text for r in judge.complete([ask("a"), ask("b"), ask("a"), ask("a", max_tokens=5)])]
    assert texts == ["echo: a", "echo: b", "echo: a", "echo: a"]
    assert (judge.last_batch.model_calls, judge.last_batch.cache_hits) == (3, 1)
    assert echo_server.stats()["calls"] - before == 3


def test_faults_in_one_batch_fail_only_their_own_requests(echo_server, judge_cache, caplog):
    contents = ["plain", "[[status:500]]", "[[flaky:2]] recovers", "[[sleep:4]] slow",
                "[[malformed]]", "[[status:400]] bad request", '[[reply:{"score": 4}]]']
    server = echo_server
    calls_at_start = server.stats()["calls"]
    judge = load_judge(f"openai:{server.base_url}#m", JudgeOptions(**FAST))
    with caplog.at_level(logging.INFO, logger="lm_eval_fin.judge"):
        responses = judge.complete([ask(c) for c in contents], desc="faults")
    by_content = dict(zip(contents, responses))
    stats = judge.last_batch

    assert by_content["plain"].text == "echo: plain"
    assert by_content['[[reply:{"score": 4}]]'].text == '{"score": 4}'
    assert by_content["[[flaky:2]] recovers"].text == "echo: [[flaky:2]] recovers"
    assert by_content["[[status:500]]"].error.startswith("HTTP 500")
    assert "after 3 attempts" in by_content["[[status:500]]"].error
    assert "timed out after 1.5s (after 3 attempts)" == by_content["[[sleep:4]] slow"].error
    assert by_content["[[malformed]]"].error.startswith("malformed reply")
    assert by_content["[[status:400]] bad request"].error.startswith("HTTP 400")
    assert "not retried" in by_content["[[status:400]] bad request"].error
    assert all(by_content[c].text is None for c in contents[1:6] if c != "[[flaky:2]] recovers")
    # retries: 2 each for 500, slow and malformed, 2 for flaky, none for 400
    assert (stats.retries, stats.failures, stats.model_calls) == (8, 4, 7)
    # server side: 3 + 3 + 3 + 3 attempts for the retried ones, 1 each for the rest
    assert server.stats()["calls"] - calls_at_start == 3 * 4 + 3
    # the batch summary is logged, and the failures with their first error
    messages = [record.getMessage() for record in caplog.records]
    assert any(m.startswith("faults [openai:") and "7 requests, 0 cache hits, 7 model calls" in m
               and "8 retries, 4 failures" in m for m in messages)
    assert any("4 of 7 judge requests failed for good; first error: " in m for m in messages)

    # a re-run asks again only for what failed; the successes come from the cache
    calls_before = server.stats()["calls"]
    judge.complete([ask(c) for c in contents])
    assert (judge.last_batch.cache_hits, judge.last_batch.model_calls) == (3, 4)
    assert server.stats()["calls"] - calls_before == 3 + 3 + 3 + 1


def test_refused_connections_fail_clearly_after_bounded_retries(judge_cache):
    judge = load_judge(f"openai:http://127.0.0.1:{closed_port()}/v1#m", JudgeOptions(**FAST))
    responses = judge.complete([ask(f"q{i}") for i in range(3)])
    assert all(r.text is None for r in responses)
    assert all(r.error.startswith("connection failed") and "after 3 attempts" in r.error for r in responses)
    assert (judge.last_batch.failures, judge.last_batch.retries) == (3, 6)
    assert len(JudgeCache(judge_cache)) == 0


def test_server_dying_half_way_keeps_what_finished(judge_cache):
    requests = [ask(f"question {i}") for i in range(40)]
    options = JudgeOptions(**{**FAST, "concurrency": 2})
    with ServerProcess(die_after=6) as server:
        port = server.base_url
        judge = load_judge(f"openai:{server.base_url}#m", options)
        responses = judge.complete(requests)
    done = [r for r in responses if r.text is not None]
    failed = [r for r in responses if r.text is None]
    assert len(done) == 6 and len(failed) == 34
    assert all(r.error for r in failed)
    # after max(8, 2 * concurrency) requests failed for good, the rest are not even sent
    # (but for one that was already in flight when the eighth failed)
    not_sent = sum(r.error.startswith("not sent") for r in failed)
    assert 34 - 8 - 1 <= not_sent <= 34 - 8
    assert len(JudgeCache(judge_cache)) == 6

    # the server comes back on the same address: the re-run sends only the 34 missing ones
    with ServerProcess(port=int(port.rsplit(":", 1)[1].split("/")[0])) as server:
        judge = load_judge(f"openai:{server.base_url}#m", options)
        again = judge.complete(requests)
        assert server.stats()["calls"] == 34
    assert [r.text for r in again] == [f"echo: question {i}" for i in range(40)]
    assert (judge.last_batch.cache_hits, judge.last_batch.model_calls) == (6, 34)


def test_rejected_requests_do_not_stop_the_batch(echo_server, judge_cache):
    """Requests the server rejects on their own merits (HTTP 400, a reply without text) are
    no sign of a server gone away: the good requests after them are still sent."""
    bad = [ask(f"[[status:400]] too long {i}") for i in range(5)] + [ask(f"[[notext]] {i}") for i in range(5)]
    good = [ask(f"good {i}") for i in range(10)]
    judge = load_judge(f"openai:{echo_server.base_url}#m", JudgeOptions(**{**FAST, "concurrency": 1}))
    responses = judge.complete(bad + good)
    assert [r.error.split(":")[0] for r in responses[:5]] == ["HTTP 400"] * 5
    assert all(r.text is None and "no text" in r.error for r in responses[5:10])
    assert [r.text for r in responses[10:]] == [f"echo: good {i}" for i in range(10)]
    assert (judge.last_batch.failures, judge.last_batch.retries) == (10, 0)


_JUDGE_RUN = textwrap.dedent(
    """
    import sys
    from lm_eval_fin.judge import JudgeOptions, JudgeRequest, load_judge
    judge = load_judge(sys.argv[1], JudgeOptions(concurrency=1))
    judge.complete([JudgeRequest(messages=({"role": "user", "content": f"[[sleep:0.05]] q{i}"},))
                    for i in range(200)])
    """
)


def test_killed_judge_process_keeps_finished_answers(judge_cache):
    with ServerProcess() as server:
        spec = f"openai:{server.base_url}#m"
        child = subprocess.Popen([sys.executable, "-c", _JUDGE_RUN, spec], env=dict(os.environ),
                                 stderr=subprocess.DEVNULL)
        cache = JudgeCache(judge_cache)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not judge_cache.exists() or len(cache) < 10):
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
        kept = len(cache)
        assert 10 <= kept < 200

        calls_before = server.stats()["calls"]
        judge = load_judge(spec, JudgeOptions(concurrency=8))
        responses = judge.complete([ask(f"[[sleep:0.05]] q{i}") for i in range(200)])
        assert all(r.text == f"echo: [[sleep:0.05]] q{i}" for i, r in enumerate(responses))
        assert judge.last_batch.cache_hits == kept
        # every answer not kept is asked again (the one in flight at the kill included)
        assert server.stats()["calls"] - calls_before == 200 - kept
