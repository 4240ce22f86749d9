"""Everything ``lm-eval-fin run`` can check before lm-eval loads a model, collected.

A run that cannot finish should fail in a second, not after hours of generation. Before
lm-eval starts, :func:`run_problems` looks at:

* each task of ours the command names (groups expanded): the user's ``--metadata`` keys, its
  settings, its data read whole with every field its scorer needs (the benchmark's
  ``check_data``), and whether the models its settings name are here;
* each judge a judged task will use, once: the judge itself and its cache
  (:func:`lm_eval_fin.judge.preflight.judge_problems`);
* the model under test, where it is a local one (``hf``, ``vllm``, ... with ``pretrained=``):
  a folder that exists, or a hub id in the local cache or on a reachable hub;
* ``--output_path``: a folder (not a file) that can be written, with free space for the
  results and samples files (:func:`lm_eval_fin.plumbing.atomic.output_problem`), and where the
  model's folder lm-eval makes can be made (:func:`lm_eval_fin.harness.saving.output_problems`).

Every problem is one :class:`~lm_eval_fin.plumbing.exit_status.Problem`, one line (``file:line``
first where there is one); the command prints them all and exits 2, or 3 when the judge
cache is all that is wrong.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lm_eval_fin.harness import saving, taskfiles
from lm_eval_fin.harness.benchmark import Benchmark, benchmark_of
from lm_eval_fin.plumbing import atomic, hub
from lm_eval_fin.plumbing.exit_status import Problem

# lm-eval models that load weights on this machine from ``pretrained`` (``fin-refine`` wraps
# one of them, named by its ``base`` argument); API models name a served model instead.
LOCAL_MODELS = ("hf", "hf-auto", "huggingface", "hf-multimodal", "vllm", "vllm-vlm", "sglang", "steered")
WRAPPER_MODEL = "fin-refine"
# Free space a run needs under --output_path beyond atomic.MIN_FREE_BYTES: room for samples
# proportional to the local data they log (each sample holds its document and its prompt,
# about three times the record).
BYTES_PER_DATA_BYTE = 3


class UnscorableData(ValueError):
    """Data that loads but that the task's scorer cannot score: an eval file without grades,
    a split without reference answers. Fine for a ``--predict_only`` run (which logs the
    answers to score elsewhere), an error for a run that scores."""


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__


def _data_bytes(data_path: Any) -> int:
    """The size of a local ``data_path`` (a file, or the files of a folder); 0 when unknown."""
    if not isinstance(data_path, str):
        return 0
    path = Path(data_path).expanduser()
    try:
        if path.is_file():
            return path.stat().st_size
        if path.is_dir():
            return sum(child.stat().st_size for child in path.iterdir() if child.is_file())
    except OSError:
        pass
    return 0


def task_problems(
    tasks: Sequence[str], metadata: Mapping[str, Any], benchmarks: Sequence[Benchmark], scored: bool = True
) -> tuple[list[Problem], set[str], int]:
    """(the problems of every task of ours that ``tasks`` names, the judge specs the judged
    ones will use, the bytes of local data they read). ``scored``: the run computes the
    metrics (not ``--predict_only``), so data its scorer cannot score is a problem. Names
    that are not ours are lm-eval's business; a ``fin_`` name that is no task of ours is a typo."""
    from lm_eval_fin.harness.settings import check_user_metadata

    ours = taskfiles.names()
    shared = [setting.name for benchmark in benchmarks for setting in benchmark.settings]  # any task ignores these
    problems: list[Problem] = []
    judges: set[str] = set()
    data_bytes = 0
    for name in tasks:
        if name.startswith("fin_") and name not in ours:
            close = difflib.get_close_matches(name, ours, n=1)
            problems.append(Problem(
                f"no task {name!r}" + (f"; did you mean {close[0]!r}?" if close else "") + " lm-eval-fin's tasks: "
                + ", ".join(ours)
            ))
            continue
        for task in taskfiles.expand(name):
            benchmark = benchmark_of(task, benchmarks)
            if benchmark is None:
                continue
            try:
                check_user_metadata(task, metadata, benchmark.settings, shared)
                settings = benchmark.read_settings(task, metadata)
            except (ValueError, OSError, RuntimeError) as exc:
                problems.append(Problem(_first_line(exc)))
                continue
            if benchmark.check_data is not None:
                try:
                    benchmark.check_data(task, settings)
                except UnscorableData as exc:
                    if scored:
                        problems.append(Problem(_first_line(exc)))
                except (ValueError, OSError, RuntimeError) as exc:
                    problems.append(Problem(_first_line(exc)))
                if "data_path" in settings.values:
                    data_bytes += _data_bytes(settings["data_path"])
            try:
                benchmark.check_usable(settings)
            except (ValueError, OSError, RuntimeError) as exc:
                problems.append(Problem(_first_line(exc)))
            if benchmark.judged and settings.judge:
                judges.add(settings.judge)
    unique = list(dict.fromkeys(problems))  # a group names a task twice: say it once
    return unique, judges, data_bytes


def model_backend(model: str | None, model_args: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """The lm-eval backend that loads the model under test (``fin-refine``'s base, for the
    wrapper) and the model arguments, as lm-eval parsed them."""
    args = dict(model_args or {})
    kind = model or "hf"
    return (str(args.get("base") or "") if kind == WRAPPER_MODEL else kind), args


def model_problem(model: str | None, model_args: Mapping[str, Any] | None) -> Problem | None:
    """Why the model under test cannot load here, where lm-eval would load it from this
    machine (``pretrained=`` of a local model: a folder, or a hub id cached or reachable);
    None when it can, or when it is not ours to know (an API model)."""
    kind, args = model_backend(model, model_args)
    pretrained = args.get("pretrained")
    if kind not in LOCAL_MODELS or not isinstance(pretrained, str) or not pretrained.strip():
        return None
    problem = hub.model_problem(pretrained.strip())
    return None if problem is None else Problem(f"--model_args pretrained: {problem}")


def run_problems(lm_args: Any, benchmarks: Sequence[Benchmark]) -> list[Problem]:
    """Every problem :mod:`this module <lm_eval_fin.harness.preflight>` can see in a run
    whose lm-eval arguments are ``lm_args`` (lm-eval's own reading of them)."""
    from lm_eval_fin.judge import parse_spec
    from lm_eval_fin.judge.preflight import judge_problems

    scored = not getattr(lm_args, "predict_only", False)
    problems, judges, data_bytes = task_problems(
        getattr(lm_args, "tasks", None) or [], getattr(lm_args, "metadata", None) or {}, benchmarks, scored
    )
    problems += judge_problems(parse_spec(spec) for spec in sorted(judges))
    model = model_problem(getattr(lm_args, "model", None), getattr(lm_args, "model_args", None))
    if model is not None:
        problems.append(model)
    output_path = getattr(lm_args, "output_path", None)
    layout = saving.output_problems(output_path, saving.model_name(getattr(lm_args, "model_args", None)))
    problems += [Problem(line) for line in layout]
    needed = atomic.MIN_FREE_BYTES + BYTES_PER_DATA_BYTE * data_bytes
    output = None if layout else atomic.output_problem(output_path, needed)
    if output is not None:
        problems.append(Problem(output))
    return problems
