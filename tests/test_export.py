"""``lm-eval-fin export`` through the real console script, on lm-eval folders written in our
tasks' shape (tests/lm_eval_folders.py): Every Eval Ever records checked against the schema
files of the every-eval-ever 0.3.0 wheel (``make install`` downloads it into .cache/), the
model-index block read back by huggingface_hub's model-card parser, and our results and
samples loaded with ``datasets`` the way lm-eval's hub card loads them."""

from __future__ import annotations

import datetime
import doctest
import hashlib
import json
import re
import shutil
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
from lm_eval_fin.measures.scales import matching, scale_of
from lm_eval_fin.plumbing import paths
from lm_eval_fin.report import stats
from tests.lm_eval_folders import JUDGE, JUDGE_MODEL, agentbench_fixture, judged_runs, write_run
from tests.logged_runs import MODEL, lfqa_documents, write_predict_only_run

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
    # lm-eval's mean over the judged documents, with its stderr
    assert judge["uncertainty"]["standard_error"]["value"] == pytest.approx(figures["judge_score_stderr,none"])
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
    # a local file is no split of the benchmark: its name and hash say what it was
    assert (folder["data_file"], folder["data_source"]) == ("agentbench", "local file") and "split" not in folder


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
    assert record["model_info"]["id"] == record["model_info"]["name"] == "acme/fin-tuned"
    details = record["model_info"]["additional_details"]
    assert details["model_availability"] == "unknown"
    # the weights as run, by the folder's name: never its path here
    assert (details["local_weights"], details["weights"]) == ("fin-tuned", "local weights 'fin-tuned' (not on the hub)")
    assert "/models" not in aggregate.read_text()
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
    # local data is no split of a benchmark; with no dataset id known its type is the task's name
    assert entries == {("fin_lfqa", "Dragongon/FinLFQA", "validation"), ("fin_ems", "fin_ems", None),
                       ("fin_agentbench_doc", "fin_agentbench_doc", None)}
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
    import lm_eval_fin.measures.scales

    assert doctest.testmod(lm_eval_fin.measures.scales).failed == 0


def test_public_doctests():
    import lm_eval_fin.export.public

    assert doctest.testmod(lm_eval_fin.export.public).attempted and not doctest.testmod(
        lm_eval_fin.export.public).failed


# ------------------------------------------------------------------- cards that say what ran


def report(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([BIN / "lm-eval-fin", "report", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def one_error(done: subprocess.CompletedProcess, status: int, *phrases: str) -> str:
    """The single ``error:`` line of a command that exited ``status``, holding every phrase."""
    assert done.returncode == status, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert all(phrase in line for phrase in phrases), line
    return line


def every_text(folder: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*")) if p.is_file())


def embedded_run(tmp_path: Path) -> Path:
    """A run of the embedded model as `lm-eval-fin model-path` converts it, in a home cache."""
    cache = tmp_path / "home" / ".cache" / "lm_eval_fin" / "models" / paths.EMBEDDED_MODEL_NAME
    write_run(tmp_path / "gguf-run", [agentbench_fixture(tmp_path / "data")],
              model_args=f"pretrained={cache},dtype=float32")
    return tmp_path / "gguf-run"


def test_a_run_of_the_embedded_gguf_is_carded_as_the_quantized_weights(tmp_path):
    run = embedded_run(tmp_path)
    refused = export(run, "--format", "model-index", "--output_path", tmp_path / "card",
                     "--model_id", paths.EMBEDDED_BASE_MODEL)
    one_error(refused, 2, "Q4_1", paths.EMBEDDED_MODEL_FILE, f"not {paths.EMBEDDED_BASE_MODEL}'s own weights")
    assert not (tmp_path / "card").exists()
    done = export(run, "--format", "model-index", "--output_path", tmp_path / "card")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "card" / "model-index.yaml").read_text(encoding="utf-8")
    card = ModelCard(f"---\n{text}---\n")
    assert card.data.model_name == paths.EMBEDDED_MODEL_REPO
    assert card.data.eval_results[0].metric_args["weights"] == (
        f"{paths.EMBEDDED_MODEL_REPO}@{paths.EMBEDDED_MODEL_REVISION[:12]} {paths.EMBEDDED_MODEL_FILE} (Q4_1)")
    (weights,) = [line for line in text.splitlines() if line.startswith("# weights: ")]
    assert weights.startswith(f"# weights: GGUF file {paths.EMBEDDED_MODEL_FILE} (Q4_1 quantization) of "
                              f"{paths.EMBEDDED_MODEL_REPO} at revision {paths.EMBEDDED_MODEL_REVISION}")
    assert f"a quantization of {paths.EMBEDDED_BASE_MODEL}" in weights
    eee_done = export(run, "--format", "eee", "--output_path", tmp_path / "eee")
    assert eee_done.returncode == 0, eee_done.stderr
    (aggregate,) = (tmp_path / "eee").rglob("*-*-*-*-*[0-9a-f].json")
    model = json.loads(aggregate.read_text())["model_info"]
    assert model["id"] == paths.EMBEDDED_MODEL_REPO
    assert (model["additional_details"]["quantization"], model["additional_details"]["gguf_file"],
            model["additional_details"]["base_model"]) == ("Q4_1", paths.EMBEDDED_MODEL_FILE, paths.EMBEDDED_BASE_MODEL)
    assert str(tmp_path) not in every_text(tmp_path / "eee") + text


def test_a_shipped_sample_is_named_with_its_hash_and_is_no_split(tmp_path):
    shipped = paths.data_path("finagentbench_demo")
    write_run(tmp_path / "run", [agentbench_fixture(shipped)])
    done = export(tmp_path / "run", "--format", "model-index", "--output_path", tmp_path / "card")
    assert done.returncode == 0, done.stderr
    card = ModelCard(f"---\n{(tmp_path / 'card' / 'model-index.yaml').read_text(encoding='utf-8')}---\n")
    result = card.data.eval_results[0]
    assert result.dataset_split is None and result.dataset_type == "fin_agentbench_doc"  # no dataset id known
    assert result.dataset_args == {"data_source": "shipped sample", "data_file": "finagentbench_demo",
                                   "data_sha256": facts.content_sha256(shipped)}
    assert result.dataset_name == "shipped sample finagentbench_demo (fin_agentbench_doc)"
    given = export(tmp_path / "run", "--format", "model-index", "--output_path", tmp_path / "given",
                   "--dataset_id", "acme/fin-agent-bench")
    assert given.returncode == 0, given.stderr
    card = ModelCard(f"---\n{(tmp_path / 'given' / 'model-index.yaml').read_text(encoding='utf-8')}---\n")
    assert card.data.eval_results[0].dataset_type == "acme/fin-agent-bench"
    assert card.data.eval_results[0].dataset_split is None
    eee_done = export(tmp_path / "run", "--format", "eee", "--output_path", tmp_path / "eee")
    (aggregate,) = (tmp_path / "eee").rglob("*-*-*-*-*[0-9a-f].json")
    source = json.loads(aggregate.read_text())["evaluation_results"][0]["source_data"]
    assert eee_done.returncode == 0 and source["additional_details"]["data_source"] == "shipped sample"
    assert "split" not in source["additional_details"] and "hf_split" not in source


def test_the_card_names_judge_generation_n_bertscore_model_and_every_metric_with_no_value(runs, tmp_path):
    copy = tmp_path / "fin_lfqa"
    shutil.copytree(runs["fin_lfqa"], copy)
    results_path = next(copy.rglob("results_*.json"))
    results = json.loads(results_path.read_text())
    results["results"]["fin_lfqa"]["judge_accuracy,none"] = None  # the judge gave it for no document
    results_path.write_text(json.dumps(results))
    done = export(copy, "--format", "model-index", "--output_path", tmp_path / "card")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "card" / "model-index.yaml").read_text(encoding="utf-8")
    metrics = {r.metric_type: r for r in ModelCard(f"---\n{text}---\n").data.eval_results}
    judge = metrics["judge_score"].metric_args
    assert (judge["judge"], judge["judge_prompt_version"], judge["n"]) == (JUDGE, "lfqa-prompt-1", "2")
    assert judge["generation"].startswith("until=[], do_sample=false, temperature=0.0, max_gen_toks=2048")
    assert "judge" not in metrics["numeric_f1"].metric_args and metrics["numeric_f1"].metric_args["n"] == "3"
    # what the block cannot hold is named, with why, above it and on stderr
    (undefined,) = [line for line in text.splitlines() if line.startswith("# fin_lfqa: no value, left out: ")]
    assert "judge_accuracy (the judge gave no usable value for any document)" in undefined
    assert "code_exec_rate, code_syntax" in undefined
    assert "judge_accuracy (the judge gave no usable value for any document)" in done.stderr
    eee_done = export(runs["fin_ems"], "--format", "eee", "--output_path", tmp_path / "eee")
    (aggregate,) = (tmp_path / "eee").rglob("*-*-*-*-*[0-9a-f].json")
    bertscore = results_of(json.loads(aggregate.read_text()))["bertscore_f1"]["metric_config"]["additional_details"]
    assert eee_done.returncode == 0 and bertscore["bertscore_model"] == "roberta-large (bert-score's default)"


def test_no_exported_file_holds_a_local_path(runs, tmp_path):
    given = [*runs.values(), embedded_run(tmp_path)]
    for index, form in enumerate(("eee", "model-index", "eval-results")):
        for number, run in enumerate(given):
            done = export(run, "--format", form, "--output_path", tmp_path / "out" / f"{index}-{number}",
                          "--dataset_id", "acme/fin-bench", "--model_id", "acme/model")
            assert done.returncode == 0, done.stderr
    text = every_text(tmp_path / "out")
    for local in (str(tmp_path), str(Path.home()), "/tmp/", "data-files"):
        assert local not in text, local
    assert "earnings_call_qa.jsonl" in text and "agentbench" in text  # files named by their names


# ----------------------------------------------------------------------------- eval-results

# the fields of a .eval_results/*.yaml result as the hub documents them (hub-docs, eval-results.md)
EVAL_RESULT_FIELDS = {"dataset", "value", "verifyToken", "date", "source", "evaluation_framework", "notes"}
EVAL_DATASET_FIELDS = {"id", "task_id", "revision", "config", "split"}
EVAL_SOURCE_FIELDS = {"url", "name", "user"}


def read_eval_results(folder: Path) -> dict[str, dict]:
    """Each file's one result, checked against the documented fields and types."""
    found = {}
    for path in sorted((folder / ".eval_results").glob("*.yaml")):
        entries = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert isinstance(entries, list) and len(entries) == 1, path
        (entry,) = entries
        assert set(entry) <= EVAL_RESULT_FIELDS and {"dataset", "value"} <= set(entry), entry
        assert set(entry["dataset"]) <= EVAL_DATASET_FIELDS and {"id", "task_id"} <= set(entry["dataset"])
        assert facts.HUB_ID.fullmatch(entry["dataset"]["id"])
        assert isinstance(entry["value"], (int, float)) and not isinstance(entry["value"], bool)
        datetime.datetime.fromisoformat(entry["date"].replace("Z", "+00:00"))
        if "source" in entry:
            assert set(entry["source"]) <= EVAL_SOURCE_FIELDS and entry["source"]["url"].startswith("https://")
        assert isinstance(entry.get("notes", ""), str)
        found[path.stem] = entry
    return found


def task_version(run: Path) -> str:
    """The task's version as the run's results file records it (lm-eval's ``versions``)."""
    (results_path,) = run.rglob("results_*.json")
    return str(json.loads(results_path.read_text(encoding="utf-8"))["versions"][run.name])


def test_eval_results_are_the_hubs_files_for_tasks_with_a_dataset_id(runs, exported, tmp_path):
    done = export(*runs.values(), "--format", "eval-results", "--output_path", tmp_path / "known",
                  "--source_url", "https://example.org/lm-eval-fin", "--source_user", "acme")
    assert done.returncode == 1  # two tasks read local data: not filed under any benchmark, and named
    for task in ("fin_ems", "fin_agentbench_doc"):
        assert f"{task}: not written: no hub dataset id" in done.stderr and "--dataset_id" in done.stderr
    (lfqa,) = read_eval_results(tmp_path / "known").values()
    assert lfqa["dataset"] == {"id": "Dragongon/FinLFQA", "task_id": "fin_lfqa"}
    figure = results_of(exported[1]["fin_lfqa"][1])["judge_score"]["score_details"]["score"]
    assert lfqa["value"] == round(figure, 4) and lfqa["date"] == "2025-06-01T12:00:00Z"
    assert lfqa["source"] == {"url": "https://example.org/lm-eval-fin", "user": "acme",
                              "name": "lm-eval-fin 0.1.0 (lm-evaluation-harness 0.4.13)"}
    notes = lfqa["notes"]
    for phrase in ("value: judge_score, range 3 to 15, higher is better", "documents: 2",
                   "weights: HuggingFaceTB/SmolLM2-135M-Instruct at revision not recorded",
                   "data: hub dataset Dragongon/FinLFQA, split validation", f"judge: {JUDGE}",
                   "judge prompt version: lfqa-prompt-1", "generation: until=[], do_sample=false",
                   "no value: code_exec_rate", f"lm-eval task fin_lfqa version {task_version(runs['fin_lfqa'])}"):
        assert phrase in notes, phrase
    given = export(*runs.values(), "--format", "eval-results", "--output_path", tmp_path / "given",
                   "--dataset_id", "acme/fin-bench")
    assert given.returncode == 0, given.stderr
    files = read_eval_results(tmp_path / "given")
    assert set(files) == set(runs) and all("source" not in f or f["source"]["url"] for f in files.values())
    assert {f["dataset"]["id"] for f in files.values()} == {"acme/fin-bench"}
    assert "data: local file earnings_call_qa.jsonl (sha256 " in files["fin_ems"]["notes"]
    nothing = export(runs["fin_ems"], "--format", "eval-results", "--output_path", tmp_path / "none")
    one_error(nothing, 2, "no task could be written")
    assert not (tmp_path / "none").exists()


# ------------------------------------------------------------------ paths built from data


def test_names_read_from_run_files_or_given_never_leave_the_output_folder(tmp_path):
    out = tmp_path / "deep" / "er" / "out"
    for bad in ("../..", "acme/../x", "/abs/x", "a" * 97 + "/b"):
        refused = export(embedded_run(tmp_path), "--format", "eee", "--output_path", out, "--model_id", bad)
        one_error(refused, 2, "--model_id", "is not ORG/NAME")
    for task in ("../../../escaped", str(tmp_path / "absolute")):
        results = write_run(tmp_path / "named" / str(len(task)), [agentbench_fixture(tmp_path / "data")])
        document = json.loads(results.read_text())
        for key in ("results", "configs", "versions", "higher_is_better", "n-samples"):
            document[key] = {task: document[key]["fin_agentbench_doc"]}
        results.write_text(json.dumps(document))
        for form in ("eee", "eval-results", "model-index"):
            refused = export(results.parent.parent, "--format", form, "--output_path", out, "--dataset_id", "a/b")
            one_error(refused, 2, "no lm-eval run could be read")
            assert "is no file name" in refused.stderr
    hub_shaped = write_run(tmp_path / "dots", [agentbench_fixture(tmp_path / "data")], model_args="pretrained=acme/..")
    one_error(export(hub_shaped.parent.parent, "--format", "eee", "--output_path", out), 2, "model id 'acme/..'")
    assert not (tmp_path / "deep").exists() and not (tmp_path / "absolute").exists()


# ------------------------------------------------------------- run folders read whole or not


def test_a_scored_predict_only_run_is_read_as_the_scored_run(tmp_path):
    """The documented flow: run --predict_only, then score; report and export read the scored run."""
    answer = "1. CWT's net interest expense rose 25% to $125 million.\nEvidence: CWT [1]"
    write_predict_only_run(tmp_path / "run", "fin_lfqa", lfqa_documents(tmp_path), [answer, answer])
    scored = subprocess.run([BIN / "lm-eval-fin", "score", tmp_path / "run", "--judge", "none",
                             "--confirm_run_unsafe_code"], capture_output=True, text=True, timeout=600)
    assert scored.returncode == 0, scored.stderr[-3000:]
    done = export(tmp_path / "run", "--format", "model-index", "--output_path", tmp_path / "card")
    assert done.returncode == 0 and "reports no figure" not in done.stderr, done.stderr
    card = ModelCard(f"---\n{(tmp_path / 'card' / 'model-index.yaml').read_text(encoding='utf-8')}---\n")
    assert card.data.model_name == MODEL and {r.task_name for r in card.data.eval_results} == {"fin_lfqa"}
    page = report(tmp_path / "run", "--output_path", tmp_path / "report")
    assert page.returncode == 0 and "reports no figure" not in page.stderr, page.stderr
    # unscored, it is still named as what it is
    (tmp_path / "alone").mkdir()
    for path in (tmp_path / "run").rglob("*2025-01-02*"):
        shutil.copy(path, tmp_path / "alone")
    one_error(export(tmp_path / "alone", "--format", "eee", "--output_path", tmp_path / "x"), 2,
              "no lm-eval run could be read")


def broken_copy(runs: dict[str, Path], tmp_path: Path, name: str) -> tuple[Path, Path, dict]:
    """A copy of the fin_agentbench_doc run: (folder, samples file, results document)."""
    copy = tmp_path / name
    shutil.copytree(runs["fin_agentbench_doc"], copy)
    return copy, next(copy.rglob("samples_*.jsonl")), json.loads(next(copy.rglob("results_*.json")).read_text())


def save_results(folder: Path, document: dict) -> None:
    next(folder.rglob("results_*.json")).write_text(json.dumps(document))


def test_a_cut_samples_line_refuses_the_run_naming_file_and_line(runs, tmp_path):
    folder, samples, _ = broken_copy(runs, tmp_path, "cut")
    text = samples.read_text()
    samples.write_text(text[:-40])  # a write cut mid-line
    where = f"{samples}:3: not JSON"
    exported_ = export(folder, "--format", "eee", "--output_path", tmp_path / "eee")
    one_error(exported_, 2, "no lm-eval run could be read")
    assert where in exported_.stderr and "--log_samples" not in exported_.stderr
    assert not (tmp_path / "eee").exists()
    page = report(folder, runs["fin_lfqa"], "--output_path", tmp_path / "report")
    assert page.returncode == 1 and where in page.stderr and "--log_samples" not in page.stderr, page.stderr


def test_samples_of_another_run_under_a_results_file_are_refused(runs, tmp_path):
    folder, samples, results = broken_copy(runs, tmp_path, "fewer")
    samples.write_text("".join(samples.read_text().splitlines(keepends=True)[:2]))
    refused = export(folder, "--format", "eee", "--output_path", tmp_path / "out")
    one_error(refused, 2, "no lm-eval run could be read")
    assert "holds 2 documents of fin_agentbench_doc, its results file counts 3" in refused.stderr
    # as many documents, but not those lm-eval hashed when it wrote the results
    folder, samples, results = broken_copy(runs, tmp_path, "other")
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    results["task_hashes"] = {"fin_agentbench_doc": hashlib.sha256("".join(
        line["doc_hash"] + line["prompt_hash"] + line["target_hash"] for line in lines).encode()).hexdigest()}
    save_results(folder, results)
    assert export(folder, "--format", "eee", "--output_path", tmp_path / "whole").returncode == 0
    lines[1]["doc_hash"] = lines[2]["doc_hash"]
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines))
    refused = export(folder, "--format", "eee", "--output_path", tmp_path / "out")
    one_error(refused, 2, "no lm-eval run could be read")
    assert f"{samples}: its documents, prompts or targets are not those" in refused.stderr


def test_a_results_file_missing_a_metric_or_its_config_is_refused_in_one_line(runs, tmp_path):
    folder, _, results = broken_copy(runs, tmp_path, "no-metric")
    del results["results"]["fin_agentbench_doc"]["ndcg@5,none"], results["results"]["fin_agentbench_doc"][
        "ndcg@5_stderr,none"]
    save_results(folder, results)
    refused = export(folder, "--format", "model-index", "--output_path", tmp_path / "out")
    one_error(refused, 2, "no lm-eval run could be read")
    assert "no figure of ndcg@5, but " in refused.stderr and "has a value of it" in refused.stderr
    for key in ("configs", "versions"):
        folder, _, results = broken_copy(runs, tmp_path, f"no-{key}")
        del results[key]
        save_results(folder, results)
        refused = export(folder, "--format", "eee", "--output_path", tmp_path / "out")
        one_error(refused, 2, "no lm-eval run could be read")
        (reason,) = [line for line in refused.stderr.splitlines() if "cannot read" in line]
        assert f"fin_agentbench_doc has no '{key}' entry" in reason and "task_version" not in refused.stderr


def test_a_hub_model_is_carded_at_the_revision_that_ran(tmp_path):
    results = write_run(tmp_path / "run", [agentbench_fixture(tmp_path / "data")],
                        model_args="pretrained=acme/fin-model,revision=v2")
    done = export(tmp_path / "run", "--format", "model-index", "--output_path", tmp_path / "named")
    card = ModelCard(f"---\n{(tmp_path / 'named' / 'model-index.yaml').read_text(encoding='utf-8')}---\n")
    assert done.returncode == 0 and card.data.eval_results[0].metric_args["weights"] == "acme/fin-model@v2"
    document = json.loads(results.read_text())
    document["config"].update(model_revision="v2", model_sha="0123456789abcdef0123")  # lm-eval's, where the hub answered
    results.write_text(json.dumps(document))
    done = export(tmp_path / "run", "--format", "eee", "--output_path", tmp_path / "eee")
    (aggregate,) = (tmp_path / "eee").rglob("*-*-*-*-*[0-9a-f].json")
    details = json.loads(aggregate.read_text())["model_info"]["additional_details"]
    assert done.returncode == 0 and details["weights"] == "acme/fin-model at revision 0123456789abcdef0123"
