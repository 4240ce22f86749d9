"""The task YAMLs read as data: the one place for generation settings and metric names.

Python code that needs a value a task YAML sets (the metrics ``process_results`` returns, the
answer budget ``max_gen_toks`` for fitting prompts to the context)
reads it here instead of repeating it. ``!function`` tags are kept as their text and
``include`` is followed, as lm-eval does.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

from lm_eval_fin.plumbing import paths


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def _read(path: Path) -> dict[str, Any]:
    config = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader) or {}
    include = config.pop("include", None)
    if include:
        config = {**_read(path.parent / include), **config}
    return config


@functools.cache
def _configs() -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    tasks: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[str]] = {}
    for path in sorted(paths.tasks_dir().rglob("*.yaml")):
        config = _read(path)
        if isinstance(config.get("task"), str):
            tasks[config["task"]] = config
            tags = config.get("tag") or []
            for tag in [tags] if isinstance(tags, str) else tags:
                groups.setdefault(str(tag), []).append(config["task"])
        elif isinstance(config.get("group"), str) and isinstance(config.get("task"), list):
            groups[config["group"]] = [str(name) for name in config["task"]]
    return tasks, groups


def task_configs() -> dict[str, dict[str, Any]]:
    """Task name -> its YAML (includes merged), for every task of the shipped task folder."""
    return _configs()[0]


def expand(name: str, within: tuple[str, ...] = ()) -> list[str]:
    """The tasks a name stands for: a tag's or group's members (recursively), else the name itself
    (also a member that names a tag it is within: a tag may share a task's name)."""
    groups = _configs()[1]
    if name not in groups or name in within:
        return [name]
    return [task for member in groups[name] for task in expand(member, (*within, name))]


def names() -> list[str]:
    """Every task, tag and group name of the shipped task folder."""
    tasks, groups = _configs()
    return sorted({*tasks, *groups})


def task_config(task: str) -> dict[str, Any]:
    configs = task_configs()
    if task not in configs:
        raise KeyError(f"no task {task!r} in {paths.tasks_dir()}; tasks: {sorted(configs)}")
    return configs[task]


def metric_names(task: str) -> list[str]:
    """The metrics of the task's ``metric_list``, in order."""
    return [str(entry["metric"]) for entry in task_config(task).get("metric_list") or [] if isinstance(entry, dict)]


def higher_is_better(task: str) -> dict[str, bool]:
    """Metric -> higher_is_better, from the task's ``metric_list``."""
    return {
        str(entry["metric"]): bool(entry["higher_is_better"])
        for entry in task_config(task).get("metric_list") or []
        if isinstance(entry, dict) and "higher_is_better" in entry
    }


def max_gen_toks(task: str) -> int:
    """The answer budget the task's ``generation_kwargs`` set."""
    return int(task_config(task)["generation_kwargs"]["max_gen_toks"])
