"""``lm-eval-fin agreement`` on lm-eval output folders written in the tasks' shape
(tests/judged_runs.py): figures against people, between judges and of a judge with itself,
bad label files, and the label template."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from scipy import stats as scipy_stats
from sklearn.metrics import cohen_kappa_score

from lm_eval_fin import cli
from lm_eval_fin.agreement.criteria import families_of
from lm_eval_fin.agreement.study import judge_stability
from lm_eval_fin.benchmarks import all_benchmarks
from tests.judged_runs import ems_doc, lfqa_doc, write_run

FAMILIES = families_of(all_benchmarks())  # what each benchmark compares its judge on

JUDGE_A, JUDGE_B = "openai:http://127.0.0.1:1/v1#judge-a", "openai:http://127.0.0.1:1/v1#judge-b"
CRITERIA = ("accuracy", "numerical_correctness", "evidence_entailment")
# judge A's three scores for each model's answer to q0..q5; people's labels differ by a little
SCORES = {
    "alpha": [(5, 4, 5), (4, 4, 4), (5, 5, 4), (3, 4, 4), (4, 5, 5), (5, 3, 4)],
    "beta": [(2, 1, 3), (3, 2, 2), (1, 2, 1), (2, 3, 3), (3, 3, 2), (2, 2, 1)],
}
NUDGE = [(0, 0, -1), (0, 1, 0), (-1, 0, 0), (0, 0, 0), (1, -1, 0), (0, 0, 1)]


def strict_json(path: Path) -> dict:
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def people_scores(model, i):
    return tuple(max(1, min(5, s + d)) for s, d in zip(SCORES[model][i], NUDGE[i]))


def judged_runs(root: Path, judge=JUDGE_A, failed=(), scores=SCORES, date="2025-01-01T00-00-00.000001") -> Path:
    for model, rows in scores.items():
        docs = [lfqa_doc(f"q{i}", f"{model} says {i}", None if (model, i) in failed else s) for i, s in enumerate(rows)]
        write_run(root, "fin_lfqa", model, judge, docs, date=date)
    return root


def label_lines(models=("alpha", "beta"), annotator="a1"):
    return [{"task": "fin_lfqa", "id": f"q{i}", "model": m, "annotator": annotator,
             "labels": dict(zip(CRITERIA, people_scores(m, i)))} for m in models for i in range(6)]


def write_lines(path: Path, lines) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def agreement(capsys, *argv):
    code = cli.main(["agreement", "--resamples", "30", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_judge_against_people_through_the_console_script(tmp_path):
    runs = judged_runs(tmp_path / "runs")
    labels = write_lines(tmp_path / "labels.jsonl", label_lines())
    done = subprocess.run([Path(sys.executable).parent / "lm-eval-fin", "agreement", runs, "--labels", labels,
                           "--output_path", tmp_path / "out", "--resamples", "50"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "judge vs people" in done.stdout and "numerical_correctness" in done.stdout
    document = strict_json(tmp_path / "out" / "agreement.json")
    [comparison] = document["comparisons"]
    assert comparison["kind"] == "judge vs people" and comparison["judged"] == JUDGE_A
    assert document["judges"][0]["spec"] == JUDGE_A
    people = [people_scores(m, i) for m in SCORES for i in range(6)]
    judge = [s for m in SCORES for s in SCORES[m]]
    for k, name in enumerate(CRITERIA):
        x, y = [p[k] for p in people], [j[k] for j in judge]
        figures = comparison["criteria"][name]
        assert figures["n"] == 12
        assert figures["pearson"]["value"] == pytest.approx(scipy_stats.pearsonr(x, y).statistic)
        assert figures["kendall"]["value"] == pytest.approx(scipy_stats.kendalltau(x, y).statistic)
        assert figures["kappa"]["value"] == pytest.approx(
            cohen_kappa_score(x, y, labels=[1, 2, 3, 4, 5], weights="quadratic"))
        assert figures["pearson"]["low"] <= figures["pearson"]["value"] <= figures["pearson"]["high"]
    overall = comparison["criteria"]["overall"]
    assert overall["pearson"]["value"] == pytest.approx(
        scipy_stats.pearsonr([sum(p) for p in people], [sum(j) for j in judge]).statistic)
    board = comparison["leaderboard"]
    assert board["criterion"] == "overall" and [s["system"] for s in board["systems"]] == ["alpha", "beta"]
    assert board["same_top"] is True and board["flipped_pairs"]["value"] == 0


@pytest.mark.parametrize("line, message", [
    ({"id": "q9", "model": "alpha", "labels": {"accuracy": 3}}, "no answer in the runs fits id 'q9'"),
    ({"id": "q1", "model": "alpha", "labels": {"accuracy": 6}}, "accuracy = 6 is not an integer in 1..5"),
    ({"id": "q1", "model": "alpha", "labels": {"accuracy": 2.5}}, "accuracy = 2.5 is not an integer in 1..5"),
    ({"id": "q1", "model": "alpha", "labels": {"fluency": 3}}, "unknown criterion 'fluency' for fin_lfqa"),
    ({"id": "q1", "model": "alpha", "labels": {"accuracy": "good"}}, "label 'accuracy' must be a number"),
    ({"id": "q1", "labels": {"accuracy": 3}}, "fits 2 answers"),
    ({"id": "q1", "model": "alpha", "labels": {"accuracy": 3, "numerical_correctness": 3,
                                                "evidence_entailment": 3, "overall": 10}}, "overall = 10 but"),
    ({"model": "alpha", "labels": {"accuracy": 3}}, "'id' is missing"),
    ({"id": "q1", "models": ["alpha", "beta"], "preferred": "gamma"}, "'preferred' must be one of"),
])
def test_bad_labels_are_one_line_usage_errors(tmp_path, capsys, line, message):
    runs = judged_runs(tmp_path / "runs")
    labels = write_lines(tmp_path / "labels.jsonl", [label_lines()[0], line])
    code, out, err = agreement(capsys, runs, "--labels", labels)
    assert code == 2, err
    assert message in err and err.count("\n") == 1 and "labels.jsonl:2" in err
    assert out == ""


def test_other_usage_errors(tmp_path, capsys):
    runs = judged_runs(tmp_path / "runs")
    assert agreement(capsys, runs)[0] == 2  # one judge, one run, no labels: nothing to compare
    code, _, err = agreement(capsys, runs, "--labels", tmp_path / "missing.jsonl")
    assert code == 2 and "no such label file" in err
    code, _, err = agreement(capsys, runs, "--template", "3")
    assert code == 2 and "--template needs --output_path" in err
    code, _, err = agreement(capsys, tmp_path / "nowhere")
    assert code == 2 and "cannot read" in err


def test_a_judged_value_off_its_scale_is_a_usage_error(tmp_path, capsys):
    judged_runs(tmp_path / "a")
    judged_runs(tmp_path / "b", judge=JUDGE_B, scores={**SCORES, "beta": [(7, 1, 1)] + SCORES["beta"][1:]})
    code, _, err = agreement(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 2 and f"{JUDGE_B} against {JUDGE_A} on accuracy" in err and "outside the scale 1..5" in err


def test_two_judges_and_a_repeat(tmp_path, capsys):
    judged_runs(tmp_path / "a")
    judged_runs(tmp_path / "a", date="2025-01-02T00-00-00.000001")  # judge A again on the same answers
    swapped = {"alpha": SCORES["beta"], "beta": SCORES["alpha"]}  # judge B ranks the models the other way round
    judged_runs(tmp_path / "b", judge=JUDGE_B, scores=swapped, failed={("beta", 2)})
    # ...on different answers: B's runs answer with the same texts (same answers), so give B A's texts
    code, out, err = agreement(capsys, tmp_path / "a", tmp_path / "b", "--output_path", tmp_path / "out")
    assert code == 1  # judge B left an answer unjudged
    assert f"{JUDGE_B} left 1 compared answer unjudged" in err
    document = strict_json(tmp_path / "out" / "agreement.json")
    kinds = {c["kind"]: c for c in document["comparisons"]}
    assert set(kinds) == {"judge vs judge", "judge vs itself"}
    between = kinds["judge vs judge"]
    assert between["criteria"]["overall"]["n"] == 11
    assert between["skipped"]["overall"]["unjudged"] == 1
    assert between["leaderboard"]["flipped_pairs"]["value"] == 1 and between["leaderboard"]["same_top"] is False
    itself = kinds["judge vs itself"]["stability"]["overall"]
    assert itself["repeats"] == 2 and itself["n"] == 12 and itself["identical"]["value"] == 1
    assert "judge vs itself" in out and "identical" in out
    # read back per judged metric, as the report shows them
    from lm_eval_fin.agreement.figures import read_agreement
    from lm_eval_fin.report.judge_agreement import describe

    entries = {(e.kind, e.metric): e for e in read_agreement(tmp_path / "out", FAMILIES)}
    assert entries["judge vs itself", "judge_score"].identical.value == 1
    assert describe(entries["judge vs itself", "judge_score"]).startswith("judge vs itself (n 12): identical 100% [")
    assert entries["judge vs judge", "judge_score"].n == 11
    assert {metric for kind, metric in entries} == {"judge_accuracy", "judge_numerical", "judge_entailment",
                                                    "judge_score"}


def test_judge_stability_for_score_judge_repeat():
    first = {"q1": {"judge_accuracy": 4, "judge_score": 12}, "q2": {"judge_accuracy": 2, "judge_score": 6},
             "q3": {"judge_accuracy": 3, "judge_score": 9}}
    second = {"q1": {"judge_accuracy": 4, "judge_score": 11}, "q2": {"judge_accuracy": 2, "judge_score": 6},
              "q3": {"judge_score": 9}}
    found = judge_stability([first, second], "fin_lfqa-posthoc", FAMILIES, resamples=20)
    assert set(found) == {"accuracy", "overall"}
    assert found["accuracy"].n == 2 and found["accuracy"].unjudged == 1 and found["accuracy"].identical.value == 1
    assert found["overall"].identical.value == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="no judged criteria"):
        judge_stability([first, second], "fin_agentbench_doc", FAMILIES)


def test_several_annotators_and_preferences(tmp_path, capsys):
    runs = judged_runs(tmp_path / "runs")
    second = label_lines(annotator="a2")
    for line in second[:4]:
        line["labels"]["accuracy"] = 5 - (line["labels"]["accuracy"] == 5)  # a2 disagrees a little
    preferences = [{"task": "fin_lfqa", "id": f"q{i}", "models": ["alpha", "beta"],
                    "preferred": "alpha" if i else "beta", "annotator": "a1"} for i in range(6)]
    labels = write_lines(tmp_path / "labels.jsonl", label_lines() + second + preferences)
    code, out, err = agreement(capsys, runs, "--labels", labels, "--output_path", tmp_path / "out")
    assert code == 0, err
    kinds = [c["kind"] for c in strict_json(tmp_path / "out" / "agreement.json")["comparisons"]]
    assert kinds.count("judge vs annotator") == 1 and kinds.count("annotator vs annotator") == 1  # pooled
    comparisons = strict_json(tmp_path / "out" / "agreement.json")["comparisons"]
    mean = next(c for c in comparisons if c["kind"] == "judge vs people")
    assert mean["reference"] == "people (mean of 2 annotators)"
    assert mean["criteria"]["accuracy"]["kappa"] is None  # a mean of two ratings is not a rating...
    each = [c for c in comparisons if c["kind"] == "judge vs annotator"]
    assert all(c["criteria"]["accuracy"]["kappa"] is not None for c in each)  # ...each annotator's is
    ceiling = next(c for c in comparisons if c["kind"] == "annotator vs annotator")["criteria"]
    assert ceiling["numerical_correctness"]["exact"]["value"] == 1 and ceiling["accuracy"]["exact"]["value"] < 1
    preferred = next(c for c in comparisons if c["kind"] == "judge vs preferences")["criteria"]["overall"]
    assert preferred["n"] == 6 and preferred["exact"]["value"] == pytest.approx(5 / 6)


def ems_runs(root: Path) -> Path:
    points = ["revenue rose 5%", "margin fell", "guidance kept"]
    for model, scores in (("alpha", [1.0, 0.5, 0.0]), ("beta", [0.3, 0.0, None])):
        docs = [ems_doc(f"e{i}", f"{model} ems answer {i}", points, [s if s is None else min(1, s + i / 10)
                                                                    for s in scores]) for i in range(3)]
        write_run(root, "fin_ems", model, JUDGE_A, docs)
    return root


def test_ems_points_and_whole_answer_ratings(tmp_path, capsys):
    runs = ems_runs(tmp_path / "runs")
    points = ["revenue rose 5%", "margin fell", "guidance kept"]
    lines = [{"task": "fin_ems", "id": f"e{i}", "model": "alpha", "labels": {"ems": 6 + i, "points": [10, 4 + i, 1]},
              "reference_points": points} for i in range(3)]
    lines += [{"task": "fin_ems", "id": f"e{i}", "model": "beta", "labels": {"ems": 2, "points": [3, 1, 0]},
               "reference_points": points} for i in range(3)]
    labels = write_lines(tmp_path / "labels.jsonl", lines)
    code, out, err = agreement(capsys, runs, "--labels", labels, "--output_path", tmp_path / "out")
    assert code == 1 and "left 3 compared answers unjudged" in err  # beta's third point is never scored
    [comparison] = strict_json(tmp_path / "out" / "agreement.json")["comparisons"]
    figures = comparison["criteria"]
    assert figures["points"]["n"] == 15 and figures["points"]["clusters"] == 6
    assert figures["points"]["kappa"] is not None
    assert comparison["skipped"]["points"]["unjudged"] == 3
    assert figures["ems"]["kappa"] is None and figures["ems"]["n"] == 3  # the judge's F1 x 10 is continuous
    assert figures["recall"]["n"] == 3
    bad = write_lines(tmp_path / "bad.jsonl", [dict(lines[0], labels={"points": [11, 0, 0]})])
    code, _, err = agreement(capsys, runs, "--labels", bad)
    assert code == 2 and "point rating 11 is not an integer in 0..10" in err
    short = write_lines(tmp_path / "short.jsonl", [dict(lines[0], labels={"points": [1, 0]})])
    code, _, err = agreement(capsys, runs, "--labels", short)
    assert code == 2 and "2 'points' ratings for 3 reference points" in err


def test_template_draws_across_models_and_reads_back(tmp_path, capsys):
    runs = judged_runs(tmp_path / "runs", scores={**SCORES, "gamma": SCORES["beta"]})
    code, out, _ = agreement(capsys, "--template", "7", runs, "--output_path", tmp_path / "t", "--seed", "3")
    assert code == 0 and "7 answers from 3 model runs" in out
    lines = [json.loads(line) for line in (tmp_path / "t" / "labels_template.jsonl").read_text().splitlines()]
    assert len(lines) == 7 and not any("model" in line for line in lines)  # annotators rate blind
    assert len({line["id"] for line in lines[:6]}) == 6  # new questions first
    assert lines[0]["labels"] == dict.fromkeys(CRITERIA) and "settings" not in lines[0]["doc"]
    models = [next(m for m in SCORES if line["answer"].startswith(m)) if not line["answer"].startswith("gamma")
              else "gamma" for line in lines]
    assert sorted(models.count(m) for m in ("alpha", "beta", "gamma")) == [2, 2, 3]
    agreement(capsys, "--template", "7", runs, "--output_path", tmp_path / "again", "--seed", "3")
    assert (tmp_path / "again" / "labels_template.jsonl").read_text() == (
        tmp_path / "t" / "labels_template.jsonl").read_text()
    # an annotator fills the CSV in a spreadsheet; it is a label file as it stands
    with open(tmp_path / "t" / "labels_template.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row.update(annotator="a1", accuracy="4", numerical_correctness="3", evidence_entailment="5")
    rows[0]["accuracy"] = "2"
    filled = tmp_path / "filled.csv"
    with open(filled, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code, out, err = agreement(capsys, runs, "--labels", filled, "--output_path", tmp_path / "out")
    assert code == 0, err
    [comparison] = strict_json(tmp_path / "out" / "agreement.json")["comparisons"]
    assert comparison["criteria"]["accuracy"]["n"] == 7
    # the blank JSONL template is no label file yet
    code, _, err = agreement(capsys, runs, "--labels", tmp_path / "t" / "labels_template.jsonl")
    assert code == 2 and "no label is filled in (7 blank lines)" in err


def metric_cell(page: str, task: str, metric: str) -> str:
    """The metric-name cell of ``metric`` in ``task``'s table of the report page."""
    table = page.split(f'id="metrics-{task}"', 1)[1].split("</table>", 1)[0]
    return table.split(f'<tr data-metric="{metric}">', 1)[1].split("</td>", 1)[0]


def test_the_report_shows_agreement_next_to_each_judged_metric(tmp_path):
    """`agreement --output_path` then `report --agreement`, through the console scripts; without
    the file the page says the judge is not validated."""
    runs = judged_runs(tmp_path / "runs")
    labels = write_lines(tmp_path / "labels.jsonl", label_lines())
    script = Path(sys.executable).parent / "lm-eval-fin"
    done = subprocess.run([script, "agreement", runs, "--labels", labels, "--output_path", tmp_path / "study",
                           "--resamples", "50"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    figures = strict_json(tmp_path / "study" / "agreement.json")["comparisons"][0]["criteria"]

    def report(out, *extra):
        return subprocess.run([script, "report", runs, "--output_path", out, "--bootstrap_iters", "50", *extra],
                              capture_output=True, text=True, timeout=120)

    shown = report(tmp_path / "shown", "--agreement", tmp_path / "study" / "agreement.json")
    assert shown.returncode == 0, shown.stderr
    page = (tmp_path / "shown" / "index.html").read_text(encoding="utf-8")
    people = [people_scores(m, i) for m in SCORES for i in range(6)]
    judge = [s for m in SCORES for s in SCORES[m]]
    overall = scipy_stats.pearsonr([sum(p) for p in people], [sum(j) for j in judge]).statistic
    pearson = figures["overall"]["pearson"]
    cell = metric_cell(page, "fin_lfqa", "judge_score")
    assert f"judge vs people (n 12): Pearson {overall:.2f} [{pearson['low']:.2f}, {pearson['high']:.2f}]" in cell
    accuracy = scipy_stats.pearsonr([p[0] for p in people], [j[0] for j in judge]).statistic
    assert f"Pearson {accuracy:.2f}" in metric_cell(page, "fin_lfqa", "judge_accuracy")
    assert "judged · agreement shown" in page  # the headline column's mark
    assert "not validated here" not in page
    markdown = (tmp_path / "shown" / "leaderboard.md").read_text(encoding="utf-8")
    assert "Judge agreement (" in markdown and "judge_score" in markdown

    bare = report(tmp_path / "bare")
    assert bare.returncode == 0, bare.stderr
    page = (tmp_path / "bare" / "index.html").read_text(encoding="utf-8")
    assert "judge vs people" not in page
    assert "No judge agreement figures for fin_lfqa: nothing here shows that the judge" in page
    assert "judged · not validated here" in page
    assert "No judge agreement figures for fin_lfqa" in (tmp_path / "bare" / "leaderboard.md").read_text("utf-8")


@pytest.mark.parametrize("content, message", [
    ('{"format": "lm-eval-fin/agreement-1", "comparisons": [{"criteria": {"x": {"n": NaN}}}]}', "NaN is not JSON"),
    ('{"format": "something else", "comparisons": []}', "not an `lm-eval-fin agreement` figures file"),
    ('{"format": "lm-eval-fin/agreement-1", "comparisons": {}}', '"comparisons" is not a list'),
])
def test_a_bad_agreement_file_stops_the_report_in_one_line(tmp_path, capsys, content, message):
    runs = judged_runs(tmp_path / "runs")
    bad = tmp_path / "agreement.json"
    bad.write_text(content, encoding="utf-8")
    code = cli.main(["report", str(runs), "--output_path", str(tmp_path / "out"), "--agreement", str(bad)])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and message in err and str(bad) in err
    assert not (tmp_path / "out").exists()


def test_score_judge_repeat_prints_the_judges_agreement_with_itself(tmp_path):
    """What `score --judge_repeat N` prints after its N scorings: the results files they wrote."""
    from lm_eval_fin.harness.rescore import judge_stability as printed_stability

    judged_runs(tmp_path / "runs")
    judged_runs(tmp_path / "runs", date="2025-01-02T00-00-00.000001")  # the same judge on the same answers again
    results = sorted((tmp_path / "runs").rglob("results_*.json"))
    assert len(results) == 4  # two models, two scorings
    text = printed_stability(results, all_benchmarks())
    assert f"fin_lfqa · judge vs itself: {JUDGE_A}" in text
    overall = next(line for line in text.splitlines() if line.startswith("overall"))
    assert overall.split()[1:4] == ["2", "12", "100%"]  # 2 runs, 12 answers, all identical
    assert printed_stability(results[:1], all_benchmarks()) == "no judged answer was repeated"
