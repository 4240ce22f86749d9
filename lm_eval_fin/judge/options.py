"""How a user names a judge: one spec string plus decoding/serving options, the same on every
``lm-eval-fin`` subcommand and in the ``LM_EVAL_FIN_JUDGE`` environment variable."""

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
    group.add_argument("--judge-max-tokens", type=int, default=defaults.max_tokens)
    group.add_argument("--judge-temperature", type=float, default=defaults.temperature)
    group.add_argument("--judge-seed", type=int, default=defaults.seed)
    group.add_argument("--judge-concurrency", type=int, default=defaults.concurrency)
    group.add_argument("--judge-timeout", type=float, default=defaults.timeout_s)
    group.add_argument("--judge-max-retries", type=int, default=defaults.max_retries)
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
        tensor_parallel_size=args.judge_tensor_parallel_size,
        gpu_memory_utilization=args.judge_gpu_memory_utilization,
        max_model_len=args.judge_max_model_len,
    )
