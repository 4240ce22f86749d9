"""``lm-eval-fin agreement RESULTS_DIR... [--labels FILE] [--output_path DIR] [--pairwise]`` and
``lm-eval-fin agreement --template N RESULTS_DIR... --output_path DIR``.

Exit status: 0 when every figure could be computed from everything given; 1 when some runs
could not be read or a judge left answers it should have judged undefined (they are left out
of the figures and counted; a judge that gave no value at all is one); 2 for bad arguments, an
``--output_path`` that cannot take the files (found before any work), a bad label file (one
line names the file, line and problem) or nothing to compare.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lm_eval_fin import __version__
from lm_eval_fin.agreement.figures import FORMAT, OUTPUT_NAME, Estimate
from lm_eval_fin.agreement.settings import CONFIDENCE, RESAMPLES, StudySettings
from lm_eval_fin.outputs.records import strict
from lm_eval_fin.plumbing import atomic, exit_status

if TYPE_CHECKING:  # the statistics load scipy and scikit-learn: only when the command runs
    from lm_eval_fin.agreement.matching import Collection
    from lm_eval_fin.agreement.study import Comparison, Study

PROG = "lm-eval-fin agreement"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results_dirs", nargs="+", metavar="RESULTS_DIR",
                        help="lm-eval --output_path folders of judged fin_lfqa / fin_ems runs, samples logged")
    parser.add_argument("--labels", metavar="FILE",
                        help="people's labels: JSONL (or the filled-in template CSV); see docs/agreement.md")
    parser.add_argument("--template", type=int, metavar="N",
                        help="write a label template of N answers drawn across the models instead of figures")
    parser.add_argument("--output_path", metavar="DIR",
                        help=f"folder for {OUTPUT_NAME} (or, with --template, the template files)")
    parser.add_argument("--resamples", type=int, default=RESAMPLES, help="bootstrap resamples per interval")
    parser.add_argument("--confidence", type=float, default=CONFIDENCE, help="interval coverage")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resampling and of the template's draw")
    parser.add_argument("--pairwise", action="store_true",
                        help="besides the annotators pooled, each pair of annotators and each annotator against each "
                             "judge (a comparison per pair: slow with many annotators)")


def _error(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return exit_status.USAGE


def _usage_problem(args: argparse.Namespace) -> str | None:
    if args.resamples < 1:
        return "--resamples must be at least 1"
    if not 0 < args.confidence < 1:
        return "--confidence must be between 0 and 1"
    if args.template is not None:
        if args.template < 1:
            return "--template N needs N of at least 1"
        if not args.output_path:
            return "--template needs --output_path, the folder for the template"
        if args.labels:
            return "--template writes a template; give --labels in a separate call"
    return None


def output_folder_problem(output_path: str | None, names: Sequence[str]) -> str | None:
    """Why the files ``names`` could not be written in the folder ``output_path``: it is a file,
    cannot be written or is full (:func:`lm_eval_fin.plumbing.atomic.output_folder_problem`), or one of
    the files is a folder. Asked before any work."""
    if not output_path:
        return None
    problem = atomic.output_folder_problem(output_path)
    if problem:
        return problem
    folder = Path(output_path).expanduser()
    taken = [name for name in names if (folder / name).is_dir()]
    if taken:
        return f"--output_path {output_path}: {', '.join(taken)} there is a folder; move it or choose another folder"
    return None


def main(args: argparse.Namespace) -> int:
    from lm_eval_fin.agreement.labels import LabelError, read_labels
    from lm_eval_fin.agreement.matching import collect, match_labels
    from lm_eval_fin.agreement.study import run_study
    from lm_eval_fin.agreement.template import CSV_NAME, JSONL_NAME

    problem = _usage_problem(args) or output_folder_problem(
        args.output_path, (JSONL_NAME, CSV_NAME) if args.template is not None else (OUTPUT_NAME,))
    if problem:
        return _error(problem)
    started = time.monotonic()
    collection = collect(args.results_dirs)
    for item in collection.unreadable:
        print(f"{PROG}: cannot read {item.path}: {item.reason}", file=sys.stderr)
    for note in collection.notes:
        print(f"{PROG}: {note}", file=sys.stderr)
    if not collection.answers:
        return _error("no logged fin_lfqa or fin_ems samples in " + ", ".join(args.results_dirs))
    incomplete = bool(collection.unreadable)
    if args.template is not None:
        return _template(args, collection, incomplete)
    if not collection.judges:
        return _error("no judged answers in the runs (their settings name no judge)")
    people = None
    try:
        if args.labels:
            labels, preferences, _ = read_labels(args.labels)
            people = match_labels(labels, preferences, collection)
            _progress(f"read {len(collection.answers)} answers and {len(labels)} labels by "
                      f"{len(people.annotators)} annotator(s)", started)
    except LabelError as exc:
        return _error(str(exc))
    settings = StudySettings(args.resamples, args.seed, args.confidence)
    try:
        study = run_study(collection, people, settings, args.pairwise, _StepProgress(started))
    except ValueError as exc:
        return _error(str(exc))
    if not study.comparisons:
        return _error("nothing to compare: give --labels, runs of two judges on the same answers, or two runs of one "
                      "judge on the same answers")
    for comparison in study.comparisons:
        print(render(comparison, settings.confidence))
    if args.output_path:
        path = write_json(args, collection, study, settings)
        print(f"figures: {path}")
    if _valueless_judges(collection):
        incomplete = True
    for judge, answers in study.unjudged().items():
        print(f"{PROG}: {judge} left {answers} compared answer{'s' if answers != 1 else ''} unjudged on some "
              "criterion (it failed or its reply did not parse); left out of those figures, counted under 'left "
              "out'", file=sys.stderr)
        incomplete = True
    return exit_status.INCOMPLETE if incomplete else exit_status.OK


def _valueless_judges(collection: Collection) -> list[str]:
    """The judges that gave no value on any answer (every judging failed or did not parse), each
    named on stderr: a failure, never "not computed"."""
    from lm_eval_fin.agreement.template import gives_a_value

    silent = [judge for judge in collection.judges
              if not any(gives_a_value(answer) for answer in collection.answers if answer.judge == judge)]
    for judge in silent:
        print(f"{PROG}: {judge} gave no value on any of its answers (every judging failed or its reply did not "
              "parse): nothing of it is compared", file=sys.stderr)
    return silent


def _template(args: argparse.Namespace, collection: Collection, incomplete: bool) -> int:
    from lm_eval_fin.agreement.template import draw, eligible, write_template

    candidates, left_out = eligible(collection)
    silent = _valueless_judges(collection)
    if left_out:
        print(f"{PROG}: {left_out} answer{'s' if left_out != 1 else ''} left out of the draw: no judge of "
              "theirs gave every value the template needs (it failed or its reply did not parse)", file=sys.stderr)
    if not candidates:
        return _error("no answer to draw: no judge gave the values a label is compared with")
    drawn = draw(candidates, args.template, args.seed)
    files = write_template(drawn, args.output_path)
    models = len({(a.task, a.model) for a in drawn})
    print(f"label template of {len(drawn)} answers from {models} model runs: {files['jsonl']} and {files['csv']}")
    if len(drawn) < args.template:
        print(f"{PROG}: the runs hold only {len(drawn)} answers to draw", file=sys.stderr)
    return exit_status.INCOMPLETE if incomplete or silent else exit_status.OK


QUIET_SECONDS = 1.0  # a study done sooner says nothing of its progress


def _progress(message: str, started: float) -> None:
    elapsed = time.monotonic() - started
    if elapsed >= QUIET_SECONDS:
        print(f"{PROG}: [{elapsed:.0f} s] {message}", file=sys.stderr, flush=True)


class _StepProgress:
    """Says on stderr which comparison is being computed, at most every ``every`` seconds, so
    a long study is seen to move (one done within a second stays quiet)."""

    def __init__(self, started: float, every: float = 2.0) -> None:
        self.started, self.every, self.last = started, every, -every

    def __call__(self, done: int, of: int, what: str) -> None:
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            _progress(f"comparison {done + 1} of {of}: {what}", self.started)


def write_json(args: argparse.Namespace, collection: Collection, study: Study, settings: StudySettings) -> Path:
    folder = Path(args.output_path)
    folder.mkdir(parents=True, exist_ok=True)
    document = {
        "format": FORMAT,
        "lm_eval_fin_version": __version__,
        "runs": list(args.results_dirs),
        "labels": args.labels,
        "confidence": settings.confidence,
        "resamples": settings.resamples,
        "seed": settings.seed,
        "pairwise": args.pairwise,
        "judges": [judge.as_dict() for judge in collection.judges.values()],
        "comparisons": [c.as_dict() for c in study.comparisons],
        "unreadable": [{"path": str(u.path), "reason": u.reason} for u in collection.unreadable],
        "notes": collection.notes,
    }
    path = folder / OUTPUT_NAME
    atomic.write_text(path, json.dumps(strict(document), indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    return path


# ------------------------------------------------------------------------------ the table


def _number(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def estimate_text(estimate: Estimate | None, digits: int = 2, percent: bool = False) -> str:
    """``value [low, high]`` (a dash for no value; a percent without decimals with ``percent``)."""
    if estimate is None or estimate.value is None:
        return "—"
    scale = 100 if percent else 1
    digits = 0 if percent else digits
    value = f"{estimate.value * scale:.{digits}f}{'%' if percent else ''}"
    if estimate.low is None or estimate.high is None:
        return value
    return f"{value} [{estimate.low * scale:.{digits}f}, {estimate.high * scale:.{digits}f}]"


def _skipped(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {why}" for why, n in counts.items() if n) or "—"


def render(comparison: Comparison, confidence: float) -> str:
    """One comparison as a plain-text table (criteria as rows)."""
    from lm_eval_fin.agreement.study import REPEATS

    title = (f"\n{comparison.family} · {comparison.kind}: {comparison.judged} against {comparison.reference}"
             f" ({confidence:.0%} bootstrap intervals)")
    if comparison.kind == REPEATS:
        return _render_stability(title, comparison)
    header = ("criterion", "n", "Pearson", "Spearman", "Kendall tau", "kappa", "exact", "bias", "left out")
    rows = [header]
    for name, f in comparison.figures.items():
        rows.append((name, str(f.n), estimate_text(f.pearson), estimate_text(f.spearman), estimate_text(f.kendall),
                     estimate_text(f.kappa), estimate_text(f.exact, percent=True), estimate_text(f.bias),
                     _skipped(comparison.skipped.get(name, {}))))
    lines = [title, *_columns(rows)]
    order = comparison.leaderboard
    if order is not None and len(order.systems) > 1:
        lines.append(f"leaderboard by {comparison.leaderboard_criterion} ({len(order.systems)} models): "
                     f"Kendall tau {estimate_text(order.kendall)}, Spearman {estimate_text(order.spearman)}, "
                     f"pairs in another order {estimate_text(order.flipped, percent=True)}, same top model: "
                     f"{'—' if order.same_top is None else 'yes' if order.same_top else 'no'}"
                     f" ({_number(None if order.top_agrees is None else order.top_agrees * 100, 0)}% of resamples)")
    for name, f in comparison.figures.items():
        lines += [f"  {name}: {note}" for note in f.notes]
    lines += [f"  {note}" for note in comparison.notes]
    return "\n".join(lines)


def _render_stability(title: str, comparison: Comparison) -> str:
    rows = [("criterion", "runs", "n", "identical", "within-answer SD", "Pearson (run 1-2)", "kappa (run 1-2)",
             "unjudged")]
    for name, s in comparison.stability.items():
        first = s.pairs.get("1-2")
        rows.append((name, str(s.repeats), str(s.n), estimate_text(s.identical, percent=True),
                     estimate_text(s.within_sd), estimate_text(first.pearson if first else None),
                     estimate_text(first.kappa if first else None), str(s.unjudged)))
    return "\n".join([title, *_columns(rows)])


def _columns(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
