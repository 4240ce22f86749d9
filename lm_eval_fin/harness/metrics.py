"""A benchmark's metrics, each declared once: name, direction, scale, aggregation, how its
per-document value is made, and for a judged metric the judge behind it.

lm-eval takes the ``metric_list`` of a task YAML (name, aggregation, ``higher_is_better``) and
``process_results``' values; the rest of what a figure means (its bounds and unit, that an LLM
judge gave it, which human ratings it is compared with) lived in tables beside it. Here one
:class:`Metric` holds all of it, as lighteval's ``Metric`` keeps name, direction and the
sample- and corpus-level functions together; the benchmark's ``process_results`` makes every
value of a document at once (inspect's scorer with its metrics), so a declaration says what
its value is (``about``) rather than holding a function of its own. ``Benchmark.metrics`` is
the list; the scales the export writes (:func:`scale_table`) come from it, and a test checks
every task YAML's ``metric_list`` against it (:func:`metric_list_problems`).

A :class:`JudgedMetric` is one the benchmark's judge stage gives (:class:`lm_eval_fin.harness.
stage.JudgeWork` says how the judge is asked and its replies read); its scale is marked judged,
and ``criteria`` are what ``lm-eval-fin agreement`` compares it on with people's labels and
with other judges (:class:`lm_eval_fin.agreement.criteria.Criterion`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lm_eval_fin.agreement.criteria import Criterion, Family, PointRatings
from lm_eval_fin.measures.scales import Scale, share, total

MEAN = "mean"  # lm-eval's mean over the documents where the value is defined
TOTAL = "total"  # the sum over the documents (``!function utils.total`` in the YAML)
# how a YAML's ``aggregation`` reads, per declared aggregation (a ``!function`` tag is read as its text)
YAML_AGGREGATION = {MEAN: "mean", TOTAL: "utils.total"}


@dataclass(frozen=True)
class Metric:
    """One metric of a benchmark. ``tasks``: the tasks whose ``metric_list`` has it (empty:
    every task of the benchmark). ``about``: what one document's value is."""

    name: str
    higher_is_better: bool
    scale: Scale
    about: str = ""
    aggregation: str = MEAN
    tasks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.aggregation not in YAML_AGGREGATION:
            raise ValueError(f"{self.name}: aggregation {self.aggregation!r} is none of {sorted(YAML_AGGREGATION)}")

    def of_task(self, task: str) -> bool:
        return not self.tasks or task in self.tasks


@dataclass(frozen=True)
class JudgedMetric(Metric):
    """A metric the LLM judge gives: its scale is marked judged (so exports name the judge), and
    ``criteria`` are what agreement compares it on (each read from this metric: its ``metric``
    is filled in)."""

    criteria: tuple[Criterion, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.scale.judged:
            object.__setattr__(self, "scale", dataclasses.replace(self.scale, judged=True))
        wrong = [c.name for c in self.criteria if c.metric not in ("", self.name)]
        if wrong:
            raise ValueError(f"{self.name}: criteria {wrong} are read from another metric")
        object.__setattr__(self, "criteria", tuple(dataclasses.replace(c, metric=self.name) for c in self.criteria))


def of_task(metrics: Iterable[Metric], task: str) -> list[Metric]:
    """The metrics ``task``'s ``metric_list`` should hold, in declaration order."""
    return [metric for metric in metrics if metric.of_task(task)]


def scale_table(metrics: Iterable[Metric]) -> dict[str, Scale]:
    """Metric-name pattern -> scale, as :func:`lm_eval_fin.measures.scales.scale_of` reads it (each
    name matches itself only)."""
    return {re.escape(metric.name): metric.scale for metric in metrics}


def agreement_family(
    name: str, metrics: Iterable[Metric], *, main: str, main_judged: str, reference_field: str,
    points: PointRatings | None = None, total: str | None = None,
) -> Family:
    """What ``lm-eval-fin agreement`` compares on a benchmark's tasks: the criteria of its judged
    metrics, in declaration order (those people label, those judges are compared on)."""
    criteria = [c for metric in metrics if isinstance(metric, JudgedMetric) for c in metric.criteria]
    return Family(name, tuple(c for c in criteria if c.people), tuple(c for c in criteria if c.judges),
                  main=main, main_judged=main_judged, reference_field=reference_field, points=points, total=total)


def metric_list_problems(task: str, metrics: Sequence[Metric], metric_list: Sequence[Mapping[str, Any]]) -> list[str]:
    """What a task YAML's ``metric_list`` says otherwise than the declarations: a metric it
    lists that none declares, a declared one it lacks, another aggregation or direction."""
    declared = {metric.name: metric for metric in of_task(metrics, task)}
    listed = {str(entry.get("metric")): entry for entry in metric_list}
    problems = [f"{task}: {name} is listed but not declared" for name in listed if name not in declared]
    problems += [f"{task}: {name} is declared but not listed" for name in declared if name not in listed]
    for name, entry in listed.items():
        metric = declared.get(name)
        if metric is None:
            continue
        if str(entry.get("aggregation")) != YAML_AGGREGATION[metric.aggregation]:
            problems.append(f"{task}: {name} aggregates by {entry.get('aggregation')!r}, declared {metric.aggregation}")
        if entry.get("higher_is_better") is not metric.higher_is_better:
            problems.append(f"{task}: {name} has higher_is_better {entry.get('higher_is_better')!r}, declared "
                            f"{metric.higher_is_better}")
    return problems


# the metrics every benchmark's tasks may share: how a run went rather than how good its answers are
DEGENERATE_ANSWER = Metric(
    "degenerate_answer", False, share("failure_rate"),
    "1 where the answer does not answer: empty, a loop, an echo of the prompt (lm_eval_fin.measures.degenerate) or, for a "
    "ranking, the candidates in the order given; the mean is the task's rate",
)
TRUNCATED_ANSWERS = Metric(
    "truncated_answers", False, total("truncation"),
    "1 where the answer is longer than the parsers read (cleantext.MAX_ANSWER_CHARS): scored on its start", TOTAL,
)
PARSE_FAILURE = Metric("parse_failure", False, share("failure_rate"), "1 where the answer could not be read")


def truncated_documents(about: str, tasks: tuple[str, ...] = ()) -> Metric:
    """1 where the document's prompt was cut to fit the model's context (``about``: what was cut)."""
    return Metric("truncated_documents", False, total("truncation"), about, TOTAL, tasks)
