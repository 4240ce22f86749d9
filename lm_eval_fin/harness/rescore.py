"""``lm-eval-fin score``: score the answers of logged lm-eval runs, with a judge.

The two-stage path for one GPU: generate with the model under test
(``lm-eval-fin run ... --predict_only --log_samples --output_path out``), let it free the GPU,
then ``lm-eval-fin score out --judge vllm:<judge model>`` gives the whole GPU to the judge. It
also re-judges a run that was judged before (with another judge, or once a judge that failed
is reachable again).

What it does:

1. Finds the samples files (:func:`lm_eval_fin.outputs.runfiles.find_samples_files`: the given
   ``samples_<task>_<date>.jsonl`` file, or every such file under the given folder) and keeps
   those of our tasks, grouped by run (their folder and lm-eval's run id); the runs ``score``
   wrote itself are left out where the folder holds others (they hold the same answers).
2. Checks, before any model loads: the judge spec and options (``--judge none`` scores without
   a judge), that the samples can be read and carry their run's settings, that the scored
   files can be written where they go,
   ``--confirm_run_unsafe_code`` for tasks whose scoring runs model code (as lm-eval asks of
   ``run``), and, as ``run`` does, that the judge's model or server and the judge cache can
   be used.
3. Replays each run through lm-eval (:mod:`lm_eval_fin.harness.replay`): the same filter stage,
   ``process_results`` and aggregations as a live run, on the logged documents and answers.
   lm-eval writes a normal results file and samples files (a new run id) into
   ``--output_path`` (default: beside the run's own files), and prints its table.

Judge answers are cached (:mod:`lm_eval_fin.judge.cache`): running ``score`` again makes no
model calls, and one that was killed resumes where it stopped. When the judge failed or could
not read some answers, the files are still written (their values null, counted in
``judge_failure`` / ``judge_parse_failure``) and ``score`` exits with status 1; running it
again sends only what is missing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from lm_eval_fin.harness import replay, run, saving, stage, taskfiles
from lm_eval_fin.harness.benchmark import Benchmark, benchmark_of
from lm_eval_fin.harness.settings import NO_JUDGE
from lm_eval_fin.outputs import runfiles
from lm_eval_fin.plumbing import atomic, exit_status
from lm_eval_fin.plumbing.flags import add_flag

PROG = "lm-eval-fin score"


class ScoreError(Exception):
    """A problem with the user's input; reported as one line, exit status 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, help="lm-eval --output_path folder, or one samples_<task>_<date>.jsonl")
    parser.add_argument(
        "--tasks", default=None,
        help="comma-separated tasks to score (default: every task of ours found); names the task of a samples "
        "file renamed by hand",
    )
    parser.add_argument(
        "--output_path", type=Path, default=None,
        help="where lm-eval writes the scored results and samples (default: beside each run's own files)",
    )
    add_flag(parser, "--judge_repeat", type=int, default=1, metavar="N",
        help="score N times, the judge seed one higher each time (sampling needs --judge_temperature above 0), "
        "then print how well the judge agrees with itself",
    )
    parser.add_argument(
        "--confirm_run_unsafe_code", action="store_true",
        help="allow running the model-written code of tasks that score it (fin_lfqa), as lm-eval's flag does",
    )


def main(args: argparse.Namespace, benchmarks: Sequence[Benchmark]) -> int:
    try:
        return _score(args, benchmarks)
    except (ScoreError, runfiles.SamplesError, replay.ReplayError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exit_status.USAGE


def judge_of(args: argparse.Namespace) -> tuple[str | None, dict]:
    """(canonical judge spec or None for ``--judge none``, the judge options given)."""
    from lm_eval_fin.judge import parse_spec
    from lm_eval_fin.judge.options import JUDGE_ENV, check_options, given_options, options_from_env

    if args.judge is None:
        raise ScoreError(f"no judge given: pass --judge <spec> (or --judge none to score without one) or set ${JUDGE_ENV}")
    try:
        options = check_options({**options_from_env(), **given_options(args)})
        spec = None if args.judge.strip().lower() in NO_JUDGE else str(parse_spec(args.judge))
    except ValueError as exc:  # a JudgeSpecError, or a bad option
        raise ScoreError(str(exc)) from None
    return spec, options


def runs_to_score(path: Path, tasks: list[str] | None, benchmarks: Sequence[Benchmark]):
    """The samples files of our tasks under ``path``, by run."""
    files = runfiles.find_samples_files(path, tasks)
    ours = [f for f in files if benchmark_of(f.task, benchmarks) is not None]
    if not ours:
        found = ", ".join(sorted({f.task for f in files}))
        raise ScoreError(f"none of the tasks found ({found}) is an lm-eval-fin task")
    # a run score wrote holds the answers of the run it scored: scoring both again would
    # double the folder's runs at each re-run
    ours = [f for f in ours if not written_by_score(f)] or ours
    for f in ours:
        replay.check_samples(f.path)  # every file readable and ours before anything starts
    by_run: dict[tuple[Path, str], list[runfiles.SamplesFile]] = defaultdict(list)
    for f in ours:
        by_run[f.run_key].append(f)
    return by_run


def written_by_score(samples: runfiles.SamplesFile) -> bool:
    """Whether the samples file belongs to a run that ``score`` wrote (its model: ``fin-replay``)."""
    results = samples.results_path
    try:
        config = json.loads(results.read_text(encoding="utf-8")).get("config") if results else None
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and config.get("model") == replay.MODEL_NAME


def model_name(files: Sequence[runfiles.SamplesFile]) -> str:
    """The model lm-eval named the run after (its results file's ``model_name``), so that the
    scored files land in the same model folder; else the folder's name."""
    results = files[0].results_path
    if results is not None:
        try:
            name = json.loads(results.read_text(encoding="utf-8")).get("model_name")
        except (OSError, ValueError):
            name = None
        if isinstance(name, str) and name and "," not in name:
            return name
    return files[0].path.parent.name


def _score(args: argparse.Namespace, benchmarks: Sequence[Benchmark]) -> int:
    from lm_eval_fin.judge import JudgeOptions, parse_spec
    from lm_eval_fin.judge.preflight import judge_problems

    spec, options = judge_of(args)
    if args.judge_repeat < 1:
        raise ScoreError(f"--judge_repeat must be at least 1, got {args.judge_repeat}")
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    by_run = runs_to_score(args.path, tasks, benchmarks)
    unsafe = sorted({f.task for files in by_run.values() for f in files if taskfiles.task_config(f.task).get("unsafe_code")})
    # every problem before any work, one line each: the unsafe flag, a judge server that cannot
    # answer, an unusable cache
    problems = []
    if unsafe and not args.confirm_run_unsafe_code:
        problems.append(exit_status.Problem(
            f"scoring {', '.join(unsafe)} runs the model's code in the sandbox: pass --confirm_run_unsafe_code"))
    if spec is not None:
        problems += judge_problems([parse_spec(spec)], score_later=False)
    problems += output_problems(args.output_path, by_run)
    if problems:
        return exit_status.report(PROG, problems)
    defaults = JudgeOptions()
    if args.judge_repeat > 1 and options.get("temperature", defaults.temperature) == 0:
        print(f"{PROG}: note: the judge decodes greedily (--judge_temperature 0), so its repeats can only agree",
              file=sys.stderr)
    replay.register_model()
    failed = False
    try:
        for (folder, date), files in by_run.items():
            output = args.output_path or folder.parent
            scored: list[Path] = []
            for repeat in range(args.judge_repeat):
                seeded = {**options, "seed": options.get("seed", defaults.seed) + repeat} if args.judge_repeat > 1 \
                    else options
                # the results files each repeat writes, for the stability table (walks of the output tree)
                before = set(output.rglob("results_*.json")) if args.judge_repeat > 1 else set()
                outcome = _replay(files, spec, seeded, output, unsafe, f"run {date or folder}")
                if args.judge_repeat > 1:
                    scored += sorted(set(output.rglob("results_*.json")) - before)
                failed = run.report_outcome(PROG, outcome) or failed
            if args.judge_repeat > 1 and spec is not None:
                print(judge_stability(scored))
    finally:
        stage.close_judges()  # one judge for every run scored, its engine freed when the command ends
    return exit_status.INCOMPLETE if failed else exit_status.OK


def output_problems(output_path: Path | None, by_run) -> list[exit_status.Problem]:
    """Why the scored files could not be written where they go (``--output_path``, else beside
    each run): a file where lm-eval makes a folder, a folder that cannot be written or is
    full, a model folder name too long; once per folder."""
    problems = {}
    for (folder, _), files in by_run.items():
        output = output_path or folder.parent
        flag = "--output_path" if output_path else "the run's folder"
        lines = saving.output_problems(output, model_name(files), flag) or \
            [line for line in [atomic.output_problem(output, flag=flag)] if line]
        problems.update(dict.fromkeys(lines))
    return [exit_status.Problem(line) for line in problems]


def _replay(files, spec: str | None, options: dict, output: Path, unsafe: list[str], which: str):
    """One replay of a logged run through lm-eval; what it left undone."""
    with tempfile.TemporaryDirectory(prefix="lm-eval-fin-score-") as scratch:
        plan_path = Path(scratch) / "replay.json"
        replay.Plan({f.task: str(f.path) for f in files}, spec, options).write(plan_path)
        argv = [
            "--model", replay.MODEL_NAME, "--model_args", f"pretrained={model_name(files)}",
            "--tasks", ",".join(f.task for f in files), "--output_path", str(output), "--log_samples",
            *(["--confirm_run_unsafe_code"] if unsafe else []),
        ]
        print(f"{PROG}: scoring {', '.join(f.task for f in files)} of {which} with judge {spec}", file=sys.stderr)
        return run.call_lm_eval(argv, {replay.REPLAY_ENV: str(plan_path)})


def judge_stability(results: Sequence[Path]) -> str:
    """How well the judge agreed with itself over the repeated scorings (:mod:`lm_eval_fin.agreement`)."""
    from lm_eval_fin.agreement.command import render
    from lm_eval_fin.agreement.matching import collect
    from lm_eval_fin.agreement.settings import StudySettings
    from lm_eval_fin.agreement.study import REPEATS, run_study

    settings = StudySettings()
    study = run_study(collect([str(path) for path in results]), None, settings)
    tables = [render(c, settings.confidence) for c in study.comparisons if c.kind == REPEATS]
    return "\n".join(tables) or "no judged answer was repeated"
