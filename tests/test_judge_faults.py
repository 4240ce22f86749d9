"""The judge under faults, end to end through ``load_judge("openai:http://127.0.0.1:PORT/v1#model")``
against the real test server (tests/openai_server.py, a child process): Retry-After, a trickling
and a hung server, the batch deadline, refusals, empty and unparsable replies, an unknown model,
a refused API key, a share of requests always failing, a server killed and restarted on its port,
escape sequences in server text, and several processes sharing one cache.

Timings are asserted as orderings (a retry came no earlier than its Retry-After) and, where the
bug being guarded against would take ten times as long or more, as generous upper bounds."""

import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import openai  # noqa: F401 - imported here, so not inside the first timed batch
import pytest

from lm_eval_fin.judge import (
    JudgeConfigError,
    JudgeOptions,
    JudgeRequest,
    complete_parsed,
    complete_parsed_answers,
    load_judge,
)
from lm_eval_fin.judge.cache import JudgeCache, cache_key
from lm_eval_fin.judge.core import resolve_request
from tests.openai_server import ServerProcess, fails_at_rate

FAST = {"timeout_s": 5.0, "max_retries": 2, "backoff_s": 0.01, "backoff_max_s": 0.05, "concurrency": 4}
CONTROL = [chr(c) for c in range(0x20) if chr(c) not in "\n\t"] + ["\x7f"] + [chr(c) for c in range(0x80, 0xA0)]


def ask(content, **fields):
    return JudgeRequest(messages=({"role": "user", "content": content},), **fields)


def parse_score(text):
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value["score"] if isinstance(value, dict) and value.get("score") in (1, 2, 3, 4, 5) else None


def options(**fields):
    return JudgeOptions(**{**FAST, **fields})


@pytest.fixture(scope="module")
def server():
    with ServerProcess() as running:
        yield running


def calls_since(server, before, settle_s=0.0):
    """Requests the server received since it had ``before``. A request the client gave up on
    may still sit in the server's backlog on a busy machine: ``settle_s`` waits until the
    count has stopped changing for that long."""
    calls = server.stats()["calls"]
    while settle_s:
        time.sleep(settle_s)
        calls, previous = server.stats()["calls"], calls
        if calls == previous:
            break
    return calls - before


# --- waits: Retry-After, whole-request timeout, batch deadline -----------------------------


def test_retry_after_sets_the_wait_capped_by_backoff_max(server, judge_cache):
    contents = [
        "[[flaky:2:429]][[retry_after:1]] seconds",  # 429, Retry-After in seconds
        "[[flaky:1:503]][[retry_after_date:2]] date",  # 503, Retry-After as an HTTP date
        "[[flaky:1:429]][[retry_after:30]] capped",  # asks 30 s, backoff_max_s is 2
        "[[flaky:1:500]][[retry_after:30]] not for 500",  # Retry-After counts on 429 and 503 only
    ]
    judge = load_judge(f"openai:{server.base_url}#m", options(backoff_s=0.01, backoff_max_s=2.0, max_retries=3))
    started = time.monotonic()
    responses = judge.complete([ask(c) for c in contents])
    elapsed = time.monotonic() - started
    assert [r.text for r in responses] == [f"echo: {c}" for c in contents]
    stats = judge.last_batch
    assert (stats.retries, stats.failures, stats.extra["retry_after_waits"]) == (5, 0, 4)

    arrivals = server.stats()["times"]
    gaps = {c: [b - a for a, b in itertools.pairwise(arrivals[c])] for c in contents}
    assert [len(gaps[c]) for c in contents] == [2, 1, 1, 1]
    assert min(gaps[contents[0]]) >= 0.99  # the second asked for, twice
    assert gaps[contents[1]][0] >= 0.99  # an HTTP date has whole seconds: "2 s from now" is 1 to 2 s away
    assert gaps[contents[2]][0] >= 2.0 and elapsed < 20  # backoff_max_s, not the 30 s asked for
    assert gaps[contents[3]][0] < 1.5  # the exponential backoff (0.01 s), not Retry-After


def test_a_trickling_or_hung_server_is_cut_at_timeout(server, judge_cache):
    """timeout_s bounds the whole request: a server sending one byte every half second never
    lets a read time out, and used to hold each attempt for minutes."""
    contents = ["[[trickle:0.5]] slow body", "[[hang]] no answer"]
    judge = load_judge(f"openai:{server.base_url}#m", options(timeout_s=1.0, max_retries=1))
    before = server.stats()["calls"]
    started = time.monotonic()
    responses = judge.complete([ask(c) for c in contents])
    elapsed = time.monotonic() - started
    assert [r.error for r in responses] == ["timed out after 1s (after 2 attempts)"] * 2
    assert (judge.last_batch.retries, judge.last_batch.failures) == (2, 2)
    assert calls_since(server, before, settle_s=0.5) == 4
    # two attempts of 1 s each; the trickled body alone is several hundred bytes (minutes)
    assert 2.0 <= elapsed < 30


def test_a_hung_server_costs_two_rounds_of_retries_not_the_whole_batch(server, judge_cache):
    """After 2 * concurrency requests in a row failed through their retries, the rest of the
    batch is not sent and the requests in flight are not retried: the batch's wall time is
    bounded by two rounds, whatever its size."""
    judge = load_judge(f"openai:{server.base_url}#m", options(timeout_s=0.5, max_retries=1, concurrency=4))
    before = server.stats()["calls"]
    responses = judge.complete([ask(f"[[hang]] hung {i}") for i in range(60)])
    calls = calls_since(server, before, settle_s=0.5)
    not_sent = sum(r.error.startswith("not sent") for r in responses)
    not_retried = sum("not retried: the 8 requests before it" in r.error for r in responses)
    assert judge.last_batch.failures == 60
    # two rounds of 4 requests, 2 attempts each; then at most 4 in flight, tried once
    assert 16 <= calls <= 16 + 4 and not_retried == calls - 16
    assert not_sent == 60 - 8 - not_retried


def test_batch_deadline_fails_what_is_not_finished_and_keeps_the_rest(server, judge_cache):
    plain = [f"plain {i}" for i in range(5)]
    hung = [f"[[hang]] {i}" for i in range(3)]
    # a deadline the five plain requests meet even on a crowded machine
    opts = options(timeout_s=60, max_retries=4, concurrency=2, batch_deadline_s=8.5)
    judge = load_judge(f"openai:{server.base_url}#m", opts)
    before = server.stats()["calls"]
    started = time.monotonic()
    responses = judge.complete([ask(c) for c in plain + hung])
    elapsed = time.monotonic() - started
    assert [r.text for r in responses[:5]] == [f"echo: {c}" for c in plain]
    assert all(r.text is None and "batch deadline of 8.5s" in r.error and "--judge_batch_deadline" in r.error
               for r in responses[5:])
    assert judge.last_batch.failures == 3
    # two hung requests were in flight when the deadline passed; the third was never sent
    assert calls_since(server, before, settle_s=0.5) == 5 + 2
    assert 8.5 <= elapsed < 40  # without the deadline: 5 attempts of 60 s
    cache = JudgeCache(judge_cache)
    assert len(cache) == 5

    # a re-run sends only the unfinished ones, and the deadline holds again
    before = server.stats()["calls"]
    again = load_judge(f"openai:{server.base_url}#m", opts).complete([ask(c) for c in plain + hung])
    assert [r.text for r in again[:5]] == [f"echo: {c}" for c in plain]
    assert calls_since(server, before, settle_s=0.5) == 2


# --- failures and parse failures --------------------------------------------------------------


def test_refusals_and_empty_replies_are_failures_unparsable_text_a_parse_failure(server, judge_cache):
    contents = ["[[refusal:I cannot grade this.]] a", "[[empty]] b", "[[reply:   ]] c",
                "[[reply:no score here]] d", '[[reply:{"score": 4}]] e']
    judge = load_judge(f"openai:{server.base_url}#m", options())
    before = server.stats()["calls"]
    answers = complete_parsed_answers(judge, [ask(c) for c in contents], parse_score, max_attempts=3)
    refusal, empty, blank, unparsable, good = answers
    assert refusal.failed and refusal.text is None and refusal.error.startswith("the judge refused: I cannot grade this.")
    assert empty.failed and "empty reply" in empty.error
    assert blank.failed and "empty reply" in blank.error
    assert unparsable.unparsed and unparsable.text == "no score here" and unparsable.error is None
    assert good.value == 4 and not good.failed
    stats = judge.last_batch
    assert (stats.failures, stats.parse_failures, stats.retries) == (3, 1, 0)
    # none of the failures is retried or re-asked; the unparsable answer is re-asked twice
    assert calls_since(server, before) == 3 + 3 + 1
    seen = server.stats()["seen"]
    assert seen[contents[0]] == seen[contents[1]] == seen[contents[2]] == 1 and seen[contents[3]] == 3

    # the next run: failures are sent again; the cached unparsable answers (3 attempts) too
    before = server.stats()["calls"]
    rerun = load_judge(f"openai:{server.base_url}#m", options())
    complete_parsed(rerun, [ask(c) for c in contents], parse_score, max_attempts=3)
    assert rerun.last_batch.extra["unparsable_resent"] == 3
    assert calls_since(server, before) == 3 + 3
    # within one run (one judge), answers it stored are not sent again: only the failures are
    before = server.stats()["calls"]
    complete_parsed(rerun, [ask(c) for c in contents], parse_score, max_attempts=3)
    assert rerun.last_batch.extra["unparsable_resent"] == 0 and calls_since(server, before) == 3
    # with retry_unparsable off, only the failures are sent again
    before = server.stats()["calls"]
    keep = load_judge(f"openai:{server.base_url}#m", options(retry_unparsable=False))
    values = complete_parsed(keep, [ask(c) for c in contents], parse_score, max_attempts=3)
    assert values == [None, None, None, None, 4]
    assert calls_since(server, before) == 3 and keep.last_batch.extra["unparsable_resent"] == 0


def test_a_reply_over_the_bound_fails_its_request_and_is_never_cached(server, judge_cache):
    """Issue 22, point 4: a server that ignores max_tokens (10 MB replies) no longer fills the cache."""
    # the default bound, 1 MB: two 3 MB replies leave the file small and count as failures
    huge = load_judge(f"openai:{server.base_url}#m", options())
    answers = complete_parsed_answers(huge, [ask(f"[[bytes:3000000]] {i}") for i in range(2)], parse_score)
    assert all(a.failed for a in answers) and huge.stats.failures == 2
    huge.close()
    assert judge_cache.stat().st_size < 1_000_000
    # a lower bound: the reply over it fails alone, the other is cached
    contents = ["[[bytes:5000]] big", '[[reply:{"score": 4}]] small']
    judge = load_judge(f"openai:{server.base_url}#m", options(max_reply_bytes=4096))
    big, small = complete_parsed_answers(judge, [ask(c) for c in contents], parse_score, max_attempts=3)
    assert big.failed and big.value is None and big.text is None
    assert "5000 bytes" in big.error and "--judge_max_reply_bytes" in big.error
    assert small.value == 4
    assert judge.last_batch.failures == 1 and judge.last_batch.extra["oversized_replies"] == 1
    keys = [cache_key(judge.spec, resolve_request(ask(c), judge.options)) for c in contents]
    assert list(JudgeCache(judge_cache).get_many(keys)) == [keys[1]]


def test_fixing_the_judge_and_re_running_recovers_unparsable_answers(judge_cache):
    requests = [ask(f"grade answer {i}") for i in range(4)]
    with ServerProcess(reply="Sure! Here is my grade: four.") as broken:
        port = broken.port
        spec = f"openai:{broken.base_url}#m"
        assert complete_parsed(load_judge(spec, options()), requests, parse_score, max_attempts=2) == [None] * 4
    cache = JudgeCache(judge_cache)
    key = cache_key(spec, resolve_request(requests[0], JudgeOptions()))
    assert cache.get(key).text == "Sure! Here is my grade: four."

    with ServerProcess(port=port, reply='{"score": 3}') as fixed:
        # --judge_retry_unparsable no: the cached replies stand, nothing is sent
        keep = load_judge(spec, options(retry_unparsable=False))
        assert complete_parsed(keep, requests, parse_score, max_attempts=2) == [None] * 4
        assert fixed.stats()["calls"] == 0
        # the default: each cached unparsable reply is asked again and replaced
        judge = load_judge(spec, options())
        assert complete_parsed(judge, requests, parse_score, max_attempts=2) == [3] * 4
        assert fixed.stats()["calls"] == 4 and judge.last_batch.extra["unparsable_resent"] == 4
        assert cache.get(key).text == '{"score": 3}'
        # and now the cache answers everything
        assert complete_parsed(judge, requests, parse_score, max_attempts=2) == [3] * 4
        assert fixed.stats()["calls"] == 4


def test_a_share_of_requests_failing_fails_exactly_those(judge_cache):
    contents = [f"question {i}" for i in range(30)]
    failing = [c for c in contents if fails_at_rate(c, 0.3)]
    assert 3 <= len(failing) <= 20  # the hash picks some, not all
    with ServerProcess(fail_rate=0.3) as server:
        judge = load_judge(f"openai:{server.base_url}#m", options(max_retries=1))
        responses = judge.complete([ask(c) for c in contents])
        assert [c for c, r in zip(contents, responses) if r.text is None] == failing
        assert all(r.error.startswith("HTTP 500") and "after 2 attempts" in r.error
                   for r in responses if r.text is None)
        stats = judge.last_batch
        assert (stats.failures, stats.retries, stats.model_calls) == (len(failing), len(failing), 30)
        assert server.stats()["calls"] == 30 + len(failing)
        assert len(JudgeCache(judge_cache)) == 30 - len(failing)
        # a re-run repeats exactly the failed requests; as every one of them fails, the batch
        # stops sending after 8 in a row (one at a time here, so exactly 8)
        before = server.stats()["calls"]
        again = load_judge(f"openai:{server.base_url}#m", options(max_retries=1, concurrency=1))
        responses = again.complete([ask(c) for c in contents])
        assert (again.last_batch.cache_hits, again.last_batch.model_calls) == (30 - len(failing), len(failing))
        assert again.last_batch.failures == len(failing)
        not_sent = [r.error for r in responses if r.text is None and r.error.startswith("not sent")]
        assert len(not_sent) == len(failing) - 8 and "the 8 requests before it failed for good" in not_sent[0]
        assert server.stats()["calls"] - before == 2 * 8


def test_a_server_killed_and_restarted_on_its_port_is_retried_through(judge_cache):
    contents = [f"question {i}" for i in range(24)]
    opts = options(concurrency=2, max_retries=12, backoff_s=0.1, backoff_max_s=0.4)
    first = ServerProcess(die_after=5)
    port, spec = first.port, f"openai:{first.base_url}#m"
    result = {}

    def run():
        judge = load_judge(spec, opts)
        result["responses"] = judge.complete([ask(c) for c in contents])
        result["stats"] = judge.last_batch

    worker = threading.Thread(target=run)
    worker.start()
    try:
        first.process.wait(timeout=30)  # it ends itself when request 6 arrives
    finally:
        first.stop()
    with ServerProcess(port=port) as second:
        worker.join(timeout=60)
        assert not worker.is_alive()
        assert [r.text for r in result["responses"]] == [f"echo: {c}" for c in contents]
        stats = result["stats"]
        assert stats.failures == 0 and stats.retries >= 2  # the two in flight at least
        # what the first server answered is not asked again; everything sent after its end is
        # (requests go out in order, two at a time: the first server saw at most question 0 to 6)
        seen = second.stats()["seen"]
        assert {f"question {i}" for i in range(6, 24)} <= set(seen) and len(seen) < 24


# --- configuration errors ---------------------------------------------------------------------


def test_an_unknown_model_stops_the_batch_with_one_clear_error(judge_cache):
    with ServerProcess(models=["served-a", "served-b"]) as server:
        judge = load_judge(f"openai:{server.base_url}#nosuch", options(concurrency=4))
        with pytest.raises(JudgeConfigError) as info:
            judge.complete([ask(f"q{i}") for i in range(20)])
        message = str(info.value)
        assert message == (
            f"the server at {server.base_url} has no model 'nosuch'; models it serves: ['served-a', 'served-b'] "
            "(GET /models); name one of them after '#' in the judge spec"
        )
        assert "again" not in message and "\n" not in message
        # not one retry per request: at most the requests already in flight were sent
        assert server.stats()["calls"] <= 4 and judge.last_batch.retries == 0
        assert judge.last_batch.failures == 20 and message in judge.last_error
        # the served model works
        good = load_judge(f"openai:{server.base_url}#served-b", options())
        assert good.complete([ask("q0")])[0].text == "echo: q0"


def test_a_refused_api_key_stops_the_batch(judge_cache, monkeypatch):
    with ServerProcess(api_key="sk-right") as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
        judge = load_judge(f"openai:{server.base_url}#m", options())
        with pytest.raises(JudgeConfigError, match=r"refused the API key \(HTTP 401: .*\); set OPENAI_API_KEY"):
            judge.complete([ask(f"q{i}") for i in range(10)])
        assert server.stats()["calls"] <= 4
        monkeypatch.setenv("OPENAI_API_KEY", "sk-right")
        assert load_judge(f"openai:{server.base_url}#m", options()).complete([ask("q")])[0].text == "echo: q"


# --- terminal safety --------------------------------------------------------------------------


def test_server_text_reaches_errors_and_logs_without_control_characters(server, judge_cache, caplog):
    hostile = "\x1b[2J\x1b]0;owned\x07red\x1b[31m alert\x9b1;1H\x00 \u202eevil"
    contents = [f"[[status:400]][[error:{hostile}]]", f"[[refusal:{hostile}]] r", "[[malformed]]"]
    judge = load_judge(f"openai:{server.base_url}#m", options(max_retries=1))
    with caplog.at_level(logging.INFO, logger="lm_eval_fin.judge"):
        responses = judge.complete([ask(c) for c in contents])
    errors = [r.error for r in responses]
    assert errors[0].startswith("HTTP 400: red alert") and "evil" in errors[0]
    assert errors[1].startswith("the judge refused: red alert")
    assert errors[2].startswith("malformed reply: ") and errors[2].count("malformed reply") == 1
    logged = " ".join(record.getMessage() for record in caplog.records) + judge.last_error
    for text in [*errors, logged]:
        assert not any(c in text for c in CONTROL) and "\u202e" not in text


# --- several processes on one cache ----------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from lm_eval_fin.judge import JudgeOptions, JudgeRequest, complete_parsed, load_judge
    spec, sleep, concurrency, count, reply, barrier = sys.argv[1:7]
    judge = load_judge(spec, JudgeOptions(concurrency=int(concurrency)))
    if barrier:  # both judges loaded (one run) before either sends
        Path(barrier, str(time.monotonic_ns())).touch()
        while len(list(Path(barrier).iterdir())) < 2:
            time.sleep(0.01)
    tag = f"[[reply:{reply}]]" if reply else ""
    requests = [JudgeRequest(messages=({"role": "user", "content": f"[[sleep:{sleep}]]{tag} q{i}"},))
                for i in range(int(count))]
    if reply:
        complete_parsed(judge, requests, lambda text: None, max_attempts=2)
    else:
        responses = judge.complete(requests)
        assert [r.text for r in responses] == [f"echo: {r.messages[0]['content']}" for r in requests], responses
    print(json.dumps(judge.stats.as_dict()))
    """
)


def _child(spec, sleep, concurrency, count, reply="", barrier=""):
    return subprocess.Popen([sys.executable, "-c", _CHILD, spec, str(sleep), str(concurrency), str(count), reply,
                             str(barrier)],
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(children):
    outputs = [child.communicate(timeout=120) for child in children]
    assert [child.returncode for child in children] == [0] * len(children), [err[-2000:] for _, err in outputs]
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]


def test_two_processes_on_one_cache_send_each_prompt_once(judge_cache, tmp_path):
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    with ServerProcess() as server:
        spec = f"openai:{server.base_url}#m"
        stats = _finish([_child(spec, 0.1, 2, 30, barrier=barrier) for _ in range(2)])
        # together they sent each prompt once; what one sent, the other read from the cache
        assert server.stats()["calls"] == 30
        assert sum(s["model_calls"] for s in stats) == 30
        assert all(s["model_calls"] + s["cache_hits"] == 30 for s in stats)
        # how many answers one process waited for while the other held their claims depends on
        # how the two interleave (none when one finishes first), so it is not asserted
        assert JudgeCache(judge_cache).claims() == 0  # every claim released


def test_two_processes_do_not_resend_each_others_unparsable_answers(judge_cache, tmp_path):
    """Answers another process of the same run stored are not stale: with retry_unparsable on,
    neither process sends the other's unparsable answers again."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    with ServerProcess() as server:
        spec = f"openai:{server.base_url}#m"
        stats = _finish([_child(spec, 0.05, 2, 12, reply="junk", barrier=barrier) for _ in range(2)])
        assert server.stats()["calls"] == 12 * 2  # each prompt, first ask and re-ask, once
        assert sum(s["model_calls"] for s in stats) == 24
        assert all(s["parse_failures"] == 12 and s["extra"]["unparsable_resent"] == 0 for s in stats)


def test_claims_of_a_killed_process_are_taken_over(judge_cache):
    with ServerProcess() as server:
        spec = f"openai:{server.base_url}#m"
        child = _child(spec, 0.1, 1, 40)
        cache = JudgeCache(judge_cache)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not judge_cache.exists() or len(cache) < 3):
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        child.stderr.close()
        kept = len(cache)
        assert 3 <= kept < 40 and cache.claims() == 40  # it had claimed the whole batch

        before = server.stats()["calls"]
        judge = load_judge(spec, JudgeOptions(concurrency=8))
        responses = judge.complete([ask(f"[[sleep:0.1]] q{i}") for i in range(40)])
        assert all(r.text == f"echo: [[sleep:0.1]] q{i}" for i, r in enumerate(responses))
        assert judge.last_batch.cache_hits == kept and judge.last_batch.model_calls == 40 - kept
        assert server.stats()["calls"] - before == 40 - kept
        assert cache.claims() == 0
