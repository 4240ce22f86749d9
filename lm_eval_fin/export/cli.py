"""``lm-eval-fin export RUN_DIR [RUN_DIR ...] --format {eee,model-index} --output_path OUT``.

Exit status: 0 when everything was exported; 1 when some of it is missing (a run that could
not be read, a task that logged no samples), after the rest was written; 2 when nothing could
be exported or the arguments are wrong (a run of a local model without --model_id, runs of
several models for one model card). A metric with no value in a run (lm-eval's null: no
judge, or nothing it applies to) is no failure of the export: it is left out and named, on
stderr and in the record.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from lm_eval_fin import atomic, exit_status
from lm_eval_fin.export import eee, facts, model_index
from lm_eval_fin.export.facts import ExportError
from lm_eval_fin.flags import add_flag
from lm_eval_fin.report import stats
from lm_eval_fin.runfiles import read_results_dirs

FORMATS = ("eee", "model-index")
MODEL_INDEX_FILE = "model-index.yaml"
MODEL_ID = re.compile(r"[^/\s]+/[^/\s]+")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                        help="lm-eval --output_path folders (or results_<date>.json files)")
    parser.add_argument("--format", required=True, choices=FORMATS,
                        help="eee: Every Eval Ever aggregate and instance-level records (OUT/data/...); "
                        f"model-index: the model card's results block (OUT/{MODEL_INDEX_FILE})")
    parser.add_argument("--output_path", required=True, help="folder to write into")
    add_flag(parser, "--model_id", dest="model_id", metavar="ORG/NAME",
                        help="the model's Hugging Face id, for runs of a local path or an API model "
                        "(default: the hub id the runs name)")
    parser.add_argument("--organization", default="unknown",
                        help="eee: who ran the evaluation (source_organization_name)")
    add_flag(parser, "--evaluator_relationship", dest="relationship", default="other", choices=eee.RELATIONSHIPS,
                        help="eee: the evaluator's relationship to the model")
    add_flag(parser, "--source_url", dest="source_url", default=None,
                        help="model-index: the URL of the results' source (default: the project's home page "
                        "from its package metadata, where it states one)")
    parser.add_argument("--bootstrap_iters", type=int, default=stats.BOOTSTRAP_RESAMPLES,
                        help="bootstrap resamples per interval")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resampling")


def fail(message: str) -> int:
    print(f"lm-eval-fin export: error: {message}", file=sys.stderr)
    return exit_status.USAGE


def main(args: argparse.Namespace) -> int:
    if args.model_id is not None and not MODEL_ID.fullmatch(args.model_id):
        return fail(f"--model_id {args.model_id!r} is not ORG/NAME")
    if args.bootstrap_iters < 1:
        return fail("--bootstrap_iters must be at least 1")
    # the output folder, and the folder names a model id becomes, before any work (exit 2)
    problems = [atomic.output_folder_problem(args.output_path)] + [
        atomic.name_problem(part, "--model_id", args.output_path) for part in (args.model_id or "").split("/")]
    if any(problems):
        return fail(next(problem for problem in problems if problem))
    runs, unreadable = read_results_dirs(args.run_dirs)
    for item in unreadable:
        print(f"lm-eval-fin export: cannot read {item.path}: {item.reason}", file=sys.stderr)
    if not runs:
        return fail("no lm-eval run could be read")
    if args.model_id is not None and len({facts.named_model(run) for run in runs}) > 1:
        return fail("--model_id names one model, but these runs are of several: export them one model at a time")
    out = Path(args.output_path)
    try:
        identities = [facts.model_identity(run, args.model_id) for run in runs]
        if args.format == "model-index":
            url = args.source_url or model_index.project_url()
            text = model_index.to_yaml(model_index.model_index(runs, identities, url))
            out.mkdir(parents=True, exist_ok=True)
            atomic.write_text(out / MODEL_INDEX_FILE, text)
            print(f"model-index of {identities[0].id}: {out / MODEL_INDEX_FILE}")
            if not url:
                print("lm-eval-fin export: note: no --source_url and no project URL in the package metadata: "
                      "the entries name no source", file=sys.stderr)
            return exit_status.INCOMPLETE if unreadable else exit_status.OK
    except ExportError as exc:
        return fail(str(exc))
    options = eee.Options(args.organization, args.relationship, args.bootstrap_iters, args.seed)
    written = eee.Written()
    for run, identity in zip(runs, identities):
        for task_run in run.tasks.values():
            eee.write_task(out, run, task_run, identity, options, written)
    for note in written.notes:
        print(f"lm-eval-fin export: {note}", file=sys.stderr)
    for problem in written.incomplete:
        print(f"lm-eval-fin export: incomplete: {problem}", file=sys.stderr)
    tasks = sum(len(run.tasks) for run in runs)
    print(f"Every Eval Ever records of {tasks} task run{'s' if tasks != 1 else ''}: {len(written.files)} files "
          f"under {out / 'data'}")
    return exit_status.INCOMPLETE if unreadable or written.incomplete else exit_status.OK
