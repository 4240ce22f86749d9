"""fin_ems task glue in-process: data loading, settings, prompt fitting, metric names."""

import json

import pytest

from lm_eval_fin import paths
from lm_eval_fin.ems import harness

DEMO = str(paths.data_path("ems_demo"))


def test_missing_data_path_is_a_clear_error():
    with pytest.raises(ValueError, match="data_path.*lm-eval-fin build earnings-call"):
        harness.load_dataset(version=1.0)


def test_demo_set_loads_whole_without_a_tokenizer(monkeypatch):
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE", raising=False)
    docs = list(harness.load_dataset(data_path=DEMO)["test"])
    assert [d["id"] for d in docs] == [
        "NWND-2024-10-24-q1",
        "NWND-2024-10-24-q5",
        "CTSO-2024-11-06-q1",
        "CTSO-2024-11-06-q5",
    ]
    assert all(
        "SYNTHETIC" in d["transcript"] and not d["truncated"] and d["transcript_tokens"] == -1 for d in docs
    )
    assert json.loads(docs[0]["scoring"])["judge"] is None
    prompt = harness.doc_to_text(docs[0])
    assert prompt.index(docs[0]["transcript"]) < prompt.index(docs[0]["question"])  # the question comes last


def test_settings_from_metadata_and_environment(monkeypatch):
    monkeypatch.setenv("LM_EVAL_FIN_JUDGE", "hf:/some/model")
    settings = harness.scoring_settings({"judge_max_tokens": 64, "max_score": 5, "dtype": "float32"})
    assert settings["judge"] == "hf:/some/model"
    assert settings["judge_options"] == {"max_tokens": 64}
    assert settings["max_score"] == 5 and settings["max_attempts"] == 3
    assert settings["extract_max_tokens"] is None  # each text its own budget
    assert harness.scoring_settings({"extract_max_tokens": 4096})["extract_max_tokens"] == 4096
    with pytest.raises(ValueError, match="extract_max_tokens must be a positive integer"):
        harness.scoring_settings({"extract_max_tokens": 0})
    assert harness.scoring_settings({"judge": "none"})["judge"] is None  # explicit offline wins over the env
    with pytest.raises(ValueError, match="max_score must be a positive integer"):
        harness.scoring_settings({"max_score": 0})
    with pytest.raises(ValueError, match="max_attempts"):
        harness.scoring_settings({"max_attempts": "3"})
    with pytest.raises(ValueError, match=r"unknown judge option\(s\) \['judge_max_token'\]"):
        harness.scoring_settings({"judge_max_token": 64})


def test_metric_names_follow_the_judge_setting():
    base = {"id": "x", "reference": "Revenue grew 5%.", "truncated": False}
    with_judge = harness.process_results(
        dict(base, scoring=json.dumps({"judge": "hf:m"})), ["Revenue grew 5%."]
    )
    offline = harness.process_results(dict(base, scoring=json.dumps({"judge": None})), ["Revenue grew 5%."])
    assert with_judge["rouge_l_f1"] == offline["rouge_l_f1"] == 1.0
    assert {
        "ems_llm_f1",
        "ems_rouge_f1",
        "ems_bertscore_f1",
        "ems_parse_failures",
        "ems_extract_fallbacks",
        "ems_judge_model_calls",
    } <= set(with_judge)
    assert not any("offline" in name for name in with_judge)
    assert {"ems_offline_rouge_f1", "ems_offline_bertscore_f1"} <= set(offline)
    assert not any(name.startswith(("ems_llm", "ems_judge", "ems_parse", "ems_extract")) for name in offline)
    assert offline["bleu"] == [
        "bleu",
        {
            "id": "x",
            "answer": "Revenue grew 5%.",
            "reference": "Revenue grew 5%.",
            "scoring": json.dumps({"judge": None}),
        },
    ]
    assert harness.process_results(dict(base, scoring=json.dumps({"judge": None})), [])["rouge_l_f1"] == 0.0


def test_transcripts_are_cut_to_fit_and_the_question_survives(embedded_model_dir):
    max_length, max_gen_toks = 480, 16
    metadata = {
        "pretrained": str(embedded_model_dir),
        "max_length": max_length,
        "max_gen_toks": max_gen_toks,
        "judge": "none",
    }
    docs = list(harness.load_dataset(data_path=DEMO, **metadata)["test"])
    assert all(d["truncated"] and d["transcript_tokens"] > 200 for d in docs)
    fitter = harness.prompt_fitter(metadata)
    for doc in docs:
        prompt = fitter.tokenizer.apply_chat_template(
            [{"role": "user", "content": harness.doc_to_text(doc)}],
            tokenize=False,
            add_generation_prompt=True,
        )
        assert (
            len(fitter.tokenizer(prompt, add_special_tokens=False)["input_ids"]) <= max_length - max_gen_toks
        )
        assert doc["question"] in prompt and harness.TRUNCATION_MARK in doc["transcript"]
        assert doc["transcript"].startswith("SYNTHETIC DEMO TRANSCRIPT")  # the beginning is kept

    roomy = list(harness.load_dataset(data_path=DEMO, **dict(metadata, max_length=8192))["test"])
    assert not any(d["truncated"] for d in roomy)
    with pytest.raises(ValueError, match="cannot hold the prompt"):
        harness.load_dataset(data_path=DEMO, **dict(metadata, max_length=200))


def test_unloadable_tokenizer_means_no_fitting(tmp_path, caplog):
    docs = list(
        harness.load_dataset(data_path=DEMO, pretrained=str(tmp_path / "no-model"), judge="none")["test"]
    )
    assert not any(d["truncated"] for d in docs)
    assert "not fitted to the context" in caplog.text


def test_the_task_lists_every_metric_the_harness_reports():
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    config = yaml.load((paths.tasks_dir() / "fin_ems" / "fin_ems.yaml").read_text(), Loader=Loader)
    listed = {entry["metric"] for entry in config["metric_list"]}
    base = {"id": "x", "reference": "r", "truncated": False}
    for judge in ("hf:m", None):
        reported = harness.process_results(dict(base, scoring=json.dumps({"judge": judge})), ["a"])
        assert set(reported) <= listed, set(reported) - listed
    # `lm-eval-fin score` reads the direction of the corpus metrics from the module: same as the YAML
    directions = {entry["metric"]: entry["higher_is_better"] for entry in config["metric_list"]}
    assert harness.HIGHER_IS_BETTER == {name: directions[name] for name in harness.HIGHER_IS_BETTER}
    assert set(harness.HIGHER_IS_BETTER) >= {"ems_llm_f1", "ems_offline_rouge_f1", "ems_parse_failures"}


def test_judge_options_in_the_metadata_and_the_environment_reach_the_judge(monkeypatch):
    monkeypatch.setenv("LM_EVAL_FIN_JUDGE_OPTIONS", '{"max_retries": 1, "concurrency": 3}')
    settings = harness.scoring_settings(
        {"judge": "openai:http://127.0.0.1:9/v1#m", "judge_options": {"max_retries": 2}, "judge_timeout_s": 5}
    )
    assert settings["judge_options"] == {"max_retries": 2, "timeout_s": 5}
    judge = harness._judge_for(settings)  # loading is lazy: no server is reached
    assert (judge.options.max_retries, judge.options.concurrency, judge.options.timeout_s) == (2, 3, 5)
    with pytest.raises(ValueError, match="unknown judge option"):
        harness.scoring_settings({"judge_options": {"no_such_option": 1}})
