"""Challenge-format loading, prompt reading and the task adapters (no model)."""

import importlib.util
import json

import pytest

from lm_eval_fin import paths
from lm_eval_fin.benchmarks.fin_agentbench import data, prompt
from tests.finagentbench_fixtures import chunk_prompt, document_record, write_jsonl


def _utils():
    spec = importlib.util.spec_from_file_location("fab_utils", paths.tasks_dir() / "fin_agentbench" / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


UTILS = _utils()


def test_parse_document_prompt():
    record = document_record("q1", "What did the CEO earn?", {"0": 4})
    question, candidates = prompt.parse_challenge_prompt(prompt.prompt_text(record))
    assert question == "What did the CEO earn?"
    assert candidates == {0: "DEF14A", 1: "10-K", 2: "10-Q", 3: "8-K", 4: "Earnings"}


def test_parse_chunk_prompt_keeps_multiline_chunks_and_drops_instruction():
    chunks = ["Revenue was $5 million.\nUp 3%.", "| Item | 2024 |\n| Cash | 12 |", "Risk factors."]
    question, candidates = prompt.parse_challenge_prompt(chunk_prompt("How much revenue?", chunks))
    assert question == "How much revenue?"
    assert candidates == {0: chunks[0], 1: chunks[1], 2: chunks[2]}


def test_load_folder_picks_files_by_kind(tmp_path):
    write_jsonl(tmp_path / "document_ranking_dev.jsonl", [document_record("d1", "Q?", {"1": 2})])
    write_jsonl(
        tmp_path / "chunk_ranking_dev.jsonl",
        [{"uuid": "c1", "messages": [{"role": "user", "content": chunk_prompt("Q?", ["a", "b"])}], "qrel": {"1": 2}}],
    )
    assert [r["uuid"] for r in data.load_records(tmp_path, "document")] == ["d1"]
    assert [r["uuid"] for r in data.load_records(tmp_path, "chunk")] == ["c1"]


def test_missing_data_path_names_what_is_expected():
    with pytest.raises(ValueError, match="data_path.*challenge JSONL"):
        UTILS.load_document_ranking(version=1.0)


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"question": "Q", "answer": "A"}\n', "no 'uuid' or '_id'"),
        ('{"uuid": "x", "messages": "hello"}\n', "'messages' must be a list"),
        ("not json at all\n", "not JSON"),
        ('{"uuid": "x", "messages": [{"role": "user", "content": "p"}], "qrel": [1, 2]}\n', "'qrel' must map"),
        ("\n\n", "holds no records"),
    ],
)
def test_wrong_shape_names_what_is_expected(tmp_path, content, message):
    path = tmp_path / "data.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        UTILS.load_document_ranking(data_path=str(path))


def test_folder_without_challenge_files(tmp_path):
    (tmp_path / "other.jsonl").write_text("{}\n")
    with pytest.raises(ValueError, match="document_ranking"):
        UTILS.load_document_ranking(data_path=str(tmp_path))


def test_nonexistent_path():
    with pytest.raises(FileNotFoundError, match="does not exist"):
        UTILS.load_chunk_ranking(data_path="/nonexistent/file.jsonl")


def test_bad_gain_in_metadata(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [document_record("d1", "Q?", {"1": 2})])
    with pytest.raises(ValueError, match=r"fin_agentbench_doc: metadata gain: expected one of \['exponential', 'linear'\]"):
        UTILS.load_document_ranking(data_path=str(path), gain="quadratic")


def test_process_results_scores_and_counts_parse_failures(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [document_record("d1", "Q?", {"1": 2, "4": 1, "0": 0})])
    doc = UTILS.load_document_ranking(data_path=str(path), pretrained="ignored-model-arg")["test"][0]
    good = UTILS.process_results_doc(doc, ["[1, 4, 0, 2, 3]"])
    assert good == {"ndcg@5": 1.0, "map@5": 1.0, "mrr@5": 1.0, "parse_failure": 0.0}
    bad = UTILS.process_results_doc(doc, ["I refuse."])
    assert bad == {"ndcg@5": 0.0, "map@5": 0.0, "mrr@5": 0.0, "parse_failure": 1.0}
    by_name = UTILS.process_results_doc(doc, ["1. Earnings\n2. 10-K"])
    assert by_name["mrr@5"] == 1.0 and by_name["parse_failure"] == 0.0
    assert by_name["ndcg@5"] < 1.0


def test_linear_gain_selectable_in_metadata(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [document_record("d1", "Q?", {"1": 3, "4": 1})])
    exp_doc = UTILS.load_document_ranking(data_path=str(path))["test"][0]
    lin_doc = UTILS.load_document_ranking(data_path=str(path), gain="linear")["test"][0]
    answer = ["[4, 1]"]
    assert UTILS.process_results_doc(lin_doc, answer)["ndcg@5"] != UTILS.process_results_doc(exp_doc, answer)["ndcg@5"]


def test_eval_records_without_qrel_load_but_refuse_scoring(tmp_path):
    path = write_jsonl(tmp_path / "document_ranking_eval.jsonl", [document_record("e1", "Q?", id_key="_id")])
    doc = UTILS.load_document_ranking(data_path=str(path))["test"][0]
    assert doc["id"] == "e1" and doc["qrel"] == ""
    with pytest.raises(ValueError, match="--predict_only"):
        UTILS.process_results_doc(doc, ["[0]"])


def test_demo_sample_is_in_the_challenge_format():
    folder = paths.data_path("finagentbench_demo")
    docs = data.load_records(folder, "document")
    chunks = data.load_records(folder, "chunk")
    assert len(docs) >= 5 and len(chunks) >= 3
    for record in chunks:
        _, candidates = prompt.parse_challenge_prompt(prompt.prompt_text(record))
        assert set(json.loads(json.dumps(record["qrel"]))) == {str(i) for i in candidates}
