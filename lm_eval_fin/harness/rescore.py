"""``lm-eval-fin score``: re-score samples logged by ``lm_eval --log_samples`` with a judge.

The two-stage path for one GPU: generate with the model under test
(``lm_eval ... --predict_only --log_samples --output_path out``), let it free the GPU, then
``lm-eval-fin score out --judge vllm:<judge model>`` gives the whole GPU to the judge.

What it does:

1. Finds the samples files: the given ``samples_<task>_<date>.jsonl`` file, or every such
   file under the given folder (lm-eval writes them to ``<output_path>/<model>/``). The task
   is read from the file name (lm-eval's pattern; ``--tasks`` names the task of a file
   renamed by hand) and each line must look like an lm-eval sample (``doc_id``, ``doc``,
   ``resps`` or ``filtered_resps``).
2. Finds the benchmark that owns the task (each :class:`~lm_eval_fin.harness.benchmark.Benchmark`
   names its task prefix; ``fin_ems_xyz`` belongs to ``fin_ems``) and calls its
   ``rescore(samples, judge) -> (metrics, details)``; each benchmark submits its judge work in
   one batch. Tasks with no judge metrics are skipped in a folder and an
   error when named explicitly.
3. Writes, next to the samples, ``judged_results_<date>.json`` in lm-eval's results format
   (``results: {task: {"metric,filter": value, "metric_stderr,filter": "N/A"}}``,
   ``higher_is_better``, ``n-shot``, ``n-samples``, ``versions``; where lm-eval's own
   ``results_<date>.json`` of the same run is there, it is copied and the judge metrics are
   added to it, so configs, versions and the model's config are kept) with a ``judge``
   section (spec, options, batch stats per task), plus ``judged_samples_<task>_<date>.jsonl``
   with one line of details per sample (the family's scores, the judge's raw reply and the
   error of a request that failed). The names do not match lm-eval's
   ``results_*``/``samples_*`` patterns, so lm-eval's tools and a second ``score`` run never
   take them for lm-eval's own files.

Judge answers are cached (see :mod:`lm_eval_fin.judge.cache`): running ``score`` again
makes no model calls, and a run that was killed resumes where it stopped. When any judge
request failed for good (a server that could not be reached, say), the results are still
written, with those samples counted as judge failures, and ``score`` exits with status 1 and
a message saying how many failed; running it again sends only those.

``higher_is_better`` of the metrics comes from the task's YAML ``metric_list``.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import logging
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lm_eval_fin import atomic, exit_status
from lm_eval_fin.harness import taskfiles
from lm_eval_fin.harness.benchmark import Benchmark, benchmark_of
from lm_eval_fin.harness.samples import SamplesError, SamplesFile, find_samples_files, read_samples

logger = logging.getLogger(__name__)

# exit status when every input was fine but some judge requests failed for good


class ScoreError(Exception):
    """A problem with the user's input; reported as one line, exit status 2."""

def higher_is_better_of(task: str, original: dict | None) -> dict[str, bool]:
    """``higher_is_better`` of a task's metrics: the ``metric_list`` in lm-eval's own results
    of the run, else the shipped task YAML's."""
    config = ((original or {}).get("configs") or {}).get(task) or {}
    listed = {
        str(entry["metric"]): bool(entry["higher_is_better"])
        for entry in config.get("metric_list") or []
        if isinstance(entry, dict) and "metric" in entry and "higher_is_better" in entry
    }
    if listed or task not in taskfiles.task_configs():
        return listed
    return taskfiles.higher_is_better(task)


def _stats_delta(after, before) -> dict[str, Any]:
    delta = {}
    for f in dataclasses.fields(after):
        if f.name == "extra":
            delta["extra"] = {
                key: value - before.extra.get(key, 0) if isinstance(value, (int, float)) else value
                for key, value in after.extra.items()
            }
        else:
            delta[f.name] = getattr(after, f.name) - getattr(before, f.name)
    return delta


def metric_entries(metrics: dict[str, Any], filter_name: str) -> dict[str, Any]:
    """lm-eval's ``"metric,filter"`` keys (a key that already has a filter is kept), each with
    its ``"metric_stderr,filter"``: ``"N/A"``, as lm-eval writes for a metric without a
    bootstrap (corpus-level judge metrics have none)."""
    entries: dict[str, Any] = {}
    for name, value in metrics.items():
        metric, _, filter_of = name.partition(",")
        entries[f"{metric},{filter_of or filter_name}"] = value
        entries[f"{metric}_stderr,{filter_of or filter_name}"] = "N/A"
    return entries


def results_document(
    original: dict | None,
    task_metrics: dict[str, dict[str, Any]],
    sample_counts: dict[str, int],
    judge_section: dict[str, Any],
    higher_is_better: dict[str, dict[str, bool]] | None = None,
) -> dict:
    """lm-eval's results JSON with the judge metrics added to each task's entry."""
    document = copy.deepcopy(original) if original else {}
    for key in ("results", "versions", "n-shot", "higher_is_better", "n-samples"):
        document.setdefault(key, {})
    for task, entries in task_metrics.items():
        document["results"].setdefault(task, {"alias": task}).update(entries)
        document["versions"].setdefault(task, "N/A")
        # the judge tasks are zero-shot; lm-eval's own value, when there, is kept
        document["n-shot"].setdefault(task, 0)
        names = {key.partition(",")[0] for key in entries if not key.partition(",")[0].endswith("_stderr")}
        known = (higher_is_better or {}).get(task, {})
        document["higher_is_better"].setdefault(task, {}).update(
            {name: known[name] for name in sorted(names) if name in known}
        )
        document["n-samples"].setdefault(task, {"original": sample_counts[task], "effective": sample_counts[task]})
    document["judge"] = judge_section
    document["date"] = time.time()
    return document


def _write_details(path: Path, samples: list[dict], details: list[dict]) -> None:
    with atomic.open_text(path) as handle:
        for index, detail in enumerate(details):
            row = dict(detail)
            if len(details) == len(samples) and "doc_id" not in row and "doc_id" in samples[index]:
                row = {"doc_id": samples[index]["doc_id"], **row}
            handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")


def _print_table(document: dict) -> None:
    try:
        from lm_eval.utils import make_table

        print(make_table(document))
    except Exception as exc:  # noqa: BLE001 - the table is a convenience; the JSON is written
        logger.debug("no results table: %r", exc)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, help="lm-eval --output_path folder, or one samples_<task>_<date>.jsonl")
    parser.add_argument(
        "--tasks", default=None,
        help="comma-separated tasks to re-score (default: every task with judge metrics); "
        "names the task of a samples file renamed by hand",
    )


def main(args: argparse.Namespace, benchmarks: Sequence[Benchmark]) -> int:
    try:
        return _score(args, [b for b in benchmarks if b.rescore is not None])
    except (ScoreError, SamplesError) as exc:
        print(f"lm-eval-fin score: error: {exc}", file=sys.stderr)
        return exit_status.USAGE


def _score(args: argparse.Namespace, judged: list[Benchmark]) -> int:
    from lm_eval_fin.judge import load_judge
    from lm_eval_fin.judge.options import JUDGE_ENV, options_from_args
    from lm_eval_fin.judge.preflight import judge_problems

    # the judge first: a bad spec or option is known before any file is read
    try:
        options = options_from_args(args)
        judge = load_judge(args.judge, options)
    except ValueError as exc:  # a JudgeSpecError, or a bad $LM_EVAL_FIN_JUDGE_OPTIONS
        raise ScoreError(str(exc)) from exc
    if judge is None:
        raise ScoreError(f"no judge configured: pass --judge <spec> or set ${JUDGE_ENV}")
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    files = find_samples_files(args.path, tasks)
    scorable = [f for f in files if benchmark_of(f.task, judged)]
    known = ", ".join(sorted(b.name for b in judged))
    if args.path.is_file() and not scorable:
        raise ScoreError(f"task {files[0].task!r} has no judge metrics; tasks with judge metrics: {known}")
    if not scorable:
        found = ", ".join(sorted({f.task for f in files}))
        raise ScoreError(f"none of the tasks found ({found}) has judge metrics; tasks with judge metrics: {known}")
    problems = judge_problems(judge.parsed_spec, score_later=False)  # a server that cannot answer, the cache
    if problems:
        return exit_status.report("lm-eval-fin score", problems)
    for f in files:
        if f not in scorable:
            logger.info("skipping %s: task %s has no judge metrics", f.path.name, f.task)
    runs: dict[tuple[Path, str], list[SamplesFile]] = defaultdict(list)
    for f in scorable:
        runs[f.run_key].append(f)
    try:
        for (folder, date), run_files in runs.items():
            out_path = score_run(folder, date, run_files, judge, dataclasses.asdict(options), judged)
            print(f"judge results: {out_path}")
    finally:
        judge.close()
    if judge.stats.failures:
        print(
            f"lm-eval-fin score: error: {judge.stats.failures} of {judge.stats.requests} judge "
            "requests failed for good "
            f"(first error: {getattr(judge, 'last_error', None) or 'unknown'}); the results written "
            "count those samples under judge_failure. Run the same command again once the judge is "
            "reachable: it resumes from the judge cache and sends only the failed requests.",
            file=sys.stderr,
        )
        return exit_status.INCOMPLETE
    if judge.stats.parse_failures:
        print(
            f"lm-eval-fin score: error: {judge.stats.parse_failures} judge answers stayed unreadable after "
            "every attempt; the results written leave what needed them unscored (judge_parse_failure). "
            "Check that the judge model and its chat template suit the task; a later run re-asks them "
            "(--judge-retry-unparsable).",
            file=sys.stderr,
        )
        return exit_status.INCOMPLETE
    return exit_status.OK


def score_run(
    folder: Path, date: str, run_files: list[SamplesFile], judge, options: dict, benchmarks: Sequence[Benchmark]
) -> Path:
    """Re-score the samples files of one lm-eval run and write its judged results."""
    original_path = folder / f"results_{date}.json"
    original = json.loads(original_path.read_text(encoding="utf-8")) if date and original_path.is_file() else None
    task_metrics, sample_counts, task_stats, detail_files, higher_is_better = {}, {}, {}, {}, {}
    for f in run_files:
        samples = read_samples(f.path)
        benchmark = benchmark_of(f.task, benchmarks)
        higher_is_better[f.task] = higher_is_better_of(f.task, original)
        before = copy.deepcopy(judge.stats)
        try:
            metrics, details = benchmark.rescore(samples, judge)
        except ValueError as exc:  # the benchmark's own check of its samples (wrong task, old format)
            raise ScoreError(f"{f.path.name}: {exc}") from exc
        task_stats[f.task] = _stats_delta(judge.stats, before)
        task_metrics[f.task] = metric_entries(metrics, str(samples[0].get("filter") or "none"))
        sample_counts[f.task] = len(samples)
        details_path = folder / f"judged_samples_{f.task}{'_' + date if date else ''}.jsonl"
        _write_details(details_path, samples, details)
        detail_files[f.task] = details_path.name
        logger.info("%s: %s", f.task, ", ".join(f"{k}={v}" for k, v in metrics.items()))
    judge_section = {
        "spec": judge.spec,
        "options": options,
        "stats": task_stats,
        "samples_files": {f.task: f.path.name for f in run_files},
        "details_files": detail_files,
        "lm_eval_results": original_path.name if original else None,
    }
    document = results_document(original, task_metrics, sample_counts, judge_section, higher_is_better)
    out_path = folder / (f"judged_results_{date}.json" if date else f"judged_results_{run_files[0].path.stem}.json")
    atomic.write_text(out_path, json.dumps(document, indent=2, ensure_ascii=False, default=str))
    _print_table(document)
    return out_path
