"""What lm-eval itself would find only after the model has loaded, found before ``lm-eval-fin
run`` hands over to it, each as one line (and the hint after lm-eval's "Tasks not found").

* ``--metadata``, ``--model_args``, ``--gen_kwargs`` given as JSON that does not parse: lm-eval's
  parser raises with a traceback (:func:`json_argument_problem`, read from the raw arguments);
* a task of ours marked ``unsafe_code`` (it runs the model's code) without
  ``--confirm_run_unsafe_code``: lm-eval refuses it once the model is loaded;
* ``--limit`` that leaves no documents (0 or less): lm-eval stops at "did not find any docs";
* a task whose data is a hub dataset, run without ``data_path`` where that dataset is neither
  cached nor reachable (offline): the loader would fail after the model loaded.

Each function returns its problems as text (None or an empty list when there is none); the
caller prints them and exits 2.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from lm_eval_fin.harness import taskfiles
from lm_eval_fin.harness.benchmark import Benchmark, benchmark_of
from lm_eval_fin.plumbing import hub, paths

# lm-eval's options that take key=value pairs or one JSON object (its MergeDictAction)
JSON_OPTIONS = {"--metadata": "--metadata", "--model_args": "--model_args", "-a": "--model_args",
                "--gen_kwargs": "--gen_kwargs"}
TASKS_NOT_FOUND = "Tasks not found"


def _given_values(args: Sequence[str]) -> list[tuple[str, str]]:
    """(option, its first value) for each JSON-taking option in ``args``, either spelling."""
    found = []
    for i, arg in enumerate(args):
        name, equals, value = arg.partition("=")
        if name in JSON_OPTIONS:
            if equals:
                found.append((JSON_OPTIONS[name], value))
            elif i + 1 < len(args):
                found.append((JSON_OPTIONS[name], args[i + 1]))
    return found


def json_argument_problem(args: Sequence[str]) -> str | None:
    """Why a JSON value of ``--metadata``, ``--model_args`` or ``--gen_kwargs`` cannot be read
    (it looks like JSON, with a ``{``, and is not a JSON object), or None."""
    for option, value in _given_values(args):
        if not value.lstrip().startswith(("{", "[")) and "{" not in value:
            continue  # key=value pairs: lm-eval's own parser reads and checks those
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            return (f"{option} is not valid JSON ({exc.msg} at character {exc.pos + 1}); write one JSON object with "
                    "double-quoted keys and strings, in single quotes for the shell: "
                    f"{option} '{{\"key\": \"value\"}}'")
        if not isinstance(parsed, dict):
            return f"{option} must be one JSON object ({{\"key\": value, ...}}), got a JSON {type(parsed).__name__}"
    return None


def our_tasks(names: Sequence[str], benchmarks: Sequence[Benchmark]) -> list[tuple[str, Benchmark]]:
    """(task, its benchmark) for every task of ours that ``names`` stands for, groups expanded,
    each once."""
    found: dict[str, Benchmark] = {}
    for name in names:
        for task in taskfiles.expand(name):
            benchmark = benchmark_of(task, benchmarks)
            if benchmark is not None and task in taskfiles.task_configs():
                found.setdefault(task, benchmark)
    return list(found.items())


def unsafe_code_problem(tasks: Sequence[str], confirmed: bool) -> str | None:
    """Our tasks marked ``unsafe_code`` in their YAML, run without ``--confirm_run_unsafe_code``."""
    if confirmed:
        return None
    unsafe = [task for task in tasks if taskfiles.task_config(task).get("unsafe_code")]
    if not unsafe:
        return None
    return (f"{', '.join(unsafe)} run{'s' if len(unsafe) == 1 else ''} the model's code (in lm-eval-fin's sandbox), "
            "so lm-eval asks for --confirm_run_unsafe_code: add it to the command")


def limit_problem(limit: float | None) -> str | None:
    """A ``--limit`` that leaves no documents: lm-eval takes a number of documents (1 or more)
    or a fraction of them (between 0 and 1)."""
    if limit is None or limit > 0:
        return None
    return (f"--limit {limit:g} leaves no documents to run; give a number of documents (--limit 2) or a fraction "
            "of them (--limit 0.1), or leave it out for all")


def dataset_problems(tasks: Sequence[tuple[str, Benchmark]], metadata: Mapping[str, Any]) -> list[str]:
    """Tasks that read a hub dataset (no ``data_path`` given) that cannot be loaded here: not
    cached, and offline mode set or the hub unreachable. Settings that cannot be read are the
    settings check's to report."""
    problems = []
    for task, benchmark in tasks:
        if benchmark.hub_dataset is None:
            continue
        try:
            settings = benchmark.read_settings(task, metadata)
        except ValueError:
            continue
        if settings.values.get("data_path"):
            continue
        problem = hub.dataset_problem(benchmark.hub_dataset)
        if problem is not None:
            problems.append(
                f"{task}: {problem}; pass a local copy in the hub schema with --metadata "
                f"'{{\"{benchmark.name}\": {{\"data_path\": \"<json, jsonl or parquet file>\"}}}}', or run once "
                "where the hub can be reached to cache it"
            )
    return problems


def start_problems(lm_args: Any, benchmarks: Sequence[Benchmark]) -> list[str]:
    """Every problem above in a run whose lm-eval arguments are ``lm_args`` (lm-eval's own
    reading of them), but the JSON one (read before lm-eval's parser)."""
    tasks = our_tasks(getattr(lm_args, "tasks", None) or [], benchmarks)
    problems = [
        unsafe_code_problem([task for task, _ in tasks], bool(getattr(lm_args, "confirm_run_unsafe_code", False))),
        limit_problem(getattr(lm_args, "limit", None)),
    ]
    found = [problem for problem in problems if problem]
    return found + dataset_problems(tasks, getattr(lm_args, "metadata", None) or {})


def tasks_not_found_hint(exc: BaseException) -> str | None:
    """lm-eval's "Tasks not found: <names>" in one line with a hint: the closest task of ours
    and how to list every task; None for any other error."""
    message = str(exc).strip()
    if not message.startswith(TASKS_NOT_FOUND):
        return None
    missing = [name.strip() for name in message.partition(":")[2].split(",") if name.strip()]
    ours = taskfiles.names()
    close = {name: found[0] for name in missing if (found := difflib.get_close_matches(name, ours, n=1))}
    hint = "".join(f"; did you mean {to!r} for {name!r}?" for name, to in close.items())
    return (f"{message.splitlines()[0]}{hint} lm-eval-fin's tasks: {', '.join(ours)}; every task lm-eval knows: "
            f"lm_eval ls tasks --include_path {paths.tasks_dir()}")
