"""Reading what ``lm_eval --log_samples`` wrote: its samples files and the answer in a sample.

lm-eval's EvaluationTracker writes ``<output_path>/<model>/samples_<task>_<date>.jsonl``, one
JSON line per document: ``doc_id``, ``doc`` (the task's document as the dataset held it),
``resps`` (the model's raw outputs, one list per request) and ``filtered_resps`` (the same after
the task's filters), then the values ``process_results`` returned. ``<date>`` is
``datetime.now().isoformat()`` with ``:`` written as ``-``; a run's ``results_<date>.json``
shares it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from lm_eval_fin.jsonl import read_jsonl

SAMPLES_FILE = re.compile(
    r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?)\.jsonl$"
)


class SamplesError(ValueError):
    """Samples that cannot be read; the message names the file (and line) and what is expected."""


@dataclass(frozen=True)
class SamplesFile:
    path: Path
    task: str
    date: str  # lm-eval's run id; "" for a file renamed by hand

    @property
    def run_key(self) -> tuple[Path, str]:
        return self.path.parent, self.date


def find_samples_files(path: Path, tasks: list[str] | None = None) -> list[SamplesFile]:
    """The samples files at ``path`` (one file, or a folder searched recursively); ``tasks``
    keeps those of these tasks and names the task of a single file renamed by hand."""
    if not path.exists():
        raise SamplesError(f"{path} does not exist")
    if path.is_file():
        match = SAMPLES_FILE.match(path.name)
        if match:
            if tasks and match["task"] not in tasks:
                raise SamplesError(f"{path.name} holds task {match['task']!r}, not one of --tasks {tasks}")
            return [SamplesFile(path, match["task"], match["date"])]
        if tasks and len(tasks) == 1:
            return [SamplesFile(path, tasks[0], "")]
        raise SamplesError(
            f"cannot tell the task of {path.name}: lm-eval names samples files "
            "samples_<task>_<date>.jsonl; pass --tasks <task> for a renamed file"
        )
    found = []
    for candidate in sorted(path.rglob("samples_*.jsonl")):
        match = SAMPLES_FILE.match(candidate.name)
        if match and (not tasks or match["task"] in tasks):
            found.append(SamplesFile(candidate, match["task"], match["date"]))
    if not found:
        which = f" for tasks {tasks}" if tasks else ""
        raise SamplesError(
            f"no lm-eval samples files{which} under {path}; run lm_eval with --log_samples "
            "(and --output_path) first"
        )
    return found


def read_samples(path: Path) -> list[dict]:
    """Every sample of one samples file, each checked to look like lm-eval's."""
    samples = []
    for where, sample in read_jsonl(path, SamplesError):
        if not isinstance(sample, dict) or "doc" not in sample or not (
            "resps" in sample or "filtered_resps" in sample
        ):
            raise SamplesError(f"{where}: not an lm-eval sample (needs doc and resps or filtered_resps)")
        samples.append(sample)
    if not samples:
        raise SamplesError(f"{path} holds no samples")
    return samples
