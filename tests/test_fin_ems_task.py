"""fin_ems task glue in-process: data loading, settings, prompt fitting, metric names."""

import json

import pytest

from lm_eval_fin import paths
from lm_eval_fin.benchmarks.fin_ems import prompt, task
from lm_eval_fin.harness import taskfiles
from lm_eval_fin.harness.corpus import judge_for
from lm_eval_fin.harness.fitting import prompt_fitter
from lm_eval_fin.harness.settings import RunSettings, SettingsError

DEMO = str(paths.data_path("ems_demo"))


def settings_json(**metadata):
    return task.BENCHMARK.read_settings("fin_ems", metadata).to_json()


def test_missing_data_path_is_a_clear_error():
    with pytest.raises(SettingsError, match="fin_ems needs its data.*lm-eval-fin build earnings-call"):
        task.load_dataset(version=1.0)


def test_demo_set_loads_whole_without_a_tokenizer(monkeypatch):
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE", raising=False)
    docs = list(task.load_dataset(bertscore_model="offline", data_path=DEMO)["test"])
    assert [d["id"] for d in docs] == [
        "NWND-2024-10-24-q1",
        "NWND-2024-10-24-q5",
        "CTSO-2024-11-06-q1",
        "CTSO-2024-11-06-q5",
    ]
    assert all(
        "SYNTHETIC" in d["transcript"] and not d["truncated"] and d["transcript_tokens"] == -1 for d in docs
    )
    assert RunSettings.from_json(docs[0]["settings"]).judge is None
    text = task.doc_to_text(docs[0])
    assert text.index(docs[0]["transcript"]) < text.index(docs[0]["question"])  # the question comes last


def test_settings_from_metadata_and_environment(monkeypatch):
    monkeypatch.setenv("LM_EVAL_FIN_JUDGE", "hf:/some/model")
    read = task.BENCHMARK.read_settings
    settings = read("fin_ems", {"judge_max_tokens": 64, "max_score": 5, "dtype": "float32"})
    assert settings.judge == "hf:/some/model"
    assert settings.judge_options == {"max_tokens": 64}
    assert settings["max_score"] == 5 and settings["max_attempts"] == 3
    assert settings["extract_max_tokens"] is None  # each text its own budget
    assert settings["summary_removal"] == "round" and settings["ragchecker"] is True
    assert read("fin_ems", {"summary_removal": "folded", "ragchecker": False})["summary_removal"] == "folded"
    with pytest.raises(SettingsError, match=r"summary_removal: expected one of \['round', 'folded'\]"):
        read("fin_ems", {"summary_removal": "separate"})
    with pytest.raises(SettingsError, match="ragchecker: expected true or false, got 1"):
        read("fin_ems", {"ragchecker": 1})
    assert read("fin_ems", {"extract_max_tokens": 4096})["extract_max_tokens"] == 4096
    with pytest.raises(SettingsError, match="fin_ems: metadata extract_max_tokens: expected a positive integer"):
        read("fin_ems", {"extract_max_tokens": 0})
    assert read("fin_ems", {"judge": "none"}).judge is None  # explicit offline wins over the env
    with pytest.raises(SettingsError, match="max_score: expected a positive integer"):
        read("fin_ems", {"max_score": 0})
    with pytest.raises(SettingsError, match="max_attempts"):
        read("fin_ems", {"max_attempts": "3"})
    with pytest.raises(SettingsError, match=r"unknown judge option\(s\) \['judge_max_token'\]"):
        read("fin_ems", {"judge_max_token": 64})


def test_metric_names_follow_the_judge_setting():
    base = {"id": "x", "reference": "Revenue grew 5%.", "truncated": False}
    with_judge = task.process_results(dict(base, settings=settings_json(judge="hf:m")), ["Revenue grew 5%."])
    offline = task.process_results(dict(base, settings=settings_json(judge="none")), ["Revenue grew 5%."])
    assert with_judge["rouge_l_f1"] == offline["rouge_l_f1"] == 1.0
    assert {
        "ems_llm_f1",
        "ems_rouge_f1",
        "ems_bertscore_f1",
        "judge_failure",
        "judge_parse_failure",
        "ems_judge_model_calls",
        "ems_judge_rounds",
        "ragchecker_precision",
        "ragchecker_recall",
        "ragchecker_f1",
    } <= set(with_judge)
    no_claims = task.process_results(
        dict(base, settings=settings_json(judge="hf:m", ragchecker=False)), ["Revenue grew 5%."]
    )
    assert "ems_llm_f1" in no_claims and not any(name.startswith("ragchecker") for name in no_claims)
    assert not any("offline" in name for name in with_judge)
    assert {"ems_offline_rouge_f1", "ems_offline_bertscore_f1"} <= set(offline)
    assert not any(name.startswith(("ems_llm", "ems_judge", "judge_", "ragchecker")) for name in offline)
    item = offline["bleu"]
    assert (item.metric, item.doc_id, dict(item.data)) == (
        "bleu", "x", {"answer": "Revenue grew 5%.", "reference": "Revenue grew 5%."}
    )
    assert str(item) == "corpus-level bleu (doc x)"
    assert task.process_results(dict(base, settings=settings_json(judge="none")), [])["rouge_l_f1"] == 0.0


def test_the_answer_prompt_asks_what_figure_3_asks():
    """Issue 23: the prompt asked for "a detailed, well-organised answer: cover all the relevant
    points", where the paper's only answer prompt (Figure 3, behind the references) asks for a
    clear, complete, accurate and concise answer without citations."""
    doc = {"id": "x", "company": "Apple", "ticker": "AAPL", "call_date": "2024-10-31",
           "transcript": "Tim Cook: revenue grew 6%.", "question": "How did revenue change?"}
    text = prompt.render_prompt(doc)
    for asked in ("clear:", "complete:", "accurate:", "concise:", "Do not include citations",
                  "read the answer again", "no needless words"):
        assert asked in text, asked
    assert "detailed" not in text and "cover all the relevant points" not in text
    assert text.index("Tim Cook: revenue grew 6%.") < text.index("concise:") < text.index("Question: How did revenue")
    assert text.endswith("Question: How did revenue change?")


def test_transcripts_are_cut_to_fit_and_the_question_survives(embedded_model_dir):
    max_length, max_gen_toks = 480, 16
    metadata = {
        "pretrained": str(embedded_model_dir),
        "max_length": max_length,
        "max_gen_toks": max_gen_toks,
        "judge": "none",
    }
    docs = list(task.load_dataset(bertscore_model="offline", data_path=DEMO, **metadata)["test"])
    assert all(d["truncated"] and d["transcript_tokens"] > 200 for d in docs)
    fitter = prompt_fitter(metadata, max_gen_toks, "fin_ems")
    for doc in docs:
        text = fitter.tokenizer.apply_chat_template(
            [{"role": "user", "content": task.doc_to_text(doc)}],
            tokenize=False,
            add_generation_prompt=True,
        )
        assert len(fitter.tokenizer(text, add_special_tokens=False)["input_ids"]) <= max_length - max_gen_toks
        assert doc["question"] in text and prompt.TRUNCATION_MARK in doc["transcript"]
        assert doc["transcript"].startswith("SYNTHETIC DEMO TRANSCRIPT")  # the beginning is kept

    roomy = list(task.load_dataset(bertscore_model="offline", data_path=DEMO, **dict(metadata, max_length=8192))["test"])
    assert not any(d["truncated"] for d in roomy)
    with pytest.raises(ValueError, match="cannot hold the prompt"):
        task.load_dataset(bertscore_model="offline", data_path=DEMO, **dict(metadata, max_length=200))


def test_the_answer_budget_defaults_to_the_yaml(embedded_model_dir):
    """Without max_gen_toks in the metadata, transcripts leave room for the YAML's answer budget."""
    metadata = {"pretrained": str(embedded_model_dir), "max_length": 1100, "judge": "none"}
    assert taskfiles.max_gen_toks("fin_ems") == 1024
    with pytest.raises(ValueError, match="plus 1024 answer tokens"):
        task.load_dataset(bertscore_model="offline", data_path=DEMO, **metadata)


def test_an_unloadable_tokenizer_stops_the_load(tmp_path, caplog):
    """Issue 23: transcripts went whole (lm-eval then cut them from the left) with a warning."""
    with pytest.raises(SettingsError, match=r"^fin_ems: cannot fit prompts to the model's context: the tokenizer of"):
        task.load_dataset(bertscore_model="offline", data_path=DEMO, pretrained=str(tmp_path / "no-model"), judge="none")
    # no model named (a loader called from Python): nothing to fit to, said in a warning
    docs = list(task.load_dataset(bertscore_model="offline", data_path=DEMO, judge="none")["test"])
    assert not any(d["truncated"] for d in docs)
    assert "not fitted to the context" in caplog.text


def test_the_task_lists_every_metric_the_harness_reports():
    listed = set(taskfiles.higher_is_better("fin_ems"))
    base = {"id": "x", "reference": "r", "truncated": False}
    for judge in ("hf:m", "none"):
        reported = task.process_results(dict(base, settings=settings_json(judge=judge)), ["a"])
        assert set(reported) <= listed, set(reported) - listed
    assert set(task.CORPUS.metrics) | {"truncated_documents", "truncated_answers", "rouge_l_precision",
                                       "rouge_l_recall", "rouge_l_f1"} == listed


def test_judge_options_in_the_metadata_and_the_environment_reach_the_judge(monkeypatch):
    monkeypatch.setenv("LM_EVAL_FIN_JUDGE_OPTIONS", '{"max_retries": 1, "concurrency": 3}')
    settings = task.BENCHMARK.read_settings(
        "fin_ems",
        {"judge": "openai:http://127.0.0.1:9/v1#m", "judge_options": {"max_retries": 2}, "judge_timeout_s": 5},
    )
    assert settings.judge_options == {"max_retries": 2, "concurrency": 3, "timeout_s": 5}
    # the environment is read once, at load: a later change does not reach the run
    monkeypatch.setenv("LM_EVAL_FIN_JUDGE_OPTIONS", '{"max_retries": 9}')
    judge = judge_for(RunSettings.from_json(settings.to_json()))  # loading is lazy: no server is reached
    assert (judge.options.max_retries, judge.options.concurrency, judge.options.timeout_s) == (2, 3, 5)
    with pytest.raises(SettingsError, match="unknown judge option"):
        task.BENCHMARK.read_settings("fin_ems", {"judge_options": {"no_such_option": 1}})
    assert json.loads(settings.to_json())["task"] == "fin_ems"
