"""The hf backend with the embedded SmolLM2-135M-Instruct: real batched generation, real
parsing of its (often poor) answers, re-asks, counting, and a warm cache that never loads
the model."""

import json
import logging

import pytest

from lm_eval_fin.judge import JudgeOptions, JudgeRequest, complete_parsed, load_judge


@pytest.fixture
def one_torch_thread():
    """Generation on one thread: on a small shared CI machine OpenMP threads spin against
    each other, which costs far more than they bring for a 135M model."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
REQUESTS = [
    JudgeRequest(messages=({"role": "user", "content": "Score 1 to 5: is 2+2=4? Reply as JSON {\"score\": n}."},),
                 json_schema=SCHEMA),
    JudgeRequest(messages=(
        {"role": "system", "content": "You are a strict grader of financial answers."},
        {"role": "user", "content": "Question: what was revenue growth? Answer: revenue grew 12% to $3.1 "
                                    "billion. Give the answer a score from 1 to 5, a number only."},
    )),
    JudgeRequest(messages=({"role": "user", "content": "One digit from 1 to 5, please."},)),
]


def parse_score(text):
    """Tolerant: JSON {"score": n} first, else the first digit 1..5 anywhere."""
    try:
        value = json.loads(text)
        if isinstance(value, dict) and value.get("score") in (1, 2, 3, 4, 5):
            return value["score"]
    except ValueError:
        pass
    return next((int(c) for c in text if c in "12345"), None)


def test_hf_backend_generates_parses_and_caches(embedded_judge_spec, judge_cache, one_torch_thread, caplog,
                                                monkeypatch):
    from lm_eval_fin.judge import hf_backend

    # the warning is given once per process: an earlier test may have had it already
    monkeypatch.setattr(hf_backend, "_warned_constraints", set())
    judge = load_judge(embedded_judge_spec, JudgeOptions(max_tokens=8, batch_size=2))
    with caplog.at_level(logging.WARNING, logger="lm_eval_fin.judge"):
        responses = judge.complete(REQUESTS)
    stats = judge.last_batch
    assert (stats.requests, stats.model_calls, stats.cache_hits, stats.failures) == (3, 3, 0, 0)
    assert all(isinstance(r.text, str) and 1 <= r.completion_tokens <= 8 for r in responses)
    # batches are sorted by prompt size; each answer must still sit at its own request:
    # its prompt token count is that of its own chat-templated messages
    tokenizer = judge.backend.tokenizer
    expected = [len(tokenizer.apply_chat_template(list(r.messages), add_generation_prompt=True, tokenize=True,
                                                  return_dict=True)["input_ids"]) for r in REQUESTS]
    assert [r.prompt_tokens for r in responses] == expected
    assert stats.prompt_tokens == sum(expected)
    # the schema cannot be enforced by transformers, and the judge says so
    assert stats.extra["unenforced_constraints"] == 1
    assert any("cannot enforce json_schema" in record.getMessage() for record in caplog.records)

    scores = complete_parsed(judge, REQUESTS, parse_score, max_attempts=2)
    assert all(s is None or 1 <= s <= 5 for s in scores)
    parsed_stats = judge.last_batch
    assert parsed_stats.parse_failures == sum(s is None for s in scores)
    # the first attempt comes from the cache (and so does the refresh of an unparsable answer
    # this run stored itself); only re-asks of unparsable answers reach the model
    assert parsed_stats.model_calls == parsed_stats.extra["parse_retries"]
    assert parsed_stats.cache_hits == parsed_stats.requests - parsed_stats.model_calls >= 3
    assert judge.stats.parse_failures == parsed_stats.parse_failures

    # a fresh judge on the warm cache, told to keep the unreadable answers it finds there (by
    # default a later run re-asks them): same values, zero model calls, the model never loaded
    fresh = load_judge(embedded_judge_spec, JudgeOptions(max_tokens=8, batch_size=2, retry_unparsable=False))
    assert complete_parsed(fresh, REQUESTS, parse_score, max_attempts=2) == scores
    assert fresh.stats.model_calls == 0
    assert fresh.backend.model is None


def test_the_transformers_pin_has_the_dtype_keyword():
    """The backend calls from_pretrained(dtype=...), which transformers has from 4.56 on
    (torch_dtype= before): the declared requirement must not admit an older release."""
    import configparser
    from pathlib import Path

    from packaging.requirements import Requirement

    setup = configparser.ConfigParser()
    setup.read(Path(__file__).resolve().parent.parent / "setup.cfg")
    lines = [line.strip() for line in setup["options"]["install_requires"].splitlines()]
    requirement = next(Requirement(line) for line in lines if line.startswith("transformers"))
    assert "4.56.0" in requirement.specifier and "4.55.4" not in requirement.specifier
    assert "dtype=dtype" in Path(__file__).resolve().parent.parent.joinpath("lm_eval_fin/judge/hf_backend.py").read_text()


@pytest.mark.parametrize("spec", ["hf:nosuch/model", "hf:/no/such/folder"])
def test_a_model_that_cannot_be_loaded_is_one_clear_config_error(spec, judge_cache):
    from lm_eval_fin.judge import JudgeConfigError

    judge = load_judge(spec)
    with pytest.raises(JudgeConfigError) as info:
        judge.complete([JudgeRequest(messages=({"role": "user", "content": "q"},))])
    message = str(info.value)
    assert message.startswith(f"hf judge: cannot load the model '{spec[3:]}' (") and "\n" not in message
    assert len(message) < 600
    assert judge.last_batch.failures == 1


def test_a_model_without_chat_template_is_a_config_error(embedded_model_dir, tmp_path, judge_cache):
    import shutil

    from lm_eval_fin.judge import JudgeConfigError

    folder = tmp_path / "plain"
    shutil.copytree(embedded_model_dir, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    for name in ("chat_template.jinja", "chat_template.json"):
        (folder / name).unlink(missing_ok=True)
    with pytest.raises(JudgeConfigError, match="has no chat template"):
        load_judge(f"hf:{folder}").complete([JudgeRequest(messages=({"role": "user", "content": "q"},))])
