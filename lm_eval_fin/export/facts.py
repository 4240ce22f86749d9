"""What an export says about a run besides its figures, one function each: the model's hub id
and how it ran, each metric's scale, direction and uncertainty, the dataset's source, the judge
and the generation settings. Both formats are built from these.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from lm_eval_fin.export.public import public_text
from lm_eval_fin.judge.spec import JudgeSpecError, parse_spec
from lm_eval_fin.measures.scales import Scale, scale_of
from lm_eval_fin.measures.textsim import DEFAULT_BERTSCORE_MODEL, OFFLINE_BERTSCORE
from lm_eval_fin.outputs.owners import owner_of
from lm_eval_fin.outputs.runfiles import Metric, Run, TaskRun
from lm_eval_fin.plumbing import paths
from lm_eval_fin.report import stats

# a Hugging Face repository id: ORG/NAME
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
# a name that can be a file or folder name in an export, as the hub spells repository names:
# letters, digits, "_", "-" and ".", neither "." nor ".." nor any "..", at most 96 characters
SAFE_NAME = re.compile(r"(?!.*\.\.)[A-Za-z0-9_][\w.-]{0,95}")
# a GGUF file's quantization as its name states it (SmolLM2-135M-Instruct.Q4_1.gguf: Q4_1)
GGUF_QUANTIZATION = re.compile(r"[.-]((?:I?Q\d[\w]*)|F16|BF16|F32)\.gguf$", re.IGNORECASE)
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
class Weights:
    """The weights a run evaluated: the hub repository they come from (None for a local folder
    or an API model) at a revision, or a GGUF file of it with its quantization and the model it
    quantizes; ``local`` names a local folder's or file's last part (never its path)."""

    repo: str | None
    revision: str | None = None
    gguf_file: str | None = None
    quantization: str | None = None
    base_model: str | None = None
    converted: str | None = None  # how the GGUF file was turned into what ran
    local: str | None = None

    def describe(self) -> str:
        """One phrase: what ran, as a reader of a card needs it."""
        if self.gguf_file:
            text = f"GGUF file {self.gguf_file}"
            text += f" ({self.quantization} quantization)" if self.quantization else ""
            text += f" of {self.repo}" if self.repo else ""
            text += f" at revision {self.revision}" if self.revision else ""
            text += f", a quantization of {self.base_model}" if self.base_model else ""
            return text + (f", {self.converted}" if self.converted else "")
        if self.repo:
            return f"{self.repo} at revision {self.revision or 'not recorded'}"
        return f"local weights {self.local!r} (not on the hub)" if self.local else "an API model (weights not known)"

    def short(self) -> str:
        """The weights in a few words: ``repo@revision`` (12 digits), the GGUF file and its
        quantization, or the local folder's name."""
        at = f"{self.repo}@{self.revision[:12] if self.revision else 'revision not recorded'}" if self.repo else None
        if self.gguf_file:
            return " ".join(filter(None, (at, self.gguf_file))) + (f" ({self.quantization})" if self.quantization else "")
        return at or self.describe()

    def details(self) -> dict[str, str]:
        """Its fields that are known, for a record's ``additional_details``."""
        fields = {"weights_repo": self.repo, "weights_revision": self.revision, "gguf_file": self.gguf_file,
                  "quantization": self.quantization, "base_model": self.base_model,
                  "conversion": self.converted, "local_weights": self.local}
        return {key: value for key, value in fields.items() if value}


@dataclass(frozen=True)
class ModelIdentity:
    id: str  # ORG/NAME
    model_type: str  # lm-eval's --model
    deployment_type: str
    availability: str
    weights: Weights
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


def is_embedded_conversion(named: str) -> bool:
    """Whether the run's model is the folder ``lm-eval-fin model-path`` converts the embedded
    GGUF file into (``<cache>/models/SmolLM2-135M-Instruct``, on whichever machine ran it)."""
    parts = Path(named).parts
    return len(parts) >= 2 and parts[-2:] == ("models", paths.EMBEDDED_MODEL_NAME)


def weights_of(run: Run) -> Weights:
    """The weights the run evaluated, from its model arguments and what lm-eval recorded."""
    named = named_model(run)
    if is_embedded_conversion(named):
        return Weights(paths.EMBEDDED_MODEL_REPO, paths.EMBEDDED_MODEL_REVISION, paths.EMBEDDED_MODEL_FILE,
                       paths.EMBEDDED_MODEL_QUANTIZATION, paths.EMBEDDED_BASE_MODEL,
                       "de-quantised to float32 by transformers (lm-eval-fin model-path)")
    args, config = run.model_args, run.config
    revision = next((str(v) for v in (config.get("model_sha"), args.get("revision"), config.get("model_revision"))
                     if v), None)
    hub = is_hub_id(named)
    local = None if hub or not named else Path(named).name or named
    gguf = str(args.get("gguf_file") or "") or (Path(named).name if named.lower().endswith(".gguf") else "")
    if gguf:
        found = GGUF_QUANTIZATION.search(Path(gguf).name)
        return Weights(named if hub else None, revision if hub else None, Path(gguf).name,
                       found[1].upper() if found else None, local=None if hub else local)
    return Weights(named if hub else None, revision if hub else None, local=local)


def model_identity(run: Run, given_id: str | None = None) -> ModelIdentity:
    """The run's model under its hub id (``given_id`` wins); :class:`ExportError` when the run
    names a local path or a bare API model and no id is given, or when ``given_id`` names the
    model a GGUF file of the run quantizes (its figures are the quantized weights')."""
    named = named_model(run)
    weights = weights_of(run)
    if given_id is not None and weights.base_model and given_id == weights.base_model:
        raise ExportError(
            f"{run.source.name}: the run evaluated the {weights.describe()}, not {given_id}'s own weights: "
            f"leave out --model_id (the export names {weights.repo}) or name the quantized model"
        )
    model_type = str(run.config.get("model") or "")
    if model_type == "fin-refine":  # our wrapper around a base model type
        model_type = str(run.model_args.get("base") or model_type)
    if given_id is not None:
        model_id = given_id
    elif weights.repo:
        model_id = weights.repo
    else:
        raise ExportError(
            f"{run.source.name}: the model {weights.local or named or '(unnamed)'!r} is not a Hugging Face id "
            "(ORG/NAME); pass --model_id ORG/NAME to name it"
        )
    engine = IN_PROCESS_ENGINES.get(model_type)
    if engine:
        deployment = "self_deployed"
        availability = "open_weights" if weights.repo else "unknown"
    elif model_type in HOSTED_APIS:
        deployment, availability = "externally_managed", "unknown"
    else:
        deployment, availability = "unknown", "unknown"
    version = run.results.get("transformers_version") if engine == "transformers" else None
    return ModelIdentity(path_component_id(model_id, "model id"), model_type, deployment, availability, weights,
                         engine, str(version) if version else None)


def safe_name(value: str) -> bool:
    """Whether ``value`` can be one file or folder name of an export (see SAFE_NAME)."""
    return bool(SAFE_NAME.fullmatch(value))


def path_component_id(model_id: str, what: str) -> str:
    """``model_id`` when it is ORG/NAME of two safe names; :class:`ExportError` otherwise (the
    export builds folder names of it)."""
    parts = model_id.split("/")
    if len(parts) != 2 or not all(safe_name(part) for part in parts):
        raise ExportError(f"{what} {model_id!r} is not ORG/NAME (letters, digits, '_', '-', '.'; no '..'; "
                          "at most 96 characters each)")
    return model_id


def check_task_name(task: str, source: Path) -> None:
    """:class:`ExportError` for a task name (read from a results file) that cannot be one file
    name: the export builds paths of it."""
    if not safe_name(task):
        raise ExportError(f"{source.name} names a task {task[:80]!r} that cannot be a file name (letters, digits, "
                          "'_', '-', '.'; no '..'): not exported")


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
    """The tables of the benchmark that owns ``task`` (:func:`lm_eval_fin.outputs.owners.owner_of`);
    None for a task of no benchmark of ours."""
    return owner_of(task, all_tables())


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


# ------------------------------------------------------------------------------- dataset


HUB = "hub dataset"
SHIPPED = "shipped sample"
LOCAL = "local file"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class DatasetSource:
    """Where the task's documents came from (``kind``): a hub dataset (``hub_id``, ``config``,
    ``split``, ``revision``), a sample shipped with lm-eval-fin or a local file or folder
    (``file``: the shipped file's path in the package, or the local one's last part, never its
    path here; ``sha256`` of its content where it is readable). ``split`` is the hub's only: a
    sample or a local file is no split of the benchmark."""

    task: str
    kind: str
    ids: tuple[str, ...]
    hub_id: str | None = None
    config: str | None = None
    split: str | None = None
    revision: str | None = None
    file: str | None = None
    sha256: str | None = None
    note: str = ""

    def describe(self) -> str:
        if self.kind == HUB:
            return (f"hub dataset {self.hub_id}" + (f" config {self.config}" if self.config else "")
                    + f", split {self.split or 'not recorded'}, revision {self.revision or 'not recorded'}")
        if self.kind in (SHIPPED, LOCAL):
            digest = f"sha256 {self.sha256}" if self.sha256 else "content not hashed: " + self.note
            return f"{self.kind} {self.file} ({digest})"
        return self.note or "unknown source"

    def details(self) -> dict[str, str]:
        """Its fields that are known, for a record's ``additional_details``."""
        fields = {"data_source": self.kind, "data_file": self.file, "data_sha256": self.sha256,
                  "hub_revision": self.revision if self.kind == HUB else None, "note": self.note or None}
        return {key: value for key, value in fields.items() if value}


def shipped_file(path: Path) -> str | None:
    """The shipped-data path (``finlfqa_demo/finlfqa_demo.jsonl``) of a file or folder under
    lm-eval-fin's ``data`` folder, on this machine or another's install; None for other paths."""
    parts = path.parts
    for at in range(len(parts) - 2, -1, -1):
        if parts[at:at + 2] == ("lm_eval_fin", "data") and at + 2 < len(parts):
            relative = Path(*parts[at + 2:])
            return relative.as_posix() if paths.data_path(*relative.parts).exists() else None
    return None


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
    ids = tuple(s.key for s in task_run.samples)
    values = settings_of(task_run).get("values") or {}
    data_path = values.get("data_path")
    tables = tables_of(task_run.task)
    split = config.get("test_split") or config.get("validation_split")
    if data_path:
        path = Path(str(data_path)).expanduser()
        shipped = shipped_file(path)
        kind, name = (SHIPPED, shipped) if shipped else (LOCAL, path.name)
        readable = path if path.exists() else paths.data_path(*Path(shipped).parts) if shipped else None
        if readable is not None:
            return DatasetSource(task_run.task, kind, ids, file=name, sha256=content_sha256(readable))
        return DatasetSource(task_run.task, kind, ids, file=name,
                             note=f"{name} was not readable where the export ran")
    if tables and tables.hub_dataset:
        return DatasetSource(task_run.task, HUB, ids, hub_id=tables.hub_dataset, split=split)
    if not tables and config.get("dataset_path"):  # a task of lm-eval's own, from the hub
        revision = (config.get("dataset_kwargs") or {}).get("revision") if isinstance(
            config.get("dataset_kwargs"), dict) else None
        return DatasetSource(task_run.task, HUB, ids, hub_id=str(config["dataset_path"]),
                             config=config.get("dataset_name") or None, split=split,
                             revision=str(revision) if revision else None)
    why = "the run logged no samples, which carry its data path" if not task_run.logged else "the run names no data"
    return DatasetSource(task_run.task, UNKNOWN, ids, note=f"unknown source: {why}")


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


def generation_text(run: Run, task_run: TaskRun) -> str:
    """The settings that make the answers, as one phrase: generation arguments, few-shot count,
    chat template and system prompt (by their digests), seeds and limit."""
    kwargs = {**generation_kwargs(task_run), "num_fewshot": task_run.config.get("num_fewshot")}
    details = run_details(run)
    for key in ("chat_template_sha", "system_instruction_sha"):
        if details.get(key):
            kwargs[key.removesuffix("_sha") + " sha256"] = str(details[key])[:12]
    for key in ("random_seed", "limit"):
        if details.get(key) is not None:
            kwargs[key] = details[key]
    return ", ".join(f"{key}={value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
                     for key, value in kwargs.items() if value is not None)


# ------------------------------------------------------------------------- what else ran


def bertscore_model(task_run: TaskRun) -> str:
    """The BERTScore model of the run's documents, by a name others can look up."""
    name = (settings_of(task_run).get("values") or {}).get("bertscore_model")
    if name is None:
        return f"{DEFAULT_BERTSCORE_MODEL} (bert-score's default)"
    if str(name).strip().lower() == OFFLINE_BERTSCORE:
        return "sentence-transformers/all-MiniLM-L6-v2 (the packaged offline MiniLM)"
    return public_text(str(name))


def undefined_reasons(task_run: TaskRun) -> dict[str, str]:
    """Each metric with no value in this run (lm-eval's null), with why."""
    tables = tables_of(task_run.task)
    judged_run = bool(judges(task_run))
    reasons = {}
    for name, metric in task_run.metrics.items():
        if metric.value is not None:
            continue
        scale = scale_of(metric.metric, tables.scales) if tables else None
        if scale is not None and scale.judged:
            reasons[name] = ("the judge gave no usable value for any document" if judged_run
                             else "no judge was configured")
        elif not task_run.logged:
            reasons[name] = "lm-eval's null"
        else:
            reasons[name] = "no document it applies to"
    return reasons


def undefined_summary(task_run: TaskRun) -> str:
    """The metrics with no value, grouped by why: ``"a, b (why); c (why)"``; "" for none."""
    by_reason: dict[str, list[str]] = {}
    for name, why in undefined_reasons(task_run).items():
        by_reason.setdefault(why, []).append(name)
    return "; ".join(f"{', '.join(names)} ({why})" for why, names in by_reason.items())


def metric_context(item: MetricFacts, task_run: TaskRun, judges_: list[JudgeFacts]) -> dict[str, str]:
    """What a reader needs beside a metric's value: its document count, and its judge (spec and
    prompt version) or BERTScore model where it has one."""
    context = {}
    n = item.interval.n if item.interval is not None else len(item.values) or task_run.n_samples.get("effective")
    if n:
        context["n"] = str(n)
    if item.scale is not None and item.scale.judged:
        context["judge"] = "; ".join(public_text(j.spec) for j in judges_) or "none recorded"
        context["judge_prompt_version"] = "; ".join(", ".join(j.prompt_versions) or "not recorded" for j in judges_) \
            or "not recorded"
    if "bertscore" in item.metric.metric:
        context["bertscore_model"] = bertscore_model(task_run)
    return context
