"""How a user names a judge: one spec string plus decoding/serving options, the same on every
``lm-eval-fin`` subcommand and in the ``LM_EVAL_FIN_JUDGE`` environment variable.

Options (flag, field, what it does):

``--judge-max-tokens`` (``max_tokens``)
    answer length for requests that do not set their own ``max_tokens``.
``--judge-temperature`` / ``--judge-seed`` (``temperature``, ``seed``)
    decoding; the default is greedy (0) with seed 0, so a judge's scores are reproducible.
    Retries of unparsable answers sample instead (see :mod:`lm_eval_fin.judge.core`).
``--judge-concurrency`` (``concurrency``)
    openai backend: requests in flight at once.
``--judge-timeout`` (``timeout_s``)
    openai backend: seconds one HTTP request may take before it counts as failed.
``--judge-max-retries`` (``max_retries``), ``--judge-backoff`` (``backoff_s``),
``--judge-backoff-max`` (``backoff_max_s``)
    openai backend: a failed request (refused connection, timeout, 429, 5xx, malformed
    reply) is re-sent up to ``max_retries`` times, waiting ``backoff_s * 2**k`` seconds,
    at most ``backoff_max_s``, before retry ``k + 1``.
``--judge-batch-size`` (``batch_size``)
    hf backend: prompts per ``generate`` call (default 8); vllm backend: prompts per
    ``LLM.chat`` call (default 1024). Results reach the cache after each such chunk.
``--judge-tensor-parallel-size``, ``--judge-gpu-memory-utilization``,
``--judge-max-model-len``
    vllm backend: passed to ``vllm.LLM``.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

JUDGE_ENV = "LM_EVAL_FIN_JUDGE"


@dataclass(frozen=True)
class JudgeOptions:
    max_tokens: int = 1024
    temperature: float = 0.0
    seed: int = 0
    concurrency: int = 8
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_s: float = 0.5
    backoff_max_s: float = 10.0
    batch_size: int | None = None
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None


def add_judge_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("judge")
    group.add_argument(
        "--judge",
        default=os.environ.get(JUDGE_ENV),
        help=f"judge spec: vllm:<model>, openai:<base url>#<model>, hf:<model or path>[#<gguf file>] "
        f"(default: ${JUDGE_ENV})",
    )
    defaults = JudgeOptions()
    group.add_argument("--judge-max-tokens", type=int, default=defaults.max_tokens,
                       help="answer length of requests that set none")
    group.add_argument("--judge-temperature", type=float, default=defaults.temperature,
                       help="0 is greedy (default)")
    group.add_argument("--judge-seed", type=int, default=defaults.seed)
    group.add_argument("--judge-concurrency", type=int, default=defaults.concurrency,
                       help="openai: requests in flight")
    group.add_argument("--judge-timeout", type=float, default=defaults.timeout_s,
                       help="openai: seconds per request")
    group.add_argument("--judge-max-retries", type=int, default=defaults.max_retries,
                       help="openai: re-sends of a failed request")
    group.add_argument("--judge-backoff", type=float, default=defaults.backoff_s,
                       help="openai: first wait before a re-send, doubled each time (seconds)")
    group.add_argument("--judge-backoff-max", type=float, default=defaults.backoff_max_s,
                       help="openai: longest wait before a re-send (seconds)")
    group.add_argument("--judge-batch-size", type=int, default=defaults.batch_size,
                       help="hf: prompts per generate call (8); vllm: prompts per LLM.chat call (1024)")
    group.add_argument("--judge-tensor-parallel-size", type=int, default=defaults.tensor_parallel_size)
    group.add_argument(
        "--judge-gpu-memory-utilization", type=float, default=defaults.gpu_memory_utilization
    )
    group.add_argument("--judge-max-model-len", type=int, default=defaults.max_model_len)


def options_from_args(args: argparse.Namespace) -> JudgeOptions:
    return JudgeOptions(
        max_tokens=args.judge_max_tokens,
        temperature=args.judge_temperature,
        seed=args.judge_seed,
        concurrency=args.judge_concurrency,
        timeout_s=args.judge_timeout,
        max_retries=args.judge_max_retries,
        backoff_s=args.judge_backoff,
        backoff_max_s=args.judge_backoff_max,
        batch_size=args.judge_batch_size,
        tensor_parallel_size=args.judge_tensor_parallel_size,
        gpu_memory_utilization=args.judge_gpu_memory_utilization,
        max_model_len=args.judge_max_model_len,
    )
