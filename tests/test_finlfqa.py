"""FinLFQA: hub schema -> documents, rendering, prompt, per-document scores, corpus metrics and
the judge's parsing, aggregation and re-scoring (a deterministic judge object here; the real
embedded judge runs in test_e2e_finlfqa.py)."""

import importlib.util
import json
import logging
import math
import re

import pyarrow
import pyarrow.parquet
import pytest

from lm_eval_fin import finlfqa, paths, sandbox
from lm_eval_fin.judge import JudgeResponse, JudgeSpecError
from lm_eval_fin.textsim import offline_bertscore_model
from tests.finlfqa_fixtures import CLAUSES, hub_record, hub_records, write_hub_fixture
from tests.openai_server import ServerProcess


def _utils():
    spec = importlib.util.spec_from_file_location("finlfqa_utils", paths.tasks_dir() / "finlfqa" / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


UTILS = _utils()


def document(**overrides):
    doc = finlfqa.to_document(hub_record(**overrides))
    doc["scoring"] = json.dumps({"bertscore_model": offline_bertscore_model(), "judge": None})
    return doc


# ------------------------------------------------------------------------------ hub schema


def test_hub_record_becomes_a_document():
    doc = finlfqa.to_document(hub_record())
    assert doc["id"] == "cwt-awk-1" and doc["companies"] == ["CWT", "AWK"] and doc["has_reference"]
    # paragraphs carry the indices the evidence uses; tables use | between columns
    assert "=== CWT: 10-Q report excerpt ===\n[0] California Water" in doc["reports"]
    assert "[1] Item | Q1 2024 | Q1 2023\nNet interest expense | 125 | 100\n[2] CWT funded" in doc["reports"]
    assert doc["knowledge"] == (
        "[0] Growth rate = (current - prior) / prior * 100\n[1] Interest coverage = EBIT / interest expense"
    )
    assert finlfqa.reference_clauses(doc) == [
        {"text": CLAUSES[0]["clause"], "evidence": [["CWT", 1]], "code": [CLAUSES[0]["code"]], "knowledge": [0]},
        {"text": CLAUSES[1]["clause"], "evidence": [["AWK", 1]], "code": [], "knowledge": []},
    ]


def test_knowledge_list_under_another_likely_name():
    record = hub_record(knowledge=...)
    record["professional_knowledge"] = ["ROE = net income / equity"]
    assert finlfqa.to_document(record)["knowledge"] == "[0] ROE = net income / equity"


def test_missing_knowledge_list_names_the_fields_found():
    with pytest.raises(finlfqa.SchemaError) as error:
        finlfqa.to_document(hub_record(knowledge=..., extra_field=1), position=7)
    message = str(error.value)
    assert "record 7" in message and "knowledge list" in message
    assert "fields found: ['clauses', 'context', 'extra_field', 'id', 'question']" in message


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({"question": ...}, "no 'question' text"),
        ({"context": json.dumps([1, 2])}, "'context'"),
        ({"context": "{not json"}, "does not decode"),
        ({"clauses": json.dumps([{"clause": "x", "code": None}])}, "fields found: ['clause', 'code']"),
    ],
)
def test_schema_errors_are_clear(overrides, expected):
    with pytest.raises(finlfqa.SchemaError, match=re.escape(expected)):
        finlfqa.to_document(hub_record(**overrides))


def test_test_split_record_has_no_reference_and_cannot_be_scored():
    doc = finlfqa.to_document(hub_record(clauses=""))
    assert not doc["has_reference"]
    with pytest.raises(ValueError, match="--predict_only"):
        finlfqa.score_document(doc, "1. x\nEvidence: CWT [1]")


def test_index_base_one_and_out_of_range_warning(caplog):
    doc = finlfqa.to_document(hub_record(), index_base=1)
    assert "[1] California Water" in doc["reports"] and "[1] Growth rate" in doc["knowledge"]
    with caplog.at_level(logging.WARNING, logger="lm_eval_fin.finlfqa"):
        finlfqa.to_document(hub_record(clauses=json.dumps([{"clause": "x", "evidence": {"CWT": [3]}}])))
    assert "cites CWT paragraph 3, outside 0..2" in caplog.text


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet", "-splits.json"])
def test_local_copies_in_every_format(tmp_path, suffix):
    path = tmp_path / f"copy{suffix}"
    if suffix == ".jsonl":
        write_hub_fixture(path)
    elif suffix == ".json":
        path.write_text(json.dumps(hub_records()))
    elif suffix == "-splits.json":
        path.write_text(json.dumps({"validation": hub_records(), "test": []}))
    else:
        pyarrow.parquet.write_table(pyarrow.Table.from_pylist(hub_records()), path)
    docs = finlfqa.load_documents("validation", str(path), scoring={"judge": None})
    assert [d["id"] for d in docs] == ["cwt-awk-1", "cwt-awk-2"]
    assert json.loads(docs[0]["scoring"]) == {"judge": None}


def test_a_json_keyed_by_split_feeds_each_task_its_own_split(tmp_path):
    path = tmp_path / "splits.json"
    test_record = hub_record(id="test-1", clauses="")
    path.write_text(json.dumps({"validation": hub_records(), "test": [test_record]}))
    assert [d["id"] for d in finlfqa.load_documents("validation", str(path))] == ["cwt-awk-1", "cwt-awk-2"]
    test_docs = finlfqa.load_documents("test", str(path))
    assert [d["id"] for d in test_docs] == ["test-1"] and not test_docs[0]["has_reference"]
    # the task's own loader passes its split through
    assert UTILS.load_test(data_path=str(path))["test"]["id"] == ["test-1"]
    only_validation = tmp_path / "validation-only.json"
    only_validation.write_text(json.dumps({"validation": hub_records()}))
    with pytest.raises(finlfqa.SchemaError, match="holds the split\\(s\\) \\['validation'\\] but not 'test'"):
        finlfqa.load_documents("test", str(only_validation))


def test_bad_split_and_missing_file():
    with pytest.raises(ValueError, match="split must be one of"):
        finlfqa.load_documents("train", "x.jsonl")
    with pytest.raises(FileNotFoundError, match="is not a file"):
        finlfqa.load_documents("validation", "/nonexistent/copy.jsonl")


def test_prompt_holds_reports_knowledge_question_and_format():
    prompt = finlfqa.build_prompt(document())
    for part in ("[1] Item | Q1 2024", "[1] Interest coverage", "Question: How did net interest expense",
                 "Evidence:", "Code:", "Knowledge:", "takes no arguments"):
        assert part in prompt


# --------------------------------------------------------------------- per-document scores


def test_the_reference_itself_scores_perfectly():
    doc = document()
    scores = finlfqa.score_document(doc, finlfqa.render_answer(finlfqa.reference_clauses(doc)))
    for name in ("numeric_f1", "evidence_f1", "knowledge_recall", "rouge_l"):
        assert scores[name] == pytest.approx(1.0), name
    assert scores["parse_failure"] == 0.0 and scores["code_per_answer"] == 1.0
    assert set(scores) == set(finlfqa.PER_DOCUMENT_METRICS) | set(finlfqa.CORPUS_METRICS)


def test_scores_of_a_partial_answer_by_hand():
    answer = (
        "1. CWT's net interest expense rose 25% to $125 million.\nEvidence: CWT [1], AWK [0]\n"
        "Code: none\nKnowledge: [1]"
    )
    scores = finlfqa.score_document(document(), answer)
    # answer values {25, 1.25e8}; reference {25, 1e8, 1.25e8, 1.1e8}: P = 1, R = 2/4
    assert scores["numeric_precision"] == 1.0 and scores["numeric_recall"] == 0.5
    # evidence {CWT1, AWK0} vs {CWT1, AWK1}: P = R = 1/2
    assert (scores["evidence_precision"], scores["evidence_recall"]) == (0.5, 0.5)
    assert scores["knowledge_recall"] == 0.0  # cites 1, the reference 0
    assert str(scores["judge_score"]) == "corpus-level (doc cwt-awk-1, 0 code snippets)"


def test_unparsable_answer_is_counted_and_scored_on_its_text():
    scores = finlfqa.score_document(document(), "CWT's net interest expense rose 25.00%.")
    assert scores["parse_failure"] == 1.0
    assert scores["evidence_f1"] == 0.0 and scores["numeric_precision"] == 1.0


@pytest.mark.parametrize("answer", [None, "", "\x00\xff" * 100, "```" * 50, "{" * 1000])
def test_bad_answers_never_crash(answer):
    scores = finlfqa.score_document(document(), answer)
    assert all(0.0 <= scores[name] <= 1.0 for name in finlfqa.PER_DOCUMENT_METRICS if name != "code_per_answer")


# ------------------------------------------------------------------------- corpus metrics


def test_corpus_work_runs_once_per_kind():
    items = [finlfqa.score_document(document(), "x")["code_exec_rate"]]
    calls = []

    def compute(batch):
        calls.append(len(batch))
        return len(calls)

    assert finlfqa._memoised("test-kind", items, compute) == 1
    assert finlfqa._memoised("test-kind", list(items), compute) == 1
    assert finlfqa._memoised("other-kind", items, compute) == 2
    assert calls == [1, 1]


def test_code_execution_rate_runs_the_snippets_in_the_sandbox():
    answers = [
        "1. a\nEvidence: CWT [1]\nCode:\n```python\ndef good():\n    return (125 - 100) / 100 * 100\n```",
        "1. b\nEvidence: CWT [1]\nCode:\n```python\ndef needs_args(x):\n    return x\n```\n"
        "2. c\nEvidence: AWK [1]\nCode:\n```python\ndef no_return():\n    pass\n```",
    ]
    items = [finlfqa.score_document(document(), a)["code_exec_rate"] for a in answers]
    assert finlfqa.code_exec_rate(items) == pytest.approx(1 / 3)
    no_code = [finlfqa.score_document(document(), "1. a\nEvidence: CWT [1]")["code_exec_rate"]]
    assert finlfqa.code_exec_rate(no_code) == 0.0


def test_a_sandbox_that_cannot_start_gives_nan_not_a_crash(tmp_path, monkeypatch, caplog):
    """After generation, an isolation failure (here a child that cannot set up) is reported,
    never raised: lm-eval would lose the run."""
    broken_child = tmp_path / "broken_child.py"
    broken_child.write_text("import sys\nsys.exit('cannot set up: no /proc here')\n")
    monkeypatch.setattr(sandbox.runner, "CHILD_MODULES", (("snippet", broken_child),))
    answer = "1. a\nEvidence: CWT [1]\nCode:\n```python\ndef isolated():\n    return 42\n```"
    items = [finlfqa.score_document(document(), answer)["code_exec_rate"]]
    with caplog.at_level(logging.WARNING, logger="lm_eval_fin.finlfqa"):
        assert math.isnan(finlfqa.code_exec_rate(items))
    assert "sandbox cannot be set up" in caplog.text and "no /proc here" in caplog.text


def test_bertscore_aggregation_names_its_model(caplog):
    doc = document()
    items = [finlfqa.score_document(doc, finlfqa.render_answer(finlfqa.reference_clauses(doc)))["bertscore_f1"]]
    with caplog.at_level(logging.INFO, logger="lm_eval_fin.finlfqa"):
        assert finlfqa.bertscore_f1(items) == pytest.approx(1.0, abs=1e-4)
    assert "all_minilm_l6_v2" in caplog.text
    missing = dict(doc, scoring=json.dumps({"bertscore_model": "/nonexistent/model"}))
    assert math.isnan(finlfqa.bertscore_f1([finlfqa.score_document(missing, "x")["bertscore_f1"]]))


def test_without_a_judge_the_judge_metrics_say_skipped(monkeypatch, caplog):
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE", raising=False)
    items = [finlfqa.score_document(document(), "1. a\nEvidence: CWT [9]")["judge_score"]]
    with caplog.at_level(logging.WARNING, logger="lm_eval_fin.finlfqa"):
        assert finlfqa.judge_metric("judge_skipped")(items) == 1.0
        assert math.isnan(finlfqa.judge_metric("judge_score")(items))
    assert "no judge configured" in caplog.text


def judged_document(scoring):
    doc = finlfqa.to_document(hub_record())
    doc["scoring"] = json.dumps(scoring)
    return doc


def test_a_bad_judge_setting_stops_the_load_before_generation(tmp_path, monkeypatch):
    data = str(write_hub_fixture(tmp_path / "copy.jsonl"))
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE_OPTIONS", raising=False)
    monkeypatch.setenv("LM_EVAL_FIN_JUDGE", "gpt4")
    with pytest.raises(JudgeSpecError, match=r"\$LM_EVAL_FIN_JUDGE: bad judge spec 'gpt4'"):
        UTILS.load_validation(data_path=data)
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE")
    with pytest.raises(JudgeSpecError, match="bad judge spec 'gpt4'"):
        UTILS.load_validation(data_path=data, judge="gpt4")
    with pytest.raises(ValueError, match=r"fin_lfqa: unknown judge option\(s\) \['judge_retries'\]"):
        UTILS.load_validation(data_path=data, judge="hf:x", judge_retries=2)
    with pytest.raises(ValueError, match="max_retries: expected an integer"):
        UTILS.load_validation(data_path=data, judge="hf:x", judge_options={"max_retries": "two"})
    monkeypatch.setenv("LM_EVAL_FIN_JUDGE_OPTIONS", "{not json")
    with pytest.raises(ValueError, match="LM_EVAL_FIN_JUDGE_OPTIONS is not JSON"):
        UTILS.load_validation(data_path=data)
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE_OPTIONS")
    dataset = UTILS.load_validation(data_path=data, judge="hf:x", judge_max_retries="2", judge_options={"seed": 3})
    assert json.loads(dataset["validation"][0]["scoring"])["judge_options"] == {"seed": 3, "max_retries": 2}


@pytest.mark.parametrize(
    "scoring, environment",
    [
        ({"judge": None}, "gpt4"),  # the environment changed after the load
        ({"judge": "openai:http://127.0.0.1:9/v1#m", "judge_options": {"concurrency": 0}}, None),
    ],
)
def test_judge_setup_problems_at_aggregation_are_reported_not_raised(monkeypatch, caplog, scoring, environment):
    if environment:
        monkeypatch.setenv("LM_EVAL_FIN_JUDGE", environment)
    items = [finlfqa.score_document(judged_document(scoring), "1. setup\nEvidence: CWT [1]")["judge_score"]]
    with caplog.at_level(logging.WARNING, logger="lm_eval_fin.finlfqa"):
        assert finlfqa.judge_metric("judge_failure")(items) == 1.0
        assert math.isnan(finlfqa.judge_metric("judge_score")(items))
        assert finlfqa.judge_metric("judge_parse_failure")(items) == 0.0
    assert "the judge cannot be set up" in caplog.text


def test_metadata_judge_options_reach_the_judge_at_aggregation(judge_cache, monkeypatch, caplog):
    """judge_max_retries and judge_backoff_s from --metadata: the failing request is sent once,
    not 1 + 4 times; it counts as a judge failure, not a parse failure."""
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE_OPTIONS", raising=False)
    verdict = json.dumps({"accuracy": 4, "numerical_correctness": 3, "evidence_entailment": 5})
    with ServerProcess(reply=verdict) as server:
        scoring = finlfqa.scoring_settings(
            {"judge": f"openai:{server.base_url}#m", "judge_max_retries": 0, "judge_backoff_s": 0}
        )
        doc = judged_document(scoring)
        items = [finlfqa.score_document(doc, answer)["judge_score"]
                 for answer in ("1. fine\nEvidence: CWT [1]", "1. [[status:500]]\nEvidence: CWT [1]")]
        with caplog.at_level(logging.WARNING, logger="lm_eval_fin.finlfqa"):
            assert finlfqa.judge_metric("judge_score")(items) == 12.0
        assert server.stats()["calls"] == 2
    assert finlfqa.judge_metric("judge_failure")(items) == 0.5
    assert finlfqa.judge_metric("judge_parse_failure")(items) == 0.0
    assert "1 of 2 judge requests failed for good" in caplog.text and "HTTP 500" in caplog.text


# ---------------------------------------------------------------------------------- judge


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"accuracy": 4, "numerical_correctness": 3, "evidence_entailment": 5}', (4, 3, 5)),
        ('```json\n{"accuracy": "2", "numerical_correctness": 1.0, "evidence_entailment": 5}\n```', (2, 1, 5)),
        ("Accuracy: 4/5\nNumerical correctness: 3\n**Evidence entailment**: 2", (4, 3, 2)),
        ('{"numerical_accuracy": 3, "accuracy": 5, "evidence": 1}', (5, 3, 1)),
        ('{"accuracy": 6, "numerical_correctness": 3, "evidence_entailment": 5}', None),
        ('{"accuracy": 4, "numerical_correctness": 3}', None),
        ("", None),
        (None, None),
    ],
)
def test_verdict_parser(text, expected):
    verdict = finlfqa.parse_verdict(text)
    got = None if verdict is None else (verdict.accuracy, verdict.numerical_correctness, verdict.evidence_entailment)
    assert got == expected


def test_summary_by_hand():
    verdicts = [finlfqa.JudgeVerdict(5, 4, 3), finlfqa.JudgeVerdict(3, 2, 1), None, None]
    summary = finlfqa.summarise_verdicts(verdicts)
    assert summary == {
        "judge_score": 9.0, "judge_accuracy": 4.0, "judge_numerical": 3.0, "judge_entailment": 2.0,
        "judge_parse_failure": 0.5, "judge_failure": 0.0, "judge_skipped": 0.0,
    }
    # a request that failed for good is a judge failure, not a parse failure
    failed = finlfqa.summarise_verdicts(verdicts, [None, None, None, "connection failed"])
    assert (failed["judge_parse_failure"], failed["judge_failure"]) == (0.25, 0.25)
    assert set(summary) == set(finlfqa.HIGHER_IS_BETTER)


class ScriptedJudge:
    """A deterministic judge: answers by the candidate answer's first clause, and garbles
    the first attempt for answers containing "garble"."""

    spec = "scripted"

    def __init__(self):
        self.batches = []

    def complete(self, requests, desc="judge"):
        self.batches.append(len(requests))
        replies = []
        for request in requests:
            prompt = request.messages[-1]["content"]
            candidate = prompt.split("=== Candidate answer ===")[1]
            assert request.json_schema == finlfqa.JUDGE_SCHEMA and "=== Reference answer ===" in prompt
            if "unreachable" in candidate:
                replies.append(JudgeResponse(text=None, error="connection failed (after 5 attempts)"))
            elif "garble" in candidate and request.attempt == 0:
                replies.append(JudgeResponse(text="I think it is fine."))
            elif "hopeless" in candidate:
                replies.append(JudgeResponse(text="no scores"))
            else:
                replies.append(JudgeResponse(text='{"accuracy": 4, "numerical_correctness": 5, "evidence_entailment": 3}'))
        return replies


def logged_sample(doc_id, doc, answer):
    """A sample as lm-eval --log_samples writes it (after a JSON round trip)."""
    return json.loads(json.dumps({
        "doc_id": doc_id, "doc": doc, "target": "", "arguments": {}, "resps": [[answer]],
        "filtered_resps": [answer], "filter": "none", "metrics": ["judge_score"],
    }))


def test_rescore_logged_samples_in_one_batch():
    doc = document()
    samples = [
        logged_sample(0, doc, "1. good\nEvidence: CWT [1]"),
        logged_sample(1, doc, "1. garble first\nEvidence: CWT [1]"),
        logged_sample(2, doc, "hopeless"),
        logged_sample(3, doc, "unreachable"),
    ]
    judge = ScriptedJudge()
    metrics, details = finlfqa.rescore(samples, judge)
    assert judge.batches == [4, 2, 1]  # one batch, then re-asks of the unparsable only
    assert metrics["judge_score"] == 12.0
    assert (metrics["judge_parse_failure"], metrics["judge_failure"]) == (0.25, 0.25)
    verdict = '{"accuracy": 4, "numerical_correctness": 5, "evidence_entailment": 3}'
    assert details[0] == {"doc_id": 0, "judge_failure": False, "parse_failure": False, "judge_error": None,
                          "judge_reply": verdict, "accuracy": 4, "numerical_correctness": 5,
                          "evidence_entailment": 3, "judge_score": 12}
    assert details[2] == {"doc_id": 2, "judge_failure": False, "parse_failure": True, "judge_error": None,
                          "judge_reply": "no scores"}
    assert details[3] == {"doc_id": 3, "judge_failure": True, "parse_failure": False,
                          "judge_error": "connection failed (after 5 attempts)", "judge_reply": None}


def test_rescore_rejects_samples_of_another_task():
    with pytest.raises(ValueError, match="no FinLFQA document"):
        finlfqa.rescore([{"doc_id": 0, "doc": {"query": "x"}, "resps": [["a"]]}], ScriptedJudge())
