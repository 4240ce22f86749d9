"""The ``lm-eval-fin`` console script.

``run`` hands every argument to lm-eval's own CLI with our task folder added, so nothing of
the harness's argument parsing is re-implemented here; only the judge flags (``--judge`` and
``--judge-*``, the same as on every other subcommand) are taken out first and handed to the
harness as ``$LM_EVAL_FIN_JUDGE`` and ``$LM_EVAL_FIN_JUDGE_OPTIONS``, which the tasks' judge
metrics read. The other subcommands reach the core without the harness (judge re-scoring,
dataset building, reranking); each lives in its own module and only registers its arguments
here.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

from lm_eval_fin import paths
from lm_eval_fin.judge.options import (
    JUDGE_ENV,
    JUDGE_OPTIONS_ENV,
    add_judge_arguments,
    flag_of,
    given_options,
    option_fields,
    options_from_env,
)

# subcommand -> module exposing add_arguments(parser) and main(args) -> int
_SUBCOMMANDS = {
    "score": ("lm_eval_fin.scoring", "re-score lm-eval samples with the judge metrics of their task"),
    "build": ("lm_eval_fin.builders.cli", "build a benchmark dataset (earnings-call)"),
    "rerank": ("lm_eval_fin.rerank.cli", "FinCARDS reranking on FinAgentBench chunk files"),
    "report": ("lm_eval_fin.report.cli", "one HTML page, Markdown and CSV leaderboard of many lm-eval runs"),
}

def harness_argv(args: list[str]) -> list[str]:
    """The argv for lm-eval's CLI: our task folder as ``--include_path``, the rest untouched."""
    if any(a == "--include_path" or a.startswith("--include_path=") for a in args):
        raise SystemExit(
            "lm-eval-fin run sets --include_path itself; to combine folders call lm_eval directly "
            'with --include_path "$(lm-eval-fin tasks-dir)"'
        )
    return ["lm-eval", "run", "--include_path", str(paths.tasks_dir()), *args]


def split_judge_arguments(args: list[str]) -> tuple[list[str], list[str]]:
    """(the judge flags with their values, every other argument), each in its order.
    ``--judge SPEC`` and ``--judge=SPEC`` forms both; lm-eval has no flag of these names."""
    flags = {"--judge", *(flag_of(name) for name in option_fields())}
    judge_args: list[str] = []
    rest: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg.partition("=")[0] not in flags:
            rest.append(arg)
            index += 1
        elif "=" in arg:
            judge_args.append(arg)
            index += 1
        else:
            judge_args += args[index : index + 2]
            index += 2
    return judge_args, rest


def judge_environment(judge_args: list[str]) -> dict[str, str]:
    """The environment that hands the judge flags of ``run`` to the harness. A bad spec or
    value stops here (exit status 2), before lm-eval loads a model."""
    from lm_eval_fin.judge import JudgeSpecError, parse_spec

    parser = argparse.ArgumentParser(
        prog="lm-eval-fin run", usage="lm-eval-fin run [--judge SPEC] [--judge-<option> VALUE ...] <lm_eval arguments>",
        add_help=False,
    )
    add_judge_arguments(parser)
    args = parser.parse_args(judge_args)
    environment = {}
    if any(arg.partition("=")[0] == "--judge" for arg in judge_args):
        try:
            environment[JUDGE_ENV] = str(parse_spec(args.judge))
        except JudgeSpecError as exc:
            parser.error(str(exc))
    given = given_options(args)
    if given:
        try:
            options = {**options_from_env(), **given}
        except ValueError as exc:
            parser.error(str(exc))
        environment[JUDGE_OPTIONS_ENV] = json.dumps(options, sort_keys=True)
    return environment


def details_environment(args: list[str]) -> dict[str, str]:
    """fin_ems writes its per-document details under lm-eval's ``--output_path`` (lm-eval hands
    that path to its own logger only), unless ``$LM_EVAL_FIN_DETAILS_DIR`` already says where."""
    from lm_eval_fin.ems.harness import DETAILS_ENV, set_details_dir_from_argv

    environment: dict[str, str] = {}
    if not os.environ.get(DETAILS_ENV):
        set_details_dir_from_argv(args, environment)
    return environment


def run_harness(args: list[str]) -> int:
    judge_args, args = split_judge_arguments(args)
    environment = judge_environment(judge_args) if judge_args else {}
    environment.update(details_environment(args))
    from lm_eval.__main__ import cli_evaluate

    saved = sys.argv, {name: os.environ.get(name) for name in environment}
    sys.argv = harness_argv(args)
    os.environ.update(environment)
    try:
        cli_evaluate()
    finally:
        sys.argv = saved[0]
        for name, value in saved[1].items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return 0


DEMO_EMS_ANSWER_TOKENS = 384


def demo_runs(output_path: str | None, limit: int | None) -> list[list[str]]:
    """lm-eval arguments of ``make demo``, one harness run per benchmark (each reads its own
    ``data_path``): the embedded model on the shipped synthetic samples, offline: the
    FinAgentBench ranking tasks, then fin_ems scored by the offline EMS (no judge) with the
    packaged MiniLM as BERTScore model."""
    model = ["--model", "hf", "--model_args", f"pretrained={paths.embedded_model()},dtype=float32",
             "--apply_chat_template", "--batch_size", "4"]
    metadata = {
        "fin_agentbench": {"data_path": str(paths.data_path("finagentbench_demo"))},
        "fin_ems": {"data_path": str(paths.data_path("ems_demo")), "judge": "none", "bertscore_model": "offline",
                    "max_gen_toks": DEMO_EMS_ANSWER_TOKENS},
    }
    # shorter answers than the task's 1024 tokens keep the demo within a few minutes on 2 cores
    gen_kwargs = {"fin_ems": ["--gen_kwargs", f"max_gen_toks={DEMO_EMS_ANSWER_TOKENS}"]}
    runs = []
    for task, task_metadata in metadata.items():
        argv = [*model, "--tasks", task, "--metadata", json.dumps(task_metadata), *gen_kwargs.get(task, [])]
        if output_path:
            argv += ["--output_path", str(Path(output_path) / task), "--log_samples"]
        if limit:
            argv += ["--limit", str(limit)]
        runs.append(argv)
    return runs


def run_demo(output_path: str | None, limit: int | None) -> int:
    for argv in demo_runs(output_path, limit):
        run_harness(argv)  # lm-eval raises on failure, which stops the demo
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lm-eval-fin",
        description="Financial long-form QA, attribution and retrieval tasks for lm-evaluation-harness.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("tasks-dir", help="print the folder to pass to lm_eval --include_path")
    sub.add_parser("metrics-dir", help="print the folder holding the evaluate metric modules")
    sub.add_parser("model-path", help="print the embedded default model's folder (converting it once)")
    sub.add_parser(
        "run",
        help="lm_eval run with the lm-eval-fin tasks included; --judge and --judge-* set the judge "
        "of the judge metrics, every other argument goes to lm_eval",
        add_help=False,
    )
    demo = sub.add_parser(
        "demo", help="fin_agentbench and fin_ems on the shipped demo samples with the embedded model, offline"
    )
    demo.add_argument("--output_path", default=None)
    demo.add_argument("--limit", type=int, default=None)
    for name, (module, help_text) in _SUBCOMMANDS.items():
        command = sub.add_parser(name, help=help_text)
        add_judge_arguments(command)
        command.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(command)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `run` forwards everything but the judge flags verbatim, so it bypasses our parser.
    if argv and argv[0] == "run":
        return run_harness(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "tasks-dir":
        print(paths.tasks_dir())
    elif args.command == "metrics-dir":
        print(paths.metrics_dir())
    elif args.command == "model-path":
        print(paths.embedded_model())
    elif args.command == "demo":
        return run_demo(args.output_path, args.limit)
    else:
        return int(importlib.import_module(args._module).main(args) or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
