"""What the report knows of each benchmark: its view, its headline metrics and whether its
tasks are judged, read from the benchmarks the command line hands over (objects with ``name``,
``headline``, ``judged`` and ``view``, as ``lm_eval_fin.harness.benchmark.Benchmark`` has; the
report does not import them). A task no benchmark owns gets the generic view.

Which metrics are diagnostics (how a run went, not how good its answers are) is decided here
for the names every benchmark shares (truncation, parse and judge failures, degenerate
answers, judge usage) and by each view for its own (``View.diagnostics``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lm_eval_fin.outputs.owners import owner_of
from lm_eval_fin.report.blocks import GENERIC, View

# the per-answer metric the tasks log: 1.0 where the answer is empty, a repetition, an echo of
# the prompt, or (rankings) the candidates in their input order
DEGENERATE = "degenerate_answer"
# the judge work in each answer's record (records.JUDGE_USAGE), summed over a row: key -> label
USAGE_LABELS = {"requests": "judge requests", "model_calls": "model calls", "prompt_tokens": "prompt tokens",
               "completion_tokens": "completion tokens"}
SHARED_DIAGNOSTICS = (
    r"truncated_.*", r"(?:.+_)?parse_failures?", r"(?:.+_)?judge_(?:failure|parse_failure|skipped)",
    r"(?:.+_)?judge_(?:requests|cache_hits|model_calls|prompt_tokens|completion_tokens|rounds)", DEGENERATE,
)


@dataclass(frozen=True)
class Entry:
    name: str
    view: View
    headline: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    judged: bool = False


class Catalog:
    def __init__(self, benchmarks: Iterable[Any] = ()):
        self.entries = [
            Entry(
                name=str(b.name),
                view=b.view if isinstance(getattr(b, "view", None), View) else GENERIC,
                headline=dict(getattr(b, "headline", None) or {}),
                judged=bool(getattr(b, "judged", False)),
            )
            for b in benchmarks
        ]

    def entry(self, task: str) -> Entry | None:
        """The benchmark that owns ``task`` (:func:`lm_eval_fin.outputs.owners.owner_of`)."""
        return owner_of(task, self.entries)

    def group(self, task: str) -> str:
        """The name a task is grouped under: its benchmark's, else its own."""
        entry = self.entry(task)
        return entry.name if entry else task

    def view(self, task: str) -> View:
        entry = self.entry(task)
        return entry.view if entry else GENERIC

    def headline(self, task: str) -> tuple[str, ...]:
        entry = self.entry(task)
        return tuple(entry.headline.get(task, ())) if entry else ()

    def judged(self, task: str) -> bool:
        entry = self.entry(task)
        return bool(entry and entry.judged)

    def is_diagnostic(self, task: str, metric: str) -> bool:
        patterns = (*SHARED_DIAGNOSTICS, *self.view(task).diagnostics)
        return any(re.fullmatch(pattern, metric) for pattern in patterns)

