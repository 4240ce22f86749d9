"""vLLM's KV cache on CPU when the user set no size (lm_eval_fin/plumbing/vllm_memory.py): the size by
hand-computed cases and properties, the models a command will load into vLLM, and the commands
(``lm-eval-fin score``, ``rerank``, ``run``) saying what they chose, or refusing in one line
before any engine starts. vLLM itself is not needed: its CPU build is what the module detects,
and that answer is substituted here (tests_vllm/ checks a real engine starts with the size)."""

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lm_eval_fin import cli
from lm_eval_fin.plumbing import exit_status, vllm_memory
from lm_eval_fin.plumbing.vllm_memory import CAP_GIB, GIB, KV_ENV, RUNTIME_BYTES, kv_cache_gib

SMALL_MODEL = GIB // 2


@pytest.mark.parametrize("free_gib, weights, expected", [
    (18, SMALL_MODEL, 3),  # (18 - 1 - 1.5) / 4 = 3.9
    (64, 15 * GIB, 8),  # an 8B model, 15 GiB in bfloat16 files: (64 - 30 - 1.5) / 4 = 8.1
    (4, SMALL_MODEL, 1),  # 1.5 GiB spare: 1 GiB, not a quarter of it
    (3, SMALL_MODEL, None),  # 0.5 GiB spare: refused
    (500, 0, CAP_GIB),
])
def test_kv_cache_size_by_hand(free_gib, weights, expected):
    assert kv_cache_gib(free_gib * GIB, weights) == expected


@given(st.integers(0, 2**40), st.integers(0, 2**37))
def test_a_chosen_size_fits_beside_the_weights_and_the_runtime(available, weights):
    gib = kv_cache_gib(available, weights)
    spare = available - 2 * weights - RUNTIME_BYTES
    if gib is None:
        assert spare < GIB
    else:
        assert 1 <= gib <= CAP_GIB and gib * GIB <= spare


def test_the_models_a_run_loads_into_vllm(monkeypatch):
    from lm_eval_fin.harness.run import judge_environment, lm_eval_arguments, split_arguments, vllm_models

    def models(argv, environ):
        for name in ("LM_EVAL_FIN_JUDGE", "LM_EVAL_FIN_JUDGE_OPTIONS"):
            monkeypatch.delenv(name, raising=False)
        for name, value in environ.items():
            monkeypatch.setenv(name, value)
        ours, rest = split_arguments(argv)
        return vllm_models(lm_eval_arguments(rest), judge_environment(ours, argv))

    assert models(["--model", "vllm", "--model_args", "pretrained=/m,dtype=float32", "--tasks", "fin_ems"], {}) == ["/m"]
    assert models(["--model=fin-refine", "--model_args", "base=vllm,pretrained=/m"], {}) == ["/m"]
    # lm-eval's other spellings of the model arguments: JSON, and -a
    assert models(["--model", "vllm", "--model_args", '{"pretrained": "/m", "dtype": "float32"}'], {}) == ["/m"]
    assert models(["--model", "vllm", "-a", "pretrained=/m"], {}) == ["/m"]
    assert models(["--model", "hf", "--model_args", "pretrained=/m", "--judge", "vllm:/j"], {}) == ["/j"]
    assert models(["--model", "hf", "--model_args", "pretrained=/m"], {"LM_EVAL_FIN_JUDGE": "vllm:/j"}) == ["/j"]
    assert models(["--model", "local-chat-completions", "--judge", "openai:http://h/v1#m"], {}) == []


def test_settled_only_on_vllms_cpu_build_with_no_size_set(monkeypatch, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"\0" * 1000)
    assert vllm_memory.weights_bytes(str(folder)) == 1000 and vllm_memory.weights_bytes("org/hub-id") == 0
    monkeypatch.setattr(vllm_memory, "cpu_build", lambda: True)
    environ = {}
    line = vllm_memory.settle_kv_cache([str(folder)], "lm-eval-fin score", environ, available=18 * GIB)
    assert environ == {KV_ENV: "4"}
    assert line == (f"lm-eval-fin score: {KV_ENV} is unset; vLLM's KV cache takes 4 GiB (18.0 GiB of memory free); "
                    f"set {KV_ENV} to choose")
    assert vllm_memory.settle_kv_cache(["/m"], "x", {KV_ENV: "2"}, available=1) is None  # the user's size stands
    assert vllm_memory.settle_kv_cache([], "x", {}, available=1) is None  # no vLLM engine
    monkeypatch.setattr(vllm_memory, "cpu_build", lambda: False)
    assert vllm_memory.settle_kv_cache(["/m"], "x", {}, available=1) is None  # a GPU build sizes its own


def test_commands_say_what_they_chose_or_refuse_in_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(vllm_memory, "cpu_build", lambda: True)
    monkeypatch.setenv(KV_ENV, "")  # unset; and whatever a command sets is undone after the test
    monkeypatch.setattr(vllm_memory, "available_memory", lambda: 2 * GIB)
    for argv in (["score", str(tmp_path), "--judge", "vllm:/m"],
                 ["rerank", "--data", str(tmp_path), "--judge", "vllm:/m", "--out", str(tmp_path / "o.jsonl")],
                 ["run", "--model", "vllm", "--model_args", "pretrained=/m", "--tasks", "fin_ems"]):
        assert cli.main(argv) == exit_status.USAGE
        err = capsys.readouterr().err
        assert err.startswith(f"lm-eval-fin {argv[0]}: error: 2.0 GiB of memory is free: too little for a vLLM engine")
        assert err.count("\n") == 1 and "Traceback" not in err
    monkeypatch.setattr(vllm_memory, "available_memory", lambda: 18 * GIB)
    cli.main(["score", str(tmp_path / "absent"), "--judge", "vllm:/m"])  # fails later, on the folder
    assert f"lm-eval-fin score: {KV_ENV} is unset; vLLM's KV cache takes 4 GiB" in capsys.readouterr().err
    assert os.environ[KV_ENV] == "4"  # engine processes inherit it
