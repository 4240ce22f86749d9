"""``lm-eval-fin report RESULTS_DIR [RESULTS_DIR ...] --output_path OUT_DIR``.

Exit status: 0 when every run was read; 1 when some could not be read (the report of the
others is written, and the unreadable ones are listed on the page and on stderr); 2 when
none could be read or the arguments are wrong.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

from lm_eval_fin.agreement.figures import AgreementFileError
from lm_eval_fin.plumbing import atomic, exit_status
from lm_eval_fin.report import judge_agreement, stats
from lm_eval_fin.report.build import DEFAULT_TITLE, write_report_files
from lm_eval_fin.report.leaderboard import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results_dirs", nargs="+", metavar="RESULTS_DIR",
                        help="lm-eval --output_path folders (or results_<date>.json files)")
    parser.add_argument("--output_path", required=True, help="folder for index.html, leaderboard.md and leaderboard.csv")
    parser.add_argument("--name", action="append", default=[], metavar="NAME",
                        help="the row name of the runs in the n-th RESULTS_DIR (repeat, in order); default: the model")
    parser.add_argument("--title", default=DEFAULT_TITLE, help=f"the page title (default: {DEFAULT_TITLE!r})")
    parser.add_argument("--export_dir", default=None, metavar="DIR",
                        help="an `lm-eval-fin export` folder to link from the page (its model-index.yaml and data/)")
    parser.add_argument("--agreement", action="append", default=[], metavar="FILE",
                        help="an `lm-eval-fin agreement` figures file (agreement.json, or its folder) whose figures "
                             "the page shows next to the judged metrics (repeat for several)")
    parser.add_argument("--bootstrap_iters", type=int, default=stats.BOOTSTRAP_RESAMPLES,
                        help="bootstrap resamples per interval")
    parser.add_argument("--permutation_iters", type=int, default=stats.PERMUTATION_RESAMPLES,
                        help="random sign patterns of a paired test beyond 16 shared questions")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resampling")


def main(args: argparse.Namespace, benchmarks: Iterable[Any] = ()) -> int:
    if len(args.name) > len(args.results_dirs):
        print(f"lm-eval-fin report: error: {len(args.name)} --name for {len(args.results_dirs)} RESULTS_DIR",
              file=sys.stderr)
        return exit_status.USAGE
    for flag in ("bootstrap_iters", "permutation_iters"):
        if getattr(args, flag) < 1:
            print(f"lm-eval-fin report: error: --{flag} must be at least 1", file=sys.stderr)
            return exit_status.USAGE
    problem = atomic.output_folder_problem(args.output_path)  # before the page is built
    if problem:
        print(f"lm-eval-fin report: error: {problem}", file=sys.stderr)
        return exit_status.USAGE
    try:
        agreement = judge_agreement.load(args.agreement)
    except AgreementFileError as exc:
        print(f"lm-eval-fin report: error: --agreement {exc}", file=sys.stderr)
        return exit_status.USAGE
    settings = Settings(bootstrap_resamples=args.bootstrap_iters, permutation_resamples=args.permutation_iters,
                        seed=args.seed)
    report = write_report_files(args.results_dirs, args.output_path, args.name, args.title, settings, benchmarks,
                                args.export_dir, agreement)
    board = report.board
    for item in board.unreadable:
        print(f"lm-eval-fin report: cannot read {item.path}: {item.reason}", file=sys.stderr)
    runs = sum(len(row.runs) for row in board.models)
    print(f"report of {runs} run{'s' if runs != 1 else ''} in {len(board.models)} model rows "
          f"({report.seconds:.1f} s): {report.files['index.html']}")
    if not board.models:
        return exit_status.USAGE
    return exit_status.INCOMPLETE if board.unreadable else exit_status.OK
