"""From lm-eval output folders to the report's files."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lm_eval_fin.outputs.runfiles import read_results_dirs
from lm_eval_fin.plumbing import atomic
from lm_eval_fin.report import render
from lm_eval_fin.report.answers import answer_sections, subset_tables
from lm_eval_fin.report.catalog import Catalog
from lm_eval_fin.report.judge_agreement import JudgeAgreement
from lm_eval_fin.report.leaderboard import Leaderboard, Settings, build_leaderboard

logger = logging.getLogger(__name__)

DEFAULT_TITLE = "lm-eval-fin leaderboard"
FILES = ("index.html", "leaderboard.md", "leaderboard.csv")  # and answers-<task>.html per task with answers


@dataclass
class Report:
    board: Leaderboard
    files: dict[str, Path]  # name -> path written
    seconds: float


def build_report(
    results_dirs: Sequence[str | os.PathLike],
    names: Sequence[str] | None = None,
    settings: Settings | None = None,
    benchmarks: Iterable[Any] = (),
) -> Leaderboard:
    """Read the runs and build the leaderboard. ``names``: one per results folder, in order
    (fewer: the rest are named by model). ``benchmarks``: the benchmarks whose views, headlines
    and baselines the report uses (``lm_eval_fin.benchmarks.all_benchmarks()``); without them
    every task gets the generic view."""
    names = list(names or [])
    if len(names) > len(results_dirs):
        raise ValueError(f"{len(names)} names for {len(results_dirs)} results folders")
    runs, unreadable = read_results_dirs([str(d) for d in results_dirs])
    by_folder = {str(Path(d).expanduser()): name for d, name in zip(results_dirs, names)}
    return build_leaderboard(runs, unreadable, by_folder, settings, Catalog(benchmarks))


def write_report(
    results_dirs: Sequence[str | os.PathLike],
    output_path: str | os.PathLike,
    names: Sequence[str] | None = None,
    title: str = DEFAULT_TITLE,
    settings: Settings | None = None,
    benchmarks: Iterable[Any] = (),
    export_dir: str | os.PathLike | None = None,
    agreement: JudgeAgreement | None = None,
) -> Path:
    """Write ``index.html``, its answers pages, ``leaderboard.md`` and ``leaderboard.csv`` of the runs under
    ``results_dirs`` (lm-eval ``--output_path`` folders) into ``output_path``; returns the
    path of ``index.html``. Runs that cannot be read are listed on the page and in the
    Markdown; use :func:`write_report_files` for the leaderboard and the timing too."""
    report = write_report_files(results_dirs, output_path, names, title, settings, benchmarks, export_dir, agreement)
    return report.files["index.html"]


def write_report_files(
    results_dirs: Sequence[str | os.PathLike],
    output_path: str | os.PathLike,
    names: Sequence[str] | None = None,
    title: str = DEFAULT_TITLE,
    settings: Settings | None = None,
    benchmarks: Iterable[Any] = (),
    export_dir: str | os.PathLike | None = None,
    agreement: JudgeAgreement | None = None,
) -> Report:
    """As :func:`write_report`; ``export_dir``: an ``lm-eval-fin export`` folder whose
    ``model-index.yaml`` and ``data/`` the page and the Markdown link to; ``agreement``: the
    judge-agreement figures shown next to the judged metrics (:func:`judge_agreement.load`)."""
    started = time.perf_counter()
    board = build_report([str(d) for d in results_dirs], names, settings, benchmarks)
    out = Path(output_path).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    links = render.export_links(export_dir, out)
    answers = answer_sections(board)
    texts = {
        "index.html": render.render_html(board, answers, subset_tables(board), title, links, agreement, out),
        "leaderboard.md": render.render_markdown(board, title, links, agreement, out),
        "leaderboard.csv": render.render_csv(board),
    }
    files = {}
    pages = [(section, part, page) for section in answers for part, (page, _, _) in enumerate(section.pages)]
    for section, part, page in pages:  # one page at a time: a page's answer views are made as it renders
        files[page] = out / page
        atomic.write_text(files[page], render.render_answers(board, section, part, title, out), newline="")
    for name, text in texts.items():
        files[name] = out / name
        atomic.write_text(files[name], text, newline="")  # a reader never sees half a report
    return Report(board, files, time.perf_counter() - started)
