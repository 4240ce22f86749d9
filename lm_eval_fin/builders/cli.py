"""``lm-eval-fin build earnings-call``: make the fin_ems dataset.

    lm-eval-fin build earnings-call --output_path data/ems \\
        --judge vllm:Qwen/Qwen2.5-7B-Instruct                 # all three roles
    lm-eval-fin build earnings-call --source ./transcripts --tickers AAPL,MSFT \\
        --answerer_a openai:http://127.0.0.1:8000/v1#model-a \\
        --answerer_b openai:http://127.0.0.1:8001/v1#model-b \\
        --consolidator openai:http://127.0.0.1:8000/v1#model-a --output_path data/ems

The judge options (``--judge_max_tokens`` ...) apply to all three roles. With one spec for
both answerers (``--judge`` alone) both answers come from one model: the build warns, and
answerer B asks with its own seed (sampling when the judge is greedy) so that it does not
get answerer A's answer back from the cache. See :mod:`lm_eval_fin.builders.earnings_call`
for the record format and call selection.
"""

from __future__ import annotations

import argparse
import json
import sys

from lm_eval_fin.benchmarks.fin_ems.data import write_dataset
from lm_eval_fin.builders import earnings_call as ec
from lm_eval_fin.plumbing import atomic, exit_status
from lm_eval_fin.plumbing.exit_status import Problem
from lm_eval_fin.plumbing.flags import add_flag

DATASETS = ("earnings-call",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", choices=DATASETS, help="the dataset to build")
    parser.add_argument("--output_path", "--output", required=True,
                        help="output folder (JSONL + save_to_disk folder; --output is an alias)")
    parser.add_argument(
        "--source",
        default="hub",
        help=f"'hub' for {ec.HUB_DATASET}, or a folder of <TICKER>_<YYYY-MM-DD>.txt files "
        "(or .txt with a .json sidecar giving ticker and call_date) and/or hub-style .jsonl files",
    )
    parser.add_argument(
        "--revision", default=ec.HUB_REVISION, help="hub dataset revision (pinned by default)"
    )
    parser.add_argument(
        "--tickers",
        default=",".join(ec.PAPER_COMPANIES),
        help="comma-separated tickers (default: the paper's ten companies)",
    )
    parser.add_argument(
        "--quarter",
        default=ec.PAPER_QUARTER,
        help="calendar quarter, e.g. 2024Q3; fiscal labels are never used (with --quarter_basis results, the "
        "default is the paper's calls)",
    )
    add_flag(parser, "--quarter_basis", choices=ec.QUARTER_BASES,
        default=ec.DEFAULT_QUARTER_BASIS,
        help="results (default): the calls reporting that quarter's results, held in the quarter after "
        "it (2024Q3 -> calls held 2024-10-01..2024-12-31, the paper's dataset); call-date: the calls "
        "held in that quarter (2024Q3 -> calls held 2024-07-01..2024-09-30)",
    )
    parser.add_argument("--questions", default=None, help="questions JSON (default: the paper's five)")
    add_flag(parser, "--answerer_a", default=None, help="judge spec of the first answerer (default: --judge)"
    )
    add_flag(parser, "--answerer_b", default=None, help="judge spec of the second answerer (default: --judge)"
    )
    parser.add_argument(
        "--consolidator", default=None, help="judge spec of the consolidator (default: --judge)"
    )


def main(args: argparse.Namespace) -> int:
    from lm_eval_fin.judge import load_judge, parse_spec
    from lm_eval_fin.judge.options import options_from_args
    from lm_eval_fin.judge.preflight import judge_problems

    roles = {
        "answerer_a": args.answerer_a or args.judge,
        "answerer_b": args.answerer_b or args.judge,
        "consolidator": args.consolidator or args.judge,
    }
    unset = [name for name, spec in roles.items() if not spec]
    if unset:
        print(
            f"lm-eval-fin build: error: no judge for {', '.join(unset)}: pass --judge (or $LM_EVAL_FIN_JUDGE) or "
            "--answerer_a/--answerer_b/--consolidator",
            file=sys.stderr,
        )
        return exit_status.USAGE
    for spec in dict.fromkeys(roles.values()):
        parse_spec(spec)  # a bad spec ends the command here (one line), before any transcript is read
    try:
        tickers = [t.strip().upper() for t in args.tickers.split(",") if t.strip()]
        year, quarter = ec.parse_quarter(args.quarter)
        window = ec.quarter_window(year, quarter, args.quarter_basis)
        questions = ec.load_questions(args.questions)
        transcripts, source = ec.transcripts_from_source(args.source, tickers, args.revision)
        selected = ec.select_transcripts(transcripts, tickers, window)
    except ec.BuildError as exc:
        print(f"lm-eval-fin build: error: {exc}", file=sys.stderr)
        return exit_status.USAGE
    if not selected:
        print(
            f"lm-eval-fin build: error: no call of {', '.join(tickers)} held {window[0]}..{window[1]} "
            f"({args.quarter_basis} basis of {year}Q{quarter}) in {source}",
            file=sys.stderr,
        )
        return exit_status.USAGE

    # before any judge works: each judge can answer, the cache takes writes, the output has room
    output = atomic.output_problem(args.output_path)
    problems = [Problem(output)] if output else []
    problems += judge_problems([parse_spec(spec) for spec in dict.fromkeys(roles.values())], score_later=False)
    if problems:
        return exit_status.report("lm-eval-fin build", problems)
    # One judge per distinct spec: a model serving two roles is loaded once.
    options = options_from_args(args)
    judges = {spec: load_judge(spec, options) for spec in dict.fromkeys(roles.values())}
    report = ec.build_records(
        selected,
        questions,
        judges[roles["answerer_a"]],
        judges[roles["answerer_b"]],
        judges[roles["consolidator"]],
        source,
    )
    if not report.records:
        print("lm-eval-fin build: error: no reference could be made (every judge call failed)", file=sys.stderr)
        return exit_status.INCOMPLETE
    jsonl, disk = write_dataset(report.records, args.output_path)
    summary = {
        "calls_held": f"{window[0]}..{window[1]} ({args.quarter_basis} basis of {year}Q{quarter})",
        "transcripts": [f"{t.ticker} {t.call_date}" for t in selected],
        "records": len(report.records),
        "skipped": report.skipped,
        "seconds": {k: round(v, 2) for k, v in report.seconds.items()},
        "jsonl": str(jsonl),
        "dataset": str(disk),
    }
    print(json.dumps(summary, indent=2))
    print(
        f'run it: lm-eval-fin run --tasks fin_ems --metadata \'{{"data_path": "{args.output_path}"}}\' ...',
        file=sys.stderr,
    )
    return 0
