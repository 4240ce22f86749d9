"""vLLM rows: our layers over vLLM against bare vLLM on the same engine, and the judge's rounds.

Every row comes from one engine in one process (prefix caching off, so a second pass over
the same prompts gets no free prefill), each ratio against a peer timed in the same run:

* harness generation: lm-eval's ``--model vllm`` (``VLLM.generate_until``: tokenising,
  ordering, ``SamplingParams`` per request, post-processing) over the fin_agentbench demo
  requests, against a bare ``LLM.generate`` of the same token prompts with the same
  ``SamplingParams``, alternating, best of 2 each. Goal: ratio (bare time / ours) >= 0.9.
* judge: our ``vllm`` backend (``judge.complete`` on a cold cache: request resolution,
  cache keys, ``SamplingParams`` with a JSON-schema constraint per request, chunked
  ``LLM.chat``, cache writes) against a bare ``LLM.chat`` of the same conversations with
  the same ``SamplingParams``. Goal: ratio >= 0.9. Each side runs twice, alternating, and
  keeps its best (the machine is shared), the judge with a fresh cache each time.
* judge rounds per fin_ems run: the EMS pipeline on the four demo documents (their answers:
  the first half of each reference), counted as ``judge.complete`` calls (three stages, plus
  re-asks of unreadable answers); and the model calls of the same run again on the warm
  cache (goal 0).

Where: ``make bench`` runs in .venv, which has no vLLM; there :func:`run` runs this file with
.venv-vllm's python (``make install-vllm``) and reads its rows, or, without that venv, returns
one row saying how to get them. CPU (default): the embedded SmolLM2-135M in float32, eager,
with the engine settings of tests_vllm/conftest.py. GPU: see bench/RESULTS.md.

    .venv-vllm/bin/python bench/bench_vllm.py [--model PATH] [--dtype float32] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
CPU_ENGINE_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "OMP_NUM_THREADS": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "HF_HUB_OFFLINE": "1",
}
JUDGE_REQUESTS = 16
JUDGE_MAX_TOKENS = 48
HARNESS_LIMIT = 3  # documents per fin_agentbench task
EMS_EXTRACT_TOKENS = 96
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5}, "reason": {"type": "string", "maxLength": 80}},
    "required": ["score", "reason"],
    "additionalProperties": False,
}


def _row(figure, ours, peer=None, ratio=None, unit="", note=""):
    return {"figure": figure, "ours": ours, "peer": peer, "ratio": ratio, "unit": unit, "note": note}


# ------------------------------------------------------------------------ harness generation


def harness_rows(lm) -> list[dict]:
    """fin_agentbench through ``lm_eval.simple_evaluate`` with ``lm.generate_until``'s requests
    kept; then those requests through ``lm.generate_until`` again and as a bare
    ``LLM.generate``, alternating, best of 2 each (the machine is shared)."""
    import lm_eval
    from lm_eval.tasks import TaskManager
    from vllm import SamplingParams, TokensPrompt

    from lm_eval_fin import paths

    calls = []
    generate_until = lm.generate_until

    def kept(requests, *args, **kwargs):
        calls.append(list(requests))
        return generate_until(requests, *args, **kwargs)

    lm.generate_until = kept
    manager = TaskManager(include_path=str(paths.tasks_dir()),
                          metadata={"data_path": str(paths.data_path("finagentbench_demo"))})
    started = time.perf_counter()
    lm_eval.simple_evaluate(model=lm, tasks=["fin_agentbench"], task_manager=manager, apply_chat_template=True,
                            limit=HARNESS_LIMIT)
    evaluate_s = time.perf_counter() - started
    lm.generate_until = generate_until
    (requests,) = calls

    # the bare peer: what VLLM.generate_until hands vLLM (its tokens, its SamplingParams)
    eos = lm.tokenizer.decode(lm.eot_token_id)
    prompts, params = [], []
    for request in requests:
        context, gen_kwargs = request.args
        kwargs, until, max_tokens = lm.modify_gen_kwargs(dict(gen_kwargs), eos=eos, default_max_gen_toks=lm.max_gen_toks)
        prompts.append(TokensPrompt(prompt_token_ids=lm.tok_encode(context)))
        params.append(SamplingParams(max_tokens=max_tokens, stop=until, **kwargs))
    ours_s = bare_s = float("inf")
    for _ in range(2):
        started = time.perf_counter()
        outputs = lm.model.generate(prompts, params, use_tqdm=False)
        bare_s = min(bare_s, time.perf_counter() - started)
        started = time.perf_counter()
        lm.generate_until(requests, disable_tqdm=True)
        ours_s = min(ours_s, time.perf_counter() - started)
    tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
    return [_row(f"harness --model vllm generation ({len(requests)} fin_agentbench requests)", ours_s, bare_s,
                 bare_s / ours_s, "s", f"lm-eval VLLM.generate_until vs bare LLM.generate, same prompts and "
                 f"SamplingParams, same engine; best of 2 alternating; {tokens} tokens a pass; the whole "
                 f"simple_evaluate before: {evaluate_s:.0f} s; goal >= 0.9")]


# ------------------------------------------------------------------------------------ judge


def _judge_requests():
    from lm_eval_fin.judge import JudgeRequest

    system = {"role": "system", "content": "You grade answers to questions about company filings. Reply with JSON."}
    return [
        JudgeRequest(messages=(system, {"role": "user", "content":
                     f"Question {i}: what was revenue growth in fiscal 2025? Reference: revenue rose 8.2% to $1,240.5 "
                     f"million. Answer: revenue grew {i % 9 + 1}% to ${1000 + 40 * i} million. Grade the answer."}),
                     max_tokens=JUDGE_MAX_TOKENS, json_schema=VERDICT_SCHEMA)
        for i in range(JUDGE_REQUESTS)
    ]


def judge_rows(llm, model: str) -> list[dict]:
    from vllm import SamplingParams

    from lm_eval_fin.judge import JudgeOptions, load_judge
    from lm_eval_fin.judge.core import resolve_request
    from lm_eval_fin.judge.vllm_backend import structured_output_kwargs

    options = JudgeOptions()
    requests = [resolve_request(r, options) for r in _judge_requests()]
    conversations = [list(r.messages) for r in requests]

    def bare_params():
        return [SamplingParams(max_tokens=r.max_tokens, temperature=r.temperature, seed=r.seed,
                               **structured_output_kwargs(r.constraint)) for r in requests]

    llm.chat(conversations[:2], sampling_params=bare_params()[:2], use_tqdm=False)  # warm-up: the grammar compiles
    ours_best = bare_best = float("inf")
    bare_tokens = ours_tokens = 0
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(2):
            started = time.perf_counter()
            outputs = llm.chat(conversations, sampling_params=bare_params(), use_tqdm=False)
            bare_s = time.perf_counter() - started
            if bare_s < bare_best:
                bare_best, bare_tokens = bare_s, sum(len(o.outputs[0].token_ids) for o in outputs)

            os.environ["LM_EVAL_FIN_CACHE"] = str(Path(folder) / f"judge-{round_}.sqlite")
            judge = load_judge(f"vllm:{model}", options)
            judge.backend.llm = llm  # the same engine: only our layer differs
            started = time.perf_counter()
            responses = judge.complete(requests, desc="bench vllm judge")
            ours_s = time.perf_counter() - started
            assert judge.last_batch.model_calls == len(requests) and all(r.text for r in responses)
            if ours_s < ours_best:
                ours_best, ours_tokens = ours_s, judge.last_batch.completion_tokens
            judge.backend.llm = None
    ours_rate, bare_rate = ours_tokens / ours_best, bare_tokens / bare_best
    return [_row(f"vllm judge backend ({len(requests)} JSON-schema requests)", ours_rate, bare_rate,
                 ours_rate / bare_rate, "completion tokens/s",
                 f"judge.complete (cold cache) vs bare LLM.chat, same engine, conversations and SamplingParams; "
                 f"best of 2 alternating; {ours_best:.1f} s vs {bare_best:.1f} s; goal >= 0.9")]


# ------------------------------------------------------------------------ fin_ems judge rounds


def ems_rows(llm, model: str) -> list[dict]:
    from lm_eval_fin import paths
    from lm_eval_fin.benchmarks.fin_ems.data import read_dataset
    from lm_eval_fin.ems.pipeline import run_ems
    from lm_eval_fin.judge import JudgeOptions, load_judge

    records = read_dataset(str(paths.data_path("ems_demo")))
    references = [r["reference"] for r in records]
    answers = [r[: len(r) // 2] for r in references]
    with tempfile.TemporaryDirectory() as folder:
        os.environ["LM_EVAL_FIN_CACHE"] = str(Path(folder) / "ems.sqlite")
        judge = load_judge(f"vllm:{model}", JudgeOptions(max_tokens=64))
        judge.backend.llm = llm
        rounds = []
        complete = judge.complete

        def counted(requests, desc="judge"):
            responses = complete(requests, desc=desc)
            rounds.append((desc, len(requests), judge.last_batch.model_calls))
            return responses

        judge.complete = counted
        started = time.perf_counter()
        run_ems(answers, references, judge=judge, scorers=("llm",), extract_max_tokens=EMS_EXTRACT_TOKENS)
        cold_s = time.perf_counter() - started
        cold = list(rounds)
        del rounds[:]
        run_ems(answers, references, judge=judge, scorers=("llm",), extract_max_tokens=EMS_EXTRACT_TOKENS)
        warm_calls = sum(calls for _, _, calls in rounds)
        judge.backend.llm = None
    stages = ", ".join(f"{desc}: {n}" for desc, n, _ in cold)
    return [
        _row(f"judge rounds per fin_ems run ({len(records)} documents)", len(cold), 3, len(cold) / 3, "rounds",
             f"peer: the three stages (extract, match, score); re-asks of unreadable answers add rounds; "
             f"requests per round: {stages}; {sum(c for _, _, c in cold)} model calls, {cold_s:.0f} s"),
        _row("judge model calls, the same fin_ems run again (warm cache)", warm_calls, 0, None, "calls",
             f"{len(rounds)} rounds, all answered by the cache; goal 0"),
    ]


# ----------------------------------------------------------------------------------- driver


def measure(model: str | None, dtype: str) -> list[dict]:
    from lm_eval.models.vllm_causallms import VLLM

    from lm_eval_fin import paths

    model = model or str(paths.embedded_model())
    cpu = _on_cpu()
    started = time.perf_counter()
    lm = VLLM(pretrained=model, dtype=dtype, max_model_len=4096, batch_size="auto", seed=0,
              enable_prefix_caching=False, **({"enforce_eager": True} if cpu else {}))
    start_s = time.perf_counter() - started
    where = "CPU, embedded SmolLM2-135M" if model == str(paths.embedded_model()) else model
    rows = [_row(f"vLLM engine start ({where})", start_s, unit="s",
                 note=f"{dtype}, {'eager, in-process engine core' if cpu else 'default compilation'}")]
    rows += harness_rows(lm)
    rows += judge_rows(lm.model, model)
    rows += ems_rows(lm.model, model)
    return rows


def _on_cpu() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def run() -> list[dict]:
    """The rows, measured here when vLLM is importable, else by .venv-vllm's python."""
    if importlib.util.find_spec("vllm") is not None:
        return measure(None, "float32")
    if not VLLM_PYTHON.exists():
        return [_row("vLLM rows (harness, judge, fin_ems rounds, warm re-run)",
                     note="not measured: no vLLM here; `make install-vllm` (CPU, .venv-vllm) then `make bench` "
                     "adds them, or see bench/RESULTS.md for a GPU")]
    done = subprocess.run([str(VLLM_PYTHON), __file__, "--json"], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"bench_vllm in .venv-vllm failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model folder or hub id (default: the embedded SmolLM2-135M)")
    parser.add_argument("--dtype", default="float32", help="vLLM dtype (float32 on CPUs without bf16 instructions)")
    parser.add_argument("--json", action="store_true", help="print the rows as one JSON line (for run_all.py)")
    args = parser.parse_args()
    rows = measure(args.model, args.dtype)
    if args.json:
        print(json.dumps(rows))
        return
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":  # vLLM may spawn processes that import this file
    if not Path("/dev/nvidiactl").exists():  # CPU: the engine settings of the tests, before vLLM is imported
        for name, value in CPU_ENGINE_ENV.items():
            os.environ.setdefault(name, value)
    main()
