"""Rendering a report: ``index.html`` (one self-contained page), ``leaderboard.md`` and
``leaderboard.csv``.

The page and the Markdown come from Jinja2 templates in ``templates/``; the HTML environment
autoescapes everything, and the page carries no data as script: model output reaches it only
as escaped text, so an answer holding ``</script>`` or ``<img onerror=...>`` is shown, never
run. The CSV is written by the ``csv`` module, with texts that a spreadsheet would take for a
formula (``=``, ``+``, ``-``, ``@`` first) prefixed by ``'``.
"""

from __future__ import annotations

import csv
import importlib.metadata
import io
import json
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from lm_eval_fin.report import plots, stats
from lm_eval_fin.report.leaderboard import Leaderboard, Row
from lm_eval_fin.report.runs import Run, Sample
from lm_eval_fin.report.views import Block, ViewOptions, question_title, view_for

TEMPLATES = Path(__file__).with_name("templates")


def package_version() -> str:
    try:
        return importlib.metadata.version("lm-eval-fin")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# ------------------------------------------------------------------------------ formatting


def number(value: Any) -> str:
    """A figure as the report prints it: 3 decimals below 10, else 4 significant digits."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "—"
    if not math.isfinite(value):
        return "NaN"
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.4g}"


def interval_text(interval: stats.Interval) -> str:
    """``mean [low, high]``, ``... (se)`` for a stderr interval, ``... (no interval)``."""
    if not interval.has_bounds:
        return f"{number(interval.mean)} (no interval)"
    text = f"{number(interval.mean)} [{number(interval.low)}, {number(interval.high)}]"
    return text + " (se)" if interval.method == stats.STDERR else text


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"


def arrow(higher_is_better: bool | None) -> str:
    return "↑" if higher_is_better else "↓" if higher_is_better is False else ""


def when(timestamp: Any) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(timestamp)))
    except (TypeError, ValueError, OverflowError, OSError):
        return "not recorded"


# ------------------------------------------------------------------------------ provenance


def run_provenance(run: Run) -> list[tuple[str, str]]:
    """What a maintainer needs to know where a run's figures come from."""
    results, config = run.results, run.config
    configs = results.get("configs") if isinstance(results.get("configs"), dict) else {}
    recorded_fin = next(
        (str(c.get("metadata", {}).get("lm_eval_fin_version")) for c in configs.values()
         if isinstance(c, dict) and isinstance(c.get("metadata"), dict) and c["metadata"].get("lm_eval_fin_version")),
        results.get("lm_eval_fin_version"),
    )
    items = [
        ("results file", str(run.source)),
        ("date", when(results.get("date"))),
        ("lm-eval version", results.get("lm_eval_version") or "not recorded"),
        ("lm-eval-fin version", recorded_fin or f"not recorded by the run (this report: {package_version()})"),
        ("transformers version", results.get("transformers_version")),
        ("git hash", results.get("git_hash")),
        ("model", config.get("model")),
        ("model args", json.dumps(run.model_args, sort_keys=True)),
        ("generation kwargs (command line)", json.dumps(config.get("gen_kwargs"), sort_keys=True)),
        ("seeds (random, numpy, torch, fewshot)", ", ".join(str(config.get(k)) for k in
                                                           ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed"))),
        ("limit", config.get("limit")),
        ("batch size", config.get("batch_size")),
        ("chat template sha256", results.get("chat_template_sha")),
        ("system instruction sha256", results.get("system_instruction_sha")),
    ]
    judge = results.get("judge") if run.judged and isinstance(results.get("judge"), dict) else None
    if judge:
        items += [("judge (lm-eval-fin score)", judge.get("spec")),
                  ("judge options", json.dumps(judge.get("options"), sort_keys=True))]
    return [(label, "—" if value is None else str(value)) for label, value in items]


def task_provenance(run: Run, task: str) -> list[tuple[str, str]]:
    task_run = run.tasks[task]
    task_hash = (run.results.get("task_hashes") or {}).get(task)
    items = [
        ("task version", task_run.version),
        ("samples (effective of original)", f"{task_run.n_samples.get('effective', '?')} of {task_run.n_samples.get('original', '?')}"),
        ("n-shot", (run.results.get("n-shot") or {}).get(task)),
        ("task hash (lm-eval)", task_hash),
        ("generation kwargs (task)", json.dumps(task_run.config.get("generation_kwargs"), sort_keys=True, default=str)),
        ("per-sample values", "logged" if task_run.logged else "not logged (run lm-eval with --log_samples)"),
        *task_run.provenance.items(),
        *(("note", note) for note in task_run.notes),
    ]
    return [(str(label), "—" if value is None else str(value)) for label, value in items]


# ------------------------------------------------------------------------------ answers


@dataclass
class AnswerView:
    row: Row
    sample: Sample
    values: list[tuple[str, str]]
    blocks: list[Block]


@dataclass
class QuestionView:
    number: int
    key: str
    title: str
    blocks: list[Block]
    answers: list[AnswerView] = field(default_factory=list)


@dataclass
class TaskAnswers:
    task: str
    slug: str
    rows: list[Row]
    questions: list[QuestionView]
    headline: str | None  # the metric shown beside each run in a question's summary


def _safe(view_function, *args) -> list[Block]:
    try:
        return view_function(*args)
    except Exception as exc:  # noqa: BLE001 - one odd sample must not stop the page
        return [Block("text", title="View failed", text=f"{type(exc).__name__}: {exc}", cls="miss")]


def answer_sections(board: Leaderboard, options: ViewOptions) -> list[TaskAnswers]:
    sections = []
    for task in board.tasks:
        view = view_for(task)
        present = [(row, run.tasks[task]) for row in board.rows for run in row.runs
                   if task in run.tasks and run.tasks[task].samples]
        if not present:
            continue
        samples = [s for _, task_run in present for s in task_run.samples]
        try:
            context = view.prepare(samples, options)
        except Exception as exc:  # noqa: BLE001
            context = {"error": f"{type(exc).__name__}: {exc}"}
        columns = board.columns_of(task)
        headline = view.headline_of([c.metric for c in columns], {m for s in samples for m in s.values})
        questions: dict[str, QuestionView] = {}
        for row, task_run in present:
            for sample in task_run.samples:
                question = questions.get(sample.key)
                if question is None:
                    question = questions[sample.key] = QuestionView(
                        len(questions) + 1, sample.key, question_title(sample.doc) or sample.key,
                        _safe(view.question, sample),
                    )
                values = [(c.metric, number(sample.values[c.metric])) for c in columns if c.metric in sample.values]
                question.answers.append(AnswerView(row, sample, values, _safe(view.answer, sample, context)))
        sections.append(TaskAnswers(task, slug(task), [row for row, _ in present], list(questions.values()), headline))
    return sections


# ------------------------------------------------------------------------------ outputs


def _environment(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=autoescape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(number=number, interval_text=interval_text, slug=slug, arrow=arrow, color=plots.color)
    env.globals.update(plots=plots)
    return env


def _context(board: Leaderboard, title: str) -> dict[str, Any]:
    return {
        "title": title,
        "board": board,
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "version": package_version(),
        "run_count": sum(len(row.runs) for row in board.rows),
        "confidence_percent": f"{board.settings.confidence * 100:g}",
    }


def render_html(board: Leaderboard, answers: Sequence[TaskAnswers], title: str) -> str:
    charts = {task: [c for c in (plots.bar_chart(col, board.rows) for col in board.columns_of(task)) if c]
              for task in board.tasks}
    return _environment(True).get_template("index.html.j2").render(
        **_context(board, title), answers=answers, charts=charts, scatters=plots.ems_scatters(board),
        run_provenance=run_provenance, task_provenance=task_provenance,
    )


def md_cell(text: str) -> str:
    """A text fit for one Markdown table cell."""
    return " ".join(str(text).split()).replace("\\", "\\\\").replace("|", "\\|")


def render_markdown(board: Leaderboard, title: str) -> str:
    env = _environment(False)
    env.filters["md"] = md_cell
    return env.get_template("leaderboard.md.j2").render(**_context(board, title))


def _spreadsheet_safe(text: str) -> str:
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def render_csv(board: Leaderboard) -> str:
    """One row per leaderboard row; per column the mean, interval bounds, method and n."""
    header = ["row", "run", "model", "results_files"]
    for column in board.columns:
        header += [column.key, f"{column.key} low", f"{column.key} high", f"{column.key} interval", f"{column.key} n"]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([_spreadsheet_safe(h) for h in header])
    for row in board.rows:
        line = [str(row.index), _spreadsheet_safe(row.label), _spreadsheet_safe(row.runs[0].model),
                _spreadsheet_safe(" ".join(str(run.source) for run in row.runs))]
        for column in board.columns:
            cell = row.cells.get(column.key)
            if cell is None:
                line += [""] * 5
                continue
            i = cell.interval
            line += [repr(i.mean), repr(i.low) if i.has_bounds else "", repr(i.high) if i.has_bounds else "",
                     i.method, str(i.n)]
        writer.writerow(line)
    return out.getvalue()
