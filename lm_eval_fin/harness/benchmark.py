"""What a benchmark tells the harness about itself, so that the harness needs no list of them.

Each ``lm_eval_fin/benchmarks/<name>/task.py`` defines one :class:`Benchmark`; the package
``lm_eval_fin.benchmarks`` finds them, and the command line hands that list to the parts that
work across benchmarks (checking a run before it starts, scoring logged samples, the demo,
the report).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lm_eval_fin.harness import replay
from lm_eval_fin.harness.settings import RunSettings, Setting, check_usable, read_settings
from lm_eval_fin.harness.stage import BatchScore, Keep, filter_function
from lm_eval_fin.harness.task import as_dataset
from lm_eval_fin.outputs.owners import owner_of

# documents(settings) -> (the task's documents, the settings they run with)
Documents = Callable[[RunSettings], tuple[Sequence[dict[str, Any]], RunSettings]]


@dataclass(frozen=True)
class Demo:
    """A benchmark's part of ``make demo``: the ``--metadata`` of its run on the shipped sample
    (paths resolved when the demo starts), lm-eval arguments beside the shared ones, and a
    note per task shown under its figures."""

    metadata: Callable[[], dict[str, Any]]
    arguments: tuple[str, ...] = ()
    notes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Benchmark:
    """``name`` is the prefix of its tasks (``fin_ems`` owns ``fin_ems`` and ``fin_ems_*``;
    :func:`benchmark_of`).

    ``check_data(task, settings)`` reads the run's data as the task's loader would, without a
    model, and raises with a one-line message when it cannot be used. ``score`` is its part of
    lm-eval's filter stage (:mod:`lm_eval_fin.harness.stage`): every answer of a task at once,
    one dict of details per document; ``keep`` what a ``--predict_only`` record holds.
    ``prompt(doc)``: the prompt a document's answer is checked against for echoes.
    ``judged``: whether its tasks have judge metrics (``lm-eval-fin score`` needs a judge for
    them). ``headline``: per task, the metrics a summary, a model card and the report show
    first. ``scales``: what each metric's values can be (:mod:`lm_eval_fin.measures.scales`: metric-name
    pattern -> scale). ``hub_dataset``: the dataset's hub id, where it has one. ``view``: its view in
    the report (an object of :mod:`lm_eval_fin.report`, opaque here). ``demo``: its part of
    ``make demo``.
    """

    name: str
    tasks: tuple[str, ...]
    settings: tuple[Setting, ...] = ()
    check_data: Callable[[str, RunSettings], object] | None = None
    score: BatchScore | None = None
    keep: Keep | None = None
    prompt: Callable[[dict], str] | None = None
    judged: bool = False
    headline: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    scales: Mapping[str, Any] = field(default_factory=dict)
    hub_dataset: str | None = None
    view: Any = None
    demo: Demo | None = None

    def read_settings(self, task: str, metadata: Mapping[str, Any]) -> RunSettings:
        return read_settings(task, metadata, self.settings)

    def check_usable(self, settings: RunSettings) -> None:
        check_usable(settings, self.settings)

    def load(
        self, task: str, metadata: Mapping[str, Any], documents: Documents, split: str = "test"
    ) -> dict:
        """What a task's loader returns to lm-eval: the documents ``documents(settings)``
        reads, each with the settings it returns (the run's, plus what the data decided), once
        those are known to be usable here (so a missing model stops the run before
        generation, after any problem with the data itself). When ``lm-eval-fin
        score`` replays logged answers, the documents are the logged ones, with the settings
        they were run with and the scoring judge (:mod:`lm_eval_fin.harness.replay`)."""
        logged = replay.logged_documents(task)
        if logged is not None:
            return as_dataset(split, *logged)
        settings = self.read_settings(task, metadata)
        docs, settings = documents(settings)
        self.check_usable(settings)
        return as_dataset(split, docs, settings)

    def filter_function(self) -> Callable[[Sequence, Sequence], list[str]]:
        """The ``filter_fn`` the task YAMLs name (``utils.score_answers``)."""
        if self.score is None:
            raise ValueError(f"{self.name} has no filter stage")
        return filter_function(self.score, self.keep, self.prompt)


def benchmark_of(task: str, benchmarks: Sequence[Benchmark]) -> Benchmark | None:
    """The benchmark that owns ``task`` (:func:`lm_eval_fin.outputs.owners.owner_of`)."""
    return owner_of(task, benchmarks)
