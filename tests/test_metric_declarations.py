"""Each metric is declared once, in its benchmark's package (lm_eval_fin.harness.metrics): every
task YAML's metric_list says what the declarations say, and what is built from them (scales,
headline metrics, agreement criteria) names only declared metrics."""

import dataclasses

import pytest

from lm_eval_fin.agreement.criteria import Criterion, RatingScale, families_of
from lm_eval_fin.benchmarks import all_benchmarks
from lm_eval_fin.harness import taskfiles
from lm_eval_fin.harness.benchmark import Benchmark, benchmark_of
from lm_eval_fin.harness.metrics import (
    MEAN,
    TOTAL,
    JudgedMetric,
    Metric,
    agreement_family,
    metric_list_problems,
)
from lm_eval_fin.measures.scales import scale_of, share, total

BENCHMARKS = all_benchmarks()


@pytest.mark.parametrize("task", sorted(taskfiles.task_configs()))
def test_every_task_yaml_lists_its_declared_metrics(task):
    benchmark = benchmark_of(task, BENCHMARKS)
    assert benchmark is not None, f"{task}: a task YAML of no benchmark"
    metric_list = taskfiles.task_config(task).get("metric_list") or []
    assert metric_list_problems(task, benchmark.metrics, metric_list) == []


def test_every_benchmark_declares_each_metric_once_with_its_scale():
    for benchmark in BENCHMARKS:
        names = [m.name for m in benchmark.metrics]
        assert len(names) == len(set(names)), benchmark.name
        for task in benchmark.tasks:
            for name in taskfiles.metric_names(task):
                assert scale_of(name, benchmark.scales) is not None, (task, name)
        for task, headline in benchmark.headline.items():
            assert set(headline) <= {m.name for m in benchmark.task_metrics(task)}, task
        # a judged metric's scale says a judge made it; judged benchmarks say what agreement compares
        judged = [m for m in benchmark.metrics if isinstance(m, JudgedMetric)]
        assert all(m.scale.judged for m in judged) and benchmark.judged == bool(judged)
        if benchmark.agreement is not None:
            criteria = (*benchmark.agreement.criteria, *benchmark.agreement.judge_criteria)
            assert {c.metric for c in criteria} <= {m.name for m in judged}, benchmark.name


def test_a_yaml_that_says_otherwise_is_caught():
    metrics = (Metric("a", True, share("x")), Metric("n", False, total("x"), aggregation=TOTAL),
               Metric("only_b", True, share("x"), tasks=("t_b",)))
    listed = [{"metric": "a", "aggregation": "mean", "higher_is_better": True},
              {"metric": "n", "aggregation": "utils.total", "higher_is_better": False}]
    assert metric_list_problems("t", metrics, listed) == []
    assert metric_list_problems("t_b", metrics, listed) == ["t_b: only_b is declared but not listed"]
    wrong = [{"metric": "a", "aggregation": "utils.total", "higher_is_better": False},
             {"metric": "extra", "aggregation": "mean", "higher_is_better": True}]
    assert metric_list_problems("t", metrics, wrong) == [
        "t: extra is listed but not declared",
        "t: n is declared but not listed",
        "t: a aggregates by 'utils.total', declared mean",
        "t: a has higher_is_better False, declared True",
    ]
    with pytest.raises(ValueError, match="aggregation 'median'"):
        Metric("m", True, share("x"), aggregation="median")
    assert MEAN != TOTAL


def test_a_judged_metrics_criteria_make_the_agreement_family():
    rating = Criterion("rating", "", RatingScale(0, 1), None, "a person's rating", people=True, judges=False)
    same = Criterion("score", "", RatingScale(0, 1), None, "the judge's score", people=False)
    judged = JudgedMetric("judge_score", True, share("x"), criteria=(rating, same))
    assert judged.scale.judged and [c.metric for c in judged.criteria] == ["judge_score", "judge_score"]
    family = agreement_family("toy", (Metric("other", True, share("x")), judged), main="rating",
                              main_judged="score", reference_field="reference")
    assert [c.name for c in family.criteria] == ["rating"] and [c.name for c in family.judge_criteria] == ["score"]
    with pytest.raises(ValueError, match="read from another metric"):
        JudgedMetric("judge_score", True, share("x"), criteria=(dataclasses.replace(rating, metric="other"),))
    # a benchmark's headline names only what it declares
    with pytest.raises(ValueError, match="does not declare"):
        Benchmark("toy", ("toy",), metrics=(judged,), headline={"toy": ("missing",)})
    toy = Benchmark("toy", ("toy",), metrics=(judged,), headline={"toy": ("judge_score",)}, agreement=family)
    assert toy.judged and families_of([toy, *BENCHMARKS])[0] is family


def test_the_shipped_families_are_the_judged_benchmarks():
    assert [f.name for f in families_of(BENCHMARKS)] == [b.name for b in BENCHMARKS if b.judged]
