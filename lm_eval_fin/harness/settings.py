"""The settings of a run: what a task reads from lm-eval's ``metadata``, once, at dataset load.

lm-eval hands a task's ``custom_dataset`` function one dict, ``metadata``: the task YAML's
``metadata`` block, then ``--model_args``, then ``--metadata`` (later ones winning). Nothing
else of the run reaches a task (process_results and the aggregations see documents and items
only), so :func:`read_settings` reads everything the scoring needs there, checks it, and the
result travels in every document (:meth:`RunSettings.to_json`) to the aggregation. The
environment is read at this point only.

Settings every benchmark shares (:data:`COMMON_SETTINGS`):

``judge``
    judge spec (``vllm:<model>``, ``openai:<url>#<model>``, ``hf:<model>``); absent: the
    environment's ``$LM_EVAL_FIN_JUDGE``; ``"none"`` (or ``"offline"``, or empty): no judge,
    whatever the environment says. A bad spec stops the load.
``judge_<option>``, ``judge_options``
    judge options (:class:`lm_eval_fin.judge.JudgeOptions`) over ``$LM_EVAL_FIN_JUDGE_OPTIONS``.
``max_attempts``
    asks per judge request before its answer counts as unparsable.

Each benchmark adds its own :class:`Setting` s. A metadata key that starts like one of ours
(``judge_``, ``bertscore``) but is not one is an error naming the known keys, so a typo never
passes silently; other unknown keys are model arguments (lm-eval mixes them in) and pass. A
task ignores the keys of ours it does not read (``bertscore_model`` in a fin_agentbench run),
so one ``--metadata`` serves a run of several benchmarks.

Sections: lm-eval hands the same ``metadata`` to every task of a run, so a key named after one
of our tasks, groups or benchmarks holds settings for those tasks alone
(``{"fin_ems": {"data_path": ...}, "fin_lfqa": {...}, "bertscore_model": "offline"}``). A task
reads the shared keys, then the section of its benchmark or group, then its own task's section,
the later winning (:func:`task_metadata`); the sections of other tasks are not its business.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_fin.harness import taskfiles
from lm_eval_fin.judge.options import (
    JUDGE_ENV,
    JudgeOptions,
    check_options,
    options_from_env,
    options_from_metadata,
)
from lm_eval_fin.judge.spec import JudgeSpecError, parse_spec
from lm_eval_fin.measures import textsim

NO_JUDGE = ("none", "offline", "")
BERTSCORE_MODEL = "bertscore_model"
# Metadata keys of ours that a typo could hide behind; "judge_*" is checked against the options.
OUR_PREFIXES = ("bertscore",)
# Keys of ours that start like that, read by some benchmarks and ignored by the others.
OURS_ANYWHERE = (BERTSCORE_MODEL,)
# lm-eval's own keys in a task's metadata block.
LM_EVAL_KEYS = ("version", "num_fewshot")


class SettingsError(ValueError):
    """A setting that cannot be used; the message is the whole story, in one line."""


@dataclass(frozen=True)
class Setting:
    """One metadata key a benchmark reads: its default and the check that converts a given
    value (raising ValueError with what is expected). ``problem``, where given, says why the
    checked value cannot be used on this machine (a model that is not here), or None: asked
    before a run, not when logged settings are read back for re-scoring. ``usable_default``,
    where given, turns the default into what this machine can use when no value is given (a
    default model that cannot load here becomes one that can); a value given is taken as it is."""

    name: str
    default: Any
    check: Callable[[Any], Any]
    help: str
    problem: Callable[[Any], str | None] | None = None
    usable_default: Callable[[Any], Any] | None = None


def positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"expected a positive integer, got {value!r}")
    return value


def optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def checked(value: Any) -> Any:
        return None if value is None else check(value)

    return checked


def one_of(*choices: Any) -> Callable[[Any], Any]:
    def checked(value: Any) -> Any:
        if value not in choices:
            raise ValueError(f"expected one of {list(choices)}, got {value!r}")
        return value

    return checked


def text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value.strip()


def bertscore_setting(default: str) -> Setting:
    """``bertscore_model`` (hub id, folder or ``offline``), which must be loadable here: known
    when the dataset loads, so an offline machine learns it before generation, not after. Not
    given, the default is used where it can load, else the packaged MiniLM, with a warning
    (:func:`lm_eval_fin.measures.textsim.usable_bertscore_model`); the model used is in the settings
    every document carries."""
    return Setting(BERTSCORE_MODEL, default, text, "BERTScore model: hub id, folder, or 'offline'",
                   problem=textsim.bertscore_model_problem, usable_default=textsim.usable_bertscore_model)


MAX_ATTEMPTS = 3  # asks per judge request: the first and two re-asks of unreadable answers

COMMON_SETTINGS = (
    Setting("max_attempts", MAX_ATTEMPTS, positive_int, "asks per judge request before its answer is unparsable"),
)


@functools.cache
def provenance() -> dict[str, str | None]:
    """What made the run: this package's version and, when it runs from a git checkout, the
    commit of its tasks and code, ``-dirty`` when files differ from it (None otherwise)."""
    from lm_eval_fin import __version__

    folder = Path(__file__).resolve().parents[2]
    try:
        done = subprocess.run(["git", "-C", str(folder), "describe", "--always", "--dirty", "--abbrev=40"], capture_output=True, text=True,
                              timeout=10, check=False)
        commit = done.stdout.strip() if done.returncode == 0 and (folder / "tasks").is_dir() else None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {"lm_eval_fin_version": __version__, "git_commit": commit or None}


@dataclass(frozen=True)
class RunSettings:
    """The checked settings of one task's run. ``judge`` is a canonical spec or None;
    ``judge_options`` the judge options given (environment and metadata; the others take
    :class:`JudgeOptions`' defaults); ``values`` the other settings; ``provenance`` what made
    the run (:func:`provenance`)."""

    task: str
    judge: str | None
    judge_options: Mapping[str, Any]
    values: Mapping[str, Any]
    provenance: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def options(self) -> JudgeOptions:
        return JudgeOptions(**self.judge_options)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> RunSettings:
        return cls(**json.loads(text))


def judge_spec(metadata: Mapping[str, Any], task: str) -> str | None:
    """The canonical judge spec of a run: ``judge`` in the metadata, else ``$LM_EVAL_FIN_JUDGE``;
    None for no judge (see the module docstring)."""
    where = f"{task}: metadata judge"
    spec = metadata.get("judge")
    if spec is None:
        spec, where = os.environ.get(JUDGE_ENV), f"{task}: ${JUDGE_ENV}"
    if spec is None or str(spec).strip().lower() in NO_JUDGE:
        return None
    try:
        return str(parse_spec(str(spec)))
    except JudgeSpecError as exc:
        raise SettingsError(f"{where}: {exc}") from None


def judge_options(metadata: Mapping[str, Any], task: str) -> dict[str, Any]:
    """The judge options given: ``$LM_EVAL_FIN_JUDGE_OPTIONS``, then the metadata's."""
    try:
        return check_options({**options_from_env(), **options_from_metadata(metadata, task)})
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def unknown_keys_message(
    where: str, unknown: Sequence[str], known: Sequence[str], more: str = "", also: Sequence[str] = ()
) -> str:
    """``<where> [...]``, with the closest known key (or ``also`` name) for each typo, and the
    known keys, each once."""
    known = sorted(set(known))
    candidates = [*known, *also]
    close = {key: found[0] for key in sorted(unknown) if (found := difflib.get_close_matches(key, candidates, n=1))}
    if len(unknown) == 1 and close:
        hint = f" (did you mean {next(iter(close.values()))!r}?)"
    else:
        hint = f" (did you mean {', '.join(f'{to!r} for {key!r}' for key, to in close.items())}?)" if close else ""
    return f"{where} {sorted(unknown)}{hint}; known: {known}{more}"


def check_typos(metadata: Mapping[str, Any], task: str, known: Sequence[str]) -> None:
    """A key that starts like one of ours but is none of them is a typo (``bertscore_modle``)."""
    typos = sorted(key for key in metadata if key.startswith(OUR_PREFIXES) and key not in (*known, *OURS_ANYWHERE))
    if typos:
        raise SettingsError(unknown_keys_message(f"{task}: unknown metadata key(s)", typos, known))


def known_keys(settings: Sequence[Setting]) -> list[str]:
    """Every metadata key a task with ``settings`` reads, each once (a benchmark's own
    ``data_path`` setting is the common key, not a second one)."""
    return list(dict.fromkeys(["data_path", "judge", "judge_options", *(s.name for s in (*COMMON_SETTINGS, *settings))]))


# ------------------------------------------------------------------ sections of --metadata


def section_names() -> list[str]:
    """The keys of ``--metadata`` that are sections: our tasks, groups and benchmarks."""
    return taskfiles.names()


def covers(section: str, task: str) -> bool:
    """Whether the section ``section`` holds settings of ``task``: its own, its group's, or its
    benchmark's (``fin_lfqa`` covers ``fin_lfqa-test``)."""
    return section == task or task.startswith((section + "_", section + "-")) or task in taskfiles.expand(section)


def sections_of(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The sections ``metadata`` holds (section name -> its value, a mapping or not)."""
    names = set(section_names())
    return {key: value for key, value in metadata.items() if key in names}


def task_metadata(task: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata ``task`` reads: the shared keys, then each section covering it, least
    specific first (its benchmark's, a group's, then its own), the later winning. A section
    that is not a JSON object is an error."""
    sections = sections_of(metadata)
    resolved = {key: value for key, value in metadata.items() if key not in sections}
    for name in sorted((name for name in sections if covers(name, task)), key=lambda name: (name == task, len(name))):
        if not isinstance(sections[name], Mapping):
            raise SettingsError(
                f"{task}: metadata {name}: a section must be a JSON object of settings, got {sections[name]!r}"
            )
        resolved.update(sections[name])
    return resolved


def read_settings(task: str, metadata: Mapping[str, Any], settings: Sequence[Setting] = ()) -> RunSettings:
    """The checked settings of ``task`` from lm-eval's ``metadata``, its sections resolved
    (see the module docstring); :class:`SettingsError` names the key, what it got and what it
    expects."""
    metadata = task_metadata(task, metadata)
    check_typos(metadata, task, known_keys(settings))
    values = {}
    for setting in (*COMMON_SETTINGS, *settings):
        if setting.name in metadata:
            value = metadata[setting.name]
        else:
            value = setting.usable_default(setting.default) if setting.usable_default else setting.default
        try:
            values[setting.name] = setting.check(value)
        except ValueError as exc:
            raise SettingsError(f"{task}: metadata {setting.name}: {exc}") from None
    return RunSettings(task, judge_spec(metadata, task), judge_options(metadata, task), values, provenance())


def check_usable(run: RunSettings, settings: Sequence[Setting]) -> None:
    """:class:`SettingsError` when a setting's value cannot be used on this machine (a model
    that is not here): asked when a run starts, after its data was found, never when logged
    settings are read back for re-scoring."""
    for setting in settings:
        problem = setting.problem(run[setting.name]) if setting.problem else None
        if problem is not None:
            raise SettingsError(f"{run.task}: metadata {setting.name}: {problem}")


def check_user_metadata(
    task: str, metadata: Mapping[str, Any], settings: Sequence[Setting], shared: Sequence[str] = ()
) -> None:
    """The strict check of ``lm-eval-fin run``, which sees the user's ``--metadata`` alone (lm-eval
    mixes model arguments into what a task sees): every key must be a known one. ``shared``: the
    keys other benchmarks read, which this task ignores where they are shared by the run (a
    section is the task's own: there only its keys count)."""
    own = [*known_keys(settings), *LM_EVAL_KEYS]
    sections = sections_of(metadata)
    unknown = [key for key in metadata if key not in (*own, *shared, *sections) and not key.startswith("judge_")]
    if unknown:
        raise SettingsError(unknown_keys_message(
            f"{task}: unknown --metadata key(s)", unknown, [*own, *shared],
            f" and judge_<option>, or a section per task or benchmark ({', '.join(section_names())})",
            also=section_names(),
        ))
    for name, section in sections.items():
        if covers(name, task) and isinstance(section, Mapping):
            unknown = [key for key in section if key not in own and not key.startswith("judge_")]
            if unknown:
                raise SettingsError(unknown_keys_message(
                    f"the --metadata section {name!r} has unknown key(s)", unknown, own, " and judge_<option>",
                ))
    read_settings(task, metadata, settings)
