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
  the first half of each reference), counted as ``judge.complete`` calls (at most four first
  asks, plus re-asks of unreadable answers); and the model calls of the same run again on the
  warm cache (goal 0).
* served path: ``vllm serve`` of the same model started beside the engine (tests_vllm/served.py,
  prefix caching off). The judge: our ``openai:`` judge against a bare ``AsyncOpenAI`` at the
  same concurrency, the same JSON-schema requests, as requests/s and completion tokens/s
  (goal >= 0.9). Harness generation: lm-eval's ``local-chat-completions`` against the server
  vs the in-process ``--model vllm`` on the same fin_agentbench documents (a ratio: what
  serving costs on one machine).

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
SERVED_CONCURRENCY = 8  # the openai judge's default; lm-eval's num_concurrent for the served model
EMS_EXTRACT_TOKENS = 96
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5}, "reason": {"type": "string", "maxLength": 80}},
    "required": ["score", "reason"],
    "additionalProperties": False,
}


def _row(figure, ours=None, peer=None, ratio=None, unit="", note=""):
    return {"figure": figure, "ours": ours, "peer": peer, "ratio": ratio, "unit": unit, "note": note}


# ------------------------------------------------------------------------ harness generation


def agentbench_requests(lm) -> tuple[list, float]:
    """fin_agentbench through ``lm_eval.simple_evaluate`` with ``lm.generate_until``'s requests
    kept: (the requests, the seconds the whole evaluation took)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_fin.plumbing import paths

    calls = []
    generate_until = lm.generate_until

    def kept(requests, *args, **kwargs):
        calls.append(list(requests))
        return generate_until(requests, *args, **kwargs)

    lm.generate_until = kept
    manager = TaskManager(include_path=str(paths.tasks_dir()),
                          metadata={"data_path": str(paths.data_path("finagentbench_demo"))})
    started = time.perf_counter()
    try:
        lm_eval.simple_evaluate(model=lm, tasks=["fin_agentbench"], task_manager=manager, apply_chat_template=True,
                                limit=HARNESS_LIMIT)
    finally:
        lm.generate_until = generate_until
    (requests,) = calls
    return requests, time.perf_counter() - started


def harness_rows(lm, requests: list, evaluate_s: float) -> list[dict]:
    """The fin_agentbench requests through ``lm.generate_until`` again and as a bare
    ``LLM.generate``, alternating, best of 2 each (the machine is shared)."""
    from vllm import SamplingParams, TokensPrompt

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
    from lm_eval_fin.benchmarks.fin_ems.data import read_dataset
    from lm_eval_fin.ems.pipeline import run_ems
    from lm_eval_fin.judge import JudgeOptions, load_judge
    from lm_eval_fin.plumbing import paths

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
    first = [desc for desc, _, _ in cold if "(re-" not in desc]
    return [
        _row(f"judge rounds per fin_ems run ({len(records)} documents)", len(first), 4, len(first) / 4, "rounds",
             f"first asks, against the limit of four (summary, extract, match + claims, score; a stage "
             f"left without requests sends none); with re-asks of unreadable answers {len(cold)} batches: "
             f"{stages}; {sum(c for _, _, c in cold)} model calls, {cold_s:.0f} s"),
        _row("judge model calls, the same fin_ems run again (warm cache)", warm_calls, 0, None, "calls",
             f"{len(rounds)} rounds, all answered by the cache; goal 0"),
    ]


# ------------------------------------------------------------------------------ served path


def _served_module():
    """tests_vllm/served.py (starting and stopping ``vllm serve``), loaded by path."""
    spec = importlib.util.spec_from_file_location("bench_vllm_served", ROOT / "tests_vllm" / "served.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def served_judge_rows(server) -> list[dict]:
    """Our openai judge (``judge.complete``, cold cache) against a bare ``AsyncOpenAI`` with an
    ``asyncio.Semaphore`` of the same concurrency, the same JSON-schema requests to the same
    ``vllm serve``; alternating, best of 2 each."""
    import asyncio

    from openai import AsyncOpenAI

    from lm_eval_fin.judge import JudgeOptions, load_judge
    from lm_eval_fin.judge.core import resolve_request
    from lm_eval_fin.judge.openai_backend import request_payload

    options = JudgeOptions(concurrency=SERVED_CONCURRENCY)
    requests = [resolve_request(r, options) for r in _judge_requests()]
    payloads = [request_payload(server.name, r) for r in requests]

    async def bare(batch) -> int:
        client = AsyncOpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0, timeout=600)
        gate = asyncio.Semaphore(options.concurrency)

        async def one(payload) -> int:
            async with gate:
                return (await client.chat.completions.create(**payload)).usage.completion_tokens

        try:
            return sum(await asyncio.gather(*(one(payload) for payload in batch)))
        finally:
            await client.close()

    asyncio.run(bare(payloads[:2]))  # warm-up: the server compiles the grammar
    ours = bare_ = (float("inf"), 0)
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(2):
            started = time.perf_counter()
            tokens = asyncio.run(bare(payloads))
            bare_ = min(bare_, (time.perf_counter() - started, tokens))
            os.environ["LM_EVAL_FIN_CACHE"] = str(Path(folder) / f"served-{round_}.sqlite")
            judge = load_judge(server.judge_spec, options)
            started = time.perf_counter()
            responses = judge.complete(requests, desc="bench served judge")
            seconds = time.perf_counter() - started
            assert judge.last_batch.model_calls == len(requests) and all(r.text for r in responses)
            ours = min(ours, (seconds, judge.last_batch.completion_tokens))
    n = len(requests)
    note = (f"openai judge (judge.complete, cold cache) vs bare AsyncOpenAI + Semaphore({options.concurrency}), "
            f"same requests, same vllm serve; best of 2 alternating; {ours[0]:.1f} s vs {bare_[0]:.1f} s; goal >= 0.9")
    return [
        _row(f"served judge requests ({n} JSON-schema requests)", n / ours[0], n / bare_[0], bare_[0] / ours[0],
             "requests/s", note),
        _row("served judge completion tokens", ours[1] / ours[0], bare_[1] / bare_[0],
             (ours[1] / ours[0]) / (bare_[1] / bare_[0]), "completion tokens/s", note),
    ]


def served_harness_rows(lm, requests: list, server) -> list[dict]:
    """fin_agentbench generation through lm-eval's ``local-chat-completions`` against the
    server, and through the in-process ``--model vllm`` (same documents, same generation
    settings; both engines the same model, float32, eager, no prefix caching); alternating,
    best of 2 each. The ratio says what serving costs on one machine."""
    from lm_eval.models.openai_completions import LocalChatCompletion

    api = LocalChatCompletion(model=server.name, base_url=f"{server.base_url}/chat/completions",
                              tokenizer=server.model_dir, num_concurrent=SERVED_CONCURRENCY, max_retries=1,
                              max_length=server.max_model_len)
    api_requests, _ = agentbench_requests(api)
    served_s = local_s = float("inf")
    for _ in range(2):
        started = time.perf_counter()
        lm.generate_until(requests, disable_tqdm=True)
        local_s = min(local_s, time.perf_counter() - started)
        started = time.perf_counter()
        api.generate_until(api_requests, disable_tqdm=True)
        served_s = min(served_s, time.perf_counter() - started)
    return [_row(f"harness generation, served vs in-process ({len(requests)} fin_agentbench requests)", served_s,
                 local_s, local_s / served_s, "s",
                 f"lm-eval local-chat-completions (num_concurrent={SERVED_CONCURRENCY}) against vllm serve vs "
                 "--model vllm in this process, same documents and gen_kwargs; best of 2 alternating; what "
                 "serving costs on one machine (HTTP, the server's own tokenising and scheduling)")]


def served_rows(lm, requests: list, model: str) -> list[dict]:
    """Start ``vllm serve`` beside the in-process engine (prefix caching off on both), measure,
    stop it."""
    served = _served_module()
    with tempfile.TemporaryDirectory() as folder:
        server = served.VLLMServer(model, Path(folder) / "vllm-serve.log", extra_args=("--no-enable-prefix-caching",))
        started = time.perf_counter()
        try:
            server.start().wait()
            start_s = time.perf_counter() - started
            rows = [_row("vllm serve start (to answering)", start_s, unit="s", note="the same model, float32, eager")]
            rows += served_judge_rows(server)
            rows += served_harness_rows(lm, requests, server)
        finally:
            server.stop()
    return rows


# ----------------------------------------------------------------------------------- driver


def measure(model: str | None, dtype: str) -> list[dict]:
    from lm_eval.models.vllm_causallms import VLLM

    from lm_eval_fin.plumbing import paths

    model = model or str(paths.embedded_model())
    cpu = _on_cpu()
    started = time.perf_counter()
    lm = VLLM(pretrained=model, dtype=dtype, max_model_len=4096, batch_size="auto", seed=0,
              enable_prefix_caching=False, **({"enforce_eager": True} if cpu else {}))
    start_s = time.perf_counter() - started
    where = "CPU, embedded SmolLM2-135M" if model == str(paths.embedded_model()) else model
    rows = [_row(f"vLLM engine start ({where})", start_s, unit="s",
                 note=f"{dtype}, {'eager, in-process engine core' if cpu else 'default compilation'}")]
    requests, evaluate_s = agentbench_requests(lm)
    rows += harness_rows(lm, requests, evaluate_s)
    rows += judge_rows(lm.model, model)
    rows += ems_rows(lm.model, model)
    rows += served_rows(lm, requests, model)
    return rows


def _on_cpu() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def run() -> list[dict]:
    """The rows, measured here when vLLM is importable, else by .venv-vllm's python."""
    if importlib.util.find_spec("vllm") is not None:
        return measure(None, "float32")
    if not VLLM_PYTHON.exists():
        return [_row("vLLM rows (harness, judge, fin_ems rounds, warm re-run, served path)",
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
