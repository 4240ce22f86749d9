"""The ``lm-eval-fin`` console script: the subcommand table.

``run`` is lm-eval's own CLI with our tasks included (:mod:`lm_eval_fin.harness.run`); the
other subcommands reach the core without the harness. Each lives in its own module, which
registers its arguments (``add_arguments(parser)``) and runs the command (``main(args)``).
Every option's help ends with its default, written one way (:class:`HelpFormatter`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from lm_eval_fin import __version__
from lm_eval_fin.judge.options import add_judge_arguments
from lm_eval_fin.plumbing import exit_status, interrupts, paths, vllm_memory
from lm_eval_fin.plumbing.flags import HelpFormatter
from lm_eval_fin.text.cleantext import one_line

# subcommand -> (module with add_arguments(parser) and main(args[, benchmarks]), summary)
_SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "score": ("lm_eval_fin.harness.rescore", "score the logged answers of lm-eval runs (a --predict_only run), with a judge"),
    "build": ("lm_eval_fin.builders.cli", "build a benchmark dataset (earnings-call)"),
    "rerank": ("lm_eval_fin.benchmarks.fin_agentbench.rerank", "FinCARDS reranking on FinAgentBench chunk files"),
    "report": ("lm_eval_fin.report.cli", "one HTML page, Markdown and CSV leaderboard of many lm-eval runs"),
    "export": ("lm_eval_fin.export.cli", "export lm-eval runs as Every Eval Ever records or a model card's model-index"),
    "agreement": ("lm_eval_fin.agreement.command", "how well a judge agrees with people, another judge and itself"),
    "doctor": ("lm_eval_fin.harness.doctor", "print what is installed and usable here (models, vllm, sandbox, a judge)"),
}
# subcommands whose main also takes the benchmarks
_WITH_BENCHMARKS = ("score", "report")
# subcommands that use a judge, so take --judge and its options
_WITH_JUDGE = ("score", "build", "rerank", "doctor")
_FOLDERS = {
    "tasks-dir": ("the installed task folder, for lm_eval --include_path", paths.tasks_dir),
    "metrics-dir": ("the installed evaluate metric modules, for evaluate.load(<dir>/<name>)", paths.metrics_dir),
    "data-dir": ("the shipped data: demo samples (ems_demo, finagentbench_demo, finlfqa_demo) and the EMS "
                 "questions", lambda: paths.data_path()),
    "model-path": ("the embedded default model as a transformers folder (converted from its GGUF once)",
                   paths.embedded_model),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lm-eval-fin",
        description="Financial long-form QA, attribution and retrieval tasks for lm-evaluation-harness.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"lm-eval-fin {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser(
        "run",
        help="lm_eval run with the lm-eval-fin tasks included and checked first; see `lm-eval-fin run --help`",
        add_help=False,
    )
    demo = sub.add_parser(
        "demo", help="every benchmark on its shipped sample with the embedded model, offline, then a report",
        formatter_class=HelpFormatter,
    )
    demo.add_argument("--output_path", default="demo-results", help="folder for results, samples and the report")
    demo.add_argument("--limit", type=int, default=None, help="documents per task (default: all)")
    for name, (help_text, _) in _FOLDERS.items():
        sub.add_parser(name, help=f"print {help_text}", description=f"Print {help_text}.")
    for name, (module, help_text) in _SUBCOMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".",
                                 formatter_class=HelpFormatter)
        if name in _WITH_JUDGE:
            add_judge_arguments(command)
        command.set_defaults(_module=module)
        importlib.import_module(module).add_arguments(command)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The program; ``argv`` None: this process's own arguments. Ctrl-C and SIGTERM end any
    command with one line (:mod:`lm_eval_fin.plumbing.interrupts`), status 130 or 143."""
    as_program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv and not argv[0].startswith("-") else None
    status = interrupts.run_interruptible(command, lambda: _main(argv), _judge_cache_path)
    if as_program and status in (exit_status.INTERRUPTED, exit_status.TERMINATED):
        # a thread still waiting on a server (a judge request in flight) would hold the exit
        # until its timeout: nothing is left to write, so the process ends now
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


def _judge_cache_path() -> object:
    from lm_eval_fin.judge.cache import default_cache_path

    return default_cache_path()


def _main(argv: list[str]) -> int:
    # `run` forwards everything but our own options verbatim, so it has its own parser.
    if argv and argv[0] == "run":
        from lm_eval_fin.benchmarks import all_benchmarks
        from lm_eval_fin.harness.run import run_harness

        return run_harness(argv[1:], all_benchmarks())
    args = build_parser().parse_args(argv)
    if args.command in _FOLDERS:
        print(_FOLDERS[args.command][1]())
        return 0
    if args.command == "demo":
        from lm_eval_fin.benchmarks import all_benchmarks
        from lm_eval_fin.harness.demo import run_demo

        return run_demo(args.output_path, args.limit, all_benchmarks())
    return run_subcommand(args)


def run_subcommand(args: argparse.Namespace) -> int:
    """A subcommand of :data:`_SUBCOMMANDS`. A judge that is misconfigured or whose cache is
    unusable ends the command with one line that names the fix, never a traceback: no retry
    or re-run can help until the user changes something. So does a file that cannot be
    written once the work started (status 1: the work done so far is kept)."""
    from lm_eval_fin.judge import JudgeCacheError, JudgeConfigError, JudgeSpecError

    module = importlib.import_module(args._module)
    status = vllm_memory.settle(f"lm-eval-fin {args.command}",
                                vllm_memory.vllm_models_of_judge(getattr(args, "judge", None)))
    if status:
        return status
    try:
        if args.command in _WITH_BENCHMARKS:
            from lm_eval_fin.benchmarks import all_benchmarks

            return int(module.main(args, all_benchmarks()) or 0)
        return int(module.main(args) or 0)
    except (JudgeSpecError, JudgeConfigError) as exc:
        print(f"lm-eval-fin {args.command}: error: {one_line(exc, 600)}", file=sys.stderr)
        return exit_status.USAGE
    except JudgeCacheError as exc:
        print(f"lm-eval-fin {args.command}: error: {one_line(exc, 600)}", file=sys.stderr)
        return exit_status.JUDGE_CACHE
    except OSError as exc:  # a file it could not write (a full disk) or read after it started
        print(f"lm-eval-fin {args.command}: error: {one_line(exc, 600)}; the files written before are whole "
              "(each is written at once or not at all), and judge answers are in the judge cache", file=sys.stderr)
        return exit_status.INCOMPLETE


if __name__ == "__main__":
    sys.exit(main())
