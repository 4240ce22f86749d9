"""lm-eval's output folders read into plain data: the one reader of results and samples files
(``lm-eval-fin report``, ``score``, ``agreement``, ``export`` and the tests all use it).

lm-eval's EvaluationTracker writes, under ``--output_path``, one folder per model holding
``results_<date>.json`` (figures, stderrs, task configs, versions, the run's ``config``) and,
with ``--log_samples``, ``samples_<task>_<date>.jsonl``: one line per document and filter with
``doc_id``, ``doc`` (the task's document; ours carry the run's settings under ``settings``),
``resps`` (the model's raw outputs), ``filtered_resps`` (for our tasks the scored-answer record
of :mod:`lm_eval_fin.outputs.records`), ``filter``, and the value ``process_results`` returned for
every metric (a number, or null where it is undefined). ``<date>`` is lm-eval's run id,
``datetime.now().isoformat()`` with ``:`` written as ``-``; a run's files share it.

A run is read whole or not at all: a results file without its tasks' configs or versions, or
without a figure for a metric its task's metric_list names, and a samples file with a cut or
non-JSON line or that is not the one its results file was computed on (another number of
documents, another lm-eval task hash), make the run unreadable, the reason naming the file (and
line). A ``--predict_only`` run that ``lm-eval-fin score`` scored into its folder is read as the
scored run it became. Reading never raises for bad input in :func:`read_results_dirs` (a folder
or file that cannot be read becomes an :class:`Unreadable` with the reason); :func:`find_samples_files` and
:func:`read_samples` raise :class:`SamplesError` naming the file (and line).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lm_eval_fin.outputs import records
from lm_eval_fin.plumbing.jsonl import read_jsonl

RESULTS_FILE = re.compile(r"^results_(?P<date>.+)\.json$")
SAMPLES_FILE = re.compile(
    r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?)\.jsonl$"
)
NO_FILTER = "none"
# lm-eval's placeholder metric of a --predict_only run: no figure
PREDICT_ONLY_METRIC = "bypass"
# keys of a task's results entry that are not metrics
_NOT_METRICS = {"alias", "name", "sample_len", "samples", " "}
# model arguments that name the model evaluated, first found wins
MODEL_ID_ARGS = ("pretrained", "model", "model_name", "path")
# the lm-eval model `lm-eval-fin score` replays logged answers with: its runs hold another run's
# answers (a results file of it beside a --predict_only run is that run scored)
REPLAY_MODEL = "fin-replay"


class RunError(Exception):
    """Why a run cannot be read; becomes an :class:`Unreadable`."""


class PredictOnlyRun(RunError):
    """A results file with no figure (a ``--predict_only`` run): unreadable, unless a run that
    ``score`` wrote beside it scored its tasks (then it is that run's past, not a run)."""

    def __init__(self, message: str, tasks: frozenset[str]) -> None:
        super().__init__(message)
        self.tasks = tasks


class SamplesError(ValueError):
    """Samples that cannot be read; the message names the file (and line) and what is expected."""


@dataclass
class Metric:
    """One metric of one task as lm-eval reported it (``value`` None: undefined in this run)."""

    name: str  # the metric, with " (filter)" when the filter is not lm-eval's "none"
    metric: str  # lm-eval's metric name
    filter: str
    value: float | None
    stderr: Any  # a number, "N/A" or None
    higher_is_better: bool | None
    aggregation: str | None  # "mean", another registered aggregation's name, or None for a function


@dataclass
class Sample:
    """One document of one task in one run."""

    key: str  # pairs the same question across runs: the doc's own id
    doc_id: Any
    doc: dict
    answer: str
    values: dict[str, float]  # per-document metric values that are defined, by Metric.name
    record: dict[str, Any] = field(default_factory=dict)  # the scored-answer record (records.decode)

    @property
    def settings(self) -> dict[str, Any]:
        return run_settings(self.doc)


@dataclass
class TaskRun:
    task: str
    version: Any
    metrics: dict[str, Metric]
    config: dict
    n_samples: dict
    samples: list[Sample] = field(default_factory=list)
    logged: bool = False  # a samples file was read
    notes: list[str] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)
    samples_path: Path | None = None

    @property
    def defined(self) -> dict[str, Metric]:
        """The metrics with a value in this run."""
        return {name: m for name, m in self.metrics.items() if m.value is not None}


@dataclass
class Run:
    source: Path  # the results file read
    results_dir: Path  # the folder named on the command line
    date: str  # lm-eval's run id (from the file name)
    results: dict  # the whole results document
    tasks: dict[str, TaskRun]

    @property
    def config(self) -> dict:
        config = self.results.get("config")
        return config if isinstance(config, dict) else {}

    @property
    def model_args(self) -> dict:
        return parse_model_args(self.config.get("model_args"))

    @property
    def model_id(self) -> str:
        """The model as given to lm-eval (its path or hub id), else lm-eval's model name."""
        args = self.model_args
        found = next((str(args[k]) for k in MODEL_ID_ARGS if args.get(k)), None)
        return found or str(self.results.get("model_name") or self.config.get("model") or "unknown model")

    @property
    def model(self) -> str:
        """The model's short name: the last part of its path or hub id."""
        return short_name(self.model_id)

    @property
    def replayed(self) -> bool:
        """Whether ``lm-eval-fin score`` wrote this run from another run's logged answers."""
        return self.config.get("model") == REPLAY_MODEL


@dataclass(frozen=True)
class Unreadable:
    path: Path
    reason: str


@dataclass(frozen=True)
class SamplesFile:
    path: Path
    task: str
    date: str  # lm-eval's run id; "" for a file renamed by hand

    @property
    def run_key(self) -> tuple[Path, str]:
        return self.path.parent, self.date

    @property
    def results_path(self) -> Path | None:
        """The results file of the same run, when it is there."""
        path = self.path.parent / f"results_{self.date}.json"
        return path if self.date and path.is_file() else None


def short_name(model_id: str) -> str:
    """The last part of a model's path or hub id."""
    return model_id.rstrip("/").rsplit("/", 1)[-1] or model_id


def parse_model_args(value: Any) -> dict:
    """lm-eval keeps ``model_args`` as a dict (0.4.9+) or as its "k=v,k=v" string."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, str) and value.strip():
        pairs = (part.partition("=") for part in value.split(","))
        return {key.strip(): val.strip() for key, sep, val in pairs if sep and key.strip()}
    return {}


def as_float(value: Any) -> float | None:
    """A metric value as a float; None for what is not a number (null, lists, texts, bools)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def run_settings(doc: Any) -> dict[str, Any]:
    """The settings a document of ours was run with (``doc["settings"]``, JSON text: the judge
    spec and options and the benchmark's settings); {} for a document without them."""
    text = doc.get("settings") if isinstance(doc, dict) else None
    try:
        settings = json.loads(text) if isinstance(text, str) else None
    except json.JSONDecodeError:
        settings = None
    return settings if isinstance(settings, dict) else {}


def answer_of(sample: dict[str, Any]) -> str:
    """The model's answer in a logged sample: the scored-answer record's ``answer``, else the
    filtered response's text, else the raw response's; "" when none holds text.

    >>> answer_of({"resps": [["raw"]], "filtered_resps": ["filtered"]})
    'filtered'
    >>> answer_of({"resps": [[]]})
    ''
    """
    for key in ("filtered_resps", "resps"):
        answer = records.decode(sample.get(key))["answer"]
        if answer:
            return answer
    return ""


def raw_answer(sample: dict[str, Any]) -> str:
    """The model's raw output in a logged sample (``resps``), before any filter."""
    value = sample.get("resps")
    while isinstance(value, list) and value:
        value = value[0]
    return value if isinstance(value, str) else ""


# ----------------------------------------------------------------------------- results


def _metric_list(config: dict) -> dict[str, dict]:
    entries = config.get("metric_list") if isinstance(config, dict) else None
    return {str(e["metric"]): e for e in entries or [] if isinstance(e, dict) and "metric" in e}


def task_metrics(task: str, entry: dict, results: dict) -> dict[str, Metric]:
    """The metrics of one task's results entry (``"metric,filter"`` keys) in their order; a
    null value is an undefined metric (kept, ``value`` None)."""
    config = (results.get("configs") or {}).get(task) or {}
    listed = _metric_list(config)
    higher = (results.get("higher_is_better") or {}).get(task) or {}
    metrics: dict[str, Metric] = {}
    for key, value in entry.items():
        if key in _NOT_METRICS or "," not in key:
            continue
        metric, _, filter_name = key.partition(",")
        if metric.endswith("_stderr") or metric == PREDICT_ONLY_METRIC:
            continue
        number = as_float(value)
        if number is None and value is not None:
            continue
        name = metric if filter_name == NO_FILTER else f"{metric} ({filter_name})"
        aggregation = listed.get(metric, {}).get("aggregation")
        metrics[name] = Metric(
            name=name,
            metric=metric,
            filter=filter_name,
            value=number,
            stderr=entry.get(f"{metric}_stderr,{filter_name}"),
            higher_is_better=higher.get(metric, listed.get(metric, {}).get("higher_is_better")),
            # lm-eval writes a function aggregation as its source code; a name is a registered one
            aggregation=aggregation if isinstance(aggregation, str) and "\n" not in aggregation else None,
        )
    return metrics


def question_key(doc: Any, sample: dict) -> str:
    """The question's id: the doc's own ``id`` (stable across models and settings, unlike
    lm-eval's doc_hash, which covers every field of the doc), else lm-eval's doc_hash, else
    its doc_id."""
    if isinstance(doc, dict) and isinstance(doc.get("id"), (str, int)) and not isinstance(doc.get("id"), bool):
        return str(doc["id"])
    return str(sample.get("doc_hash") or sample.get("doc_id"))


@dataclass(frozen=True)
class SamplesRead:
    """One task's samples file as read: its samples and notes; a digest of lm-eval's per-sample
    prompt hashes (equal digests: the same prompts, chat template included); lm-eval's task hash
    of its lines (what its results file's ``task_hashes`` holds; None where a line lacks its
    hashes); and how many documents (lm-eval doc ids) its lines are of."""

    samples: list[Sample]
    notes: list[str]
    prompts: str
    task_hash: str | None
    documents: int


def task_samples(path: Path, metrics: dict[str, Metric], docs: dict | None = None) -> SamplesRead:
    """The samples of one task from lm-eval's samples file, each document's defined metric
    values and scored-answer record. A line that is cut or not JSON raises :class:`RunError`
    naming the file and line. ``docs``: documents read before (from other runs of the same
    questions), by lm-eval's doc hash: an equal one is shared, so that a hundred runs of a task
    hold its documents once."""
    by_filter: dict[str, list[Metric]] = {}
    for metric in metrics.values():
        by_filter.setdefault(metric.filter, []).append(metric)
    samples: dict[str, Sample] = {}
    seen: set[tuple[str, str]] = set()
    notes: list[str] = []
    prompts = hashlib.sha256()
    line_hashes: list[str] | None = []
    doc_ids: set[str] = set()
    duplicates = 0
    for where, line in read_jsonl(path, RunError):
        if not isinstance(line, dict) or "doc" not in line:
            raise RunError(f"{where}: not an lm-eval sample (no 'doc')")
        hashes = [line.get(k) for k in ("doc_hash", "prompt_hash", "target_hash")]
        if line_hashes is not None and all(isinstance(h, str) for h in hashes):
            line_hashes.append("".join(map(str, hashes)))
        else:
            line_hashes = None
        doc_ids.add(json.dumps(line.get("doc_id")))
        doc = line["doc"] if isinstance(line["doc"], dict) else {"value": line["doc"]}
        if docs is not None and isinstance(line.get("doc_hash"), str):
            doc = docs.setdefault((line["doc_hash"], question_key(doc, line)), doc)
        key, filter_name = question_key(doc, line), str(line.get("filter", NO_FILTER))
        if (key, filter_name) in seen:  # lm-eval writes one line per document and filter
            duplicates += 1
            continue
        seen.add((key, filter_name))
        prompts.update(str(line.get("prompt_hash", "")).encode("utf-8"))
        sample = samples.get(key)
        if sample is None:
            record = records.decode(line.get("filtered_resps"))
            sample = samples[key] = Sample(key, line.get("doc_id"), doc, answer_of(line), {}, record)
        for metric in by_filter.get(filter_name, []):
            value = as_float(line.get(metric.metric))
            if value is not None:
                sample.values[metric.name] = value
    if duplicates:
        notes.append(f"{duplicates} samples repeat a question id of this task; the first of each is shown")
    task_hash = hashlib.sha256("".join(line_hashes).encode("utf-8")).hexdigest() if line_hashes else None
    return SamplesRead(list(samples.values()), notes, prompts.hexdigest(), task_hash, len(doc_ids))


def _whole_task_entry(results: dict, task: str, entry: dict, where: Path) -> list[str]:
    """:class:`RunError` (one line) where the results file lacks the task's config or version;
    else the metrics of its ``metric_list`` with no figure. lm-eval leaves out a metric that no
    document defined (the task leaves an undefined value out of its document's metrics), so an
    unreported metric is a metric with no value, unless the samples hold values of it
    (:func:`_unreported_defined`)."""
    lacking = [key for key in ("configs", "versions")
               if not isinstance(results.get(key), dict) or task not in results[key]]
    if lacking:
        raise RunError(f"{where}: {task} has no {' or '.join(repr(k) for k in lacking)} entry: not a whole lm-eval "
                       "results file")
    reported = {key.partition(",")[0] for key in entry if "," in key}
    return [name for name in _metric_list(results["configs"][task] or {}) if name not in reported]


def _unreported_defined(samples_path: Path, unreported: list[str], where: Path) -> None:
    """:class:`RunError` where a document of the samples file has a value of a metric its
    results file reports no figure of: the figure was removed, or the files are of two runs."""
    if not unreported:
        return
    for line_where, line in read_jsonl(samples_path, RunError):
        found = [name for name in unreported if isinstance(line, dict) and as_float(line.get(name)) is not None]
        if found:
            raise RunError(f"{where}: no figure of {', '.join(found)}, but {line_where} has a value of it: a figure "
                           "removed from the results file, or the samples of another run?")


def _samples_match(task_run: TaskRun, samples_path: Path, results: dict, read: SamplesRead) -> None:
    """:class:`RunError` where the samples file is not the one its results file was written with:
    another number of documents than lm-eval counted, or another task hash (lm-eval's digest of
    every line's document, prompt and target hashes)."""
    effective = task_run.n_samples.get("effective") if isinstance(task_run.n_samples, dict) else None
    if isinstance(effective, int) and not isinstance(effective, bool) and effective != read.documents:
        raise RunError(f"{samples_path} holds {read.documents} documents of {task_run.task}, its results file counts "
                       f"{effective}: the samples of another run?")
    expected = (results.get("task_hashes") or {}).get(task_run.task) if isinstance(
        results.get("task_hashes"), dict) else None
    if expected and read.task_hash is not None and expected != read.task_hash:
        raise RunError(f"{samples_path}: its documents, prompts or targets are not those its results file was "
                       f"computed on (lm-eval's task hash differs): the samples of another run?")


def read_run(results_path: Path, results_dir: Path, docs: dict | None = None) -> Run:
    """One lm-eval run: its results file, and its samples files where they were logged.
    Raises :class:`RunError` when the results file itself cannot be used. Tasks with no
    figure (a ``--predict_only`` run) and groups (their figures aggregate their tasks') are
    left out."""
    match = RESULTS_FILE.match(results_path.name)
    if not match:
        raise RunError(f"{results_path.name} is not named like lm-eval's results_<date>.json")
    date = match["date"]
    try:
        results = json.loads(results_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise RunError(f"cannot read {results_path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise RunError(f"{results_path} is not JSON ({exc})") from None
    if not isinstance(results, dict) or not isinstance(results.get("results"), dict) or not results["results"]:
        raise RunError(f"{results_path} has no 'results' section: not an lm-eval results file")
    folder = results_path.parent
    tasks = {}
    predict_only = set()
    groups = set(results.get("group_subtasks") or {}) | set(results.get("groups") or {})
    for task, entry in results["results"].items():
        if not isinstance(entry, dict) or task in groups:  # a group's figures aggregate its tasks'
            continue
        if not plain_name(task):
            raise RunError(f"{results_path}: the task name {task[:80]!r} is no file name (a path?): its samples "
                           "file cannot be looked up inside the run's folder")
        metrics = task_metrics(task, entry, results)
        if not metrics:
            if any(key.partition(",")[0] == PREDICT_ONLY_METRIC for key in entry):
                predict_only.add(task)
            continue
        unreported = _whole_task_entry(results, task, entry, results_path)
        task_run = TaskRun(
            task=task,
            version=results["versions"][task],
            metrics=metrics,
            config=results["configs"][task] or {},
            n_samples=(results.get("n-samples") or {}).get(task) or {},
        )
        samples_path = folder / f"samples_{task}_{date}.jsonl"
        if samples_path.is_file():
            try:
                read = task_samples(samples_path, metrics, docs)
            except (OSError, UnicodeDecodeError) as exc:
                raise RunError(f"cannot read {samples_path}: {exc}") from None
            _samples_match(task_run, samples_path, results, read)
            _unreported_defined(samples_path, unreported, results_path)
            task_run.samples, task_run.notes = read.samples, read.notes
            task_run.logged = True
            task_run.samples_path = samples_path
            task_run.provenance["prompts hash (of lm-eval's per-sample prompt hashes)"] = read.prompts
        if unreported:
            task_run.notes.append(f"no value on any document: {', '.join(unreported)}")
        tasks[task] = task_run
    if not tasks:
        raise PredictOnlyRun(f"{results_path} reports no figure (a --predict_only run: score it with "
                             "`lm-eval-fin score`)", frozenset(predict_only))
    return Run(results_path, results_dir, date, results, tasks)


def plain_name(name: str) -> bool:
    """Whether ``name`` (read from a run's files) names one file in a folder: no separator, no
    NUL, not "." or ".."; a path built of it stays in its folder."""
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\0")


def _empty(path: Path) -> bool:
    """An empty file in a folder of runs: a write that never happened (lm-eval's, on a full
    disk), not a run; it never blocks a command on the folder."""
    try:
        return path.stat().st_size == 0
    except OSError:
        return False


def results_files(path: Path) -> list[Path]:
    """The results files of one lm-eval output folder (or the file itself), in date order."""
    if path.is_file():
        return [path]
    dates = {p: match["date"] for p in path.rglob("results_*.json")
             if (match := RESULTS_FILE.match(p.name)) and not _empty(p)}
    return sorted(dates, key=lambda p: (dates[p], str(p)))


def read_results_dirs(paths: Iterable[str | Path]) -> tuple[list[Run], list[Unreadable]]:
    """Every run under the given lm-eval output folders, and what could not be read."""
    runs: list[Run] = []
    unreadable: list[Unreadable] = []
    docs: dict[tuple[str, str], dict] = {}  # (lm-eval's doc hash, question) -> the document its runs share
    for given in paths:
        path = Path(given).expanduser()
        if not path.exists():
            unreadable.append(Unreadable(path, "does not exist"))
            continue
        files = results_files(path)
        if not files:
            unreadable.append(Unreadable(path, "holds no results_<date>.json: not an lm-eval --output_path folder"))
            continue
        found: list[Run] = []
        unscored: list[tuple[Path, PredictOnlyRun]] = []
        for file in files:
            try:
                found.append(read_run(file, path, docs))
            except PredictOnlyRun as exc:
                unscored.append((file, exc))
            except RunError as exc:
                unreadable.append(Unreadable(file, str(exc)))
            except Exception as exc:  # noqa: BLE001 - one broken run must not stop the reader
                unreadable.append(Unreadable(file, f"unexpected {type(exc).__name__}: {exc}"))
        runs += found
        unreadable += [Unreadable(file, str(exc)) for file, exc in unscored if not scored_later(file, exc.tasks, found)]
    return runs, unreadable


def scored_later(results_path: Path, tasks: frozenset[str], runs: Iterable[Run]) -> bool:
    """Whether a ``--predict_only`` run's tasks were all scored by ``lm-eval-fin score`` into its
    folder after it (a later results file of the replay model): then the scored run is the run."""
    match = RESULTS_FILE.match(results_path.name)
    date = match["date"] if match else ""
    scored = {task for run in runs if run.source.parent == results_path.parent and run.date > date
              and run.replayed for task in run.tasks}
    return bool(tasks) and tasks <= scored


# ------------------------------------------------------------------------------ samples


def find_samples_files(path: Path, tasks: list[str] | None = None) -> list[SamplesFile]:
    """The samples files at ``path`` (one file, or a folder searched recursively); ``tasks``
    keeps those of these tasks and names the task of a single file renamed by hand."""
    if not path.exists():
        raise SamplesError(f"{path} does not exist")
    if path.is_file():
        match = SAMPLES_FILE.match(path.name)
        if match:
            if tasks and match["task"] not in tasks:
                raise SamplesError(f"{path.name} holds task {match['task']!r}, not one of --tasks {tasks}")
            return [SamplesFile(path, match["task"], match["date"])]
        if tasks and len(tasks) == 1:
            return [SamplesFile(path, tasks[0], "")]
        raise SamplesError(
            f"cannot tell the task of {path.name}: lm-eval names samples files "
            "samples_<task>_<date>.jsonl; pass --tasks <task> for a renamed file"
        )
    found = []
    for candidate in sorted(path.rglob("samples_*.jsonl")):
        match = SAMPLES_FILE.match(candidate.name)
        if match and (not tasks or match["task"] in tasks) and not _empty(candidate):
            found.append(SamplesFile(candidate, match["task"], match["date"]))
    if not found:
        which = f" for tasks {tasks}" if tasks else ""
        raise SamplesError(
            f"no lm-eval samples files{which} under {path}; run lm_eval with --log_samples (and --output_path) first"
        )
    return found


def read_samples(path: Path) -> list[dict]:
    """Every line of one samples file, each checked to look like lm-eval's."""
    samples = []
    for where, sample in read_jsonl(path, SamplesError):
        if not isinstance(sample, dict) or "doc" not in sample or not (
            "resps" in sample or "filtered_resps" in sample
        ):
            raise SamplesError(f"{where}: not an lm-eval sample (needs doc and resps or filtered_resps)")
        samples.append(sample)
    if not samples:
        raise SamplesError(f"{path} holds no samples")
    return samples
