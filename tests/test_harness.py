"""The harness layer on its own: settings read once and checked, the memoised corpus pass,
the task YAMLs read as data, and logged samples."""

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lm_eval_fin.benchmarks import all_benchmarks
from lm_eval_fin.harness import corpus, taskfiles
from lm_eval_fin.harness.benchmark import Benchmark, benchmark_of
from lm_eval_fin.harness.settings import (
    RunSettings,
    Setting,
    SettingsError,
    check_user_metadata,
    positive_int,
    read_settings,
)
from lm_eval_fin.jsonl import answer_of

SETTINGS = (Setting("max_score", 10, positive_int, "top of the scale"),)


def test_one_rule_for_no_judge(monkeypatch):
    monkeypatch.setenv("LM_EVAL_FIN_JUDGE", "hf:/env/model")
    assert read_settings("t", {}).judge == "hf:/env/model"
    for off in ("none", "NONE", "offline", ""):
        assert read_settings("t", {"judge": off}).judge is None
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE")
    assert read_settings("t", {}).judge is None
    # canonical spec: the trailing slash of a base URL is dropped
    assert read_settings("t", {"judge": "openai:http://h:1/v1/#m"}).judge == "openai:http://h:1/v1#m"


def test_every_benchmark_rejects_a_bad_judge_spec_when_its_data_loads(monkeypatch):
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE", raising=False)
    for benchmark in all_benchmarks():
        with pytest.raises(SettingsError, match=f"{benchmark.tasks[0]}: metadata judge: bad judge spec 'gpt-4o'"):
            benchmark.read_settings(benchmark.tasks[0], {"judge": "gpt-4o"})


def test_settings_are_checked_and_travel_as_json():
    settings = read_settings("t", {"max_score": 5, "judge_seed": 3, "pretrained": "model args pass"}, SETTINGS)
    assert settings["max_score"] == 5 and settings["max_attempts"] == 3
    assert RunSettings.from_json(settings.to_json()) == settings
    assert settings.options().seed == 3
    with pytest.raises(SettingsError, match="t: metadata max_score: expected a positive integer, got 0"):
        read_settings("t", {"max_score": 0}, SETTINGS)
    with pytest.raises(SettingsError, match=r"t: unknown metadata key\(s\) \['bertscore_modle'\]"):
        read_settings("t", {"bertscore_modle": "x"}, SETTINGS)


def test_run_checks_the_users_own_metadata_strictly():
    check_user_metadata("t", {"max_score": 3, "judge_seed": 1, "version": 1}, SETTINGS)
    with pytest.raises(SettingsError, match=r"t: unknown --metadata key\(s\) \['max_scor'\]; known: .*'max_score'"):
        check_user_metadata("t", {"max_scor": 3}, SETTINGS)


def _counting_pass(name, calls):
    def compute(items, settings):
        calls.append(len(items))
        return {"a": float(len(items)), "b": settings["max_attempts"]}

    return corpus.CorpusMetrics(name, ("a", "b"), compute)


def test_the_corpus_pass_runs_once_per_run_whatever_the_number_of_metrics():
    calls = []
    metrics = _counting_pass("test_bench_once", calls)
    settings = read_settings("t", {"judge": "none"}).to_json()
    docs = [{"id": i, "settings": settings} for i in range(3)]
    items = [metrics.items(doc, {"answer": f"a{doc['id']}"}) for doc in docs]
    assert corpus.corpus_metric([i["a"] for i in items]) == 3.0
    assert corpus.corpus_metric([i["b"] for i in items]) == 3.0
    assert calls == [3]
    # another run (other answers) is another pass; a metric the pass lacks is NaN
    other = [metrics.items(doc, {"answer": "changed"}) for doc in docs]
    assert corpus.corpus_metric([i["a"] for i in other]) == 3.0 and calls == [3, 3]
    assert math.isnan(corpus.corpus_metric([]))
    assert str(items[0]["a"]) == "corpus-level a (doc 0)"


def test_judge_failures_are_remembered_for_the_exit_status():
    before = len(corpus.FAILURES)
    corpus.record_judge_failures("t", 0, 0, 4, None)
    assert len(corpus.FAILURES) == before
    corpus.record_judge_failures("t", 1, 2, 4, "HTTP 500")
    assert corpus.FAILURES[-1] == corpus.JudgeFailures("t", 1, 2, 4, "HTTP 500")


def test_the_yaml_is_the_one_place_for_directions_and_budgets():
    directions = taskfiles.higher_is_better("fin_lfqa")
    assert directions["judge_score"] is True and directions["judge_failure"] is False
    assert taskfiles.max_gen_toks("fin_ems") == 1024
    assert set(taskfiles.task_configs()) >= {"fin_ems", "fin_lfqa", "fin_lfqa_test", "fin_agentbench_doc"}
    with pytest.raises(KeyError, match="no task 'fin_nothing'"):
        taskfiles.task_config("fin_nothing")


def test_each_task_belongs_to_one_benchmark():
    benchmarks = all_benchmarks()
    for benchmark in benchmarks:
        for task in benchmark.tasks:
            assert benchmark_of(task, benchmarks) is benchmark
            assert task in taskfiles.task_configs()
    toy = Benchmark("fin_ems_long", ("fin_ems_long",))
    assert benchmark_of("fin_ems_long_x", [*benchmarks, toy]) is toy  # the longest name wins


@given(st.recursive(st.none() | st.text() | st.integers(), lambda inner: st.lists(inner, max_size=3), max_leaves=6))
def test_answer_of_any_logged_value_is_text(value):
    assert isinstance(answer_of({"resps": value, "filtered_resps": value}), str)


def test_answer_of_prefers_filtered_responses():
    sample = json.loads(json.dumps({"resps": [["raw answer"]], "filtered_resps": ["filtered answer"]}))
    assert answer_of(sample) == "filtered answer"
    assert answer_of({"resps": [["raw answer"]]}) == "raw answer"
