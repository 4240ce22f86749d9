"""What a benchmark tells the harness about itself, so that the harness needs no list of them.

Each ``lm_eval_fin/benchmarks/<name>/task.py`` defines one :class:`Benchmark`; the package
``lm_eval_fin.benchmarks`` lists them, and the command line hands that list to the parts of
the harness that work across benchmarks (checking a run before it starts, re-scoring logged
samples with a judge).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_fin.harness.settings import RunSettings, Setting, check_usable, read_settings
from lm_eval_fin.harness.task import as_dataset

# rescore(samples, judge) -> (corpus metrics, one dict of details per sample)
Rescore = Callable[[Sequence[dict], Any], tuple[dict[str, float], list[dict]]]


@dataclass(frozen=True)
class Benchmark:
    """``name`` is the prefix of its tasks (``fin_ems`` owns ``fin_ems`` and ``fin_ems_*``).

    ``check_data(task, settings)`` reads the run's data as the task's loader would, without a
    model, and raises with a one-line message when it cannot be used; ``rescore`` (benchmarks
    with judge metrics) scores logged samples with a judge, in one batch.
    """

    name: str
    tasks: tuple[str, ...]
    settings: tuple[Setting, ...] = ()
    check_data: Callable[[str, RunSettings], object] | None = None
    rescore: Rescore | None = None

    def owns(self, task: str) -> bool:
        return task == self.name or task.startswith(self.name + "_")

    def read_settings(self, task: str, metadata: Mapping[str, Any]) -> RunSettings:
        return read_settings(task, metadata, self.settings)

    def check_usable(self, settings: RunSettings) -> None:
        check_usable(settings, self.settings)

    def dataset(self, split: str, documents: Sequence[dict[str, Any]], settings: RunSettings) -> dict:
        """What a task's loader returns to lm-eval: the documents with the run's settings, once
        the settings are known to be usable here (so a missing model stops the run before
        generation, after any problem with the data itself)."""
        self.check_usable(settings)
        return as_dataset(split, documents, settings)

    def logged_settings(self, doc: Mapping[str, Any]) -> RunSettings:
        """The settings a logged document was run with (the defaults for one logged before
        documents carried them)."""
        if isinstance(doc.get("settings"), str):
            return RunSettings.from_json(doc["settings"])
        return self.read_settings(self.name, {"judge": "none"})


def benchmark_of(task: str, benchmarks: Sequence[Benchmark]) -> Benchmark | None:
    """The benchmark that owns ``task`` (the longest matching name wins)."""
    owners = [b for b in benchmarks if b.owns(task)]
    return max(owners, key=lambda b: len(b.name)) if owners else None
