"""fin_ems task glue in-process: data loading, settings, prompt fitting, the filter stage's records and
the per-document metric values ``process_results`` gives (every metric the YAML lists, null where
undefined)."""

import json

import pytest

from lm_eval_fin.benchmarks.fin_ems import prompt, task
from lm_eval_fin.harness import stage, taskfiles
from lm_eval_fin.harness.fitting import prompt_fitter
from lm_eval_fin.harness.settings import RunSettings, SettingsError
from lm_eval_fin.outputs import records
from lm_eval_fin.plumbing import paths

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


def values_of(doc, answer, **record):
    """process_results of one document whose filter stage left ``record``."""
    return task.process_results(doc, [records.encode(answer, record)])


EMS_NAMES = [f"ems_{s}_{p}" for s in ("llm", "rouge", "bertscore") for p in ("precision", "recall", "f1")]
OFFLINE_NAMES = [f"ems_offline_{s}_{p}" for s in ("rouge", "bertscore") for p in ("precision", "recall", "f1")]
CLAIM_NAMES = ["ragchecker_precision", "ragchecker_recall", "ragchecker_f1"]


def test_a_judged_record_leaves_out_every_metric_the_judge_left_undefined():
    doc = {"id": "x", "reference": "Revenue grew 5%.", "truncated": False, "settings": settings_json(judge="hf:m")}
    judged = {"method": "llm", "ragchecker_checked": True, "ems": {"llm": [0.5, 0.25, 1 / 3], "rouge": [1.0, 1.0, 1.0],
              "bertscore": None}, "ragchecker": [1.0, 0.5, 2 / 3], "judge_error": None,
              "parse_failures": {"extraction": 0, "matching": 0}}
    values = values_of(doc, "Revenue grew 5%.", ems=judged, bertscore_f1=0.9)
    assert list(values) == [m for m in taskfiles.metric_names("fin_ems") if m in values]  # in the YAML's order
    assert values["rouge_l_f1"] == 1.0 and values["bleu"] > 0 and values["bertscore_f1"] == 0.9
    assert [values.get(name) for name in EMS_NAMES] == [0.5, 0.25, 1 / 3, 1.0, 1.0, 1.0, None, None, None]
    assert [values[name] for name in CLAIM_NAMES] == [1.0, 0.5, 2 / 3]
    assert (values["judge_failure"], values["judge_parse_failure"]) == (0.0, 0.0)
    assert not set(OFFLINE_NAMES) & set(values)  # never posing as the other variant
    # an unreadable answer: no EMS, counted; claim checks switched off: no claim figures
    unread = values_of(doc, "x", ems={**judged, "ems": {"llm": None, "rouge": None, "bertscore": None},
                                      "ragchecker": None, "ragchecker_checked": False,
                                      "parse_failures": {"extraction": 1}})
    assert not set(EMS_NAMES + CLAIM_NAMES) & set(unread)
    assert (unread["judge_failure"], unread["judge_parse_failure"]) == (0.0, 1.0)
    failed = values_of(doc, "x", ems={"method": "llm", "judge_error": "HTTP 500"})
    assert (failed["judge_failure"], failed["judge_parse_failure"]) == (1.0, 0.0)
    assert "ems_llm_f1" not in failed and "bertscore_f1" not in failed  # no value in the record: undefined


def test_the_offline_filter_stage_scores_every_answer_and_flags_echoes(monkeypatch):
    monkeypatch.delenv("LM_EVAL_FIN_PREDICT_ONLY", raising=False)
    docs = [dict(doc) for doc in task.load_dataset(bertscore_model="offline", data_path=DEMO, judge="none")["test"]][:2]
    answers = ["Revenue grew 5% on higher volumes.", docs[1]["question"]]
    texts = task.score_answers([[a] for a in answers], docs)  # lm-eval hands the filter every response at once
    recorded = [records.decode(text) for text in texts]
    assert [r["answer"] for r in recorded] == answers and [r["degenerate"] for r in recorded] == [None, "echo"]
    assert all(r["judge"] is None and r["ems"]["method"] == "offline" for r in recorded)
    values = [task.process_results(doc, [text]) for doc, text in zip(docs, texts)]
    for value in values:
        assert list(value) == [m for m in taskfiles.metric_names("fin_ems") if m in value]
        assert all(0.0 <= value[name] <= 1.0 for name in OFFLINE_NAMES + ["bertscore_f1", "rouge_l_f1", "bleu"])
        assert not set(EMS_NAMES + CLAIM_NAMES + ["judge_failure", "judge_parse_failure"]) & set(value)
    assert [v["degenerate_answer"] for v in values] == [0.0, 1.0]
    # no answer at all: scored as the empty text
    assert task.process_results(docs[0], [])["rouge_l_f1"] == 0.0


def test_process_results_refuses_a_metric_the_yaml_does_not_list():
    from lm_eval_fin.harness.task import metric_values

    settings = task.BENCHMARK.read_settings("fin_ems", {"judge": "none"})
    with pytest.raises(KeyError, match=r"fin_ems: process_results gave metrics its YAML does not list: \['ems_judge_rounds'\]"):
        metric_values(settings, {"bleu": 0.5, "ems_judge_rounds": 4})
    # NaN and infinities are no values: left out
    assert metric_values(settings, {"bleu": float("nan"), "rouge_l_f1": float("inf")}) == {}


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


def test_judge_options_in_the_metadata_and_the_environment_reach_the_judge(monkeypatch):
    monkeypatch.setattr(stage, "_JUDGES", {})  # the process's judge pool, for this test alone
    monkeypatch.setenv("LM_EVAL_FIN_JUDGE_OPTIONS", '{"max_retries": 1, "concurrency": 3}')
    settings = task.BENCHMARK.read_settings(
        "fin_ems",
        {"judge": "openai:http://127.0.0.1:9/v1#m", "judge_options": {"max_retries": 2}, "judge_timeout_s": 5},
    )
    assert settings.judge_options == {"max_retries": 2, "concurrency": 3, "timeout_s": 5}
    # the environment is read once, at load: a later change does not reach the run
    monkeypatch.setenv("LM_EVAL_FIN_JUDGE_OPTIONS", '{"max_retries": 9}')
    judge = stage.judge_for(RunSettings.from_json(settings.to_json()))  # loading is lazy: no server is reached
    assert (judge.options.max_retries, judge.options.concurrency, judge.options.timeout_s) == (2, 3, 5)
    with pytest.raises(SettingsError, match="unknown judge option"):
        task.BENCHMARK.read_settings("fin_ems", {"judge_options": {"no_such_option": 1}})
    assert json.loads(settings.to_json())["task"] == "fin_ems"
