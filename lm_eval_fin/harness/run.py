"""``lm-eval-fin run``: lm-eval's own CLI with our task folder included, our judge flags, and
the run checked before lm-eval loads a model.

Our options (``--judge``, ``--judge_<option>``) are parsed here, a mistyped ``--judge_*`` flag
included; every other argument goes to lm-eval's CLI untouched, so nothing of the harness's
argument parsing is re-implemented. Before lm-eval starts, every task of ours the command names
is checked the way its dataset will load (metadata keys, judge spec and options, the data
itself), and what lm-eval would find only once the model is loaded (:mod:`.startchecks`: JSON
arguments, the unsafe-code flag, ``--limit``, a hub dataset that cannot be reached), each
problem one line and exit status 2: a run that cannot finish fails before hours of generation,
not after. lm-eval's "Tasks not found" ends as one line with a hint. The judge flags reach the
tasks as ``$LM_EVAL_FIN_JUDGE`` and ``$LM_EVAL_FIN_JUDGE_OPTIONS``. When a judge failed on some documents, the command exits with
status 1 after lm-eval has written its results; so it does when lm-eval could not write a results or
samples file whole (:mod:`.saving`: the run is then kept elsewhere, and one line says where). Our model wrapper, ``--model fin-refine``
(:mod:`lm_eval_fin.harness.multistep`), is registered before lm-eval resolves the model name.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from lm_eval_fin.harness import compat, preflight, saving, stage, startchecks, taskfiles
from lm_eval_fin.harness.benchmark import Benchmark
from lm_eval_fin.harness.settings import SettingsError
from lm_eval_fin.judge.base import failure_phrase
from lm_eval_fin.judge.options import (
    JUDGE_ENV,
    JUDGE_OPTIONS_ENV,
    add_judge_arguments,
    given_options,
    options_from_env,
)
from lm_eval_fin.plumbing import exit_status, paths, vllm_memory
from lm_eval_fin.plumbing.flags import HelpFormatter, is_alias
from lm_eval_fin.text.cleantext import one_line

PROG = "lm-eval-fin run"


class RunError(Exception):
    """A run that cannot start; the message is one line naming the fix."""


def run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} [--judge SPEC] [--judge_<option> VALUE ...] <lm_eval run arguments>",
        description="lm-eval's `run` with the lm-eval-fin tasks included (--include_path is set for you). "
        "The options below are lm-eval-fin's; every other argument goes to lm-eval unchanged.",
        epilog="lm-eval's own arguments (--model, --model_args, --tasks, --metadata, --output_path, "
        "--log_samples, ...): see `lm_eval run --help`.",
        add_help=False,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    add_judge_arguments(parser)
    return parser


def split_arguments(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """(our options, lm-eval's arguments). A ``--judge_*`` flag that is not ours is a typo
    and an error naming the closest flag, not an argument for lm-eval."""
    parser = run_parser()
    ours, rest = parser.parse_known_args(list(argv))
    flags = [flag for action in parser._actions for flag in action.option_strings if not is_alias(flag)]
    for arg in rest:
        name = arg.partition("=")[0]
        if name.startswith("--judge"):
            close = difflib.get_close_matches(name, flags, n=1)
            hint = f"; did you mean {close[0]}?" if close else f"; see `{PROG} --help`"
            parser.error(f"unrecognised option {name}{hint}")
        if name == "--include_path":
            parser.error(
                "lm-eval-fin run sets --include_path itself; to combine folders call lm_eval directly "
                'with --include_path "$(lm-eval-fin tasks-dir)"'
            )
    return ours, rest


def harness_argv(args: list[str]) -> list[str]:
    """The argv for lm-eval's CLI: our task folder as ``--include_path``, the rest untouched."""
    return ["lm-eval", "run", "--include_path", str(paths.tasks_dir()), *args]


def judge_environment(ours: argparse.Namespace, argv: Sequence[str]) -> dict[str, str]:
    """The environment that hands our judge flags to the tasks. A bad spec or value stops
    here, before lm-eval loads a model."""
    from lm_eval_fin.judge import JudgeSpecError, parse_spec

    environment = {}
    if any(arg.partition("=")[0] == "--judge" for arg in argv):
        try:
            environment[JUDGE_ENV] = str(parse_spec(ours.judge))
        except JudgeSpecError as exc:
            raise RunError(str(exc)) from None
    given = given_options(ours)
    if given:
        try:
            options = {**options_from_env(), **given}
        except ValueError as exc:
            raise RunError(str(exc)) from None
        environment[JUDGE_OPTIONS_ENV] = json.dumps(options, sort_keys=True)
    return environment


def lm_eval_arguments(args: list[str]) -> argparse.Namespace:
    """lm-eval's own reading of its arguments (its parser, so --tasks and --metadata mean
    what they mean to it); an argument it rejects ends here with its own message."""
    return compat.run_arguments(args)


@contextlib.contextmanager
def environment_set(environment: Mapping[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass(frozen=True)
class Outcome:
    """What a finished lm-eval run left to report: the judge failures its tasks recorded, and
    the files lm-eval could not write whole (:mod:`.saving`)."""

    judge_failures: list[stage.JudgeFailures]
    unsaved: list[saving.Unsaved]


def call_lm_eval(args: Sequence[str], environment: Mapping[str, str]) -> Outcome:
    """lm-eval's own CLI on ``args`` (our task folder included) with ``environment`` set, its
    writes checked. lm-eval raises on its own errors."""
    from lm_eval_fin.harness import multistep  # noqa: F401 - registers --model fin-refine

    saved_argv = sys.argv
    sys.argv = harness_argv(list(args))
    failures_before = len(stage.FAILURES)
    try:
        with environment_set(environment), only_our_tasks(lm_eval_arguments(list(args)).tasks or []), \
                saving.checked_saves() as unsaved:
            compat.cli_evaluate()
    finally:
        sys.argv = saved_argv
    return Outcome(stage.FAILURES[failures_before:], unsaved)


@contextlib.contextmanager
def only_our_tasks(tasks: Sequence[str]) -> Iterator[None]:
    """When every task named is ours, lm-eval's task manager reads only our task folder: it
    would otherwise index its own ~13,000 task files first (8 s of CPU on every run)."""
    from lm_eval.tasks import TaskManager

    names = [name for task in tasks for name in str(task).split(",") if name]
    ours = set(taskfiles.names())
    if not names or not all(name in ours for name in names):
        yield
        return
    index = TaskManager.__init__

    def ours_only(self, *positional, **keywords):
        keywords["include_defaults"] = False
        index(self, *positional, **keywords)

    TaskManager.__init__ = ours_only
    try:
        yield
    finally:
        TaskManager.__init__ = index


def report_outcome(prog: str, outcome: Outcome) -> bool:
    """Print what the run left undone, one line each; whether anything was."""
    for unsaved in outcome.unsaved:
        print(f"{prog}: error: {unsaved.line()}", file=sys.stderr)
    report_failures(prog, outcome.judge_failures)
    return bool(outcome.unsaved or outcome.judge_failures)


def report_failures(prog: str, failures: Sequence[stage.JudgeFailures]) -> None:
    for failure in failures:
        print(
            f"{prog}: error: {failure.task}: "
            f"{failure_phrase(failure.failed, failure.unparsed, failure.documents, failure.first_error)}; their "
            "judged values are null in the results and samples. Run the same command again to resume from the "
            "judge cache.",
            file=sys.stderr,
        )


def vllm_models(lm_args: argparse.Namespace, environment: Mapping[str, str]) -> list[str]:
    """The models the run loads into vLLM engines, as lm-eval reads its arguments: the model
    under test on lm-eval's ``vllm`` backend (or as ``fin-refine``'s base), and a ``vllm:`` judge
    (``--judge``, else ``$LM_EVAL_FIN_JUDGE``)."""
    backend, model_args = preflight.model_backend(lm_args.model, lm_args.model_args)
    models = [str(model_args.get("pretrained") or "")] if backend == "vllm" else []
    return models + vllm_memory.vllm_models_of_judge(environment.get(JUDGE_ENV, os.environ.get(JUDGE_ENV)))


def run_harness(argv: Sequence[str], benchmarks: Sequence[Benchmark]) -> int:
    """``lm-eval-fin run``: 0, 1 when a judge failed on some documents, 2 when the run could
    not start (with one line saying why)."""
    ours, args = split_arguments(argv)
    if ours.help:
        run_parser().print_help()
        return 0
    try:
        environment = judge_environment(ours, argv)
        problem = startchecks.json_argument_problem(args)
        if problem:
            raise RunError(problem)
        lm_args = lm_eval_arguments(args)
        status = vllm_memory.settle(PROG, vllm_models(lm_args, environment))
        if status:
            return status
        with environment_set(environment):
            problems = preflight.run_problems(lm_args, benchmarks)
            problems += [exit_status.Problem(line) for line in startchecks.start_problems(lm_args, benchmarks)]
    except RunError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exit_status.USAGE
    if problems:
        return exit_status.report(PROG, problems)
    try:
        outcome = call_lm_eval(args, environment)
    except SettingsError as exc:
        # raised while lm-eval loads a task's dataset (a model argument the pre-check cannot see,
        # such as a tokenizer that does not load), so before any generation
        print(f"{PROG}: error: {one_line(exc, 1000)}", file=sys.stderr)
        return exit_status.USAGE
    except ValueError as exc:  # lm-eval's "Tasks not found" comes before any model loads
        hint = startchecks.tasks_not_found_hint(exc)
        if hint is None:
            raise
        print(f"{PROG}: error: {hint}", file=sys.stderr)
        return exit_status.USAGE
    return exit_status.INCOMPLETE if report_outcome(PROG, outcome) else exit_status.OK
