"""The ``lm-eval-fin`` console script: the subcommand table.

``run`` is lm-eval's own CLI with our tasks included (:mod:`lm_eval_fin.harness.run`); the
other subcommands reach the core without the harness. Each lives in its own module, which
registers its arguments and runs the command.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from lm_eval_fin import paths
from lm_eval_fin.judge.options import add_judge_arguments

# subcommand -> (module with add_arguments(parser) and main(args), help)
_SUBCOMMANDS = {
    "score": ("lm_eval_fin.harness.rescore", "re-score lm-eval samples with the judge metrics of their task"),
    "build": ("lm_eval_fin.builders.cli", "build a benchmark dataset (earnings-call)"),
    "rerank": ("lm_eval_fin.benchmarks.fin_agentbench.rerank", "FinCARDS reranking on FinAgentBench chunk files"),
}


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
        from lm_eval_fin.benchmarks import all_benchmarks
        from lm_eval_fin.harness.run import run_harness

        return run_harness(argv[1:], all_benchmarks())
    args = build_parser().parse_args(argv)
    if args.command == "tasks-dir":
        print(paths.tasks_dir())
    elif args.command == "metrics-dir":
        print(paths.metrics_dir())
    elif args.command == "model-path":
        print(paths.embedded_model())
    elif args.command == "demo":
        from lm_eval_fin.benchmarks import all_benchmarks
        from lm_eval_fin.harness.demo import run_demo

        return run_demo(args.output_path, args.limit, all_benchmarks())
    elif args.command == "score":
        from lm_eval_fin.benchmarks import all_benchmarks
        from lm_eval_fin.harness import rescore

        return rescore.main(args, all_benchmarks())
    else:
        return int(importlib.import_module(args._module).main(args) or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
