"""`lm-eval-fin report` on real lm-eval output: rows per model, the headline columns and their
standings, baselines and the papers' figures, degenerate answers, the files written, and the page
in headless Chromium.

The five runs of issue 27 are made once for the module by the real `lm-eval-fin run` (two
documents each, see tests/report_runs.py): the embedded model on fin_agentbench_doc greedy,
sampled and with a shorter answer budget, on fin_ems offline with max_gen_toks=64, and a tiny
random model on fin_agentbench_doc."""

import csv
import html as html_text
import io
import json
import math
import os
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from lm_eval_fin.benchmarks import all_benchmarks
from lm_eval_fin.benchmarks.fin_agentbench.score import score_ranking
from lm_eval_fin.outputs.runfiles import read_results_dirs
from lm_eval_fin.report import build_report, stats, write_report, write_report_files
from lm_eval_fin.report.rows import BASELINE, REFERENCE
from tests.chromium import Browser
from tests.report_runs import (
    HOSTILE,
    SECOND_MODEL,
    copy_run,
    echo_copy,
    hostile_copy,
    make_runs,
    more_questions,
    only,
    redate,
    rename_model,
    rename_task,
    rewrite_samples,
    set_model_args,
)

BIN = Path(sys.executable).parent
BENCHMARKS = all_benchmarks()
MODEL = "SmolLM2-135M-Instruct"
ORDER = ("greedy", "sampled", "short", "ems", "second")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, embedded_model_dir):
    # $LM_EVAL_FIN_REPORT_RUNS: a folder where make_runs left its runs before (iterating on the report)
    kept = os.environ.get("LM_EVAL_FIN_REPORT_RUNS")
    return make_runs(Path(kept) if kept else tmp_path_factory.mktemp("report_runs"), embedded_model_dir)


@pytest.fixture(scope="module")
def board(runs):
    return build_report([runs[name] for name in ORDER], benchmarks=BENCHMARKS)


def lm_eval_figure(folder: Path, task: str, metric: str) -> float:
    return json.loads(only(folder, "results_*.json").read_text())["results"][task][f"{metric},none"]


def row_named(board, label: str):
    return next(row for row in board.rows if row.label == label)


# ----------------------------------------------------------------------------- reading


def test_reads_the_runs_samples_and_records(runs):
    found, unreadable = read_results_dirs([runs["greedy"], runs["ems"]])
    assert unreadable == []
    greedy, ems = found
    task = greedy.tasks["fin_agentbench_doc"]
    assert task.logged and len(task.samples) == 2 and greedy.model == MODEL
    # every metric the task lists has its per-sample value, and the record holds the ranking read
    assert all({"ndcg@5", "map@5", "mrr@5", "parse_failure"} <= set(s.values) for s in task.samples)
    assert all("ranking" in s.record for s in task.samples)
    ems_samples = ems.tasks["fin_ems"].samples
    assert all(s.record["ems"]["method"] == "offline" and s.record["ems"]["reference_points"] for s in ems_samples)


def test_cells_are_bootstrap_intervals_of_the_per_sample_values(board, runs):
    main = row_named(board, MODEL)
    ndcg = main.cells["fin_agentbench_doc/ndcg@5"]
    assert ndcg.interval.method == stats.BOOTSTRAP and ndcg.interval.n == 2
    assert ndcg.interval.mean == pytest.approx(lm_eval_figure(runs["greedy"], "fin_agentbench_doc", "ndcg@5"))
    values = sorted(ndcg.values.values())
    # two values: the resample means are min, their mean and max; both tails reach the extremes
    assert (ndcg.interval.low, ndcg.interval.high) == pytest.approx((values[0], values[1]))
    f1 = main.cells["fin_ems/ems_offline_rouge_f1"]
    assert f1.interval.method == stats.BOOTSTRAP and f1.interval.n == 2
    assert f1.interval.mean == pytest.approx(lm_eval_figure(runs["ems"], "fin_ems", "ems_offline_rouge_f1"))
    assert "fin_ems/ems_llm_f1" not in main.cells  # null in an offline run: undefined, no cell
    truncated = main.cells["fin_ems/truncated_documents"]  # a sum: lm-eval's own figure
    assert truncated.interval.mean == lm_eval_figure(runs["ems"], "fin_ems", "truncated_documents")


def test_without_samples_the_cell_is_lm_evals_stderr(runs, tmp_path):
    bare = copy_run(runs["greedy"], tmp_path / "bare")
    only(bare, "samples_*.jsonl").unlink()
    board = build_report([bare], benchmarks=BENCHMARKS)
    ndcg = board.rows[0].cells["fin_agentbench_doc/ndcg@5"]
    results = json.loads(only(bare, "results_*.json").read_text())["results"]["fin_agentbench_doc"]
    assert ndcg.interval.method == stats.STDERR
    assert ndcg.interval.low == pytest.approx(results["ndcg@5,none"] - 1.959964 * results["ndcg@5_stderr,none"])
    assert [b.text for b in board.rows[0].badges] == ["--limit 2", "synthetic data", "no samples"]
    assert board.rows_of(BASELINE) == []  # baselines are computed on the logged questions


# ------------------------------------------------------------------------------ rows


def test_one_row_per_model_and_one_per_setting_that_reran_a_task(board):
    labels = sorted(row.label for row in board.models)
    assert labels == sorted([MODEL, f"{MODEL} · do_sample=True · temperature=1.0 · seed=7",
                             f"{MODEL} · max_gen_toks=32", SECOND_MODEL])
    main = row_named(board, MODEL)
    # the greedy run and the fin_ems run share the model's row; fin_ems's answer budget tags its cells
    assert main.tasks == ["fin_agentbench_doc", "fin_ems"] and main.task_tags == {"fin_ems": "max_gen_toks=64"}
    assert main.seconds == pytest.approx(sum(float(run.results["total_evaluation_time_seconds"]) for run in main.runs))
    assert [b.text for b in main.badges] == ["--limit 2", "synthetic data", "unjudged"]
    assert dict(main.metadata)["parameters"] == "135M" and dict(main.metadata)["dtype"] == "float32"


def test_headlines_are_ranked_with_ties_and_the_rows_ordered_by_win_rate(board):
    assert {task: c.metric for task, c in board.headlines.items()} == {
        "fin_agentbench_doc": "ndcg@5", "fin_ems": "ems_offline_bertscore_f1"}  # ems_llm_f1 is undefined offline
    key = "fin_agentbench_doc/ndcg@5"
    intervals = {row.label: row.cells[key].interval for row in board.models}
    for row in board.models:
        mine = intervals[row.label]
        wholly_above = [label for label, i in intervals.items()
                        if label != row.label and (i.low if i.has_bounds else i.mean) > (mine.high if mine.has_bounds else mine.mean)]
        assert row.ranks[key] == 1 + len(wholly_above)
    means = {row.label: row.cells[key].interval.mean for row in board.models}
    for row in board.models:
        others = [m for label, m in means.items() if label != row.label]
        beaten = sum(m < means[row.label] for m in others) + sum(m == means[row.label] for m in others) / 2
        doc_rate = beaten / len(others)
        # fin_ems has one row: it takes no part in the win rate
        assert row.win_rate == pytest.approx(doc_rate)
    assert [row.rank for row in board.models] == sorted(row.rank for row in board.models)
    assert [row.index for row in board.models] == [1, 2, 3, 4]  # a row's number is its line


def test_baselines_are_scored_by_the_benchmarks_code_on_the_logged_questions(board):
    baselines = {row.label: row for row in board.rows_of(BASELINE)}
    assert set(baselines) == {"input order", "random order", "question echo", "reference, first sentence"}
    assert all(row.rank is None and not row.runs for row in baselines.values())
    samples = {s.key: s for s in board.samples("fin_agentbench_doc")}
    in_order = baselines["input order"].cells["fin_agentbench_doc/ndcg@5"]
    assert in_order.values == {key: score_ranking(s.doc, s.doc["candidates"], gain="exponential")["ndcg@5"]
                               for key, s in samples.items()}
    echo = baselines["question echo"].cells["fin_ems/ems_offline_bertscore_f1"]
    assert echo.interval.n == 2 and 0.0 <= echo.interval.mean <= 1.0
    # a model figure not above the best baseline is flagged
    for row in board.models:
        cell = row.cells["fin_agentbench_doc/ndcg@5"]
        best = max(b.cells["fin_agentbench_doc/ndcg@5"].interval.mean for b in baselines.values()
                   if "fin_agentbench_doc/ndcg@5" in b.cells)
        assert ("not above the" in row.flags.get("fin_agentbench_doc/ndcg@5", "")) == (cell.interval.mean <= best)


def test_papers_figures_only_for_the_tasks_on_the_board(board):
    papers = board.rows_of(REFERENCE)
    assert [row.label for row in papers] == [f"Llama 3.2 {size} · reported in EMS (Hu et al. 2025), Table 1"
                                             for size in ("1B Instruct", "11B Vision Instruct", "90B Vision Instruct")]
    assert papers[2].cells["fin_ems/ems_llm_f1"].interval.mean == 0.40
    assert "fin_ems/ragchecker_f1" not in papers[0].cells  # RAGChecker's definition is not ours
    assert board.headline_rows(REFERENCE) == []  # no offline EMS in the paper: not in the headline table


def test_paired_tests_of_neighbours_in_a_headline_column(board):
    tests = [c for c in board.comparisons if c.column.metric == "ndcg@5"]
    assert len(tests) == 3  # four rows, three neighbours
    first = tests[0]
    a, b = first.upper.cells["fin_agentbench_doc/ndcg@5"].values, first.lower.cells["fin_agentbench_doc/ndcg@5"].values
    d = [a[k] - b[k] for k in a]
    assert first.test.n == 2 and first.test.difference.mean == pytest.approx(sum(d) / 2)
    # of the 4 sign patterns, ++ and -- reach |d1 + d2|; +- and -+ too when the signs differ or one is 0
    assert first.test.p_value == (1.0 if d[0] * d[1] <= 0 else 0.5)


def test_degenerate_answers_are_flagged_per_answer_and_per_row(runs, tmp_path):
    echo = echo_copy(runs["greedy"], tmp_path / "echo")
    board = build_report([runs["greedy"], echo], benchmarks=BENCHMARKS)
    row = row_named(board, "echo-model")
    assert row.cells["fin_agentbench_doc/degenerate_answer"].interval.mean == 1.0
    assert "100% of the answers degenerate" in row.flags["fin_agentbench_doc/ndcg@5"]
    assert "100% degenerate" in [badge.text for badge in row.badges]
    assert "degenerate" not in row_named(board, MODEL).flags.get("fin_agentbench_doc/ndcg@5", "")
    # the echo scores what the input-order baseline scores
    baseline = row_named(board, "input order").cells["fin_agentbench_doc/ndcg@5"]
    assert row.cells["fin_agentbench_doc/ndcg@5"].values == pytest.approx(baseline.values)


def test_broken_runs_are_named_and_the_rest_is_read(runs, tmp_path):
    broken = copy_run(runs["greedy"], tmp_path / "broken")
    only(broken, "results_*.json").write_text("{ not json")
    bad_samples = copy_run(runs["sampled"], tmp_path / "bad_samples")
    with only(bad_samples, "samples_*.jsonl").open("a") as handle:
        handle.write("{ truncated\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    found, unreadable = read_results_dirs([broken, bad_samples, empty, tmp_path / "missing", runs["ems"]])
    reasons = {item.path: item.reason for item in unreadable}
    assert "not JSON" in reasons[only(broken, "results_*.json")]
    assert "no results_" in reasons[empty] and reasons[tmp_path / "missing"] == "does not exist"
    # a run is read whole or not at all: the cut samples line is named with its file and line
    samples = only(bad_samples, "samples_*.jsonl")
    lines = len(samples.read_text().splitlines())
    assert f"{samples}:{lines}: not JSON" in reasons[only(bad_samples, "results_*.json")]
    assert len(found) == 1


# ------------------------------------------------------------------------------ outputs


def test_cli_writes_the_page_the_markdown_and_the_csv(runs, tmp_path):
    missing = tmp_path / "missing"
    exports = tmp_path / "export"
    (exports / "data").mkdir(parents=True)
    (exports / "model-index.yaml").write_text("model-index: []\n")
    out = tmp_path / "report"
    done = subprocess.run(
        [BIN / "lm-eval-fin", "report", *(str(runs[name]) for name in ORDER), str(missing),
         "--output_path", str(out), "--bootstrap_iters", "500", "--export_dir", str(exports)],
        check=False, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 1, done.stderr  # one folder could not be read
    assert f"cannot read {missing}: does not exist" in done.stderr
    assert str(out / "index.html") in done.stdout and "in 4 model rows" in done.stdout
    markdown = (out / "leaderboard.md").read_text()
    table = markdown.split("|---", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    assert all(line.split(" | ")[0][2:].isdigit() for line in table[:4])
    assert sum(line.startswith("| baseline |") for line in table) == 4
    assert "fin_agentbench_doc: ndcg@5 ↑" in markdown and "fin_ems: ems_offline_bertscore_f1 ↑" in markdown
    assert "parse_failure" not in "\n".join(table) and "truncated" not in markdown  # headline table only
    assert "[fin_ems](index.html#bench-fin_ems)" in markdown and "[model-index.yaml](../export/model-index.yaml)" in markdown
    assert "does not exist" in markdown
    rows = list(csv.DictReader(io.StringIO((out / "leaderboard.csv").read_text())))
    assert [r["kind"] for r in rows].count("model") == 4 and [r["kind"] for r in rows].count("baseline") == 4
    main = next(r for r in rows if r["label"] == MODEL)
    figure = lm_eval_figure(runs["greedy"], "fin_agentbench_doc", "ndcg@5")
    assert float(main["fin_agentbench_doc/ndcg@5"]) == pytest.approx(figure)
    assert float(main["fin_agentbench_doc/ndcg@5 low"]) <= figure <= float(main["fin_agentbench_doc/ndcg@5 high"])
    assert main.get("fin_ems/ems_llm_f1", "") == ""  # undefined offline: no column or empty, never NaN
    html = (out / "index.html").read_text()
    for text in (html.split("<script>")[0], markdown, (out / "leaderboard.csv").read_text()):  # the data, not the code
        assert not [text[max(0, text.find(w) - 80):text.find(w) + 20] for w in ("NaN", "nan,", ",nan", "Infinity")
                    if w in text]
    assert "does not exist" in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert 'href="../export/data/"' in html
    # every file the page was built from, linked relative to it (no absolute path), and the report's own files
    links = set(re.findall(r'href="([^"#]+)"', html))
    sources = {only(runs[name], pattern) for name in ORDER for pattern in ("results_*.json", "samples_*.jsonl")}
    assert {(out / urllib.parse.unquote(link)).resolve() for link in links} >= sources
    assert {"leaderboard.md", "leaderboard.csv", "answers-fin_ems.html", "answers-fin_agentbench_doc.html"} <= links
    assert not [link for link in links if link.startswith("/")]
    assert all((out / page).is_file() for page in ("answers-fin_ems.html", "answers-fin_agentbench_doc.html"))
    built_from = re.findall(r"\]\(([^)]+\.jsonl?)\)", markdown)
    assert {(out / urllib.parse.unquote(link)).resolve() for link in built_from} == sources
    # the answers are on their own pages, the board page carries none
    answer = html_text.escape(json.loads(only(runs["greedy"], "samples_*.jsonl").read_text().splitlines()[0])["resps"][0][0])
    assert answer not in html and answer in (out / "answers-fin_agentbench_doc.html").read_text()


def test_hostile_text_is_escaped_everywhere(runs, tmp_path):
    hostile = hostile_copy(runs["greedy"], tmp_path / "hostile")
    out = tmp_path / "report"
    write_report([hostile], out, benchmarks=BENCHMARKS)
    html = (out / "index.html").read_text()
    assert "<script>window.__pwned" not in html and "<img src=\"x\"" not in html
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html
    assert html.count("<script>") == 1  # the page's own


def test_names_are_plain_text_in_markdown_and_csv(runs, tmp_path):
    out = tmp_path / "report"
    write_report([runs["greedy"], runs["second"]], out, names=["=HYPERLINK(\"http://x\")", "a | b\nc"])
    rows = list(csv.reader(io.StringIO((out / "leaderboard.csv").read_text())))
    assert "'=HYPERLINK(\"http://x\")" in [row[3] for row in rows]  # a spreadsheet shows it, never runs it
    assert "a \\| b c" in (out / "leaderboard.md").read_text()


# ------------------------------------------------------------------------------ browser


def shown_run(task: str, row: int | str) -> str:
    """Whether the page's answer filter of ``task`` shows row ``row`` (set by its hash route)."""
    return f"(document.querySelector('#answers-{task} .filters a.on') || {{}}).getAttribute?.('data-row') === '{row}'"


def search(text: str) -> str:
    """Type ``text`` in the page's search box."""
    return f"(s => {{ s.value = '{text}'; s.dispatchEvent(new Event('input')); }})(document.getElementById('search'))"


VISIBLE_MODELS = "Array.from(document.querySelectorAll('#board tbody.models tr')).filter(tr => !tr.hidden).length"


def test_the_page_in_headless_chromium(runs, tmp_path):
    echo = echo_copy(runs["greedy"], tmp_path / "echo")
    hostile = hostile_copy(runs["greedy"], tmp_path / "hostile")
    folders = [runs[name] for name in ORDER] + [echo, hostile, tmp_path / "missing"]
    report = write_report_files(folders, tmp_path / "report", benchmarks=BENCHMARKS)
    page = report.files["index.html"]
    board = report.board
    reference_point = board.samples("fin_ems")[0].record["ems"]["reference_points"][0]
    with Browser(tmp_path / "profile", width=1400) as browser:
        browser.open(page.as_uri())
        # nothing but the page itself is requested: scripts, styles and plots are inline
        assert browser.requested_urls() == [page.as_uri()]
        assert browser.evaluate("window.__pwned === undefined")
        # the default view fits a 1400-pixel screen: no sideways scrolling
        assert browser.evaluate("document.documentElement.scrollWidth") <= 1400

        # one row per model: the embedded model's four runs in three rows, the tiny model, the echo, the hostile copy
        table = browser.evaluate("""Array.from(document.querySelectorAll('#board tbody.models tr')).map(tr => ({
            place: tr.cells[0].textContent.trim(), label: tr.cells[1].querySelector('a').textContent.trim(),
            ndcg: tr.cells[2].getAttribute('data-v'), flag: !!tr.cells[2].querySelector('.flag'),
            interval: (tr.cells[2].querySelector('.ci') || {}).textContent}))""")
        labels = [row["label"] for row in table]
        assert len(table) == 6 and labels.count(MODEL) == 1 and SECOND_MODEL in labels and "echo-model" in labels
        assert '<img src="x" onerror="window.__pwned = 2">' in " ".join(labels)
        # headline order: places ascend down the table, as the standings say
        assert [row["place"] for row in table] == [str(row.rank) for row in board.models]
        assert [int(p) for p in (row["place"] for row in table)] == sorted(int(row["place"]) for row in table)
        assert all(row["interval"].startswith("[") for row in table)
        # baselines shown beside the models, labelled
        baselines = browser.evaluate("Array.from(document.querySelectorAll('#board tbody.baseline tr')).map(tr => tr.cells[1].textContent)")
        assert len(baselines) == 4 and any("input order" in text for text in baselines)
        assert browser.evaluate("document.querySelectorAll('#unreadable li').length") == 1
        # the echo is flagged in the table and its answers on the page
        echo_row = next(row for row in table if row["label"] == "echo-model")
        assert echo_row["flag"]

        # the search box filters the rows; the column filter hides a benchmark's column
        browser.evaluate(search("tiny"))
        assert browser.evaluate(VISIBLE_MODELS) == 1
        browser.evaluate(search("max_gen_toks"))
        assert browser.evaluate(VISIBLE_MODELS) == 2  # the short row, and the model's own row (its fin_ems tag)
        browser.evaluate(search(""))
        assert browser.evaluate(VISIBLE_MODELS) == 6
        browser.evaluate("document.querySelector('#column-filter input[data-group=\"fin_ems\"]').click()")
        assert browser.evaluate("Array.from(document.querySelectorAll('#board [data-group=\"fin_ems\"]')).every(c => c.offsetParent === null)")
        assert browser.evaluate("document.querySelector('#board [data-group=\"fin_agentbench_doc\"]').offsetParent !== null")

        # sorting a headline column: figures high to low, no value last
        browser.evaluate("document.querySelector('#board th[data-col=\"2\"]').click()")
        ordered = browser.evaluate("Array.from(document.querySelectorAll('#board tbody.models tr')).map(tr => tr.cells[2].getAttribute('data-v'))")
        numbers = [float(v) for v in ordered if v]
        assert numbers == sorted(numbers, reverse=True)

        # the benchmark views unfold from their links; plots drawn with whiskers
        browser.evaluate("location.hash = '#bench-fin_ems'")
        browser.wait_until("document.getElementById('bench-fin_ems').open")
        assert browser.evaluate("document.querySelectorAll('#bench-fin_agentbench figure.bars g.bar rect').length") > 0
        # per question (the two documents are one company's: no breakdown by company)
        assert browser.evaluate("Array.from(document.querySelectorAll('#bench-fin_ems h4')).map(h => h.textContent)"
                                ).count("ems_offline_bertscore_f1 by question") == 1

        # a sort cue on every sortable heading: ⇅ until sorted, then ▲ or ▼
        cues = browser.evaluate("Array.from(document.querySelectorAll('#board th[data-col]')).map(th => "
                                "getComputedStyle(th, '::after').content)")
        assert cues[2] == '" ▼"' and set(cues[:2] + cues[3:]) == {'" ⇅"'}
        # charts and tables name the rows as the board does: no line numbers
        bar_labels = browser.evaluate("Array.from(document.querySelectorAll('#bench-fin_agentbench figure.bars')[0]"
                                      ".querySelectorAll('g.bar > text')).map(t => t.textContent)")
        assert "SmolLM2-135M-Instruct" in bar_labels and not [label for label in bar_labels if label.startswith("#")]
        assert browser.evaluate("Array.from(document.querySelectorAll('body > :not(script)')).map(e => e.textContent)"
                                ".join(' ').match(/#\\d+ [A-Za-z]/g)") is None

        # the answers, on their own page per task, reached from the board's links
        ems_row = next(row.index for row in board.models if "fin_ems" in row.tasks)
        browser.evaluate(f"document.querySelector('#answers a[href=\"answers-fin_ems.html#answers-fin_ems-r{ems_row}\"]').click()")
        browser.wait_until("location.pathname.endsWith('answers-fin_ems.html')")
        browser.wait_until(shown_run("fin_ems", ems_row))
        view = browser.evaluate(f"""(() => {{
            const question = document.querySelector('#answers-fin_ems details.question:not([hidden])');
            const answer = question.querySelector('.answer[data-row="{ems_row}"]');
            return {{open: question.open, visible: answer.offsetParent !== null, text: answer.innerText}};
        }})()""")
        assert view["open"] and view["visible"] and "Reference points" in view["text"]
        assert reference_point in view["text"] and "Answer points" in view["text"]

        # hostile answers are text on the page, not markup
        hostile_row = next(row.index for row in board.models if row.model_id == HOSTILE)
        browser.open((page.parent / "answers-fin_agentbench_doc.html").as_uri() + f"#answers-fin_agentbench_doc-r{hostile_row}")
        browser.wait_until(shown_run("fin_agentbench_doc", hostile_row))
        # the echo's answers flagged on the page, a warning chip in its question's summary for every
        # degenerate answer (the echo's two, and any of the real runs' own)
        browser.evaluate("location.hash = '#answers-fin_agentbench_doc-all'")
        browser.wait_until(shown_run("fin_agentbench_doc", "all"))
        echo_index = next(row.index for row in board.models if row.label == "echo-model")
        assert browser.evaluate("document.querySelectorAll('#answers-fin_agentbench_doc .answer[data-row=\"%d\"]"
                                "[data-degenerate] .degenerate-flag').length" % echo_index) == 2
        # a warning chip in its question's summary for every degenerate answer (the echo's two, and
        # any of the real runs' own)
        chips = browser.evaluate("document.querySelectorAll('#answers-fin_agentbench_doc summary .chip.degenerate').length")
        flagged = browser.evaluate("document.querySelectorAll('#answers-fin_agentbench_doc .answer[data-degenerate]').length")
        assert chips == flagged >= 2
        shown = browser.evaluate(f"document.querySelector('#answers-fin_agentbench_doc .answer[data-row=\"{hostile_row}\"]').innerText")
        assert HOSTILE in shown and browser.evaluate("window.__pwned === undefined")
        assert browser.evaluate("document.querySelectorAll('.answer img').length") == 0
        assert not math.isnan(float(table[0]["ndcg"]))


# ------------------------------------------------------------------- issue 32: the board


def report_cli(folders, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([BIN / "lm-eval-fin", "report", *map(str, folders), "--output_path", str(out),
                           "--bootstrap_iters", "200", *extra], check=False, capture_output=True, text=True, timeout=600)


def board_rows(markdown: str) -> list[list[str]]:
    """The cells of the Markdown board's lines."""
    table = markdown.split("|---", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in table]


def test_a_run_its_scorings_and_settings_that_change_no_answer_are_one_row(runs, tmp_path):
    # the documented flow: run, then `lm-eval-fin score` writes a new run from its answers beside it
    scored = copy_run(runs["greedy"], tmp_path / "scored")
    done = subprocess.run([BIN / "lm-eval-fin", "score", str(scored), "--judge", "none"],
                          check=False, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert len(list(scored.rglob("results_*.json"))) == 2
    # a later run of the same model and settings on another machine: batch size, device and dtype on
    # CPU differ, one answer differs (sampling noise), and its files carry a later date
    again = copy_run(runs["greedy"], tmp_path / "again")
    set_model_args(again, dtype="bfloat16", device="cpu", batch_size=16)
    first = [True]

    def other_answer(line):
        if first.pop() if first else False:
            line["resps"] = [["[1, 0]"]]
            record = json.loads(line["filtered_resps"][0])
            record["answer"] = "[1, 0]"
            line["filtered_resps"] = [json.dumps(record)]
    rewrite_samples(again, other_answer)
    redate(again, "2099-01-01T00-00-00.000000")
    out = tmp_path / "report"
    done = report_cli([runs["greedy"], scored, again, runs["ems"]], out)
    assert done.returncode == 0, done.stderr
    assert "4 runs in 1 model rows" in done.stdout or "in 1 model rows" in done.stdout  # one model, one row
    models = [row for row in board_rows((out / "leaderboard.md").read_text()) if row[0].isdigit()]
    assert len(models) == 1 and models[0][1].startswith(MODEL + " (") and "·" not in models[0][1]
    html = (out / "index.html").read_text()
    # the latest run of the task is shown; the run and its scoring are named under the row's provenance
    later = only(again, "results_*.json")
    # the run read twice (its folder, and its copy that score wrote into) and the earlier run
    assert html.count("the same answers, scored earlier") == 2 and html.count("an earlier run with the same settings") == 1
    panel = re.search(r'<details class="panel run".*?</details>', html, re.DOTALL)
    assert panel is not None
    shown = panel.group(0)
    assert later.name in shown.split("Runs this row shows a later one of")[0]
    board = build_report([runs["greedy"], scored, again, runs["ems"]], benchmarks=BENCHMARKS)
    (row,) = board.models
    assert row.tasks == ["fin_agentbench_doc", "fin_ems"] and row.runs[0].source == later
    assert {item.why for item in row.earlier} == {"the same answers, scored earlier", "an earlier run with the same settings"}


def test_a_quantized_file_or_another_answer_budget_is_a_row_tagged_with_why(runs, tmp_path):
    quantized = copy_run(runs["greedy"], tmp_path / "quantized")
    set_model_args(quantized, gguf_file="SmolLM2-135M-Instruct-Q4_1.gguf")

    def changed(line):
        line["resps"] = [["[0]"]]
        record = json.loads(line["filtered_resps"][0])
        record["answer"] = "[0]"
        line["filtered_resps"] = [json.dumps(record)]
    rewrite_samples(quantized, changed)
    out = tmp_path / "report"
    done = report_cli([runs["greedy"], quantized, runs["short"]], out)
    assert done.returncode == 0, done.stderr
    labels = sorted(row[1].split(" (")[0] for row in board_rows((out / "leaderboard.md").read_text()) if row[0].isdigit())
    assert labels == sorted([MODEL, f"{MODEL} · gguf_file=SmolLM2-135M-Instruct-Q4_1.gguf",
                             f"{MODEL} · max_gen_toks=32"])


def test_failure_rates_and_undefined_figures_are_on_the_board(runs, tmp_path):
    # one run whose answers could not be read at all: every figure null, parse_failure 1.0
    unread = copy_run(runs["greedy"], tmp_path / "unread")
    rename_model(unread, "unreadable-model")

    def unreadable(line):
        for metric in ("ndcg@5", "map@5", "mrr@5"):
            line[metric] = None
        line["parse_failure"] = 1.0
    rewrite_samples(unread, unreadable)
    # one where one answer of two could not be read: figures defined, a badge on them
    half = copy_run(runs["greedy"], tmp_path / "half")
    rename_model(half, "half-model")
    lines = [True, False]
    rewrite_samples(half, lambda line: line.update(parse_failure=1.0 if lines.pop() else 0.0))
    out = tmp_path / "report"
    done = report_cli([runs["greedy"], unread, half], out)
    assert done.returncode == 0, done.stderr
    html = (out / "index.html").read_text()
    cells = {label: cell for label, cell in re.findall(
        r'<tr data-row="\d+" data-label="([\w-]+) [^"]*">.*?data-group="fin_agentbench_doc"[^>]*>(.*?)</td>', html, re.DOTALL)}
    assert "parse_failure 50%" in cells["half-model"] and "0.5" not in cells[MODEL] + cells["unreadable-model"].split("<")[0]
    assert "undefined: no answer could be read (parse_failure 100%)" in cells["unreadable-model"]
    assert "parse_failure 100%" in cells["unreadable-model"] and "badge" not in cells[MODEL]
    markdown = (out / "leaderboard.md").read_text()
    rows = {row[1].split(" (")[0]: row for row in board_rows(markdown)}
    assert rows["half-model"][2].endswith("✗") and rows["unreadable-model"][2] == "— ✗" and "✗" not in rows[MODEL][2]
    assert "- half-model, fin_agentbench_doc ndcg@5: parse_failure 50% of the answers." in markdown
    assert ("- unreadable-model, fin_agentbench_doc ndcg@5: undefined: no answer could be read (parse_failure 100%); "
            "parse_failure 100% of the answers.") in markdown


def test_papers_figure_sets_and_bertscore_scales_are_told_apart(runs, tmp_path):
    chunk = copy_run(runs["greedy"], tmp_path / "chunk")
    rename_task(chunk, "fin_agentbench_doc", "fin_agentbench_chunk")
    out = tmp_path / "report"
    done = report_cli([chunk, runs["ems"]], out)
    assert done.returncode == 0, done.stderr
    html = (out / "index.html").read_text()
    # the paper's two figure sets for GPT-5 mini: labelled by their settings, in the page and the Markdown
    for text in (html, (out / "leaderboard.md").read_text()):
        assert "GPT-5 mini · reported in FinCARDS (Zhou et al. 2026), Table 1 · zero-shot LLM reranking" in text
        assert "GPT-5 mini · reported in FinCARDS (Zhou et al. 2026), Table 1 · FinCARDS, stages 1+2+3" in text
    # BERTScore on the runs' MiniLM and the paper's (unnamed) model: two charts, never one axis
    charts = re.findall(r'<figure class="bars" data-metric="fin_ems/bertscore_f1">(.*?)</figure>', html, re.DOTALL)
    assert len(charts) == 2
    runs_chart, papers_chart = charts
    assert "BERTScore model: packaged MiniLM (offline)" in runs_chart and MODEL in runs_chart
    assert "reported in EMS" not in runs_chart
    assert "not named by the paper (another scale" in papers_chart and "reported in EMS" in papers_chart
    assert MODEL not in papers_chart


def test_markdown_is_text_under_a_common_renderer(runs, tmp_path):
    out = tmp_path / "report"
    name, title = '<img src=x onerror="alert(1)"> [link](javascript:alert(2)) *bold*', "<script>alert(3)</script> `x`"
    done = report_cli([runs["greedy"]], out, "--name", name, "--title", title)
    assert done.returncode == 0, done.stderr
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render((out / "leaderboard.md").read_text())
    assert "<img" not in rendered and "<script" not in rendered and "javascript:" not in rendered.replace(
        "[link](javascript:alert(2))", "")
    assert 'href="javascript' not in rendered and "<strong>" not in rendered and "<em>bold" not in rendered
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; [link](javascript:alert(2)) *bold*" in rendered
    assert "&lt;script&gt;alert(3)&lt;/script&gt; `x`" in rendered


def test_answers_are_paged_and_the_board_page_stays_small(runs, tmp_path):
    many = copy_run(runs["greedy"], tmp_path / "many")
    more_questions(many, 60)
    out = tmp_path / "report"
    done = report_cli([many], out)
    assert done.returncode == 0, done.stderr
    pages = sorted(path.name for path in out.glob("answers-*.html"))
    assert pages == ["answers-fin_agentbench_doc-2.html", "answers-fin_agentbench_doc-3.html",
                     "answers-fin_agentbench_doc.html"]
    questions = [len(re.findall(r'<details class="question"', (out / page).read_text())) for page in pages]
    assert sorted(questions) == [10, 25, 25]
    index = (out / "index.html").read_text()
    assert '<details class="question"' not in index and 'href="answers-fin_agentbench_doc.html"' in index
    first = (out / "answers-fin_agentbench_doc.html").read_text()
    assert 'href="answers-fin_agentbench_doc-2.html"' in first and 'href="answers-fin_agentbench_doc-3.html"' in first


def test_a_question_answered_by_many_rows_sums_them_in_its_summary(runs, tmp_path):
    copies = []
    for n in range(13):
        copy = copy_run(runs["greedy"], tmp_path / f"copy{n}")
        rename_model(copy, f"model-{n:02d}")
        copies.append(copy)
    out = tmp_path / "report"
    done = report_cli(copies, out)
    assert done.returncode == 0, done.stderr
    page = (out / "answers-fin_agentbench_doc.html").read_text()
    summaries = re.findall(r"<summary>(.*?)</summary>", page, re.DOTALL)
    assert len(summaries) == 2 and all("13 answers · ndcg@5 mean" in text and 'class="chip' not in text
                                       for text in summaries)
    assert page.count('<div class="answer"') == 26  # every answer still on the page
