"""What the report says about the judge behind each judged metric: the figures of the
``lm-eval-fin agreement`` files given with ``--agreement`` next to the metric, or, when none
covers it, that nothing here shows the judge agrees with people."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from lm_eval_fin.agreement.command import estimate_text
from lm_eval_fin.agreement.criteria import Family, family_of
from lm_eval_fin.agreement.figures import Estimate, MetricAgreement, judged_metrics, read_agreement


@dataclass
class JudgeAgreement:
    """The agreement figures given to a report (``files``: the files read), for the benchmarks'
    ``families`` (what each compares its judge on)."""

    families: tuple[Family, ...] = ()
    entries: list[MetricAgreement] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def judged(self, task: str) -> tuple[str, ...]:
        return judged_metrics(task, self.families)

    def of(self, task: str, metric: str) -> list[MetricAgreement]:
        family = family_of(task, self.families)
        return [e for e in self.entries if family is not None and e.family == family.name and e.metric == metric]

    def lines(self, task: str, metric: str) -> list[str]:
        """One short line per comparison that covers ``metric`` of ``task``."""
        return [describe(entry) for entry in self.of(task, metric)]

    def note(self, task: str) -> str | None:
        """What the page says once per judged task: which files give figures, or that none do."""
        judged = self.judged(task)
        if not judged:
            return None
        covered = [metric for metric in judged if self.of(task, metric)]
        if covered:
            return (f"Judge agreement ({', '.join(self.files)}) is shown under each judged metric it covers: "
                    f"{', '.join(covered)}.")
        given = f"The agreement files given ({', '.join(self.files)}) hold no figures for {task}. " if self.files else ""
        return (f"{given}No judge agreement figures for {task}: nothing here shows that the judge of its judged "
                f"metrics ({', '.join(judged)}) agrees with people. `lm-eval-fin agreement` measures it "
                "(docs/agreement.md); `lm-eval-fin report --agreement FILE` shows it here.")


def _estimate(name: str, estimate: Estimate | None, percent: bool = False) -> str | None:
    if estimate is None or estimate.value is None:
        return None
    return f"{name} {estimate_text(estimate, percent=percent)}"


def describe(entry: MetricAgreement) -> str:
    """``judge vs people (n 50): Pearson 0.85 [0.78, 0.91] · kappa 0.61 [...]``."""
    parts = [_estimate("identical", entry.identical, percent=True),
             _estimate("Pearson" if entry.identical is None else "Pearson runs 1-2", entry.correlation),
             _estimate("kappa", entry.kappa)]
    figures = " · ".join(part for part in parts if part) or "no figure defined"
    return f"{entry.kind} (n {entry.n}): {figures}"


def load(paths: Sequence[str | os.PathLike], families: Sequence[Family]) -> JudgeAgreement:
    """The figures of every file in ``paths`` (raises ``AgreementFileError`` naming a bad one)."""
    agreement = JudgeAgreement(tuple(families))
    for path in paths:
        agreement.entries += read_agreement(path, families)
        agreement.files.append(str(path))
    return agreement
