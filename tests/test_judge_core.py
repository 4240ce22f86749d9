"""Judge specs, request resolution, the sqlite cache (keys, WAL, several processes),
complete_parsed's re-asking and counting, and the vllm backend's gate."""

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lm_eval_fin.judge import (
    BatchStats,
    JudgeOptions,
    JudgeRequest,
    JudgeResponse,
    JudgeSpecError,
    complete_parsed,
    load_judge,
    parse_spec,
)
from lm_eval_fin.judge.cache import CachedAnswer, JudgeCache, cache_key, default_cache_path
from lm_eval_fin.judge.core import RETRY_TEMPERATURE, CachedJudge, resolve_request
from lm_eval_fin.judge.openai_backend import request_payload, retry_after_seconds
from lm_eval_fin.text.cleantext import one_line, printable

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def ask(content, **fields):
    return JudgeRequest(messages=({"role": "user", "content": content},), **fields)


# --- specs -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, backend, model, base_url, gguf",
    [
        ("vllm:Qwen/Qwen2.5-7B-Instruct", "vllm", "Qwen/Qwen2.5-7B-Instruct", None, None),
        ("openai:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-7B-Instruct", "openai", "Qwen/Qwen2.5-7B-Instruct",
         "http://127.0.0.1:8000/v1", None),
        ("openai:https://api.openai.com/v1/#gpt-4o-mini", "openai", "gpt-4o-mini", "https://api.openai.com/v1", None),
        ("hf:HuggingFaceTB/SmolLM2-135M-Instruct", "hf", "HuggingFaceTB/SmolLM2-135M-Instruct", None, None),
        ("hf:/models/smol#SmolLM2.Q4_1.gguf", "hf", "/models/smol", None, "SmolLM2.Q4_1.gguf"),
        ("  hf:/m  ", "hf", "/m", None, None),
    ],
)
def test_spec_forms(spec, backend, model, base_url, gguf):
    parsed = parse_spec(spec)
    assert (parsed.backend, parsed.model, parsed.base_url, parsed.gguf_file) == (backend, model, base_url, gguf)
    assert parse_spec(str(parsed)) == parsed  # the canonical string round-trips


def test_several_endpoints_of_one_model_are_one_judge_in_any_order():
    a = parse_spec("openai:http://10.0.0.2:8000/v1/, http://10.0.0.1:8000/v1#Qwen/Qwen2.5-7B-Instruct")
    b = parse_spec("openai:http://10.0.0.1:8000/v1,http://10.0.0.2:8000/v1,http://10.0.0.1:8000/v1#Qwen/Qwen2.5-7B-Instruct")
    assert a == b and a.base_urls == ("http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1")
    assert str(a) == "openai:http://10.0.0.1:8000/v1,http://10.0.0.2:8000/v1#Qwen/Qwen2.5-7B-Instruct"
    # the spec string is the cache key's judge: one address alone is another judge
    assert str(parse_spec("openai:http://10.0.0.1:8000/v1#Qwen/Qwen2.5-7B-Instruct")) != str(a)


def test_each_backend_module_registers_its_kind(judge_cache):
    """The kinds come from the backend modules (no list of names elsewhere); a kind registered
    by other code is parsed, built and checked like the shipped ones."""
    from lm_eval_fin.judge import spec as spec_module

    assert list(spec_module._KINDS) == ["vllm", "openai", "hf"]
    built = []

    class Echo:
        def __init__(self, parsed, options):
            built.append((parsed, options))

        def run(self, requests, sink):
            sink.done_many([(i, JudgeResponse(r.messages[-1]["content"])) for i, r in enumerate(requests)])

        def close(self):
            pass

    kind = spec_module.BackendKind(
        name="echo", form="echo:<name>", parse=lambda rest: spec_module.JudgeSpec("echo", rest) if rest else None,
        build=Echo, problem=lambda parsed: None, ready="always")
    spec_module.register_backend(kind)
    try:
        assert "echo:<name>" in spec_module.spec_forms()
        with pytest.raises(JudgeSpecError, match="expected echo:<name>"):
            parse_spec("echo:")
        judge = load_judge("echo:x", JudgeOptions(max_tokens=4))
        with judge:
            assert judge.complete([ask("hello")])[0].text == "hello"
        assert built[0][0] == parse_spec("echo:x")
    finally:
        del spec_module._KINDS["echo"]


@pytest.mark.parametrize(
    "spec, hint",
    [
        ("", "expected vllm:<model>"),
        ("Qwen/Qwen2.5-7B-Instruct", "expected vllm:<model>"),
        ("tgi:http://x#m", "expected vllm:<model>"),
        ("vllm:", "vllm:<model>"),
        ("openai:http://127.0.0.1:8000/v1", "openai:<base url>[,<base url>...]#<model>"),
        ("openai:127.0.0.1:8000#m", "openai:<base url>[,<base url>...]#<model>"),
        ("openai:http://a:1/v1,b:2/v1#m", "openai:<base url>[,<base url>...]#<model>"),
        ("hf:", "hf:<model id or path>"),
        ("hf:/models/smol#", "hf:<model id or path>"),
    ],
)
def test_bad_specs_say_what_is_expected(spec, hint):
    with pytest.raises(JudgeSpecError, match="bad judge spec") as info:
        parse_spec(spec)
    assert hint in str(info.value)
    with pytest.raises(ValueError):
        load_judge(spec or "x")


def test_load_judge_reads_the_environment(monkeypatch, judge_cache):
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE", raising=False)
    assert load_judge() is None
    monkeypatch.setenv("LM_EVAL_FIN_JUDGE", "openai:http://127.0.0.1:9/v1#m")
    judge = load_judge()
    assert judge.spec == "openai:http://127.0.0.1:9/v1#m"
    assert judge.cache.path == judge_cache == default_cache_path()


# --- resolution and keys -----------------------------------------------------------------


def test_unset_decoding_parameters_take_the_options():
    options = JudgeOptions(max_tokens=77, temperature=0.0, seed=5)
    resolved = resolve_request(ask("q"), options)
    assert (resolved.max_tokens, resolved.temperature, resolved.seed) == (77, 0.0, 5)
    own = resolve_request(ask("q", max_tokens=9, temperature=0.3, seed=1), options)
    assert (own.max_tokens, own.temperature, own.seed) == (9, 0.3, 1)


def test_a_re_ask_samples_with_a_derived_seed():
    options = JudgeOptions(seed=5)
    first = resolve_request(ask("q"), options)
    retry = resolve_request(ask("q", attempt=2), options)
    assert (first.temperature, first.seed) == (0.0, 5)
    assert (retry.temperature, retry.seed) == (RETRY_TEMPERATURE, 7)
    assert resolve_request(ask("q", temperature=0.2, attempt=1), options).temperature == 0.2


def test_cache_key_changes_with_every_part():
    base = resolve_request(ask("q", json_schema={"type": "object"}), JudgeOptions())
    variants = {
        "model": ("openai:http://h/v1#other", base),
        "content": ("hf:m", dataclasses.replace(base, messages=({"role": "user", "content": "q2"},))),
        "role": ("hf:m", dataclasses.replace(base, messages=({"role": "system", "content": "q"},))),
        "extra turn": ("hf:m", dataclasses.replace(base, messages=base.messages + ({"role": "user", "content": "q"},))),
        "max_tokens": ("hf:m", dataclasses.replace(base, max_tokens=base.max_tokens + 1)),
        "temperature": ("hf:m", dataclasses.replace(base, temperature=0.5)),
        "seed": ("hf:m", dataclasses.replace(base, seed=1)),
        "schema": ("hf:m", dataclasses.replace(base, json_schema={"type": "array"})),
        "regex": ("hf:m", dataclasses.replace(base, json_schema=None, regex="[0-9]")),
        "choice": ("hf:m", dataclasses.replace(base, json_schema=None, choice=("a", "b"))),
        "choice order": ("hf:m", dataclasses.replace(base, json_schema=None, choice=("b", "a"))),
        "no constraint": ("hf:m", dataclasses.replace(base, json_schema=None)),
        "attempt": ("hf:m", dataclasses.replace(base, attempt=1)),
    }
    keys = {name: cache_key(spec, request) for name, (spec, request) in variants.items()}
    keys["base"] = cache_key("hf:m", base)
    assert len(set(keys.values())) == len(keys)
    # equal requests are one key: integer and float temperatures, a rebuilt message dict
    same = dataclasses.replace(base, temperature=0, messages=({"content": "q", "role": "user"},))
    assert cache_key("hf:m", same) == keys["base"]


def test_payload_carries_the_constraint():
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}}
    resolved = resolve_request(ask("q", json_schema=schema), JudgeOptions())
    payload = request_payload("m", resolved)
    assert payload["response_format"] == {"type": "json_schema", "json_schema": {"name": "judge_answer", "schema": schema}}
    assert (payload["temperature"], payload["seed"], payload["max_tokens"]) == (0.0, 0, 1024)
    regex = request_payload("m", resolve_request(ask("q", regex=r"\d"), JudgeOptions()))
    assert regex["extra_body"] == {"structured_outputs": {"regex": r"\d"}}
    choice = request_payload("m", resolve_request(ask("q", choice=("yes", "no")), JudgeOptions()))
    assert choice["extra_body"] == {"structured_outputs": {"choice": ["yes", "no"]}}


@pytest.mark.parametrize(
    "request_, message",
    [
        (JudgeRequest(messages=()), "no messages"),
        (JudgeRequest(messages=({"role": "user"},)), "'role' and 'content'"),
        (ask("q", regex="x", choice=("a",)), "at most one"),
        (ask("q", choice=()), "at least one option"),
    ],
)
def test_malformed_requests_fail_before_anything_is_sent(request_, message, judge_cache):
    judge = load_judge("openai:http://127.0.0.1:9/v1#m")
    with pytest.raises(ValueError, match=message):
        judge.complete([ask("fine"), request_])
    assert judge.stats.requests == 0


# --- the cache ---------------------------------------------------------------------------


def test_cache_is_wal_and_persists(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = JudgeCache(path)
    cache.put("hf:m", "k1", CachedAnswer("one", 3, 1))
    assert cache.journal_mode() == "wal"
    assert (tmp_path / "c.sqlite-wal").exists()
    cache.close()
    reopened = JudgeCache(path)
    assert reopened.get("k1") == CachedAnswer("one", 3, 1)
    assert reopened.get("missing") is None


def test_batch_lookup_beyond_one_statement(tmp_path):
    cache = JudgeCache(tmp_path / "c.sqlite")
    cache.put_many("hf:m", [(f"k{i}", CachedAnswer(f"t{i}", i, 1)) for i in range(0, 2500, 2)])
    found = cache.get_many([f"k{i}" for i in range(2500)])
    assert len(found) == 1250
    assert found["k2498"].text == "t2498" and "k2499" not in found


_WRITER = textwrap.dedent(
    """
    import sys
    from lm_eval_fin.judge.cache import CachedAnswer, JudgeCache
    cache = JudgeCache(sys.argv[1])
    name = sys.argv[2]
    for i in range(300):
        cache.put("hf:m", f"{name}-{i}", CachedAnswer(f"{name} {i}", 1, 1))
        cache.put("hf:m", f"shared-{i % 50}", CachedAnswer(f"shared {i % 50}", 1, 1))
    """
)


def test_two_processes_write_one_cache(tmp_path):
    path = tmp_path / "shared.sqlite"
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), name], stderr=subprocess.PIPE, text=True)
        for name in ("a", "b")
    ]
    errors = [writer.communicate(timeout=120)[1] for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0], errors
    cache = JudgeCache(path)
    assert len(cache) == 650
    found = cache.get_many([f"a-{i}" for i in range(300)] + [f"b-{i}" for i in range(300)])
    assert len(found) == 600 and found["b-299"].text == "b 299"


# --- complete_parsed with a deterministic judge -------------------------------------------


class ScriptedJudge:
    """Answers each request by (content, attempt) from a script; None text is a failure."""

    def __init__(self, script):
        self.script = script
        self.batches = []

    def complete(self, requests, desc="judge"):
        self.batches.append([(r.messages[0]["content"], r.attempt) for r in requests])
        return [JudgeResponse(self.script.get((r.messages[0]["content"], r.attempt), "junk"))
                for r in requests]


def parse_score(text):
    if text == "boom":
        raise RuntimeError("parser bug")
    return int(text) if text.strip().isdigit() else None


def test_complete_parsed_re_asks_only_the_unparsable():
    judge = ScriptedJudge({("a", 0): "1", ("b", 0): "junk", ("b", 1): "2", ("c", 0): "boom",
                           ("d", 0): None})
    values = complete_parsed(judge, [ask("a"), ask("b"), ask("c"), ask("d")], parse_score, max_attempts=3)
    assert values == [1, 2, None, None]
    # attempt 0: everything; 1: b and c; 2: c only. d failed in transport: not re-asked.
    assert judge.batches == [[("a", 0), ("b", 0), ("c", 0), ("d", 0)], [("b", 1), ("c", 1)], [("c", 2)]]
    assert judge.last_batch.parse_failures == 1
    assert judge.last_batch.extra["parse_retries"] == 3


def test_complete_parsed_single_attempt_and_empty_batch():
    judge = ScriptedJudge({("a", 0): "junk"})
    assert complete_parsed(judge, [ask("a")], parse_score, max_attempts=1) == [None]
    assert len(judge.batches) == 1 and judge.last_batch.parse_failures == 1
    assert complete_parsed(judge, [], parse_score) == []
    with pytest.raises(ValueError):
        complete_parsed(judge, [ask("a")], parse_score, max_attempts=0)


def test_complete_parsed_with_one_parser_per_request():
    # "3" is readable for a list of 5 but not for a list of 2, so only b is re-asked
    def within(n):
        return lambda text: int(text) if text.isdigit() and int(text) <= n else None

    judge = ScriptedJudge({("a", 0): "3", ("b", 0): "3", ("b", 1): "2"})
    values = complete_parsed(judge, [ask("a"), ask("b")], [within(5), within(2)], max_attempts=2)
    assert values == [3, 2]
    assert judge.batches == [[("a", 0), ("b", 0)], [("b", 1)]]
    with pytest.raises(ValueError, match="2 parsers for 1 requests"):
        complete_parsed(judge, [ask("a")], [within(1), within(2)])


def test_batch_stats_accumulate():
    total = BatchStats()
    total.add(BatchStats(requests=3, cache_hits=1, retries=2, wall_time_s=0.5, extra={"n": 1, "tag": "x"}))
    total.add(BatchStats(requests=2, parse_failures=1, wall_time_s=0.25, extra={"n": 2}))
    assert (total.requests, total.cache_hits, total.retries, total.parse_failures) == (5, 1, 2, 1)
    assert total.wall_time_s == 0.75 and total.extra == {"n": 3, "tag": "x"}
    assert "5 requests, 1 cache hits" in total.summary() and "parse failures" in total.summary()
    json.dumps(total.as_dict())


# --- vllm ---------------------------------------------------------------------------------


def test_vllm_backend_without_vllm_says_how_to_get_it(judge_cache, monkeypatch):
    # where vLLM is installed, hide it: importing a name that sys.modules maps to None fails
    monkeypatch.setitem(sys.modules, "vllm", None)
    judge = load_judge("vllm:some/model")  # loading is lazy: nothing fails yet
    with pytest.raises(RuntimeError, match=r"needs vLLM, which is not installed") as error:
        judge.complete([ask("q")])
    assert "pip install 'lm-eval-fin[vllm]'" in str(error.value)  # GPU
    assert "make install-vllm" in str(error.value)  # CPU
    assert judge.last_batch.failures == 1


def test_a_command_with_a_vllm_judge_names_the_install_command(tmp_path, judge_cache):
    """``lm-eval-fin rerank --judge vllm:...`` without vLLM (hidden in the child where it is
    installed) stops before any work with one line naming the install commands, no traceback."""
    from lm_eval_fin.plumbing import paths

    command = "import sys; sys.modules['vllm'] = None; from lm_eval_fin.cli import main; sys.exit(main())"
    done = subprocess.run(
        [sys.executable, "-c", command, "rerank", "--data", str(paths.data_path("finagentbench_demo")),
         "--judge", "vllm:some/model", "--variant", "llm", "--limit", "1"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    (last,) = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert "judge vllm:some/model: vLLM is not installed" in last
    assert "make install-vllm" in last and "lm-eval-fin[vllm]" in last


class FakeVLLMEngine:
    """Stands in for ``vllm.LLM`` where vLLM cannot run: the embedded model's real tokenizer,
    ``llm_engine.model_config.max_model_len``, and a ``chat`` that, like vLLM's, raises for the
    whole batch when one prompt is longer than the context (or holds "reject")."""

    def __init__(self, tokenizer, max_model_len):
        self.tokenizer = tokenizer
        self.llm_engine = SimpleNamespace(model_config=SimpleNamespace(max_model_len=max_model_len))
        self.batches = []

    def get_tokenizer(self):
        return self.tokenizer

    def chat(self, conversations, sampling_params, use_tqdm=True):
        assert len(sampling_params) == len(conversations) and not use_tqdm
        self.batches.append(len(conversations))
        limit = self.llm_engine.model_config.max_model_len
        outputs = []
        for messages in conversations:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            length = len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            if length > limit:
                raise ValueError(f"The decoder prompt (length {length}) is longer than the maximum model length of {limit}.")
            if "reject" in messages[-1]["content"]:
                raise ValueError("the engine rejects this request")
            outputs.append(SimpleNamespace(prompt_token_ids=[0] * length, outputs=[
                SimpleNamespace(text=f"ok: {messages[-1]['content']}", token_ids=[1, 2])]))
        return outputs


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed: tests_vllm/ runs these cases on a real engine")
def test_vllm_backend_fails_too_long_and_rejected_prompts_alone(embedded_model_dir, judge_cache, monkeypatch):
    from transformers import AutoTokenizer

    from lm_eval_fin.judge.vllm_backend import VLLMBackend

    backend = VLLMBackend(parse_spec("vllm:fake"), JudgeOptions(batch_size=4))
    backend.llm = FakeVLLMEngine(AutoTokenizer.from_pretrained(embedded_model_dir), max_model_len=64)
    monkeypatch.setattr(backend, "sampling_params", lambda request: request)  # no vLLM to build them
    judge = CachedJudge(parse_spec("vllm:fake"), backend, JudgeOptions(batch_size=4))
    long_text = "revenue " * 100
    contents = ["a", long_text, "b", "reject me", long_text + "again", "c"]
    responses = judge.complete([ask(c) for c in contents])
    texts = [r.text for r in responses]
    assert texts == ["ok: a", None, "ok: b", None, None, "ok: c"]
    assert "max_model_len is 64" in responses[1].error and responses[1].prompt_tokens > 64
    assert "not sent" in responses[4].error
    assert responses[3].error == "vLLM: ValueError: the engine rejects this request"
    # the too-long ones never reach the engine; the chunk with the rejected one is re-sent one by one
    assert backend.llm.batches == [4, 1, 1, 1, 1]
    assert (judge.last_batch.failures, judge.last_batch.model_calls) == (3, 6)
    # the answers are cached: a re-run sends only the three that failed
    judge.complete([ask(c) for c in contents])
    assert judge.last_batch.cache_hits == 3 and backend.llm.batches[5:] == [1, 1]


# --- options: the new ones, bools, flags --------------------------------------------------


def test_bool_and_optional_float_options_are_checked():
    from lm_eval_fin.judge.options import check_option, check_options, options_from_metadata

    for text, expected in [("no", False), ("YES", True), ("false", False), ("on", True), ("0", False), (1, True),
                           (False, False)]:
        assert check_option("retry_unparsable", text) is expected
    for bad in ["maybe", 2, None, 0.5]:
        with pytest.raises(ValueError, match="retry_unparsable: expected yes or no"):
            check_option("retry_unparsable", bad)
    assert check_options({"batch_deadline_s": "90", "max_model_len": None}) == {"batch_deadline_s": 90.0,
                                                                                "max_model_len": None}
    assert check_option("batch_deadline_s", None) is None
    for name, bad, message in [("batch_deadline_s", 0, "above 0"), ("timeout_s", -1, "above 0"),
                               ("max_retries", -1, "not be negative"), ("batch_deadline_s", True, "a number"),
                               ("max_retries", 1.5, "an integer")]:
        with pytest.raises(ValueError, match=message):
            check_option(name, bad)
    assert options_from_metadata({"judge_retry_unparsable": "false", "judge_batch_deadline_s": 30}) == {
        "retry_unparsable": False, "batch_deadline_s": 30.0}


def test_the_new_flags(monkeypatch):
    import argparse

    from lm_eval_fin.judge.options import add_judge_arguments, options_from_args

    monkeypatch.delenv("LM_EVAL_FIN_JUDGE_OPTIONS", raising=False)
    parser = argparse.ArgumentParser()
    add_judge_arguments(parser)
    options = options_from_args(parser.parse_args(["--judge_retry_unparsable", "no", "--judge_batch_deadline", "600"]))
    assert (options.retry_unparsable, options.batch_deadline_s) == (False, 600.0)
    defaults = options_from_args(parser.parse_args([]))
    assert (defaults.retry_unparsable, defaults.batch_deadline_s) == (True, None)
    monkeypatch.setenv("LM_EVAL_FIN_JUDGE_OPTIONS", '{"retry_unparsable": false}')
    assert options_from_args(parser.parse_args([])).retry_unparsable is False
    assert options_from_args(parser.parse_args(["--judge_retry_unparsable", "yes"])).retry_unparsable is True
    with pytest.raises(SystemExit):
        parser.parse_args(["--judge_retry_unparsable", "perhaps"])


# --- terminal-safe text, Retry-After ---------------------------------------------------------

_UNSAFE = set(map(chr, [*range(0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F),
                        *range(0x2066, 0x206A)]))


@pytest.mark.parametrize(
    "text, expected",
    [
        ("plain text, ünïcode €", "plain text, ünïcode €"),
        ("\x1b[31mred\x1b[0m", "red"),
        ("a\x1b]0;window title\x07b", "ab"),
        ("link \x1b]8;;http://x\x1b\\here\x1b]8;;\x1b\\", "link here"),
        ("c1 csi \x9b2J done", "c1 csi  done"),
        ("nul\x00 bell\x07 del\x7f", "nul bell del"),
        ("keeps\ttab\nand newline", "keeps\ttab\nand newline"),
        ("lone \ud800 surrogate", "lone \ufffd surrogate"),
        ("bidi \u202eoverride\u2066", "bidi override"),
    ],
)
def test_printable_removes_what_a_terminal_would_act_on(text, expected):
    assert printable(text) == expected


@given(st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x2100)))
def test_printable_never_lets_a_control_character_through(text):
    clean = printable(text)
    assert not (set(clean) & _UNSAFE) and "\x1b" not in clean
    clean.encode("utf-8")  # no lone surrogates either
    line = one_line(text, 50)
    assert "\n" not in line and len(line) <= 50


def test_retry_after_values():
    import email.utils

    now = 1_700_000_000.0
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after": "1.5"}) == 1.5
    assert retry_after_seconds({"retry-after": "-4"}) == 0.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": email.utils.formatdate(now + 7, usegmt=True)}, now=now) == 7.0
    assert retry_after_seconds({"retry-after": email.utils.formatdate(now - 60, usegmt=True)}, now=now) == 0.0
    for headers in [None, {}, {"retry-after": "soon"}, {"retry-after": ""}]:
        assert retry_after_seconds(headers) is None


# --- unusable cache files ----------------------------------------------------------------------


def _complete_with_cache(path, monkeypatch):
    monkeypatch.setenv("LM_EVAL_FIN_CACHE", str(path))
    judge = load_judge("openai:http://127.0.0.1:9/v1#m")
    return judge.complete([ask("q")])


def test_a_file_that_is_not_sqlite_is_a_clear_cache_error(tmp_path, monkeypatch):
    from lm_eval_fin.judge import JudgeCacheError

    path = tmp_path / "judge.sqlite"
    path.write_bytes(b"this is not a database, " * 200)
    with pytest.raises(JudgeCacheError) as info:
        _complete_with_cache(path, monkeypatch)
    message = str(info.value)
    assert message.startswith(f"the judge cache {path} is not a usable judge cache (")
    assert "delete it" in message and "LM_EVAL_FIN_CACHE" in message and "\n" not in message
    assert path.read_bytes().startswith(b"this is not a database")  # never overwritten


def test_a_cache_of_another_shape_is_a_clear_cache_error(tmp_path, monkeypatch):
    import sqlite3

    from lm_eval_fin.judge import JudgeCacheError

    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE completions (key TEXT PRIMARY KEY, value TEXT)")
    with pytest.raises(JudgeCacheError, match=r"has a table 'completions' with the columns \['key', 'value'\]"):
        _complete_with_cache(path, monkeypatch)
    with pytest.raises(JudgeCacheError, match="is not a usable judge cache"):
        JudgeCache(tmp_path).check()  # a folder


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files anyway")
def test_a_read_only_cache_is_a_clear_cache_error(tmp_path, monkeypatch):
    from lm_eval_fin.judge import JudgeCacheError

    folder = tmp_path / "ro"
    folder.mkdir()
    cache = JudgeCache(folder / "judge.sqlite")
    cache.put("hf:m", "k", CachedAnswer("t", 1, 1))
    cache.close()
    (folder / "judge.sqlite").chmod(0o444)
    folder.chmod(0o555)
    try:
        with pytest.raises(JudgeCacheError, match="is read-only"):
            _complete_with_cache(folder / "judge.sqlite", monkeypatch)
    finally:
        folder.chmod(0o755)


# --- claims ------------------------------------------------------------------------------------


def test_claims_hold_against_live_owners_and_pass_from_dead_ones(tmp_path):
    from lm_eval_fin.judge.cache import Claimant

    cache = JudgeCache(tmp_path / "c.sqlite")
    first, second = Claimant.here(), Claimant.here()
    assert cache.claim(["a", "b"], first) == ["a", "b"]
    assert cache.claim(["b", "c"], second) == ["c"]  # b is held by a live owner (this process)
    assert cache.claim(["a"], first) == ["a"]  # its own claim again
    cache.release(first, ["a"])
    assert cache.claim(["a", "b"], second) == ["a"]
    # a dead process's claims are taken over
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    dead = Claimant("dead-owner", first.host, int(child.stdout), None)
    assert cache.claim(["d"], dead) == ["d"]
    assert cache.claim(["d"], second) == ["d"]
    cache.release(first)
    cache.release(second)
    assert cache.claims() == 0
