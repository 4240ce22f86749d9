"""`lm-eval-fin report` on real lm-eval output: reading, the leaderboard's cells and tests,
the files written, and the page in headless Chromium.

The runs are made once for the module by the real `lm-eval-fin run` (the embedded model,
two documents each): fin_agentbench_doc greedy and sampled, and fin_ems offline."""

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lm_eval_fin.harness import taskfiles
from lm_eval_fin.report import build_report, stats, write_report, write_report_files
from lm_eval_fin.report.runs import read_results_dirs
from tests.chromium import Browser
from tests.report_runs import (
    HOSTILE,
    copy_run,
    hostile_copy,
    make_runs,
    only,
    read_lines,
    write_lines,
)

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def runs(tmp_path_factory, embedded_model_dir):
    return make_runs(tmp_path_factory.mktemp("report_runs"), embedded_model_dir)


def lm_eval_figure(folder: Path, task: str, metric: str) -> float:
    return json.loads(only(folder, "results_*.json").read_text())["results"][task][f"{metric},none"]


def cell(board, row_index: int, key: str):
    return board.rows[row_index].cells[key]


# ----------------------------------------------------------------------------- reading


def test_reads_the_runs_samples_and_ems_details(runs):
    found, unreadable = read_results_dirs([runs["greedy"], runs["ems"]])
    assert unreadable == []
    greedy, _ = found
    task = greedy.tasks["fin_agentbench_doc"]
    assert task.logged and len(task.samples) == 2
    assert greedy.results["lm_eval_version"] and greedy.model == "SmolLM2-135M-Instruct"
    # every sample carries the per-document value of each metric the task's YAML averages
    averaged = {m["metric"] for m in taskfiles.task_config("fin_agentbench_doc")["metric_list"]
                if m.get("aggregation") == "mean"}
    assert "ndcg@5" in averaged and all(set(s.values) == averaged for s in task.samples)
    assert task.metrics["ndcg@5"].aggregation == "mean" and task.metrics["parse_failure"].higher_is_better is False

    board = build_report([runs["greedy"], runs["ems"]])
    ems_task = board.rows[1].runs[0].tasks["fin_ems"]
    # the details file is found by the hash fin_ems names it with
    assert "matched by document ids and answers" in ems_task.provenance["EMS details"]
    details = json.loads(only(runs["ems"] / "ems_details", "fin_ems-offline-*.json").read_text())
    assert [s.details["ems"]["reference_points"] for s in ems_task.samples] == [
        d["reference_points"] for d in details["documents"]
    ]


def test_cells_are_bootstrap_intervals_of_the_per_sample_values(runs):
    board = build_report([runs["greedy"], runs["ems"]])
    ndcg = cell(board, 0, "fin_agentbench_doc/ndcg@5")
    assert ndcg.interval.method == stats.BOOTSTRAP and ndcg.interval.n == 2
    assert ndcg.interval.mean == pytest.approx(lm_eval_figure(runs["greedy"], "fin_agentbench_doc", "ndcg@5"))
    values = sorted(ndcg.values.values())
    # two values: the resample means are min, their mean and max; both tails reach the extremes
    assert (ndcg.interval.low, ndcg.interval.high) == pytest.approx((values[0], values[1]))
    # EMS figures are corpus metrics in lm-eval (no stderr); the details give per-document values
    f1 = cell(board, 1, "fin_ems/ems_offline_rouge_f1")
    assert f1.interval.method == stats.BOOTSTRAP and f1.interval.n == 2
    assert f1.interval.mean == pytest.approx(lm_eval_figure(runs["ems"], "fin_ems", "ems_offline_rouge_f1"))
    bleu = cell(board, 1, "fin_ems/bleu")  # corpus-level, no per-sample value, no stderr
    assert bleu.interval.method == stats.NONE and "corpus" in bleu.note
    truncated = cell(board, 1, "fin_ems/truncated_documents")  # a sum: per-sample values are not used
    assert truncated.interval.method == stats.NONE


def test_without_samples_the_cell_is_lm_evals_stderr(runs, tmp_path):
    bare = copy_run(runs["greedy"], tmp_path / "bare")
    only(bare, "samples_*.jsonl").unlink()
    board = build_report([bare])
    ndcg = cell(board, 0, "fin_agentbench_doc/ndcg@5")
    results = json.loads(only(bare, "results_*.json").read_text())["results"]["fin_agentbench_doc"]
    assert ndcg.interval.method == stats.STDERR
    assert ndcg.interval.low == pytest.approx(results["ndcg@5,none"] - 1.959964 * results["ndcg@5_stderr,none"])
    assert not board.rows[0].runs[0].tasks["fin_agentbench_doc"].logged


def test_rows_are_named_by_what_sets_them_apart(runs):
    board = build_report([runs["greedy"], runs["sampled"], runs["ems"]], names=["", "", "ems offline"])
    labels = [row.label for row in board.rows]
    assert labels[0].startswith("SmolLM2-135M-Instruct") and "do_sample" not in labels[0]
    assert "do_sample=True" in labels[1] and "temperature=1.0" in labels[1] and "seed=7" in labels[1]
    assert labels[2] == "ems offline"
    assert len(set(labels)) == 3


def test_runs_of_one_model_and_settings_on_other_tasks_share_a_row(runs, tmp_path):
    # the same greedy settings on fin_ems: lm-eval writes a second results file
    ems_greedy = copy_run(runs["ems"], tmp_path / "ems")
    results_path = only(ems_greedy, "results_*.json")
    results = json.loads(results_path.read_text())
    greedy_config = json.loads(only(runs["greedy"], "results_*.json").read_text())["config"]
    results["config"] = greedy_config
    results_path.write_text(json.dumps(results))
    board = build_report([runs["greedy"], ems_greedy])
    assert len(board.rows) == 1 and board.rows[0].tasks == ["fin_agentbench_doc", "fin_ems"]


def test_adjacent_rows_get_a_paired_test_on_the_shared_questions(runs):
    board = build_report([runs["greedy"], runs["sampled"], runs["ems"]])
    first, second = board.comparisons
    assert second.tests == {}  # fin_agentbench_doc against fin_ems: nothing shared
    test = first.tests["fin_agentbench_doc/ndcg@5"]
    a, b = board.rows[0].cells["fin_agentbench_doc/ndcg@5"].values, board.rows[1].cells["fin_agentbench_doc/ndcg@5"].values
    d = [a[k] - b[k] for k in a]
    assert test.n == 2 and test.method == "exact"
    assert test.difference.mean == pytest.approx(sum(d) / 2)
    # two differences: of the 4 sign patterns, ++ and -- reach |d1 + d2|; +- and -+ too when
    # |d1 - d2| >= |d1 + d2|, i.e. when the signs differ or one is 0
    assert test.p_value == (1.0 if d[0] * d[1] <= 0 else 0.5)


def test_judged_results_replace_the_originals_with_their_per_sample_judge_values(runs, tmp_path):
    """The files `lm-eval-fin score` writes beside a fin_ems run: judged_results_<date>.json
    (lm-eval's results plus the judge metrics) and judged_samples_fin_ems_<date>.jsonl (the
    EMS documents, judged)."""
    judged = copy_run(runs["ems"], tmp_path / "judged")
    results_path = only(judged, "results_*.json")
    date = results_path.stem.removeprefix("results_")
    details = json.loads(only(judged / "ems_details", "fin_ems-*.json").read_text())["documents"]
    scored = [dict(d, ems={"llm": [0.5, 0.25 * (i + 1), 0.3]}) for i, d in enumerate(details)]
    samples = read_lines(only(judged, "samples_*.jsonl"))
    write_lines(results_path.parent / f"judged_samples_fin_ems_{date}.jsonl",
                [dict(d, doc_id=s["doc_id"]) for d, s in zip(scored, samples)])
    results = json.loads(results_path.read_text())
    results["results"]["fin_ems"].update({"ems_llm_recall,none": 0.375, "ems_llm_recall_stderr,none": "N/A"})
    results["judge"] = {"spec": "openai:http://127.0.0.1:1/v1#judge", "options": {"temperature": 0.0}}
    (results_path.parent / f"judged_results_{date}.json").write_text(json.dumps(results))

    board = build_report([judged])
    run = board.rows[0].runs[0]
    assert run.judged and run.source.name.startswith("judged_results_")
    recall = board.rows[0].cells["fin_ems/ems_llm_recall"]
    assert recall.interval.method == stats.BOOTSTRAP and recall.interval.mean == pytest.approx(0.375)
    assert board.rows[0].cells["fin_ems/ems_offline_rouge_f1"].interval.method == stats.BOOTSTRAP


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
    assert len(found) == 2
    task = found[0].tasks["fin_agentbench_doc"]
    assert not task.logged and any("samples not read" in note for note in task.notes)


# ------------------------------------------------------------------------------ outputs


def test_cli_writes_the_page_the_markdown_and_the_csv(runs, tmp_path):
    missing = tmp_path / "missing"
    out = tmp_path / "report"
    done = subprocess.run(
        [BIN / "lm-eval-fin", "report", str(runs["greedy"]), str(runs["sampled"]), str(runs["ems"]), str(missing),
         "--output_path", str(out), "--bootstrap_iters", "500"],
        check=False, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 1, done.stderr  # one folder could not be read
    assert f"cannot read {missing}: does not exist" in done.stderr
    assert str(out / "index.html") in done.stdout
    markdown = (out / "leaderboard.md").read_text()
    leaderboard = markdown.split("|---", 1)[1].split("\n\n", 1)[0].splitlines()[1:]  # the first table's rows
    assert [line.split(" | ")[0] for line in leaderboard] == ["| 1", "| 2", "| 3"]
    assert "fin_agentbench_doc: ndcg@5 ↑" in markdown and "(500 resamples" in markdown
    assert "does not exist" in markdown
    rows = list(csv.DictReader(io.StringIO((out / "leaderboard.csv").read_text())))
    assert [r["row"] for r in rows] == ["1", "2", "3"]
    figure = lm_eval_figure(runs["greedy"], "fin_agentbench_doc", "ndcg@5")
    assert float(rows[0]["fin_agentbench_doc/ndcg@5"]) == pytest.approx(figure)
    assert rows[0]["fin_agentbench_doc/ndcg@5 interval"] == "bootstrap"
    assert float(rows[0]["fin_agentbench_doc/ndcg@5 low"]) <= figure <= float(rows[0]["fin_agentbench_doc/ndcg@5 high"])
    assert rows[0]["fin_ems/bleu"] == "" and rows[2]["fin_ems/bleu interval"] == "none"
    html = (out / "index.html").read_text()
    assert "does not exist" in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")


def test_hostile_text_is_escaped_everywhere(runs, tmp_path):
    hostile = hostile_copy(runs["greedy"], tmp_path / "hostile")
    out = tmp_path / "report"
    write_report([hostile], out)
    html = (out / "index.html").read_text()
    assert "<script>window.__pwned" not in html and "<img src=\"x\"" not in html
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html
    assert html.count("<script>") == 1  # the page's own


def test_names_are_plain_text_in_markdown_and_csv(runs, tmp_path):
    out = tmp_path / "report"
    write_report([runs["greedy"], runs["sampled"]], out, names=["=HYPERLINK(\"http://x\")", "a | b\nc"])
    rows = list(csv.reader(io.StringIO((out / "leaderboard.csv").read_text())))
    assert rows[1][1] == "'=HYPERLINK(\"http://x\")"  # a spreadsheet shows it, never runs it
    assert "| 2 | a \\| b c |" in (out / "leaderboard.md").read_text()


# ------------------------------------------------------------------------------ browser


def shown_run(task: str, row: int) -> str:
    """Whether the page's answer filter of ``task`` shows row ``row`` (set by its hash route)."""
    return f"(document.querySelector('#answers-{task} .filters a.on') || {{}}).getAttribute?.('data-row') === '{row}'"


def test_the_page_in_headless_chromium(runs, tmp_path):
    hostile = hostile_copy(runs["greedy"], tmp_path / "hostile")
    report = write_report_files([runs["greedy"], runs["sampled"], runs["ems"], hostile, tmp_path / "missing"],
                                tmp_path / "report")
    page = report.files["index.html"]
    reference_point = json.loads(only(runs["ems"] / "ems_details", "fin_ems-*.json").read_text())[
        "documents"][0]["reference_points"][0]
    with Browser(tmp_path / "profile") as browser:
        browser.open(page.as_uri())
        # nothing but the page itself is requested: scripts, styles and plots are inline
        assert browser.requested_urls() == [page.as_uri()]
        assert browser.evaluate("window.__pwned === undefined")

        # the table: four rows with intervals, sortable
        table = browser.evaluate("""Array.from(document.querySelectorAll('#board tbody tr')).map(tr => ({
            label: tr.cells[1].textContent.trim(),
            ndcg: tr.cells[2].getAttribute('data-v'),
            interval: tr.cells[2].querySelector('.ci') && tr.cells[2].querySelector('.ci').textContent}))""")
        assert len(table) == 4
        # the hostile model's name (its last path part) is text in the table
        assert "do_sample=True" in table[1]["label"] and '<img src="x" onerror="window.__pwned = 2">' in table[3]["label"]
        assert all(row["interval"].startswith("[") for row in table[:2])
        assert browser.evaluate("document.querySelectorAll('#unreadable li').length") == 1
        browser.evaluate("document.querySelector('#board th[data-col=\"2\"]').click()")
        ordered = browser.evaluate("Array.from(document.querySelectorAll('#board tbody tr')).map(tr => tr.cells[2].getAttribute('data-v'))")
        numbers = [float(v) for v in ordered if v]
        assert numbers == sorted(numbers, reverse=True) and ordered[-1] == ""  # no value: last
        assert browser.evaluate("document.querySelector('#board th[data-col=\"2\"]').getAttribute('aria-sort')") == "descending"

        # the plots: drawn bars with whiskers, and the EMS precision/recall point
        bars = browser.evaluate("""Array.from(document.querySelectorAll(
            'figure.bars[data-metric="fin_agentbench_doc/ndcg@5"] g.bar rect')).map(r => r.getBoundingClientRect().width)""")
        assert len(bars) == 3 and all(width >= 1 for width in bars)
        assert browser.evaluate("document.querySelectorAll('figure.bars g.bar path.wh').length") > 0
        assert browser.evaluate("document.querySelectorAll('figure.scatter g.point[data-row=\"3\"] circle').length") == 2

        # a per-answer view reached from the table: the EMS run's figure links to its answers
        browser.evaluate("document.querySelector('#board tbody tr[data-row=\"3\"] a[href^=\"#answers-fin_ems\"]').click()")
        browser.wait_until(shown_run("fin_ems", 3))
        view = browser.evaluate("""(() => {
            const section = document.getElementById('answers-fin_ems');
            const question = section.querySelector('details.question:not([hidden])');
            const answer = question.querySelector('.answer[data-row="3"]');
            return {hash: location.hash, open: question.open, visible: answer.offsetParent !== null,
                    height: answer.getBoundingClientRect().height, text: answer.innerText,
                    others: Array.from(document.querySelectorAll('#answers-fin_ems .answer:not([data-row="3"])')).length};
        })()""")
        assert view["hash"] == "#answers-fin_ems-r3" and view["open"] and view["visible"] and view["height"] > 50
        assert "Reference points" in view["text"] and reference_point in view["text"]
        assert "Answer points" in view["text"]
        # FinAgentBench: the sampled run's ranking against the grades, only that run shown
        browser.evaluate("location.hash = '#answers-fin_agentbench_doc-r2'")
        browser.wait_until(shown_run("fin_agentbench_doc", 2))
        ranking = browser.evaluate("""(() => {
            const section = document.getElementById('answers-fin_agentbench_doc');
            const shown = Array.from(section.querySelectorAll('.answer')).filter(a => !a.hidden);
            return {rows: shown.map(a => a.getAttribute('data-row')), text: shown[0].innerText};
        })()""")
        assert set(ranking["rows"]) == {"2"} and "graded rank" in ranking["text"]

        # hostile answers are text on the page, not markup
        browser.evaluate("location.hash = '#answers-fin_agentbench_doc-r4'")
        browser.wait_until(shown_run("fin_agentbench_doc", 4))
        shown = browser.evaluate("document.querySelector('#answers-fin_agentbench_doc .answer[data-row=\"4\"]').innerText")
        assert HOSTILE in shown and browser.evaluate("window.__pwned === undefined")
        assert browser.evaluate("document.querySelectorAll('.answer img').length") == 0

        screenshot = browser.screenshot(tmp_path / "report.png")
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 20_000
    print(f"screenshot: {screenshot}")
