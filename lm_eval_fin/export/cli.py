"""``lm-eval-fin export RUN_DIR [RUN_DIR ...] --format {eee,model-index,eval-results} --output_path OUT``.

Exit status: 0 when everything was exported; 1 when some of it is missing (a run that could
not be read, a task that logged no samples, a task with no hub dataset id for eval-results),
after the rest was written; 2 when nothing could be exported or the arguments are wrong (a run
of a local model without --model_id, a --model_id that names the model a GGUF run quantizes,
runs of several models for one model card, a model id or task name that cannot be a file
name: nothing is written then). A metric with no value in a run (lm-eval's null: no judge, or
nothing it applies to) is no failure of the export: it is left out and named with the reason,
on stderr and in the record.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lm_eval_fin.export import eee, eval_results, facts, model_index
from lm_eval_fin.export.facts import ExportError
from lm_eval_fin.outputs.runfiles import read_results_dirs
from lm_eval_fin.plumbing import atomic, exit_status
from lm_eval_fin.plumbing.flags import add_flag
from lm_eval_fin.report import stats

FORMATS = ("eee", "model-index", "eval-results")
MODEL_INDEX_FILE = "model-index.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                        help="lm-eval --output_path folders (or results_<date>.json files)")
    parser.add_argument("--format", required=True, choices=FORMATS,
                        help="eee: Every Eval Ever aggregate and instance-level records (OUT/data/...); "
                        f"model-index: the model card's results block (OUT/{MODEL_INDEX_FILE}); eval-results: "
                        f"the hub's results files of the model repository (OUT/{eval_results.FOLDER}/<task>.yaml)")
    parser.add_argument("--output_path", required=True, help="folder to write into")
    add_flag(parser, "--model_id", dest="model_id", metavar="ORG/NAME",
                        help="the model's Hugging Face id, for runs of a local path or an API model "
                        "(default: the hub id the runs name)")
    parser.add_argument("--organization", default="unknown",
                        help="eee: who ran the evaluation (source_organization_name)")
    add_flag(parser, "--evaluator_relationship", dest="relationship", default="other", choices=eee.RELATIONSHIPS,
                        help="eee: the evaluator's relationship to the model")
    add_flag(parser, "--source_url", dest="source_url", default=None,
                        help="model-index, eval-results: the URL of the results' source (default: the project's "
                        "home page from its package metadata, where it states one)")
    add_flag(parser, "--source_user", dest="source_user", default=None, metavar="HF_USER",
                        help="eval-results: the Hugging Face user or organization the results come from")
    add_flag(parser, "--dataset_id", dest="dataset_id", default=None, metavar="ORG/NAME",
                        help="model-index, eval-results: the hub id of the benchmark dataset the runs' tasks "
                        "belong to (default: the hub dataset a run read; eval-results writes no task without one)")
    parser.add_argument("--bootstrap_iters", type=int, default=stats.BOOTSTRAP_RESAMPLES,
                        help="bootstrap resamples per interval")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resampling")


def fail(message: str) -> int:
    print(f"lm-eval-fin export: error: {message}", file=sys.stderr)
    return exit_status.USAGE


def main(args: argparse.Namespace) -> int:
    try:
        for flag, value in (("--model_id", args.model_id), ("--dataset_id", args.dataset_id)):
            if value is not None:
                facts.path_component_id(value, flag)
    except ExportError as exc:
        return fail(str(exc))
    if args.bootstrap_iters < 1:
        return fail("--bootstrap_iters must be at least 1")
    problem = atomic.output_folder_problem(args.output_path)  # before any work (exit 2)
    if problem:
        return fail(problem)
    runs, unreadable = read_results_dirs(args.run_dirs)
    for item in unreadable:
        print(f"lm-eval-fin export: cannot read {item.path}: {item.reason}", file=sys.stderr)
    if not runs:
        return fail("no lm-eval run could be read")
    if args.model_id is not None and len({facts.named_model(run) for run in runs}) > 1:
        return fail("--model_id names one model, but these runs are of several: export them one model at a time")
    out = Path(args.output_path)
    url = args.source_url or model_index.project_url()
    try:
        for run in runs:  # every path the export builds of a run's names stays in OUT
            for task in run.tasks:
                facts.check_task_name(task, run.source)
        identities = [facts.model_identity(run, args.model_id) for run in runs]
        if args.format == "model-index":
            notes = model_index.comments(runs, identities)
            text = model_index.to_yaml(model_index.model_index(runs, identities, url, args.dataset_id), notes)
            out.mkdir(parents=True, exist_ok=True)
            atomic.write_text(out / MODEL_INDEX_FILE, text)
            print(f"model-index of {identities[0].id}: {out / MODEL_INDEX_FILE}")
            for note in notes:
                if not note.startswith("weights: "):
                    print(f"lm-eval-fin export: {note}", file=sys.stderr)
            if not url:
                print("lm-eval-fin export: note: no --source_url and no project URL in the package metadata: "
                      "the entries name no source", file=sys.stderr)
            return exit_status.INCOMPLETE if unreadable else exit_status.OK
        if args.format == "eval-results":
            return write_eval_results(runs, identities, out, args, url, bool(unreadable))
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


def write_eval_results(runs, identities, out: Path, args: argparse.Namespace, url: str | None,
                       unreadable: bool) -> int:
    """One ``.eval_results/<task>.yaml`` per task with a hub dataset id (known or given)."""
    if len({identity.id for identity in identities}) > 1:
        raise ExportError("a model repository holds one model's results; these runs are of "
                          f"{', '.join(sorted({i.id for i in identities}))}: export them one model at a time")
    contents: dict[str, str] = {}
    skipped: list[str] = []
    source = eval_results.Source(url, args.source_user)
    for run, identity in zip(runs, identities):
        for task, task_run in run.tasks.items():
            if task in contents:
                raise ExportError(f"two runs of {task}: the hub shows one result per task; export the one to show")
            dataset_id = eval_results.dataset_id_of(task_run, args.dataset_id)
            entry = eval_results.result(run, task_run, identity, dataset_id, source) if dataset_id else None
            if entry is None:
                why = "no hub dataset id (the run read a shipped sample or a local file): pass --dataset_id to " \
                      "file it under a benchmark dataset" if not dataset_id else "no metric has a value"
                skipped.append(f"{run.source.name}: {task}: not written: {why}")
                continue
            contents[task] = eval_results.to_yaml(entry)
    for line in skipped:
        print(f"lm-eval-fin export: {line}", file=sys.stderr)
    if not contents:
        return fail("no task could be written as a hub result")
    folder = out / eval_results.FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for task, text in contents.items():
        atomic.write_text(folder / f"{task}.yaml", text)
    if not url:
        print("lm-eval-fin export: note: no --source_url and no project URL in the package metadata: "
              "the results name no source", file=sys.stderr)
    print(f"hub results of {identities[0].id}: {len(contents)} file{'s' if len(contents) != 1 else ''} under {folder}")
    return exit_status.INCOMPLETE if unreadable or skipped else exit_status.OK
