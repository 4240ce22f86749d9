"""From lm-eval output folders to the report's files."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lm_eval_fin import atomic
from lm_eval_fin.report import render
from lm_eval_fin.report.leaderboard import Leaderboard, Settings, build_leaderboard
from lm_eval_fin.report.runs import read_results_dirs
from lm_eval_fin.report.views import ViewOptions, view_for

logger = logging.getLogger(__name__)

DEFAULT_TITLE = "lm-eval-fin leaderboard"
FILES = ("index.html", "leaderboard.md", "leaderboard.csv")


@dataclass
class Report:
    board: Leaderboard
    files: dict[str, Path]  # name -> path written
    seconds: float


def build_report(
    results_dirs: Sequence[str | os.PathLike],
    names: Sequence[str] | None = None,
    settings: Settings | None = None,
) -> Leaderboard:
    """Read the runs, let each benchmark's view attach its side files, build the leaderboard.
    ``names``: one per results folder, in order (fewer: the rest are named by model)."""
    names = list(names or [])
    if len(names) > len(results_dirs):
        raise ValueError(f"{len(names)} names for {len(results_dirs)} results folders")
    runs, unreadable = read_results_dirs(results_dirs)
    for run in runs:
        for task, task_run in run.tasks.items():
            try:
                view_for(task).attach(task_run, run)
            except Exception as exc:  # noqa: BLE001 - a side file must not stop the report
                task_run.notes.append(f"the {view_for(task).name} view could not read its details: {exc!r}")
    by_folder = {str(Path(d).expanduser()): name for d, name in zip(results_dirs, names)}
    return build_leaderboard(runs, unreadable, by_folder, settings)


def write_report(
    results_dirs: Sequence[str | os.PathLike],
    output_path: str | os.PathLike,
    names: Sequence[str] | None = None,
    title: str = DEFAULT_TITLE,
    settings: Settings | None = None,
    options: ViewOptions | None = None,
) -> Path:
    """Write ``index.html``, ``leaderboard.md`` and ``leaderboard.csv`` of the runs under
    ``results_dirs`` (lm-eval ``--output_path`` folders) into ``output_path``; returns the
    path of ``index.html``. Runs that cannot be read are listed on the page and in the
    Markdown; use :func:`write_report_files` for the leaderboard and the timing too."""
    return write_report_files(results_dirs, output_path, names, title, settings, options).files["index.html"]


def write_report_files(
    results_dirs: Sequence[str | os.PathLike],
    output_path: str | os.PathLike,
    names: Sequence[str] | None = None,
    title: str = DEFAULT_TITLE,
    settings: Settings | None = None,
    options: ViewOptions | None = None,
) -> Report:
    started = time.perf_counter()
    options = options or ViewOptions()
    board = build_report([str(d) for d in results_dirs], names, settings)
    answers = render.answer_sections(board, options)
    out = Path(output_path).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    texts = {
        "index.html": render.render_html(board, answers, title),
        "leaderboard.md": render.render_markdown(board, title),
        "leaderboard.csv": render.render_csv(board),
    }
    files = {}
    for name, text in texts.items():
        files[name] = out / name
        atomic.write_text(files[name], text, newline="")  # a reader never sees half a report
    return Report(board, files, time.perf_counter() - started)
