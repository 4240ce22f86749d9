"""`lm-eval-fin report`: build time and size for 3 real runs, 2 and 20 runs, and hand-written SVG
against matplotlib's for the same chart.

Base runs are real: `lm-eval-fin run` with the embedded model on the shipped demo data
(fin_agentbench_doc greedy and sampled, fin_ems offline; all documents) unless
``--runs DIR ...`` names existing lm-eval output folders. Twenty runs are synthesised by
copying them round-robin under another model name and perturbing every per-sample score (and
lm-eval's figures with them), so each copy reads like a real run of another model: twenty
model rows, each benchmark's baselines and the papers' figures beside them. Peers measured in
the same run: reading the inputs (``json.loads`` of every results and samples file) for the
time, the inputs' bytes for the size, and a matplotlib SVG of one bar chart for the plots.

    python bench/bench_report.py [--runs DIR ...] [--screenshot docs/report.png] [--questions 300]
    python bench/bench_report.py --runs DIR ... --board 100 1000   # the board-scale case alone
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lm_eval_fin.benchmarks import all_benchmarks
from lm_eval_fin.plumbing import paths
from lm_eval_fin.report import write_report_files

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
REPEATS = 3
BENCHMARKS = all_benchmarks()


def lm_eval_fin_run(out: Path, task: str, metadata: dict, extra: list[str]) -> Path:
    subprocess.run(
        [BIN / "lm-eval-fin", "run", "--model", "hf", "--model_args", f"pretrained={paths.embedded_model()},dtype=float32",
         "--apply_chat_template", "--batch_size", "4", "--tasks", task, "--metadata", json.dumps(metadata),
         "--log_samples", "--output_path", str(out), *extra],
        check=True, capture_output=True, text=True,
    )
    return out


def base_runs(root: Path) -> list[Path]:
    agentbench = {"data_path": str(paths.data_path("finagentbench_demo"))}
    ems = {"data_path": str(paths.data_path("ems_demo")), "judge": "none", "bertscore_model": "offline",
           "max_gen_toks": 64}
    return [
        lm_eval_fin_run(root / "greedy", "fin_agentbench_doc", agentbench, []),
        lm_eval_fin_run(root / "sampled", "fin_agentbench_doc", agentbench,
                        ["--gen_kwargs", "do_sample=True,temperature=1.0", "--seed", "7"]),
        lm_eval_fin_run(root / "ems", "fin_ems", ems, ["--gen_kwargs", "max_gen_toks=64"]),
    ]


# per-sample values that say how a run went, not how good it was: left as they are
_NOT_SCORES = re.compile(r"truncated|failure|judge_|index_base|skipped|degenerate|code_per_answer")


def _jitter(value, rng: random.Random):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return min(1.0, max(0.0, value + rng.uniform(-0.15, 0.15))) if 0.0 <= value <= 1.0 else value


def _more_questions(lines: list[dict], questions: int) -> list[dict]:
    """The samples repeated under new question ids up to ``questions`` of them."""
    more = []
    for n in range(max(questions, len(lines))):
        line = json.loads(json.dumps(lines[n % len(lines)]))
        if n >= len(lines):
            line["doc_id"] = n
            line["doc"]["id"] = f"{line['doc']['id']}~{n // len(lines)}"
            line["doc_hash"] = f"{line.get('doc_hash', '')}~{n // len(lines)}"
        more.append(line)
    return more


def synthesise(source: Path, target: Path, number: int, questions: int = 0) -> Path:
    """A copy of an lm-eval output folder as if another model had made it (with
    ``questions``: its questions repeated under new ids up to that many)."""
    rng = random.Random(number)
    shutil.copytree(source, target)
    for samples_path in target.rglob("samples_*.jsonl"):
        lines = [json.loads(line) for line in samples_path.read_text().splitlines() if line.strip()]
        lines = _more_questions(lines, questions)
        results_path = samples_path.parent / re.sub(r"^samples_.+_(\d{4}-.+)\.jsonl$", r"results_\1.json", samples_path.name)
        results = json.loads(results_path.read_text())
        metrics = [key.removesuffix(",none") for entry in results["results"].values() for key in entry
                   if key.endswith(",none") and "_stderr" not in key and not _NOT_SCORES.search(key)]
        for line in lines:
            for metric in metrics:
                line[metric] = _jitter(line.get(metric), rng)
        samples_path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        results["config"]["model_args"]["pretrained"] = f"synthetic/model-{number:02d}"
        task = re.fullmatch(r"samples_(.+)_\d{4}-\d\d-\d\dT.+\.jsonl", samples_path.name)[1]
        # the reader checks the count and lm-eval's task hash against the samples: new ones, no hash
        results["n-samples"][task] = {"original": len(lines), "effective": len(lines)}
        (results.get("task_hashes") or {}).pop(task, None)
        for entry in results["results"].values():
            for metric in metrics:
                values = [line[metric] for line in lines if isinstance(line.get(metric), (int, float))]
                if values and f"{metric},none" in entry:
                    entry[f"{metric},none"] = sum(values) / len(values)
        results_path.write_text(json.dumps(results))
    return target


def input_bytes_and_read_s(folders: list[Path]) -> tuple[int, float]:
    files = [f for folder in folders for f in folder.rglob("*") if f.suffix in (".json", ".jsonl")]
    start = time.perf_counter()
    for f in files:
        text = f.read_text()
        if f.suffix == ".json":
            json.loads(text)
        else:
            [json.loads(line) for line in text.splitlines() if line.strip()]
    return sum(f.stat().st_size for f in files), time.perf_counter() - start


def matplotlib_chart_bytes(report) -> tuple[int, int]:
    """(our SVG bytes, matplotlib's) for the bar chart of the report's first headline column."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    board = report.board
    column = next(iter(board.headlines.values()))
    html = report.files["index.html"].read_text()
    ours = re.search(r'<figure class="bars" data-metric="' + re.escape(column.key) + r'">.*?</figure>', html, re.DOTALL)
    rows = [row for row in board.rows if column.key in row.cells]
    means = [row.cells[column.key].interval.mean for row in rows]
    bounds = [row.cells[column.key].interval for row in rows]  # a paper's figure has no interval: no whisker
    errors = [[m - i.low if i.has_bounds else 0.0 for m, i in zip(means, bounds)],
              [i.high - m if i.has_bounds else 0.0 for m, i in zip(means, bounds)]]
    figure, axes = plt.subplots(figsize=(3.6, 0.2 * len(rows) + 0.5))
    axes.barh([f"#{row.index}" for row in rows], means, xerr=errors, capsize=2)
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg")
    plt.close(figure)
    return len(ours.group(0).encode()), len(buffer.getvalue().encode())


def screenshot(report_dir: Path, target: Path) -> None:
    """The page at 1400 px wide: its default view (the leaderboard) above the first EMS answer."""
    from PIL import Image

    sys.path.insert(0, str(HERE.parent))
    from tests.chromium import Browser

    page = (report_dir / "index.html").as_uri()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile, Browser(Path(profile), width=1400, height=1000) as browser:
        browser.open(page)
        top = browser.screenshot(Path(profile) / "top.png", full_page=False, height=1150)
        row = browser.evaluate("document.querySelector('#answers-fin_ems .answer').getAttribute('data-row')")
        browser.evaluate(f"location.hash = '#answers-fin_ems-r{row}'")
        browser.wait_until(f"document.querySelector('#answers-fin_ems .filters a.on').getAttribute('data-row') === '{row}'")
        answer = browser.screenshot(Path(profile) / "answer.png", full_page=False, height=900)
        parts = [Image.open(top), Image.open(answer)]
        sheet = Image.new("RGB", (parts[0].width, sum(p.height for p in parts)), "white")
        sheet.paste(parts[0], (0, 0))
        sheet.paste(parts[1], (0, parts[0].height))
        sheet.quantize(colors=128).save(target, optimize=True)  # a third of the bytes, no visible loss


def measure(folders: list[Path], out: Path) -> tuple[float, object]:
    seconds = []
    for _ in range(REPEATS):
        report = write_report_files(folders, out, benchmarks=BENCHMARKS)
        seconds.append(report.seconds)
    return statistics.median(seconds), report


def run(given: list[str] | None = None, screenshot_path: str | None = None, questions: int = 0) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        bases = [Path(p) for p in given] if given else base_runs(root / "base")
        made_s = time.perf_counter() - start
        synthetic = [synthesise(bases[n % len(bases)], root / f"run{n:02d}", n) for n in range(20)]
        cases = [(f"{len(bases)} real runs", bases), ("2 runs", synthetic[:2]), ("20 runs", synthetic)]
        if questions:
            cases.append((f"20 runs x {questions} questions",
                          [synthesise(bases[n % len(bases)], root / f"big{n:02d}", n, questions) for n in range(20)]))
        for label, folders in cases:
            seconds, report = measure(folders, root / "out")
            size = report.files["index.html"].stat().st_size
            in_bytes, read_s = input_bytes_and_read_s(folders)
            questions = sum(len(run.tasks[t].samples) for row in report.board.rows for run in row.runs for t in run.tasks)
            rows += [
                {"figure": f"report, {label}: build time (s)", "ours": seconds, "peer": read_s, "ratio": seconds / read_s,
                 "unit": "s", "note": f"median of {REPEATS}; peer: json.loads of the inputs; {questions} answers"},
                {"figure": f"report, {label}: index.html (kB)", "ours": size / 1000, "peer": in_bytes / 1000,
                 "ratio": size / in_bytes, "unit": "kB", "note": "peer: the lm-eval files read"},
                {"figure": f"report, {label}: leaderboard.md + .csv (kB)",
                 "ours": (report.files["leaderboard.md"].stat().st_size + report.files["leaderboard.csv"].stat().st_size) / 1000,
                 "unit": "kB", "note": f"{len(report.board.rows)} rows, {len(report.board.columns)} metric columns"},
            ]
            if label == "20 runs":
                ours, theirs = matplotlib_chart_bytes(report)
                rows.append({"figure": "report: one bar chart, 20 rows, SVG bytes", "ours": ours, "peer": theirs,
                             "ratio": ours / theirs, "unit": "B", "note": "peer: matplotlib barh + xerr, savefig(svg)"})
            if label.endswith("real runs") and screenshot_path:
                screenshot(root / "out", Path(screenshot_path))
        if not given:
            rows.append({"figure": "report bench: making the 3 base runs (s)", "ours": made_s, "unit": "s",
                         "note": "lm-eval-fin run, embedded model, all demo documents"})
    return rows


def board_scale(bases: list[Path], runs: int, questions: int) -> list[dict]:
    """`lm-eval-fin report` of ``runs`` synthesised runs of ``questions`` answers per task, as a
    user runs it (a child process): wall time, the child's peak RSS, the page a browser opens
    first and the largest answers page."""
    with tempfile.TemporaryDirectory(prefix="bench-report-board-") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        folders = [synthesise(bases[n % len(bases)], root / f"run{n:03d}", n, questions) for n in range(runs)]
        made_s = time.perf_counter() - start
        in_bytes = sum(f.stat().st_size for folder in folders for f in folder.rglob("*.json*"))
        out = root / "out"
        start = time.perf_counter()
        child = subprocess.Popen([BIN / "lm-eval-fin", "report", *map(str, folders), "--output_path", str(out)],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        stdout = child.stdout.read().decode() if child.stdout else ""
        if status != 0:
            raise RuntimeError(f"lm-eval-fin report exited {status}: {stdout}")
        peak_mb = usage.ru_maxrss / 1024  # kB on Linux
        pages = {path.name: path.stat().st_size for path in out.glob("*.html")}
        answers = {name: size for name, size in pages.items() if name.startswith("answers-")}
        label = f"{runs} runs x {questions} answers per task"
        return [
            {"figure": f"report board, {label}: build time (s)", "ours": seconds, "unit": "s",
             "note": f"`lm-eval-fin report` in a child process, {usage.ru_utime + usage.ru_stime:.0f} s of CPU; "
                     f"{in_bytes / 1e6:.0f} MB of lm-eval files in; synthesising them took {made_s:.0f} s"},
            {"figure": f"report board, {label}: peak RSS (MB)", "ours": peak_mb, "unit": "MB",
             "note": "the report process's maximum resident set (os.wait4)"},
            {"figure": f"report board, {label}: index.html (MB)", "ours": pages["index.html"] / 1e6, "unit": "MB",
             "note": "the page a browser opens first"},
            {"figure": f"report board, {label}: largest answers page (MB)", "ours": max(answers.values(), default=0) / 1e6,
             "unit": "MB", "note": f"{len(answers)} answers pages, {sum(answers.values()) / 1e6:.0f} MB in all"},
        ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", help="existing lm-eval output folders to start from")
    parser.add_argument("--screenshot", help="write a PNG of the 3-run report's page here")
    parser.add_argument("--questions", type=int, default=0,
                        help="also 20 runs with their questions repeated up to this many per run")
    parser.add_argument("--board", nargs=2, type=int, metavar=("RUNS", "QUESTIONS"),
                        help="only the board-scale case: RUNS runs of QUESTIONS answers per task, made from --runs")
    arguments = parser.parse_args()
    if arguments.board:
        if not arguments.runs:
            parser.error("--board needs --runs (the base runs to synthesise from)")
        for row in board_scale([Path(p) for p in arguments.runs], *arguments.board):
            print(row)
    else:
        for row in run(arguments.runs, arguments.screenshot, arguments.questions):
            print(row)
