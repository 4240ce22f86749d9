"""Rendering a report: ``index.html`` (the board, self-contained), ``answers-<task>[-<n>].html``
(every answer, a page per task and 25 questions), ``leaderboard.md`` (the headline table,
details linked) and ``leaderboard.csv`` (every figure).

The page and the Markdown come from Jinja2 templates in ``templates/``; the HTML environment
autoescapes everything, and the page carries no data as script: model output reaches it only
as escaped text, so an answer holding ``</script>`` or ``<img onerror=...>`` is shown, never
run. The CSV is written by the ``csv`` module, with texts that a spreadsheet would take for a
formula (``=``, ``+``, ``-``, ``@`` first) prefixed by ``'``. No output holds NaN: a figure that
is not a number is a dash or an empty field.
"""

from __future__ import annotations

import csv
import html
import importlib.metadata
import io
import json
import math
import os
import re
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2
import markupsafe

from lm_eval_fin.outputs.runfiles import Run, run_settings
from lm_eval_fin.report import plots, stats
from lm_eval_fin.report.answers import CHIP_LIMIT, SubsetTable, TaskAnswers, page_of, slug
from lm_eval_fin.report.blocks import Block
from lm_eval_fin.report.judge_agreement import JudgeAgreement
from lm_eval_fin.report.leaderboard import FAILURE_THRESHOLD, Leaderboard
from lm_eval_fin.report.rows import BASELINE, MODEL, REFERENCE
from lm_eval_fin.text.csvtext import spreadsheet_safe as _spreadsheet_safe

TEMPLATES = Path(__file__).with_name("templates")
EXPORT_FILES = {"model-index.yaml": "the model card's results block", "data": "Every Eval Ever records"}


def package_version() -> str:
    try:
        return importlib.metadata.version("lm-eval-fin")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# ------------------------------------------------------------------------------ formatting


def number(value: Any) -> str:
    """A figure as the report prints it: 3 decimals below 10, else 4 significant digits; a
    value that is not a finite number is a dash."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return "—"
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.4g}"


def interval_text(interval: stats.Interval) -> str:
    """``mean [low, high]``, ``... (se)`` for a stderr interval, ``mean`` alone without bounds."""
    if not interval.has_bounds:
        return number(interval.mean)
    text = f"{number(interval.mean)} [{number(interval.low)}, {number(interval.high)}]"
    return text + " (se)" if interval.method == stats.STDERR else text


def data_value(value: Any) -> str:
    """A figure for a data attribute (sorting): its repr, or empty when not finite."""
    return repr(float(value)) if isinstance(value, (int, float)) and math.isfinite(value) else ""


def arrow(higher_is_better: bool | None) -> str:
    return "↑" if higher_is_better else "↓" if higher_is_better is False else ""


def short(text: Any, width: int = 28) -> str:
    """A label cut to fit a chart or a chip, in its middle: the model's name begins it and the
    tags that set its row apart end it (the whole label is in its tooltip).

    >>> short("SmolLM2-135M-Instruct · max_gen_toks=32")
    'SmolLM2-13…· max_gen_toks=32'
    """
    text = str(text)
    if len(text) <= width:
        return text
    head = (width - 1) * 2 // 5
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def relative_path(path: Path, out: Path) -> str:
    """``path`` as seen from the report's folder: a relative path, never an absolute one (the
    page may be read on another machine, next to a copy of the runs)."""
    return Path(os.path.relpath(Path(path).resolve(), out.resolve())).as_posix()


def _escape(text: Any) -> str:
    return html.escape(str(text), quote=True)


def blocks_html(blocks: Sequence[Block]) -> markupsafe.Markup:
    """A view's blocks as HTML, every text escaped (what the answers pages' template would write
    with a macro per block, at a tenth of the cost: a board of 100 runs has 100,000 answers)."""
    out: list[str] = []
    for block in blocks:
        out.append('<div class="block">')
        if block.title:
            out.append(f'<div class="title">{_escape(block.title)}</div>')
        if block.kind == "text":
            out.append(f'<div class="text {_escape(block.cls)}">{_escape(block.text)}</div>')
        elif block.kind == "facts":
            out.append('<dl class="facts">' + "".join(f"<dt>{_escape(label)}</dt><dd>{_escape(value)}</dd>"
                                                      for label, value in block.items) + "</dl>")
        elif block.kind == "table":
            header = ("<thead><tr>" + "".join(f"<th>{_escape(h)}</th>" for h in block.header) + "</tr></thead>"
                      if block.header else "")
            body = "".join("<tr>" + "".join(f'<td class="{_escape(cell.cls)}">{_escape(cell.text)}</td>' for cell in row)
                           + "</tr>" for row in block.rows)
            out.append(f'<div class="scroll"><table>{header}<tbody>{body}</tbody></table></div>')
        out.append("</div>\n")
    return markupsafe.Markup("".join(out))


def when(timestamp: Any) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(timestamp)))
    except (TypeError, ValueError, OverflowError, OSError):
        return "not recorded"


def duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "—"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def count(value: int | None) -> str:
    if value is None:
        return "—"
    return f"{value / 1e6:.1f}M" if value >= 1e6 else f"{value / 1e3:.1f}k" if value >= 1e4 else str(value)


# ------------------------------------------------------------------------------ provenance


def recorded_provenance(run: Run) -> dict[str, Any]:
    """What ``lm-eval-fin run`` recorded in the settings of the run's documents: the
    lm-eval-fin version and the git commit of the tasks."""
    for task_run in run.tasks.values():
        for sample in task_run.samples[:1]:
            found = run_settings(sample.doc).get("provenance")
            if isinstance(found, dict):
                return found
    return {}


def run_provenance(run: Run) -> list[tuple[str, str]]:
    """What a maintainer needs to know where a run's figures come from."""
    results, config = run.results, run.config
    recorded = recorded_provenance(run)
    items = [
        ("date", when(results.get("date"))),
        ("lm-eval version", results.get("lm_eval_version") or "not recorded"),
        ("lm-eval-fin version", recorded.get("lm_eval_fin_version") or "not recorded by the run (made without "
                                f"`lm-eval-fin run`?; this report: {package_version()})"),
        ("lm-eval-fin git commit", recorded.get("git_commit") or "not recorded"),
        ("lm-eval git hash", results.get("git_hash")),
        ("transformers version", results.get("transformers_version")),
        ("model", config.get("model")),
        ("model args", json.dumps(run.model_args, sort_keys=True)),
        ("generation kwargs (command line)", json.dumps(config.get("gen_kwargs"), sort_keys=True)),
        ("seeds (random, numpy, torch, fewshot)", ", ".join(str(config.get(k)) for k in
                                                           ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed"))),
        ("limit", config.get("limit")),
        ("batch size", config.get("batch_size")),
        ("wall time", duration(_seconds(results.get("total_evaluation_time_seconds")))),
        ("chat template sha256", results.get("chat_template_sha")),
        ("system instruction sha256", results.get("system_instruction_sha")),
    ]
    return [(label, "—" if value is None else str(value)) for label, value in items]


def _seconds(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def task_provenance(run: Run, task: str) -> list[tuple[str, str]]:
    task_run = run.tasks[task]
    settings = run_settings(task_run.samples[0].doc) if task_run.samples else {}
    items = [
        ("task version", task_run.version),
        ("samples (effective of original)",
         f"{task_run.n_samples.get('effective', '?')} of {task_run.n_samples.get('original', '?')}"),
        ("n-shot", (run.results.get("n-shot") or {}).get(task)),
        ("task hash (lm-eval)", (run.results.get("task_hashes") or {}).get(task)),
        ("generation kwargs (task)", json.dumps(task_run.config.get("generation_kwargs"), sort_keys=True, default=str)),
        ("per-sample values", "logged" if task_run.logged else "not logged (run lm-eval with --log_samples)"),
        ("judge", settings.get("judge") or ("none" if settings else None)),
        ("judge options", json.dumps(settings.get("judge_options"), sort_keys=True) if settings.get("judge_options")
         else None),
        ("task settings", json.dumps(settings.get("values"), sort_keys=True) if settings.get("values") else None),
        *task_run.provenance.items(),
        *(("note", note) for note in task_run.notes),
    ]
    return [(str(label), str(value)) for label, value in items if value is not None]


def export_links(export_dir: str | os.PathLike | None, out: Path) -> list[tuple[str, str, str]]:
    """(relative link, name, what it is) of the ``lm-eval-fin export`` files found in
    ``export_dir``, relative to the report's folder."""
    if not export_dir:
        return []
    folder = Path(export_dir).expanduser()
    links = []
    for name, what in EXPORT_FILES.items():
        target = folder / name
        if target.exists():
            link = Path(os.path.relpath(target.resolve(), out.resolve())).as_posix() + ("/" if target.is_dir() else "")
            links.append((link, name + ("/" if target.is_dir() else ""), what))
    return links


# ------------------------------------------------------------------------------ outputs


def _environment(autoescape: bool, out: Path | None = None) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=autoescape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(number=number, interval_text=interval_text, slug=slug, arrow=arrow, color=plots.color,
                       duration=duration, count=count, data_value=data_value, short=short, blocks=blocks_html)
    base = out or Path.cwd()
    env.filters.update(link_text=lambda path: relative_path(path, base),
                       link=lambda path: urllib.parse.quote(relative_path(path, base)))
    env.globals.update(plots=plots, MODEL=MODEL, BASELINE=BASELINE, REFERENCE=REFERENCE)
    return env


def _context(board: Leaderboard, title: str, links: Sequence[tuple[str, str, str]],
             agreement: JudgeAgreement | None) -> dict[str, Any]:
    agreement = agreement or JudgeAgreement()
    return {
        "agreement": agreement,
        "agreement_notes": [note for task in dict.fromkeys(column.task for column in board.headlines.values())
                            if (note := agreement.note(task))],
        "title": title,
        "board": board,
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "version": package_version(),
        "run_count": sum(len(row.runs) for row in board.models),
        "confidence_percent": f"{board.settings.confidence * 100:g}",
        "usage_kinds": list(dict.fromkeys(kind for row in board.models for kind in row.judge_usage)),
        "export_links": links,
        "failure_threshold": f"{FAILURE_THRESHOLD:.0%}",
        "source_count": sum(1 + sum(task_run.samples_path is not None for task_run in run.tasks.values())
                            for row in board.models for run in row.runs),
        "reference_notes": [(entry.name, entry.view.references_note) for entry in board.catalog.entries
                            if entry.view.references_note and any(board.catalog.group(t) == entry.name
                                                                  for t in board.tasks)],
    }


def render_html(board: Leaderboard, answers: Sequence[TaskAnswers], subsets: dict[str, list[SubsetTable]],
                title: str, links: Sequence[tuple[str, str, str]] = (), agreement: JudgeAgreement | None = None,
                out: Path | None = None) -> str:
    """The page a browser opens first (``out``: the folder it is written to, for its links)."""
    charts = {task: [chart for col in board.columns_of(task, diagnostic=False) for chart in plots.bar_charts(col, board.rows)]
              for task in board.tasks}
    return _environment(True, out).get_template("index.html.j2").render(
        **_context(board, title, links, agreement), answers=answers, subsets=subsets, charts=charts,
        scatters=plots.precision_recall_scatters(board), run_provenance=run_provenance,
        task_provenance=task_provenance,
    )


def render_answers(board: Leaderboard, section: TaskAnswers, part: int, title: str, out: Path | None = None) -> str:
    """The ``part``-th page of one task's answers (``section.pages``, beside index.html)."""
    return _environment(True, out).get_template("answers.html.j2").render(
        **_context(board, title, (), None), section=section, part=part, questions=section.part(part),
        chip_limit=CHIP_LIMIT)


_MARKDOWN_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*[]|~"})
# an underscore opens or closes emphasis only at a word's edge: inside one (fin_ems) it stays as written
_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_HTML_SPECIAL = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})


def md_cell(text: Any) -> str:
    r"""A text fit for one Markdown table cell, read as text by any renderer: one line, HTML's
    and Markdown's special characters escaped (a model id or ``--name`` holding ``<img ...>``,
    ``[x](javascript:...)`` or ``|`` shows as written).

    >>> print(md_cell('<img src=x onerror=alert(1)> a|b *c* [d](e) _f_ g_h'))
    &lt;img src=x onerror=alert(1)&gt; a\|b \*c\* \[d\](e) \_f\_ g_h
    """
    text = " ".join(str(text).split()).translate(_HTML_SPECIAL).translate(_MARKDOWN_SPECIAL)
    return _EDGE_UNDERSCORE.sub(r"\\_", text)


def md_link(path: Any) -> str:
    """A link target for Markdown: percent-encoded, so that no ``)``, space or ``<`` ends it."""
    return urllib.parse.quote(str(path), safe="/#.-_~")


def render_markdown(board: Leaderboard, title: str, links: Sequence[tuple[str, str, str]] = (),
                    agreement: JudgeAgreement | None = None, out: Path | None = None) -> str:
    env = _environment(False, out)
    env.filters.update(md=md_cell, md_link=md_link)
    answers = [(task, page_of(task)) for task in board.tasks
               if any(task in run.tasks and run.tasks[task].samples for row in board.models for run in row.runs)]
    return env.get_template("leaderboard.md.j2").render(**_context(board, title, links, agreement),
                                                        answer_pages=answers)


def render_csv(board: Leaderboard) -> str:
    """One line per row (models, baselines, reference rows); per column the mean, interval
    bounds, method and n; empty where there is no figure."""
    header = ["row", "kind", "rank", "label", "model", "seconds", "results_files"]
    for column in board.columns:
        header += [column.key, f"{column.key} low", f"{column.key} high", f"{column.key} interval", f"{column.key} n"]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([_spreadsheet_safe(h) for h in header])
    for row in board.rows:
        line = [str(row.index), row.kind, "" if row.rank is None else str(row.rank), _spreadsheet_safe(row.label),
                _spreadsheet_safe(row.model_id), data_value(row.seconds),
                _spreadsheet_safe(" ".join(str(run.source) for run in row.runs))]
        for column in board.columns:
            cell = row.cells.get(column.key)
            if cell is None or not math.isfinite(cell.interval.mean):
                line += [""] * 5
                continue
            i = cell.interval
            bounds = [data_value(i.low), data_value(i.high)] if i.has_bounds else ["", ""]
            line += [data_value(i.mean), *bounds, i.method, str(i.n) if i.n else ""]
        writer.writerow(line)
    return out.getvalue()
