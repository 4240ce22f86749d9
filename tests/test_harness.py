"""The harness layer on its own: settings read once and checked, the filter stage, the
per-document metric values and aggregations, the task YAMLs read as data, logged samples and
their replay."""

import json
import math
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lm_eval_fin.benchmarks import all_benchmarks
from lm_eval_fin.harness import replay, stage, taskfiles
from lm_eval_fin.harness.benchmark import Benchmark, benchmark_of
from lm_eval_fin.harness.settings import (
    RunSettings,
    Setting,
    SettingsError,
    check_user_metadata,
    positive_int,
    read_settings,
)
from lm_eval_fin.harness.task import metric_values, total
from lm_eval_fin.outputs import records
from lm_eval_fin.outputs.runfiles import answer_of
from lm_eval_fin.text.cleantext import MAX_ANSWER_CHARS

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


def test_benchmarks_are_every_package_whose_task_module_defines_one(tmp_path, monkeypatch):
    import lm_eval_fin.benchmarks as package
    from lm_eval_fin.benchmarks.fin_agentbench.task import BENCHMARK as fin_agentbench
    from lm_eval_fin.benchmarks.fin_ems.task import BENCHMARK as fin_ems
    from lm_eval_fin.benchmarks.fin_lfqa.task import BENCHMARK as fin_lfqa

    assert all_benchmarks() == (fin_agentbench, fin_ems, fin_lfqa)  # in the order of their names
    # a toy benchmark in another folder of the package path is found in its place by name; a
    # package without a task module, a task module without BENCHMARK and a loose module are not
    for folder, task in (
        ("fin_b_toy", "import dataclasses\nfrom lm_eval_fin.benchmarks.fin_ems.task import BENCHMARK as EMS\n"
         "BENCHMARK = dataclasses.replace(EMS, name='fin_b_toy')\n"),
        ("fin_c_no_task", None),
        ("fin_d_no_benchmark", "NOT_A_BENCHMARK = 1\n"),
    ):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
        if task is not None:
            (tmp_path / folder / "task.py").write_text(task)
    (tmp_path / "fin_e_loose.py").write_text("BENCHMARK = 1\n")
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    try:
        assert [b.name for b in all_benchmarks()] == ["fin_agentbench", "fin_b_toy", "fin_ems", "fin_lfqa"]
    finally:
        toys = tuple(f"lm_eval_fin.benchmarks.{p.stem}" for p in tmp_path.iterdir())
        for name in [n for n in sys.modules if n.startswith(toys)]:
            del sys.modules[name]


def test_one_rule_says_which_benchmark_owns_a_task():
    from collections import namedtuple

    from lm_eval_fin.agreement.criteria import family_of
    from lm_eval_fin.export.facts import tables_of
    from lm_eval_fin.outputs.owners import owner_of
    from lm_eval_fin.report.catalog import Catalog

    named = namedtuple("named", "name")
    short, long = named("fin_lfqa"), named("fin_lfqa_x")
    for candidates in ((short, long), (long, short)):  # the longest name wins, in any order
        assert owner_of("fin_lfqa_x_long", candidates) is long
        assert owner_of("fin_lfqa-test", candidates) is short
        assert owner_of("fin_lfqax", candidates) is None
    # the harness, the report, the exports and agreement ask it and agree on every shipped task
    benchmarks = all_benchmarks()
    catalog = Catalog(benchmarks)
    for task in [*taskfiles.names(), "fin_emsx", "other"]:
        owner = benchmark_of(task, benchmarks)
        name = owner.name if owner else None
        assert (catalog.entry(task) or named(None)).name == name, task
        assert (tables_of(task) or named(None)).name == name, task
        family = family_of(task)
        assert family is None or family.name == name, task
        assert (family is not None) == (owner is not None and owner.judged), task


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
    with pytest.raises(SettingsError, match=r"t: unknown --metadata key\(s\) \['max_scor'\] \(did you mean 'max_score'\?\); known: .*'max_score'"):
        check_user_metadata("t", {"max_scor": 3}, SETTINGS)


class ToyJudgeless:
    """A benchmark's stage: one detail per document, counting its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, answers, docs, settings):
        self.calls += 1
        return [{"length": len(answer), "task": settings.task} for answer in answers]


def toy_docs(n, task="fin_ems"):
    settings = read_settings(task, {"judge": "none"})
    return [{"id": f"d{i}", "prompt": f"What happened to revenue in quarter {i}?", "settings": settings.to_json()}
            for i in range(n)]


def test_the_filter_stage_scores_every_answer_of_a_task_in_one_call(monkeypatch):
    monkeypatch.delenv(stage.PREDICT_ONLY_ENV, raising=False)
    score = ToyJudgeless()
    apply = stage.filter_function(score, prompt=lambda doc: doc["prompt"])
    docs = toy_docs(3)
    resps = [["Revenue rose 5% on cloud demand."], ["What happened to revenue in quarter 1?"], ["again and again " * 20_000]]
    filtered = apply(resps, docs)
    assert score.calls == 1 and len(filtered) == 3 and all(isinstance(text, str) for text in filtered)
    decoded = [records.decode(text) for text in filtered]
    assert [d["length"] for d in decoded] == [32, 38, MAX_ANSWER_CHARS]
    assert [d["truncated_answer"] for d in decoded] == [False, False, True]  # read as the parsers read it
    assert [d["degenerate"] for d in decoded] == [None, "echo", "repetition"]
    assert decoded[0]["answer"] == "Revenue rose 5% on cloud demand." and decoded[0]["task"] == "fin_ems"
    assert apply([], []) == []


def test_predict_only_scores_nothing_and_keeps_what_the_benchmark_asks(monkeypatch):
    monkeypatch.setenv(stage.PREDICT_ONLY_ENV, "1")
    score = ToyJudgeless()
    apply = stage.filter_function(score, keep=lambda docs: [{"trace": doc["id"]} for doc in docs])
    decoded = [records.decode(text) for text in apply([["a"], ["b"]], toy_docs(2))]
    assert score.calls == 0
    assert decoded == [{"format": records.FORMAT, "answer": "a", "truncated_answer": False, "trace": "d0"},
                       {"format": records.FORMAT, "answer": "b", "truncated_answer": False, "trace": "d1"}]


@pytest.mark.parametrize("argv, expected", [
    (["/venv/bin/lm_eval", "run", "--predict_only", "--tasks", "x"], True),
    (["lm-eval", "run", "-x"], True),
    (["lm-eval", "run", "--predict_only=True"], True),
    (["lm-eval", "run", "--tasks", "x"], False),
    (["/venv/lib/python3.11/site-packages/lm_eval/__main__.py", "-x"], True),  # python -m lm_eval
    (["/venv/bin/pytest", "--predict_only"], False),  # not lm-eval's command line
    (["/venv/lib/python3.11/site-packages/pytest/__main__.py", "-x"], False),  # python -m pytest -x
    ([], False),
])
def test_predict_only_is_read_from_lm_evals_command_line(monkeypatch, argv, expected):
    monkeypatch.delenv(stage.PREDICT_ONLY_ENV, raising=False)
    assert stage.predict_only(argv) is expected


def test_a_stage_that_loses_documents_is_a_bug_not_a_silent_misalignment(monkeypatch):
    monkeypatch.delenv(stage.PREDICT_ONLY_ENV, raising=False)
    apply = stage.filter_function(lambda answers, docs, settings: [{}])
    with pytest.raises(RuntimeError, match="returned 1 records for 2 documents"):
        apply([["a"], ["b"]], toy_docs(2))


def test_a_judge_that_cannot_work_leaves_values_undefined_and_is_recorded(tmp_path, judge_cache):
    settings = read_settings("t", {"judge": f"hf:{tmp_path / 'no-such-model'}"})

    def work(judge):
        raise ConnectionError("the judge's backend went away")

    with pytest.raises(stage.JudgeUnavailable, match="ConnectionError: the judge's backend went away"):
        stage.run_with_judge(settings, work)
    before = len(stage.FAILURES)
    stage.record_judge_failures("t", 0, 0, 4, None)
    assert len(stage.FAILURES) == before
    stage.record_judge_failures("t", 1, 2, 4, "HTTP 500")
    assert stage.FAILURES[-1] == stage.JudgeFailures("t", 1, 2, 4, "HTTP 500")


def test_the_listed_metrics_defined_for_a_document_as_numbers():
    settings = read_settings("fin_agentbench_doc", {"judge": "none"})
    values = metric_values(settings, {"ndcg@5": 1, "map@5": math.nan, "parse_failure": True})
    # in the YAML's order; NaN and a metric not given are undefined: left out, never None
    assert list(values) == ["ndcg@5", "parse_failure"]
    assert values["ndcg@5"] == 1.0 and isinstance(values["ndcg@5"], float) and values["parse_failure"] == 1.0
    with pytest.raises(KeyError, match="does not list: \\['ndcg@7'\\]"):
        metric_values(settings, {"ndcg@7": 1.0})


@given(st.lists(st.floats(min_value=0, max_value=100), max_size=20))
def test_total_is_a_number_for_every_resample(items):
    """lm-eval 0.5 bootstraps a standard error for every aggregation but its mean: the
    aggregation must give a number for any list of defined values, the empty one included."""
    assert total(items) == pytest.approx(sum(items)) and isinstance(total(items), float)


def test_the_yaml_is_the_one_place_for_directions_and_budgets():
    directions = taskfiles.higher_is_better("fin_lfqa")
    assert directions["judge_score"] is True and directions["judge_failure"] is False
    assert taskfiles.max_gen_toks("fin_ems") == 1024
    assert set(taskfiles.task_configs()) >= {"fin_ems", "fin_lfqa", "fin_lfqa-test", "fin_agentbench_doc"}
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


def test_answer_of_reads_the_record_then_the_filtered_then_the_raw_response():
    sample = json.loads(json.dumps({"resps": [["raw answer"]], "filtered_resps": ["filtered answer"]}))
    assert answer_of(sample) == "filtered answer"
    assert answer_of({"resps": [["raw answer"]]}) == "raw answer"
    assert answer_of({"resps": [["raw"]], "filtered_resps": [records.encode("as scored", {"x": 1})]}) == "as scored"


@given(st.recursive(st.none() | st.booleans() | st.floats() | st.text(), lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8))
def test_records_are_strict_json_whatever_the_details(details):
    text = records.encode("answer", {"details": details})
    decoded = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in a record"))
    assert decoded["answer"] == "answer" and records.decode(text) == decoded


def test_a_replay_serves_the_logged_documents_with_the_scoring_judge(tmp_path, monkeypatch):
    agentbench = next(b for b in all_benchmarks() if b.name == "fin_agentbench")
    logged = agentbench.read_settings("fin_agentbench_doc", {"judge": "none", "gain": "linear"})
    samples = tmp_path / "samples_fin_agentbench_doc_2026-01-01T00-00-00.000001.jsonl"
    lines = [{"doc_id": i, "doc": {"id": f"q{i}", "prompt": "p", "settings": logged.to_json()},
              "resps": [[f"[{i}, 0]"]], "filtered_resps": [f"[{i}, 0]"]} for i in (1, 0)]
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines))
    plan = tmp_path / "plan.json"
    replay.Plan({"fin_agentbench_doc": str(samples)}, "openai:http://h:1/v1#m", {"seed": 3}).write(plan)
    monkeypatch.setenv(replay.REPLAY_ENV, str(plan))
    docs, settings = replay.logged_documents("fin_agentbench_doc")
    assert [doc["id"] for doc in docs] == ["q0", "q1"] and "settings" not in docs[0]  # lm-eval's order
    assert settings.judge == "openai:http://h:1/v1#m" and settings.judge_options == {"seed": 3}
    assert settings["gain"] == "linear"  # the rest as the run was made
    assert replay.logged_answer("fin_agentbench_doc", {"id": "q1"})[0] == "[1, 0]"
    assert replay.logged_documents("fin_ems") is None
    with pytest.raises(replay.ReplayError, match="no logged answer for document 'q9'"):
        replay.logged_answer("fin_agentbench_doc", {"id": "q9"})


def test_the_context_fallback_reads_a_model_as_lm_evals_own_helper_does():
    """lm-eval 0.5 has no ``resolve_max_length``: :mod:`~lm_eval_fin.harness.compat` reads the
    context the same way where it is missing (the text model's config, the tokenizer, the default)."""
    from types import SimpleNamespace

    from lm_eval.models.utils import resolve_max_length
    from transformers import GPT2Config, LlamaConfig

    from lm_eval_fin.harness import compat

    cases = [
        (GPT2Config(n_positions=512), None),
        (LlamaConfig(max_position_embeddings=8192), None),
        (SimpleNamespace(max_position_embeddings=1200, text_config=SimpleNamespace(max_position_embeddings=32768)), None),
        (SimpleNamespace(), SimpleNamespace(model_max_length=4096)),
        (SimpleNamespace(), SimpleNamespace(model_max_length=compat.TOKENIZER_INFINITY)),
        (SimpleNamespace(), None),
    ]
    found = [compat.max_length_of(config, tokenizer) for config, tokenizer in cases]
    assert found == [resolve_max_length(config, tokenizer) for config, tokenizer in cases]
    assert found == [512, 8192, 32768, 4096, 2048, 2048]
    assert compat.resolve_max_length(*cases[1]) == 8192
