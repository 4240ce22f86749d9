"""Several endpoints of one model behind one openai judge (``openai:URL1,URL2#model``): requests
spread over them, a failed endpoint taken out and tried again later. The choice of endpoint by
hand-computed cases, then end to end against real test servers (tests/openai_server.py, child
processes on loopback): two alive, one refusing connections, one dying half way and restarted
on its port during the batch."""

import threading
import time

import pytest

from lm_eval_fin.judge import JudgeOptions, JudgeRequest, load_judge
from lm_eval_fin.judge.endpoints import COOLDOWN_MAX_S, EndpointPool
from tests.openai_server import ServerProcess, closed_port

FAST = {"timeout_s": 5.0, "max_retries": 3, "backoff_s": 0.05, "backoff_max_s": 0.2, "concurrency": 2}


def ask(content):
    return JudgeRequest(messages=({"role": "user", "content": content},), max_tokens=4)


# --- the choice of endpoint ----------------------------------------------------------------


def test_the_least_busy_endpoint_in_service_takes_the_next_request():
    pool = EndpointPool(["a", "b", "c"], concurrency=2, backoff_s=1.0)
    a, b, c = pool.endpoints
    a.in_flight, b.in_flight, c.in_flight = 1, 0, 2
    assert pool.choose(now=0.0) is b
    b.in_flight = 2
    assert pool.choose(now=0.0) is a
    a.in_flight = 2
    assert pool.choose(now=0.0) is None  # all full: the request waits for one to finish
    # ties go round the list rather than always to the first
    a.in_flight = b.in_flight = c.in_flight = 0
    assert {pool.choose(now=0.0).url for _ in range(3)} == {"a", "b", "c"}


def test_a_failed_endpoint_is_out_for_a_growing_cooldown_then_on_trial():
    pool = EndpointPool(["a", "b"], concurrency=4, backoff_s=1.0)
    a, b = pool.endpoints
    start = time.monotonic()
    pool.failed(a, "connection refused")
    assert a.out_until - start == pytest.approx(1.0, abs=0.1)
    pool.failed(a, "connection refused")
    assert a.out_until - start == pytest.approx(2.0, abs=0.1)  # backoff_s * 2**k after k+1 failures
    pool.failed(a, "HTTP 429", retry_after=1000.0)
    assert a.out_until - start == pytest.approx(COOLDOWN_MAX_S, abs=0.1)  # Retry-After, capped
    assert pool.another_in_service(a) and not pool.another_in_service(b)
    assert pool.choose(now=time.monotonic()) is b
    # after the cooldown: back, but one request at a time until it answers
    later = a.out_until + 0.01
    b.in_flight = 4
    assert pool.choose(now=later) is a
    a.in_flight = 1
    assert pool.choose(now=later) is None
    pool.answered(a)
    assert (a.failures, a.capacity(4), pool.choose(now=later)) == (0, 4, a)
    # every endpoint out: requests go to them anyway (their own backoff paces them)
    pool.failed(a, "x")
    pool.failed(b, "y")
    a.in_flight = b.in_flight = 0
    assert pool.choose(now=time.monotonic()) in (a, b)


def test_one_endpoint_is_never_taken_out():
    pool = EndpointPool(["a"], concurrency=3, backoff_s=1.0)
    (a,) = pool.endpoints
    pool.failed(a, "connection refused")
    assert (a.failures, a.out_until, pool.outages) == (0, 0.0, 0)


# --- end to end ------------------------------------------------------------------------------


@pytest.fixture
def two_servers():
    with ServerProcess() as first, ServerProcess() as second:
        yield first, second


def test_requests_spread_over_two_servers(two_servers, judge_cache):
    first, second = two_servers
    judge = load_judge(f"openai:{first.base_url},{second.base_url}#m", JudgeOptions(**FAST))
    responses = judge.complete([ask(f"question {i}") for i in range(40)])
    assert [r.text for r in responses] == [f"echo: question {i}" for i in range(40)]
    calls = first.stats()["calls"], second.stats()["calls"]
    assert sum(calls) == 40 and min(calls) >= 10, calls
    assert (judge.last_batch.retries, judge.last_batch.failures) == (0, 0)


def test_an_endpoint_that_refuses_connections_is_taken_out(judge_cache, caplog):
    with ServerProcess() as alive:
        dead = f"http://127.0.0.1:{closed_port()}/v1"
        judge = load_judge(f"openai:{dead},{alive.base_url}#m", JudgeOptions(**FAST))
        responses = judge.complete([ask(f"question {i}") for i in range(40)])
        assert all(r.text == f"echo: question {i}" for i, r in enumerate(responses))
        assert alive.stats()["calls"] == 40
    stats = judge.last_batch
    assert stats.failures == 0
    # each request that met the dead endpoint was re-sent at once to the live one; the dead
    # one was tried again only after each cooldown, not by every request
    assert 1 <= stats.retries < 10 and stats.extra["endpoint_outages"] == stats.retries
    assert f"judge endpoint {dead} out of service" in caplog.text


def test_an_endpoint_back_from_an_outage_takes_requests_again(judge_cache):
    """The first server dies after 3 requests (its connections cut) and is started again on its
    port while the batch goes on; once its cooldown ends it is tried and serves again."""
    with ServerProcess() as steady:
        flaky = ServerProcess(die_after=3)
        port = flaky.port
        restarted = []

        def restart():
            time.sleep(0.6)
            flaky.process.wait()
            restarted.append(ServerProcess(port=port))

        judge = load_judge(f"openai:http://127.0.0.1:{port}/v1,{steady.base_url}#m", JudgeOptions(**FAST))
        helper = threading.Thread(target=restart)
        helper.start()
        try:
            # the steady server answers each in 0.1 s: the batch outlasts the outage
            responses = judge.complete([ask(f"[[sleep:0.1]] question {i}") for i in range(60)])
        finally:
            helper.join()
            flaky.stop()
        try:
            assert all(r.text for r in responses), [r.error for r in responses if not r.text]
            assert restarted[0].stats()["calls"] >= 1
            assert judge.last_batch.extra["endpoint_outages"] >= 1
        finally:
            restarted[0].stop()


def test_before_a_run_every_endpoint_must_answer_and_list_the_model():
    from lm_eval_fin.judge import parse_spec
    from lm_eval_fin.judge.preflight import judge_problem

    with ServerProcess(models=["m"]) as good, ServerProcess(models=["other"]) as wrong:
        dead = f"http://127.0.0.1:{closed_port()}/v1"
        assert judge_problem(parse_spec(f"openai:{good.base_url},{good.base_url}#m")) is None
        problem = judge_problem(parse_spec(f"openai:{good.base_url},{wrong.base_url}#m"))
        assert f"the server at {wrong.base_url} has no model 'm'; it serves other" in problem
        problem = judge_problem(parse_spec(f"openai:{good.base_url},{dead}#m"))
        assert f"no answer from {dead}" in problem and "start the server first" in problem
