"""What an export says about a run besides its figures, one function each: the model's hub id
and how it ran, each metric's scale, direction and uncertainty, the dataset's source, the judge
and the generation settings. Both formats are built from these.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from lm_eval_fin.judge.spec import JudgeSpecError, parse_spec
from lm_eval_fin.report import stats
from lm_eval_fin.runfiles import Metric, Run, TaskRun
from lm_eval_fin.scales import Scale, scale_of

# a Hugging Face repository id: ORG/NAME
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
# lm-eval model types that load the weights in the evaluating process -> their inference engine
IN_PROCESS_ENGINES = {
    "hf": "transformers", "hf-auto": "transformers", "huggingface": "transformers", "hf-multimodal": "transformers",
    "vllm": "vllm", "vllm-vlm": "vllm", "sglang": "sglang",
}
# lm-eval model types that call a provider's hosted API
HOSTED_APIS = ("openai-completions", "openai-chat-completions", "anthropic-completions", "anthropic-chat",
               "anthropic-chat-completions")
# the per-document mean is lm-eval's figure when they agree this closely (as in the report)
AGREE = 1e-6
DEPLOYMENT_TYPES = ("self_deployed", "externally_managed", "unknown")
AVAILABILITY = ("open_weights", "closed_weights", "unknown")


class ExportError(Exception):
    """A run the export cannot describe as asked (exit status 2); the message says what to pass."""


# ------------------------------------------------------------------------------------ model


@dataclass(frozen=True)
class ModelIdentity:
    id: str  # ORG/NAME
    named: str  # the model as the run named it (hub id, local path or API model)
    model_type: str  # lm-eval's --model
    deployment_type: str
    availability: str
    engine: str | None = None
    engine_version: str | None = None

    @property
    def developer(self) -> str:
        return self.id.split("/", 1)[0]


def named_model(run: Run) -> str:
    """The model as the run named it: its hub id, local path or API model name."""
    args = run.model_args
    for key in ("pretrained", "model", "model_name", "path"):
        if args.get(key):
            return str(args[key])
    return str(run.results.get("model_name") or run.config.get("model") or "")


def is_hub_id(name: str) -> bool:
    """``ORG/NAME`` that is not a folder here (a local ``models/x`` has the same shape)."""
    return bool(HUB_ID.fullmatch(name)) and not Path(name).expanduser().is_dir()


def model_identity(run: Run, given_id: str | None = None) -> ModelIdentity:
    """The run's model under its hub id (``given_id`` wins); :class:`ExportError` when the run
    names a local path or a bare API model and no id is given."""
    named = named_model(run)
    model_type = str(run.config.get("model") or "")
    if model_type == "fin-refine":  # our wrapper around a base model type
        model_type = str(run.model_args.get("base") or model_type)
    if given_id is not None:
        model_id = given_id
    elif is_hub_id(named):
        model_id = named
    else:
        raise ExportError(
            f"{run.source}: the model {named or '(unnamed)'!r} is not a Hugging Face id (ORG/NAME); "
            "pass --model_id ORG/NAME to name it"
        )
    engine = IN_PROCESS_ENGINES.get(model_type)
    if engine:
        deployment = "self_deployed"
        availability = "open_weights" if is_hub_id(named) else "unknown"
    elif model_type in HOSTED_APIS:
        deployment, availability = "externally_managed", "unknown"
    else:
        deployment, availability = "unknown", "unknown"
    version = run.results.get("transformers_version") if engine == "transformers" else None
    return ModelIdentity(model_id, named, model_type, deployment, availability, engine,
                         str(version) if version else None)


# ---------------------------------------------------------------------------- benchmarks


@dataclass(frozen=True)
class BenchmarkTables:
    """What a benchmark says of its metrics and data (its :class:`~lm_eval_fin.harness.benchmark.Benchmark`):
    each metric's scale, the headline metrics of each task, its dataset's hub id."""

    name: str
    scales: Mapping[str, Scale]
    headlines: Mapping[str, tuple[str, ...]]
    hub_dataset: str | None

    def headline(self, task: str) -> tuple[str, ...]:
        return tuple(self.headlines.get(task, ()))


@functools.cache
def all_tables() -> tuple[BenchmarkTables, ...]:
    """Every benchmark's tables."""
    from lm_eval_fin.benchmarks import all_benchmarks

    return tuple(BenchmarkTables(b.name, b.scales, b.headline, b.hub_dataset) for b in all_benchmarks())


def tables_of(task: str) -> BenchmarkTables | None:
    """The tables of the benchmark that owns ``task`` (its name or ``<name>_*``; the longest
    name wins); None for a task of no benchmark of ours."""
    owners = [t for t in all_tables() if task == t.name or task.startswith((t.name + "_", t.name + "-"))]
    return max(owners, key=lambda t: len(t.name)) if owners else None


# ------------------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class MetricFacts:
    """One defined metric of one task: its figure, scale, direction and uncertainty.
    ``interval``: the bootstrap interval of the per-document ``values``, given only when their
    mean is lm-eval's figure (``note`` says why not otherwise)."""

    metric: Metric
    scale: Scale | None
    values: dict[str, float]
    interval: stats.Interval | None
    note: str = ""

    @property
    def name(self) -> str:
        return self.metric.name

    @property
    def value(self) -> float:
        value = self.metric.value
        assert value is not None, "facts are made of defined metrics only (metric_facts)"
        return float(value)

    @property
    def higher_is_better(self) -> bool | None:
        return self.metric.higher_is_better

    @property
    def stderr(self) -> float | None:
        stderr = self.metric.stderr
        if isinstance(stderr, bool) or not isinstance(stderr, (int, float)) or not math.isfinite(stderr):
            return None
        return float(stderr)

    @property
    def standard_deviation(self) -> float | None:
        if self.interval is None or len(self.values) < 2:
            return None
        return float(np.std(list(self.values.values()), ddof=1))


def metric_facts(task_run: TaskRun, resamples: int = stats.BOOTSTRAP_RESAMPLES, seed: int = 0) -> list[MetricFacts]:
    """The facts of every metric of the task that has a value in this run, in lm-eval's order."""
    tables = tables_of(task_run.task)
    found = []
    for metric in task_run.defined.values():
        scale = scale_of(metric.metric, tables.scales) if tables else None
        values = {s.key: s.values[metric.name] for s in task_run.samples if metric.name in s.values}
        interval, note = None, ""
        if values:
            interval = stats.bootstrap_interval(values.values(), resamples=resamples, seed=seed)
            assert metric.value is not None, "TaskRun.defined holds the metrics with a value"
            reported = float(metric.value)
            if not abs(interval.mean - reported) <= AGREE * max(1.0, abs(reported)):
                note = (f"the mean of the {interval.n} per-document values ({interval.mean:.6g}) is not the "
                        f"run's figure ({reported:.6g}, a run-level aggregate): no interval is given")
                interval = None
        elif task_run.logged:
            note = "no per-document values (a run-level metric)"
        found.append(MetricFacts(metric, scale, values, interval, note))
    return found


def undefined_metrics(task_run: TaskRun) -> list[str]:
    """The task's metrics with no value in this run (lm-eval's null)."""
    return [name for name, metric in task_run.metrics.items() if metric.value is None]


# ------------------------------------------------------------------------------- dataset


@dataclass(frozen=True)
class DatasetSource:
    """Where the task's documents came from: a hub dataset (``hub_id``, ``config``, ``split``)
    or a local file or folder (``path``, as the run named it, and the sha256 of its content,
    when it is readable here)."""

    task: str
    split: str | None
    ids: tuple[str, ...]
    hub_id: str | None = None
    config: str | None = None
    path: str | None = None
    sha256: str | None = None
    note: str = ""

    @property
    def file_name(self) -> str | None:
        """The local file's or folder's name: what records meant for others show of the path."""
        return Path(self.path).name if self.path else None


def content_sha256(path: Path) -> str:
    """sha256 of a file's bytes; of a folder, over its files' relative paths and digests in
    path order (hidden files left out)."""
    if path.is_file():
        return _file_sha256(path)
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        relative = file.relative_to(path)
        if not any(part.startswith(".") for part in relative.parts):
            digest.update(f"{relative.as_posix()}\0{_file_sha256(file)}\n".encode())
    return digest.hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def settings_of(task_run: TaskRun) -> dict[str, Any]:
    """The run's settings as its documents carry them ({} without samples)."""
    return task_run.samples[0].settings if task_run.samples else {}


def dataset_source(task_run: TaskRun) -> DatasetSource:
    config = task_run.config
    split = config.get("test_split") or config.get("validation_split")
    ids = tuple(s.key for s in task_run.samples)
    values = settings_of(task_run).get("values") or {}
    data_path = values.get("data_path")
    tables = tables_of(task_run.task)
    if data_path:
        path = Path(str(data_path)).expanduser()
        if path.exists():
            return DatasetSource(task_run.task, split, ids, path=str(data_path), sha256=content_sha256(path))
        return DatasetSource(task_run.task, split, ids, path=str(data_path),
                             note=f"{path.name} was not readable where the export ran: no content hash")
    if tables and tables.hub_dataset:
        return DatasetSource(task_run.task, split, ids, hub_id=tables.hub_dataset)
    if not tables and config.get("dataset_path"):  # a task of lm-eval's own, from the hub
        return DatasetSource(task_run.task, split, ids, hub_id=str(config["dataset_path"]),
                             config=config.get("dataset_name") or None)
    why = "the run logged no samples, which carry its data path" if not task_run.logged else "the run names no data"
    return DatasetSource(task_run.task, split, ids, note=f"unknown source: {why}")


# --------------------------------------------------------------------------------- judge


@dataclass(frozen=True)
class JudgeFacts:
    spec: str  # the canonical judge spec
    model: str
    backend: str
    prompt_versions: tuple[str, ...]
    options: dict[str, Any]

    @property
    def deployment_type(self) -> str:
        if self.backend in ("vllm", "hf"):
            return "self_deployed"
        host = urlparse(self.spec.partition(":")[2]).hostname or ""
        try:
            private = ipaddress.ip_address(host).is_private or ipaddress.ip_address(host).is_loopback
        except ValueError:
            private = host == "localhost"
        return "self_deployed" if private else "unknown"

    @property
    def availability(self) -> str:
        return "open_weights" if self.backend in ("vllm", "hf") and is_hub_id(self.model) else "unknown"


def judges(task_run: TaskRun) -> list[JudgeFacts]:
    """The judges that scored the task's documents (the records' specs, else the settings'),
    each with the prompt versions its records name; [] for an unjudged run."""
    versions: dict[str, set[str]] = {}
    options: dict[str, dict] = {}
    for sample in task_run.samples:
        judge = sample.record.get("judge")
        record_judge = judge if isinstance(judge, dict) else {}
        settings = sample.settings
        spec = record_judge.get("spec") or settings.get("judge")
        if not spec:
            continue
        found = versions.setdefault(str(spec), set())
        if record_judge.get("prompt_version"):
            found.add(str(record_judge["prompt_version"]))
        if isinstance(settings.get("judge_options"), dict):
            options.setdefault(str(spec), settings["judge_options"])
    found_judges = []
    for spec, prompt_versions in sorted(versions.items()):
        try:
            parsed = parse_spec(spec)
            model, backend = parsed.model, parsed.backend
        except JudgeSpecError:
            model, backend = spec, "unknown"
        found_judges.append(JudgeFacts(spec, model, backend, tuple(sorted(prompt_versions)), options.get(spec, {})))
    return found_judges


# ---------------------------------------------------------------------------- generation


def generation_kwargs(task_run: TaskRun) -> dict[str, Any]:
    """The generation arguments lm-eval used for the task (the YAML's, with --gen_kwargs)."""
    kwargs = task_run.config.get("generation_kwargs")
    return dict(kwargs) if isinstance(kwargs, dict) else {}


def run_details(run: Run) -> dict[str, Any]:
    """What else of the run bears on its figures: seeds, limit, chat template, system prompt."""
    config = run.config
    found = {key: config.get(key) for key in (
        "limit", "random_seed", "numpy_seed", "torch_seed", "fewshot_seed", "bootstrap_iters", "batch_size",
    ) if config.get(key) is not None}
    for key in ("chat_template_sha", "system_instruction_sha", "fewshot_as_multiturn", "git_hash"):
        if run.results.get(key) is not None:
            found[key] = run.results[key]
    return found
