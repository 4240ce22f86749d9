"""``lm-eval-fin export`` through the real console script, on lm-eval folders written in our
tasks' shape (tests/lm_eval_folders.py): Every Eval Ever records checked against the schema
files of the every-eval-ever 0.3.0 wheel (``make install`` downloads it into .cache/), the
model-index block read back by huggingface_hub's model-card parser, and our results and
samples loaded with ``datasets`` the way lm-eval's hub card loads them."""

from __future__ import annotations

import doctest
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import datasets
import jsonschema
import pyarrow.json
import pytest
import yaml
from huggingface_hub import ModelCard

from lm_eval_fin.benchmarks import all_benchmarks
from lm_eval_fin.export import eee, facts
from lm_eval_fin.harness import taskfiles
from lm_eval_fin.report import stats
from lm_eval_fin.scales import matching, scale_of
from tests.lm_eval_folders import JUDGE, JUDGE_MODEL, agentbench_fixture, judged_runs, write_run

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DATASTORE_PATH = re.compile(r"data/[^/]+/[^/]+/[^/]+/[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def export(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([BIN / "lm-eval-fin", "export", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    return judged_runs(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def exported(runs, tmp_path_factory) -> tuple[Path, dict[str, tuple[Path, dict]]]:
    """The EEE export of the three judged runs: (out folder, task -> (aggregate file, record))."""
    out = tmp_path_factory.mktemp("eee")
    result = export(*runs.values(), "--format", "eee", "--output_path", out, "--organization", "tests")
    assert result.returncode == 0, result.stderr
    found = {}
    for path in out.glob("data/*/*/*/*.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        found[path.parts[-4]] = (path, record)
    assert set(found) == set(runs)
    return out, found


def results_of(record: dict) -> dict[str, dict]:
    return {result["evaluation_result_id"]: result for result in record["evaluation_results"]}


def bound(value: float | str) -> float:
    return float("inf") if value == "Infinity" else float("-inf") if value == "-Infinity" else float(value)


def test_records_pass_the_every_eval_ever_schemas_and_datastore_rules(exported, schemas):
    out, found = exported
    aggregate_schema, instance_schema = schemas
    assert aggregate_schema["version"] == instance_schema["version"] == eee.SCHEMA_VERSION
    aggregate_check, instance_check = jsonschema.Draft7Validator(aggregate_schema), jsonschema.Draft7Validator(
        instance_schema)
    for task, (path, record) in found.items():
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in aggregate_check.iter_errors(record)]
        assert not errors, (task, errors)
        assert DATASTORE_PATH.fullmatch(path.relative_to(out).with_suffix("").as_posix())
        detail = record["detailed_evaluation_results"]
        samples = out / detail["file_path"]
        assert detail["file_path"] == path.relative_to(out).with_name(f"{path.stem}_samples.jsonl").as_posix()
        assert detail["checksum"] == hashlib.sha256(samples.read_bytes()).hexdigest()
        rows = read_rows(samples)
        assert detail["total_rows"] == len(rows) > 0
        ids = set(results_of(record))
        for row in rows:
            errors = [f"{list(e.absolute_path)}: {e.message}" for e in instance_check.iter_errors(row)]
            assert not errors, (task, row["evaluation_result_id"], errors)
            assert (row["evaluation_id"], row["model_id"]) == (record["evaluation_id"], record["model_info"]["id"])
            assert row["evaluation_result_id"] in ids
        for result in record["evaluation_results"]:  # the validator's score checks, as warnings there
            config, score = result["metric_config"], result["score_details"]
            low, high = bound(config["min_score"]), bound(config["max_score"])
            assert low <= score["score"] <= high, result["evaluation_result_id"]
            interval = score["uncertainty"].get("confidence_interval")
            if interval:
                assert low <= interval["lower"] <= score["score"] <= interval["upper"] <= high
        model = record["model_info"]["additional_details"]
        assert (model["deployment_type"], model["model_availability"]) == ("self_deployed", "open_weights")


@pytest.mark.parametrize(("task", "metric", "low", "high", "lower_is_better", "unit"), [
    ("fin_lfqa", "judge_score", 3.0, 15.0, False, "points"),
    ("fin_lfqa", "judge_accuracy", 1.0, 5.0, False, "points"),
    ("fin_lfqa", "numeric_f1", 0.0, 1.0, False, "proportion"),
    ("fin_lfqa", "parse_failure", 0.0, 1.0, True, "proportion"),
    ("fin_lfqa", "bertscore_f1", -1.0, 1.0, False, "cosine similarity"),
    ("fin_lfqa", "truncated_answers", 0.0, "Infinity", True, "count"),
    ("fin_ems", "ems_llm_f1", 0.0, 1.0, False, "proportion"),
    ("fin_ems", "truncated_documents", 0.0, "Infinity", True, "count"),
    ("fin_agentbench_doc", "ndcg@5", 0.0, 1.0, False, "proportion"),
])
def test_each_metric_has_its_bounds_and_direction(exported, task, metric, low, high, lower_is_better, unit):
    config = results_of(exported[1][task][1])[metric]["metric_config"]
    assert (config["min_score"], config["max_score"], config["lower_is_better"], config["metric_unit"]) == (
        low, high, lower_is_better, unit)
    assert config["score_type"] == "continuous" and config["metric_id"].endswith(f".{metric}")


def test_counts_of_flags_and_cut_offs_say_so(exported):
    truncated = results_of(exported[1]["fin_lfqa"][1])["truncated_answers"]["metric_config"]["additional_details"]
    assert (truncated["per_document_min"], truncated["per_document_max"]) == ("0.0", "1.0")
    assert results_of(exported[1]["fin_agentbench_doc"][1])["ndcg@10"]["metric_config"]["metric_parameters"] == {
        "k": 10}


def test_uncertainty_is_lm_evals_stderr_and_the_bootstrap_of_the_documents(exported, runs):
    record = exported[1]["fin_lfqa"][1]
    figures = json.loads(next(runs["fin_lfqa"].rglob("results_*.json")).read_text())["results"]["fin_lfqa"]
    numeric = results_of(record)["numeric_f1"]["score_details"]["uncertainty"]
    expected = stats.bootstrap_interval([0.25, 0.5, 1.0])
    assert numeric["standard_error"]["value"] == pytest.approx(figures["numeric_f1_stderr,none"])
    assert (numeric["confidence_interval"]["lower"], numeric["confidence_interval"]["upper"]) == (
        expected.low, expected.high)
    assert numeric["num_samples"] == 3 and numeric["num_bootstrap_samples"] == stats.BOOTSTRAP_RESAMPLES
    judge = results_of(record)["judge_score"]["score_details"]
    assert judge["score"] == 9.5 and judge["uncertainty"]["num_samples"] == 2  # the unjudged document has no value
    assert "standard_error" not in judge["uncertainty"]  # a run-level aggregation: lm-eval gives "N/A"
    # BLEU's figure is corpus-level, not the mean of the documents' values: no interval of that mean
    bleu = results_of(exported[1]["fin_ems"][1])["bleu"]
    assert "confidence_interval" not in bleu["score_details"].get("uncertainty", {})
    assert "not the run's figure" in bleu["metric_config"]["additional_details"]["note"]


def test_dataset_source_is_the_hub_split_or_the_local_data_with_its_hash(exported, runs):
    lfqa = results_of(exported[1]["fin_lfqa"][1])["numeric_f1"]["source_data"]
    assert (lfqa["source_type"], lfqa["hf_repo"], lfqa["hf_split"]) == ("hf_dataset", "Dragongon/FinLFQA", "validation")
    assert lfqa["sample_ids"] == ["lfqa-0", "lfqa-1", "lfqa-2"]
    data = runs["fin_lfqa"].parent / "data-files"
    ems = results_of(exported[1]["fin_ems"][1])["bleu"]["source_data"]
    assert ems["source_type"] == "other"
    assert ems["additional_details"]["data_sha256"] == hashlib.sha256(
        (data / "earnings_call_qa.jsonl").read_bytes()).hexdigest()
    folder = results_of(exported[1]["fin_agentbench_doc"][1])["ndcg@5"]["source_data"]["additional_details"]
    file_digest = hashlib.sha256((data / "agentbench" / "document_ranking.jsonl").read_bytes()).hexdigest()
    assert folder["data_sha256"] == hashlib.sha256(f"document_ranking.jsonl\0{file_digest}\n".encode()).hexdigest()
    assert (folder["data_file"], folder["split"]) == ("agentbench", "test")


def test_judged_metrics_name_their_judge_and_others_do_not(exported):
    lfqa = results_of(exported[1]["fin_lfqa"][1])
    scoring = lfqa["judge_score"]["metric_config"]["llm_scoring"]
    judge = scoring["judges"][0]
    assert (judge["model_info"]["id"], judge["temperature"]) == (JUDGE_MODEL, 0.0)
    assert judge["model_info"]["additional_details"]["deployment_type"] == "self_deployed"  # a loopback server
    assert lfqa["judge_score"]["score_details"]["details"] == {
        "judge_spec": JUDGE, "judge_model": JUDGE_MODEL, "judge_prompt_version": "lfqa-prompt-1"}
    assert "lfqa-prompt-1" in scoring["input_prompt"]
    ragchecker = results_of(exported[1]["fin_ems"][1])["ragchecker_f1"]["score_details"]["details"]
    assert ragchecker["judge_prompt_version"] == "ems-prompts-1"
    for result in (lfqa["numeric_f1"], results_of(exported[1]["fin_agentbench_doc"][1])["ndcg@5"]):
        assert "llm_scoring" not in result["metric_config"] and "details" not in result["score_details"]


def test_generation_settings_and_what_the_run_did_not_define(exported):
    lfqa = exported[1]["fin_lfqa"][1]
    generation = lfqa["evaluation_results"][0]["generation_config"]
    assert generation["generation_args"] == {"temperature": 0.0, "max_tokens": 2048}
    assert generation["additional_details"]["do_sample"] == "false"
    undefined = lfqa["source_metadata"]["additional_details"]["undefined_metrics"].split(", ")
    assert "code_exec_rate" in undefined and "code_exec_rate" not in results_of(lfqa)
    agentbench = exported[1]["fin_agentbench_doc"][1]["evaluation_results"][0]["generation_config"]
    assert agentbench["generation_args"]["max_tokens"] == 64


def test_instance_rows_one_per_document_and_defined_value(exported):
    out, found = exported
    record = found["fin_lfqa"][1]
    rows = read_rows(out / record["detailed_evaluation_results"]["file_path"])
    by_metric: dict[str, dict[str, dict]] = {}
    for row in rows:
        by_metric.setdefault(row["evaluation_result_id"], {})[row["sample_id"]] = row
    assert set(by_metric["judge_score"]) == {"lfqa-0", "lfqa-1"}  # lfqa-2 was not judged
    assert set(by_metric["knowledge_recall"]) == {"lfqa-1", "lfqa-2"}
    assert by_metric["judge_score"]["lfqa-0"]["evaluation"] == {"score": 11.0, "is_correct": False}
    assert by_metric["judge_score"]["lfqa-0"]["metadata"]["judge_spec"] == JUDGE
    assert by_metric["numeric_f1"]["lfqa-2"]["evaluation"] == {"score": 1.0, "is_correct": True}
    assert by_metric["numeric_f1"]["lfqa-2"]["input"]["raw"] == "Reports ... question 2?"
    assert by_metric["numeric_f1"]["lfqa-2"]["answer_attribution"][0]["extracted_value"] == "answer 2 [1]"
    ranking = found["fin_agentbench_doc"][1]
    rows = read_rows(out / ranking["detailed_evaluation_results"]["file_path"])
    failures = {row["sample_id"]: row["evaluation"] for row in rows if row["evaluation_result_id"] == "parse_failure"}
    assert failures == {"q0": {"score": 0.0, "is_correct": True}, "q1": {"score": 0.0, "is_correct": True},
                        "q2": {"score": 1.0, "is_correct": False}}  # lower is better: 0 is the best


def test_a_local_model_needs_its_hub_id_and_a_run_without_samples_is_incomplete(tmp_path):
    results = write_run(tmp_path / "run", [agentbench_fixture(tmp_path)],
                        model_args="pretrained=/models/fin-tuned,dtype=float32")
    refused = export(tmp_path / "run", "--format", "eee", "--output_path", tmp_path / "out")
    assert refused.returncode == 2 and "--model_id" in refused.stderr
    next(results.parent.glob("samples_*.jsonl")).unlink()
    done = export(tmp_path / "run", "--format", "eee", "--output_path", tmp_path / "out", "--model_id", "acme/fin-tuned")
    assert done.returncode == 1 and "--log_samples" in done.stderr
    (aggregate,) = (tmp_path / "out" / "data" / "fin_agentbench_doc" / "acme" / "fin-tuned").iterdir()
    record = json.loads(aggregate.read_text())
    assert record["model_info"]["id"] == "acme/fin-tuned" and record["model_info"]["name"] == "/models/fin-tuned"
    assert record["model_info"]["additional_details"]["model_availability"] == "unknown"
    assert "detailed_evaluation_results" not in record


def test_model_index_parses_with_huggingface_hub(runs, exported, tmp_path):
    result = export(*runs.values(), "--format", "model-index", "--output_path", tmp_path,
                    "--source_url", "https://example.org/lm-eval-fin")
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "model-index.yaml").read_text(encoding="utf-8")
    card = ModelCard(f"---\n{text}---\n\n# A model\n")
    assert card.data.model_name == "HuggingFaceTB/SmolLM2-135M-Instruct"
    # the hub's own serialisation of what it parsed is the block we wrote
    assert card.data.to_dict()["model-index"] == yaml.safe_load(text)["model-index"]
    entries = {(r.task_name, r.dataset_type, r.dataset_split) for r in card.data.eval_results}
    assert entries == {("fin_lfqa", "Dragongon/FinLFQA", "validation"), ("fin_ems", "fin_ems", "test"),
                       ("fin_agentbench_doc", "fin_agentbench_doc", "test")}
    shown = {(r.task_name, r.metric_type): r.metric_value for r in card.data.eval_results}
    lfqa = next(b for b in all_benchmarks() if b.name == "fin_lfqa")
    defined = {"judge_score", "numeric_f1", "evidence_f1", "knowledge_recall", "rouge_l"}  # in the fixture
    assert [m for t, m in shown if t == "fin_lfqa"] == [m for m in lfqa.headline["fin_lfqa"] if m in defined]
    for task, (_, record) in exported[1].items():
        for (shown_task, metric), value in shown.items():
            if shown_task == task:
                assert value == round(results_of(record)[metric]["score_details"]["score"], 4)
    assert all(r.source_url == "https://example.org/lm-eval-fin" for r in card.data.eval_results)


def test_model_index_is_one_models(runs, tmp_path):
    other = write_run(tmp_path / "other", [agentbench_fixture(tmp_path)], model_args="pretrained=acme/other")
    result = export(runs["fin_lfqa"], other.parent.parent, "--format", "model-index", "--output_path", tmp_path)
    assert result.returncode == 2 and "one model" in result.stderr


# ------------------------------------------------------------------- hub-card loading


def test_results_and_samples_load_with_datasets_keeping_every_metric(runs, tmp_path):
    """lm-eval's hub card loads a results file with the json builder and each samples file as
    a split; every per-document metric column survives, those null for every document too.
    The json builder takes a column's type from its first 10 MB of lines, so a metric that is
    null there and a number later cannot be cast: the samples load with explicit features,
    every metric a float64 (the small ``chunksize`` makes that case here)."""
    cache = tmp_path / "datasets-cache"
    results_path = next(runs["fin_lfqa"].rglob("results_*.json"))
    loaded = datasets.load_dataset("json", data_files=str(results_path), split="train", cache_dir=str(cache))
    written = json.loads(results_path.read_text())["results"]["fin_lfqa"]
    assert loaded[0]["results"]["fin_lfqa"] == written  # null figures included
    samples_path = next(runs["fin_lfqa"].rglob("samples_*.jsonl"))
    metrics = [entry["metric"] for entry in taskfiles.task_config("fin_lfqa")["metric_list"]]
    whole = pyarrow.json.read_json(samples_path, read_options=pyarrow.json.ReadOptions(
        block_size=samples_path.stat().st_size + 1))
    features = datasets.Features.from_arrow_schema(whole.schema)
    assert features["code_exec_rate"] == datasets.Value("null")  # no document had code
    features.update({metric: datasets.Value("float64") for metric in metrics})
    samples = datasets.load_dataset("json", data_files={"latest": [str(samples_path)]}, split="latest",
                                    features=features, chunksize=256, cache_dir=str(cache))
    lines = read_rows(samples_path)
    for metric in metrics:
        assert samples[metric] == [line[metric] for line in lines], metric
    assert samples["judge_score"] == [11.0, 8.0, None] and samples["code_exec_rate"] == [None] * 3


# ------------------------------------------------------------------------ the scale tables


def test_every_metric_of_our_tasks_has_a_scale_and_every_headline_a_metric():
    assert {t.name for t in facts.all_tables()} == {b.name for b in all_benchmarks()}
    names: dict[str, set[str]] = {}
    for task, config in taskfiles.task_configs().items():
        tables = facts.tables_of(task)
        assert tables is not None, task
        for entry in config["metric_list"]:
            scale = scale_of(entry["metric"], tables.scales)
            assert scale is not None, (task, entry["metric"])
            # a run total of per-document flags has a per-document scale of its own
            assert (scale.item is not None) == (entry["aggregation"] == "utils.total"), (task, entry["metric"])
            names.setdefault(tables.name, set()).add(entry["metric"])
    for tables in facts.all_tables():
        for task, headline in tables.headlines.items():
            for name in headline:
                assert matching(names[tables.name], [name]), (task, name)


def test_scales_doctests():
    import lm_eval_fin.scales

    assert doctest.testmod(lm_eval_fin.scales).failed == 0
