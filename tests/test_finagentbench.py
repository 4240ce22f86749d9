"""Challenge-format loading, prompt reading and the task adapters (no model)."""

import importlib.util
import json
import math

import pytest

from lm_eval_fin.benchmarks.fin_agentbench import data, prompt
from lm_eval_fin.harness import taskfiles
from lm_eval_fin.harness.fitting import config_arguments, prompt_fitter, tokenizer_arguments
from lm_eval_fin.harness.settings import SettingsError
from lm_eval_fin.outputs import records
from lm_eval_fin.plumbing import paths
from tests.finagentbench_fixtures import chunk_prompt, document_record, write_jsonl


def _utils():
    spec = importlib.util.spec_from_file_location("fab_utils", paths.tasks_dir() / "fin_agentbench" / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


UTILS = _utils()


def scored(doc, answer):
    """Every metric of one document, as lm-eval computes it: the filter stage reads the answer
    into the document's record, which ``process_results`` scores."""
    (record,) = UTILS.score_answers([[answer]], [doc])
    return UTILS.process_results(doc, [record])


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
    good = scored(doc, "[1, 4, 0, 2, 3]")
    # every metric of the YAML, in its order
    ranks = [f"{m}@{k}" for k in (5, 10) for m in ("ndcg", "map", "map_hits", "mrr")]
    assert good == {**dict.fromkeys(ranks, 1.0), "parse_failure": 0.0, "degenerate_answer": 0.0,
                    "truncated_answers": 0.0}
    assert list(good) == taskfiles.metric_names("fin_agentbench_doc")
    bad = scored(doc, "I refuse.")
    assert bad == {**dict.fromkeys(ranks, 0.0), "parse_failure": 1.0, "degenerate_answer": 0.0,
                   "truncated_answers": 0.0}
    by_name = scored(doc, "1. Earnings\n2. 10-K")
    assert by_name["mrr@5"] == 1.0 and by_name["parse_failure"] == 0.0
    assert by_name["ndcg@5"] < 1.0


def test_the_record_holds_the_ranking_as_read_and_flags_the_input_order(tmp_path):
    """A ranking that repeats the candidates in the order given earns nDCG without ranking: it
    is scored, and flagged degenerate (so is an echo of the prompt)."""
    path = write_jsonl(tmp_path / "d.jsonl", [document_record("d1", "Q?", {"0": 2, "1": 1})])
    doc = UTILS.load_document_ranking(data_path=str(path))["test"][0]
    answers = ["[0, 1, 2, 3, 4]", "[4, 0, 1]", "no ranking", doc["prompt"]]
    records_ = [records.decode(text) for text in UTILS.score_answers([[a] for a in answers], [doc] * 4)]
    assert [r["ranking"] for r in records_] == [[0, 1, 2, 3, 4], [4, 0, 1], None, [4, 2, 1, 0, 3]]
    assert [r["degenerate"] for r in records_] == ["input order", None, None, "echo"]
    assert [r["answer"] for r in records_] == answers
    in_order = UTILS.process_results(doc, [records.encode(answers[0], records_[0])])
    assert in_order["ndcg@5"] == 1.0 and in_order["degenerate_answer"] == 1.0
    assert UTILS.process_results(doc, [records.encode(answers[1], records_[1])])["degenerate_answer"] == 0.0


def test_linear_gain_selectable_in_metadata(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [document_record("d1", "Q?", {"1": 3, "4": 1})])
    exp_doc = UTILS.load_document_ranking(data_path=str(path))["test"][0]
    lin_doc = UTILS.load_document_ranking(data_path=str(path), gain="linear")["test"][0]
    answer = "[4, 1]"
    assert scored(lin_doc, answer)["ndcg@5"] != scored(exp_doc, answer)["ndcg@5"]


def test_eval_records_without_qrel_are_for_predict_only_runs(tmp_path, monkeypatch):
    path = write_jsonl(tmp_path / "document_ranking_eval.jsonl", [document_record("e1", "Q?", id_key="_id")])
    with pytest.raises(ValueError, match="no 'qrel'.*--predict_only --log_samples"):
        UTILS.load_document_ranking(data_path=str(path))
    monkeypatch.setenv("LM_EVAL_FIN_PREDICT_ONLY", "1")
    doc = UTILS.load_document_ranking(data_path=str(path))["test"][0]
    assert doc["id"] == "e1" and doc["qrel"] == "" and UTILS.doc_to_target(doc) == ""
    # the answer is logged as it was given, nothing is read or scored
    (record,) = UTILS.score_answers([["[0]"]], [doc])
    assert records.decode(record) == {"format": records.FORMAT, "answer": "[0]", "truncated_answer": False}


def test_demo_sample_is_in_the_challenge_format():
    folder = paths.data_path("finagentbench_demo")
    docs = data.load_records(folder, "document")
    chunks = data.load_records(folder, "chunk")
    assert len(docs) >= 5 and len(chunks) >= 3
    for record in chunks:
        _, candidates = prompt.parse_challenge_prompt(prompt.prompt_text(record))
        assert set(json.loads(json.dumps(record["qrel"]))) == {str(i) for i in candidates}


def _chunk_file(tmp_path, chunks, qrel, question="What was Northwind's revenue in fiscal 2025?"):
    record = {"uuid": "c1", "messages": [{"role": "user", "content": chunk_prompt(question, chunks)}], "qrel": qrel}
    return write_jsonl(tmp_path / "chunk_ranking_fixture.jsonl", [record])


def test_both_tasks_report_at_5_and_at_10(tmp_path):
    """FinAgentBench's tables use @5 for chunks, FinCARDS @10: the chunk task reports both.
    Grades by hand: chunk 7 (grade 2) at rank 6, chunk 0 (grade 1) at rank 1."""
    chunks = [f"Chunk text {i}." for i in range(12)]
    path = _chunk_file(tmp_path, chunks, {"0": 1, "7": 2})
    doc = UTILS.load_chunk_ranking(data_path=str(path))["test"][0]
    got = scored(doc, "[0, 1, 2, 3, 4, 7, 5]")
    ideal = 3 + 1 / math.log2(3)  # grade 2 (gain 3) first, grade 1 (gain 1) second
    assert got["ndcg@5"] == pytest.approx(1 / ideal)
    assert got["ndcg@10"] == pytest.approx((1 + 3 / math.log2(7)) / ideal)
    assert got["map@5"] == pytest.approx(1 / 2) and got["map@10"] == pytest.approx((1 + 2 / 6) / 2)
    # over the hits: one hit within 5 (precision 1), two within 10
    assert got["map_hits@5"] == 1.0 and got["map_hits@10"] == pytest.approx((1 + 2 / 6) / 2)
    assert got["mrr@5"] == got["mrr@10"] == 1.0
    for task in ("fin_agentbench_doc", "fin_agentbench_chunk"):
        listed = set(taskfiles.higher_is_better(task))
        assert {f"{m}@{k}" for m in ("ndcg", "map", "map_hits", "mrr") for k in (5, 10)} <= listed, task


def test_split_challenge_prompt_gives_back_the_prompt():
    text = chunk_prompt("Q?", ["first\nline two", "| a | b |", "last"])
    parts = prompt.split_challenge_prompt(text)
    assert [index for index, _ in parts.blocks] == [0, 1, 2]
    assert parts.with_first(3) == text
    assert parts.head.endswith("Chunks to rank:\n") and parts.tail.startswith("\n\nYour response")
    cut = parts.with_first(1)
    assert cut.startswith(parts.head + "[Chunk Index 0] first\nline two\n\n[... 2 more chunks left out")
    assert cut.endswith(parts.tail) and "Chunk Index 1" not in cut


def test_chunk_prompts_are_fitted_keeping_question_and_instruction(tmp_path, embedded_model_dir):
    """Issue 16, point 6: a prompt longer than the context lost its question to lm-eval's cut
    from the left. Now chunks go from the end of the list, and the count is reported."""
    chunks = [f"Chunk {i}: the segment reported revenue of ${i}.5 million and costs of ${i}.1 million " * 6
              for i in range(40)]
    path = _chunk_file(tmp_path, chunks, {"0": 2, "39": 1})
    max_length, max_gen_toks = 1024, 32
    metadata = {"pretrained": str(embedded_model_dir), "max_length": max_length, "max_gen_toks": max_gen_toks}
    doc = UTILS.load_chunk_ranking(data_path=str(path), **metadata)["test"][0]
    assert doc["truncated"] and 0 < doc["dropped_chunks"] < 40 and doc["prompt_tokens"] > max_length
    fitter = prompt_fitter(metadata, max_gen_toks, "fin_agentbench_chunk")
    assert fitter.prompt_tokens(doc["prompt"]) <= max_length - max_gen_toks
    kept = 40 - doc["dropped_chunks"]
    assert f"[Chunk Index {kept - 1}]" in doc["prompt"] and f"[Chunk Index {kept}]" not in doc["prompt"]
    assert "Question: What was Northwind's revenue in fiscal 2025?" in doc["prompt"]
    assert doc["prompt"].rstrip().endswith("e.g. [3, 0, 7].")  # the closing instruction, whole
    assert f"{doc['dropped_chunks']} more chunks left out" in doc["prompt"]
    assert scored(doc, "[0]")["truncated_documents"] == 1.0

    roomy = UTILS.load_chunk_ranking(data_path=str(path), **dict(metadata, max_length=32768))["test"][0]
    assert not roomy["truncated"] and roomy["dropped_chunks"] == 0 and roomy["prompt"] == chunk_prompt(
        "What was Northwind's revenue in fiscal 2025?", chunks)
    assert scored(roomy, "[0]")["truncated_documents"] == 0.0
    with pytest.raises(ValueError, match="record c1: max_length 100 cannot hold the prompt without its chunks"):
        UTILS.load_chunk_ranking(data_path=str(path), **dict(metadata, max_length=100))


def test_chunk_prompts_leave_room_for_the_yaml_answer_budget(tmp_path, embedded_model_dir):
    chunks = [f"Chunk {i} says little. " * 10 for i in range(30)]
    path = _chunk_file(tmp_path, chunks, {"0": 1})
    assert taskfiles.max_gen_toks("fin_agentbench_chunk") == 128
    doc = UTILS.load_chunk_ranking(data_path=str(path), pretrained=str(embedded_model_dir), max_length=700)["test"][0]
    fitter = prompt_fitter({"pretrained": str(embedded_model_dir), "max_length": 700}, 128, "fin_agentbench_chunk")
    assert doc["truncated"] and fitter.prompt_tokens(doc["prompt"]) <= 700 - 128


def test_a_tokenizer_that_does_not_load_stops_the_load_in_one_line(tmp_path, caplog):
    """Issue 23: the fitter warned and sent the whole prompt, which lm-eval then cut from the left."""
    path = _chunk_file(tmp_path, ["a", "b"], {"0": 1})
    with pytest.raises(SettingsError) as caught:
        UTILS.load_chunk_ranking(data_path=str(path), pretrained=str(tmp_path / "no-model"))
    message = str(caught.value)
    assert "\n" not in message and message.startswith("fin_agentbench_chunk: cannot fit prompts")
    assert f"the tokenizer of '{tmp_path / 'no-model'}' does not load" in message and "tokenizer=<hub id" in message
    # no model named at all (a loader called from Python): nothing to fit to, said in a warning
    doc = UTILS.load_chunk_ranking(data_path=str(path))["test"][0]
    assert not doc["truncated"] and doc["prompt_tokens"] == -1
    assert "not fitted to the context" in caplog.text


def test_a_gguf_models_chunk_prompt_is_fitted_and_counted(tmp_path):
    """Issue 23: with gguf_file= the tokenizer failed to load and a 19k-token prompt went whole
    with truncated_documents 0. The embedded model is a GGUF file; its own tokenizer fits it."""
    gguf = paths.embedded_gguf()
    chunks = [f"Chunk {i}: segment revenue was ${i}.5 million against costs of ${i}.1 million. " * 8 for i in range(60)]
    path = _chunk_file(tmp_path, chunks, {"0": 2, "59": 1})
    metadata = {"pretrained": str(gguf.parent), "gguf_file": gguf.name, "max_length": 2048}
    doc = UTILS.load_chunk_ranking(data_path=str(path), **metadata)["test"][0]
    assert doc["truncated"] and doc["prompt_tokens"] > 2048 and 0 < doc["dropped_chunks"] < 60
    fitter = prompt_fitter(metadata, 128, "fin_agentbench_chunk")
    assert fitter.prompt_tokens(doc["prompt"]) <= 2048 - 128
    assert "Question: What was Northwind's revenue in fiscal 2025?" in doc["prompt"]
    assert scored(doc, "[0]")["truncated_documents"] == 1.0


def test_tokenizer_arguments_follow_lm_evals_models():
    hf = {"pretrained": "m", "revision": "r1", "trust_remote_code": True, "gguf_file": "m.gguf", "subfolder": "s"}
    assert tokenizer_arguments(hf) == ("m", {"trust_remote_code": True, "revision": "r1", "gguf_file": "m.gguf",
                                             "subfolder": "s"})
    # a separate tokenizer: no GGUF file for it (lm-eval's hf does the same)
    assert tokenizer_arguments({**hf, "tokenizer": "t"})[1].get("gguf_file") is None
    assert tokenizer_arguments({**hf, "tokenizer": "t"})[0] == "t"
    # vllm's spellings, and model arguments lm-eval left as strings
    vllm = {"pretrained": "m", "tokenizer_revision": "r2", "revision": "r1", "tokenizer_mode": "slow",
            "trust_remote_code": "True"}
    assert tokenizer_arguments(vllm) == ("m", {"trust_remote_code": True, "revision": "r2", "use_fast": False})
    assert tokenizer_arguments({"model": "gpt-4o", "use_fast_tokenizer": False}) == (
        "gpt-4o", {"trust_remote_code": False, "use_fast": False})
    assert tokenizer_arguments({"max_length": 10}) == (None, {"trust_remote_code": False})
    assert config_arguments(hf) == ("m", {"trust_remote_code": True, "revision": "r1", "subfolder": "s",
                                          "gguf_file": "m.gguf"})
