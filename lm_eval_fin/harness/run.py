"""``lm-eval-fin run``: lm-eval's own CLI with our task folder included and our judge flags.

Every argument but the judge flags (``--judge`` and ``--judge-*``, the same as on every other
subcommand) goes to lm-eval's CLI untouched, so nothing of the harness's argument parsing is
re-implemented. The judge flags reach the tasks as ``$LM_EVAL_FIN_JUDGE`` and
``$LM_EVAL_FIN_JUDGE_OPTIONS``, read when each task's dataset loads; fin_ems's per-document
details go under lm-eval's ``--output_path``. When a judge failed on some documents, the
command exits with status 1 after lm-eval has written its results. Our model wrapper,
``--model fin-refine`` (:mod:`lm_eval_fin.harness.multistep`), is registered before lm-eval
resolves the model name.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from lm_eval_fin import paths
from lm_eval_fin.harness import corpus, outputs
from lm_eval_fin.judge.options import (
    JUDGE_ENV,
    JUDGE_OPTIONS_ENV,
    add_judge_arguments,
    flag_of,
    given_options,
    option_fields,
    options_from_env,
)

JUDGE_FAILED_STATUS = 1


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
    """The environment that hands the judge flags of ``run`` to the tasks. A bad spec or value
    stops here (exit status 2), before lm-eval loads a model."""
    from lm_eval_fin.judge import JudgeSpecError, parse_spec

    parser = argparse.ArgumentParser(
        prog="lm-eval-fin run",
        usage="lm-eval-fin run [--judge SPEC] [--judge-<option> VALUE ...] <lm_eval arguments>",
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


def run_harness(args: list[str]) -> int:
    """Run lm-eval with ``args``; 1 when a judge failed on some documents, else 0."""
    judge_args, args = split_judge_arguments(args)
    environment = judge_environment(judge_args) if judge_args else {}
    if not os.environ.get(outputs.DETAILS_ENV):
        outputs.set_details_dir_from_argv(args, environment)
    from lm_eval.__main__ import cli_evaluate

    from lm_eval_fin.harness import multistep  # noqa: F401 - registers --model fin-refine

    saved = sys.argv, {name: os.environ.get(name) for name in environment}
    sys.argv = harness_argv(args)
    os.environ.update(environment)
    failures_before = len(corpus.FAILURES)
    try:
        cli_evaluate()
    finally:
        sys.argv = saved[0]
        for name, value in saved[1].items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    failures = corpus.FAILURES[failures_before:]
    for failure in failures:
        print(
            f"lm-eval-fin run: error: {failure.task}: the judge failed on {failure.failed} and answered "
            f"unreadably on {failure.unparsed} of {failure.documents} documents (first error: "
            f"{failure.first_error}); the results leave them out. Run the same command again to resume "
            "from the judge cache.",
            file=sys.stderr,
        )
    return JUDGE_FAILED_STATUS if failures else 0
