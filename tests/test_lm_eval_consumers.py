"""Our output folders as lm-eval's own consumers read them: a judged fin_ems run, a judged
fin_lfqa run and a fin_agentbench run through ``lm-eval-fin run`` (lm-eval's own CLI, in
process, with our task folder; the embedded model answers, a scripted judge behind the real
OpenAI-compatible test server judges; lm-eval's W&B logger on, offline), then

* strict JSON: the results file and every samples line parse with NaN and Infinity refused;
* lm-eval's results: a metric of each task's ``metric_list`` is a number with a stderr key
  where the run defines it, and absent where it does not (never null: lm-eval 0.4 and 0.5 add
  up what they aggregate); each samples line holds every listed metric, null where undefined
  (lm-eval's per-sample table builders read them all);
* W&B: the figures ``WandbLogger`` logs (``_sanitize_results_dict``) hold the headline metrics
  (EMS, BERTScore, the judge's); the samples table it logged during the run (offline) has a
  column for every listed metric, values where defined;
* Zeno: lm-eval's ``scripts/zeno_visualize.py`` (not on PyPI: a copy in
  ``tests/lm_eval_scripts``) with the real ``zeno_client``: the metrics it registers (those
  whose aggregation is ``mean``) hold the headline metrics, and its dataset and system tables
  build from the folder with every listed metric a column;
* ``datasets``: the samples of a judged and an unjudged run load as one set with
  :func:`lm_eval_fin.harness.samples.samples_features`;
* ``lm-eval-fin export``: Every Eval Ever records valid against the every-eval-ever schemas,
  and a model card's model-index that huggingface_hub reads;
* Every Eval Ever's own lm-eval converter and validator (``.venv-eee``) on one model folder
  holding a fin_lfqa run and a fin_lfqa-test run: each record gets its own task's samples;
* ``lm-eval-fin agreement``: the judged runs against labels, through the console script.

Nothing but lm-eval's model folders may be written into ``--output_path``.
"""

import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lm_eval_fin.benchmarks import demo_data
from lm_eval_fin.plumbing import paths
from tests.ems_scripted_judge import ScriptedJudgeServer
from tests.openai_server import ServerProcess

BIN = Path(sys.executable).parent
VERDICT = json.dumps({"accuracy": 4, "numerical_correctness": 3, "evidence_entailment": 5})


def strict_json(text: str):
    return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))


@pytest.fixture(scope="module")
def output_roots(tmp_path_factory, embedded_model_dir):
    """name -> the --output_path of one lm_eval run (the three run side by side)."""
    root = tmp_path_factory.mktemp("consumers")
    with ScriptedJudgeServer() as ems_judge, ServerProcess(reply=VERDICT) as lfqa_judge:
        runs = {
            "fin_agentbench": ({"data_path": str(demo_data("fin_agentbench"))}, None, []),
            "fin_ems": ({"data_path": str(demo_data("fin_ems")), "bertscore_model": "offline",
                         "max_gen_toks": 16}, ems_judge.spec, []),
            "fin_lfqa": ({"data_path": str(demo_data("fin_lfqa", "finlfqa_demo.jsonl")),
                          "bertscore_model": "offline"}, f"openai:{lfqa_judge.base_url}#verdict",
                         ["--confirm_run_unsafe_code", "--limit", "2"]),
        }
        processes = {}
        for name, (metadata, judge, extra) in runs.items():
            env = dict(os.environ, LM_EVAL_FIN_CACHE=str(root / f"{name}.sqlite"), WANDB_MODE="offline",
                       WANDB_SILENT="true")
            env.pop("LM_EVAL_FIN_JUDGE", None)
            if judge:
                env["LM_EVAL_FIN_JUDGE"] = judge
            processes[name] = subprocess.Popen(
                [BIN / "lm-eval-fin", "run", "--model", "hf",
                 "--model_args", f"pretrained={embedded_model_dir},dtype=float32", "--apply_chat_template",
                 "--tasks", name, "--gen_kwargs", "max_gen_toks=16", "--metadata", json.dumps(metadata),
                 *(extra if "--limit" in extra else [*extra, "--limit", "1"]), "--output_path", str(root / name),
                 "--log_samples", "--wandb_args", f"project=lm-eval-fin,dir={wandb_dir(root, name)}"],
                cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )
        for name, process in processes.items():
            log, _ = process.communicate(timeout=900)
            assert process.returncode == 0, f"{name}: {log[-4000:]}"
            assert "Logging to W&B failed" not in log, f"{name}: {log[-4000:]}"
    return {name: root / name for name in runs}


def wandb_dir(root: Path, name: str) -> Path:
    """Where a run of ``output_roots`` keeps its offline W&B run (beside --output_path, not in it)."""
    folder = root / f"{name}-wandb"
    folder.mkdir(exist_ok=True)
    return folder


def unjudged_lfqa_run(output_path: Path, model_dir: Path, task: str, *selection: str) -> None:
    """A run of a FinLFQA task on the demo file without a judge into ``output_path``: no judge
    metric in any line. ``selection``: lm-eval's --limit or --samples, and --predict_only.

    The model is named by its repository's id, a relative path linked to the embedded model's
    folder: Every Eval Ever's converter takes ``pretrained`` for the model's id, and refuses a
    local absolute path."""
    link = output_path.parent / paths.EMBEDDED_MODEL_REPO
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(model_dir, target_is_directory=True)
    env = {key: value for key, value in os.environ.items() if key != "LM_EVAL_FIN_JUDGE"}
    metadata = {"data_path": str(demo_data("fin_lfqa", "finlfqa_demo.jsonl")), "judge": "none",
                "bertscore_model": "offline"}
    done = subprocess.run(
        [BIN / "lm_eval", "run", "--include_path", str(paths.tasks_dir()), "--model", "hf", "--model_args",
         f"pretrained={paths.EMBEDDED_MODEL_REPO},dtype=float32", "--apply_chat_template", "--tasks", task,
         "--gen_kwargs", "max_gen_toks=16", "--metadata", json.dumps(metadata), "--confirm_run_unsafe_code",
         *selection, "--output_path", str(output_path), "--log_samples"],
        cwd=output_path.parent, env=dict(env, LM_EVAL_FIN_CACHE=str(output_path.parent / f"{task}.sqlite")),
        capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]


@pytest.fixture(scope="module")
def unjudged_lfqa_root(tmp_path_factory, embedded_model_dir):
    """The --output_path of a fin_lfqa run without a judge: no judge metric in any line."""
    root = tmp_path_factory.mktemp("unjudged") / "fin_lfqa"
    unjudged_lfqa_run(root, embedded_model_dir, "fin_lfqa", "--limit", "2")
    return root


def latest(paths_: list[Path]) -> Path:
    return max(paths_, key=lambda p: p.stem.rsplit("_", 1)[-1])


def run_files(root: Path) -> tuple[dict, dict[str, list[dict]]]:
    (model_dir,) = [p for p in root.iterdir()]  # lm-eval's model folder, and nothing beside it
    assert model_dir.is_dir()
    results = strict_json(latest(list(model_dir.glob("results_*.json"))).read_text())
    samples = {
        task: [strict_json(line) for line in latest(list(model_dir.glob(f"samples_{task}_*.jsonl"))).read_text().splitlines()]
        for task in results["configs"]
    }
    return results, samples


@pytest.mark.parametrize("name", ["fin_agentbench", "fin_ems", "fin_lfqa"])
def test_results_and_samples_are_strict_json_with_every_listed_metric(output_roots, name):
    results, samples = run_files(output_roots[name])
    for task, lines in samples.items():
        listed = [entry["metric"] for entry in results["configs"][task]["metric_list"]]
        entry = results["results"][task]
        for metric in listed:
            if f"{metric},none" in entry:
                assert isinstance(entry[f"{metric},none"], (int, float)), (task, metric, entry[f"{metric},none"])
                assert f"{metric}_stderr,none" in entry
            else:  # undefined on every document: null in every line
                assert all(line[metric] is None for line in lines), (task, metric)
        assert lines
        for line in lines:
            for metric in listed:  # every listed metric, null where undefined (lm-eval's `metrics` names the others)
                assert isinstance(line[metric], float) or (line[metric] is None and metric not in line["metrics"]), (
                    task, metric, line[metric])
            record = json.loads(line["filtered_resps"][0])
            assert record["format"].startswith("lm-eval-fin/") and isinstance(record["answer"], str)


def test_judged_values_are_per_sample_with_the_judge_named(output_roots):
    results, samples = run_files(output_roots["fin_lfqa"])
    line = samples["fin_lfqa"][0]
    assert (line["judge_accuracy"], line["judge_numerical"], line["judge_entailment"], line["judge_score"]) == (
        4.0, 3.0, 5.0, 12.0)
    record = json.loads(line["filtered_resps"][0])
    assert record["judge"]["spec"].endswith("#verdict") and record["judge"]["scores"]["accuracy"] == 4
    assert results["results"]["fin_lfqa"]["judge_score,none"] == 12.0
    _, ems_samples = run_files(output_roots["fin_ems"])
    (ems_line,) = ems_samples["fin_ems"]
    assert ems_line["judge_failure"] == 0.0 and ems_line["ems_offline_rouge_f1"] is None
    assert json.loads(ems_line["filtered_resps"][0])["ems"]["method"] == "llm"
    # each answer's judge work, in its record: one verdict request for FinLFQA, EMS's rounds
    assert record["judge_usage"]["requests"] == record["judge_usage"]["model_calls"] == 1
    ems_usage = json.loads(ems_line["filtered_resps"][0])["judge_usage"]
    assert ems_usage["requests"] >= 4 and ems_usage["model_calls"] <= ems_usage["requests"]


def test_the_report_sums_the_judge_work_of_the_answers(output_roots, tmp_path, capsys):
    from lm_eval_fin import cli
    from lm_eval_fin.report.render import count

    usage = {"requests": 0, "completion_tokens": 0}
    for name in ("fin_ems", "fin_lfqa"):
        _, samples = run_files(output_roots[name])
        for lines in samples.values():
            for line in lines:
                found = json.loads(line["filtered_resps"][0])["judge_usage"]
                usage = {key: usage[key] + found[key] for key in usage}
    code = cli.main(["report", str(output_roots["fin_ems"]), str(output_roots["fin_lfqa"]), "--output_path",
                     str(tmp_path / "report"), "--bootstrap_iters", "20"])
    capsys.readouterr()
    assert code == 0
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert f'{count(usage["requests"])} judge requests' in page and usage["requests"] > 0
    assert f'{count(usage["completion_tokens"])} completion tokens' in page


# the headline metrics of each judged run, defined there: what Zeno and W&B must show
HEADLINES = {
    "fin_ems": {"ems_llm_f1", "ems_llm_precision", "ems_llm_recall", "ems_rouge_f1", "bertscore_f1",
                "ragchecker_f1", "judge_failure", "rouge_l_f1"},
    "fin_lfqa": {"judge_score", "judge_accuracy", "judge_numerical", "judge_entailment", "bertscore_f1",
                 "numeric_f1", "evidence_f1", "rouge_l", "judge_failure"},
}


@pytest.mark.parametrize("name", list(HEADLINES))
def test_zeno_and_wandb_register_the_headline_metrics(output_roots, name):
    """Zeno registers a metric only where its aggregation is ``mean``; W&B logs the figures of
    the results that are numbers (strings go to its summary)."""
    from lm_eval.loggers.wandb_logger import WandbLogger

    results, _ = run_files(output_roots[name])
    zeno = {metric["metric"] for metric in results["configs"][name]["metric_list"] if metric.get("aggregation") == "mean"}
    assert HEADLINES[name] <= zeno, HEADLINES[name] - zeno
    logger = WandbLogger.__new__(WandbLogger)
    logger.post_init(results)
    _, figures = logger._sanitize_results_dict()
    wandb = {key.split("/", 1)[1] for key, value in figures.items() if isinstance(value, (int, float))}
    assert HEADLINES[name] <= wandb, HEADLINES[name] - wandb


# defined on no document of these runs (no answer ran code; the cited knowledge may be none), yet
# listed: a column of nulls in the per-sample tables, as the issue asks them visible
VISIBLE = {"fin_lfqa": {"code_exec_rate", "knowledge_recall"}, "fin_ems": {"ems_offline_rouge_f1"}}


def wandb_tables(root: Path, name: str) -> dict[str, dict]:
    """Table name -> the table W&B's offline run saved (``{"columns", "data"}``)."""
    files = list(wandb_dir(root.parent, name).glob("wandb/offline-run-*/files/media/table/**/*.table.json"))
    return {path.name.split("_eval_results")[0]: json.loads(path.read_text()) for path in files
            if "_eval_results" in path.name}


@pytest.mark.parametrize("name", ["fin_agentbench", "fin_ems", "fin_lfqa"])
def test_wandb_logged_the_samples_table_of_every_task(output_roots, name):
    """lm-eval's ``WandbLogger.log_eval_samples`` reads every listed metric of every sample
    (``x[metric]``): a metric left out of one sample stopped the table (lm-eval logs the error
    at INFO and goes on); the run logged it offline, with a column for each listed metric."""
    results, samples = run_files(output_roots[name])
    tables = wandb_tables(output_roots[name], name)
    for task, lines in samples.items():
        listed = [entry["metric"] for entry in results["configs"][task]["metric_list"]]
        table = tables[task]
        assert set(listed) <= set(table["columns"]) and len(table["data"]) == len(lines), task
        columns = {column: [row[i] for row in table["data"]] for i, column in enumerate(table["columns"])}
        for metric in listed:
            assert columns[metric] == [line[metric] for line in lines], (task, metric)
        for metric in HEADLINES.get(task, set()):
            assert all(isinstance(value, float) for value in columns[metric]), (task, metric)
        assert VISIBLE.get(task, set()) <= set(table["columns"])


def zeno_visualize():
    """lm-eval's ``scripts/zeno_visualize.py``, imported with the real ``zeno_client``. That
    client imports ``pkg_resources``, which setuptools 81 dropped: pip's own copy stands in."""
    if importlib.util.find_spec("pkg_resources") is None:
        sys.modules["pkg_resources"] = importlib.import_module("pip._vendor.pkg_resources")
    return importlib.import_module("tests.lm_eval_scripts.zeno_visualize")


@pytest.mark.parametrize("name", ["fin_agentbench", "fin_ems", "fin_lfqa"])
def test_zeno_builds_its_tables_from_the_output_folder(output_roots, name):
    """What ``zeno_visualize.main`` does before it uploads, with lm-eval's own functions: the
    model folders of ``--data_path``, their tasks, the registered metrics (aggregation ``mean``),
    the dataset and each model's system table (``x[metric]`` for every listed metric)."""
    zeno = zeno_visualize()
    from lm_eval.utils import get_latest_filename, get_results_filenames, get_sample_results_filenames

    root = output_roots[name]
    models = [os.path.basename(os.path.normpath(entry)) for entry in os.scandir(root) if entry.is_dir()]
    assert models
    for model in models:
        model_dir = root / model
        files = [f.as_posix() for f in model_dir.iterdir() if f.is_file()]
        results = strict_json((model_dir / get_latest_filename([Path(f).name for f in get_results_filenames(files)]))
                              .read_text())
        assert zeno.sanitize_string(results["config"]["model_args"])
        for task in zeno.tasks_for_model(model, str(root)):
            config = results["configs"][task]
            samples_file = get_latest_filename([Path(f).name for f in get_sample_results_filenames(files) if task in f])
            data = [strict_json(line) for line in (model_dir / samples_file).read_text().splitlines()]
            metrics = [zeno.ZenoMetric(name=m["metric"], type="mean", columns=[m["metric"]])
                       for m in config["metric_list"] if m.get("aggregation") == "mean"]
            assert HEADLINES.get(task, set()) <= {metric.name for metric in metrics}
            dataset = zeno.generate_dataset(data, config)
            system = zeno.generate_system_df(data, config)
            assert len(dataset) == len(system) == len(data) and dataset["id"].is_unique
            listed = [m["metric"] for m in config["metric_list"]]
            assert set(listed) <= set(system.columns)
            for metric in HEADLINES.get(task, set()):
                assert system[metric].notna().all(), (task, metric)
            assert VISIBLE.get(task, set()) <= set(system.columns)


def test_every_eval_ever_records_and_the_model_index_of_real_runs(output_roots, tmp_path, schemas):
    import jsonschema
    from huggingface_hub import ModelCard

    from tests.test_export import export

    aggregate_schema, instance_schema = schemas
    out = tmp_path / "eee"
    # the embedded model's runs are carded as what ran: its Q4_1 GGUF file, not the original weights
    refused = export(*output_roots.values(), "--format", "eee", "--output_path", out, "--model-id",
                     paths.EMBEDDED_BASE_MODEL)
    assert refused.returncode == 2 and "Q4_1" in refused.stderr and not out.exists()
    done = export(*output_roots.values(), "--format", "eee", "--output_path", out)
    assert done.returncode == 0, done.stderr
    records = {path: json.loads(path.read_text()) for path in out.glob("data/*/*/*/*.json")}
    assert {record["model_info"]["id"] for record in records.values()} == {paths.EMBEDDED_MODEL_REPO}
    assert str(paths.cache_home()) not in "".join(path.read_text() for path in out.rglob("*") if path.is_file())
    assert {path.parts[-4] for path in records} == {"fin_agentbench_doc", "fin_agentbench_chunk", "fin_ems", "fin_lfqa"}
    for path, record in records.items():
        jsonschema.validate(record, aggregate_schema)
        for line in path.with_name(path.stem + "_samples.jsonl").read_text().splitlines():
            jsonschema.validate(json.loads(line), instance_schema)
    judged = [result for path, record in records.items() if path.parts[-4] == "fin_lfqa"
              for result in record["evaluation_results"] if "judge_score" in result["evaluation_result_id"]]
    assert judged and "#verdict" in json.dumps(judged)  # the judge that made the score is named
    done = export(*output_roots.values(), "--format", "model-index", "--output_path", out,
                  "--source-url", "https://example.org/lm-eval-fin")
    assert done.returncode == 0, done.stderr
    card = ModelCard(f"---\n{(out / 'model-index.yaml').read_text()}---\n")
    assert {result.dataset_name for result in card.data.eval_results} >= {"fin_lfqa", "fin_ems"} or card.data.eval_results


def test_agreement_of_the_judged_run_with_labels(output_roots, tmp_path):
    _, samples = run_files(output_roots["fin_lfqa"])
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"task": "fin_lfqa", "id": line["doc"]["id"], "annotator": "a1", "labels": {
        "accuracy": 4, "numerical_correctness": 3 + i, "evidence_entailment": 5}}) + "\n"
        for i, line in enumerate(samples["fin_lfqa"])))
    done = subprocess.run([BIN / "lm-eval-fin", "agreement", output_roots["fin_lfqa"], "--labels", labels,
                           "--output_path", tmp_path / "study", "--resamples", "50"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    study = strict_json((tmp_path / "study" / "agreement.json").read_text())
    assert "judge against people" in done.stdout or study["comparisons"]
    assert "accuracy" in done.stdout and "#verdict" in done.stdout


def test_datasets_loads_the_samples_of_a_judged_and_an_unjudged_run_as_one_set(output_roots, unjudged_lfqa_root,
                                                                                tmp_path):
    """The unjudged run first: ``datasets`` would type the set by its lines, which have no judge
    metric; the declared types add the column as nulls there."""
    import datasets

    from lm_eval_fin.harness.samples import samples_features

    files = [str(latest(list(next(root.iterdir()).glob("samples_fin_lfqa_*.jsonl"))))
             for root in (unjudged_lfqa_root, output_roots["fin_lfqa"])]
    _, unjudged = run_files(unjudged_lfqa_root)
    assert not any("judge_score" in line for line in unjudged["fin_lfqa"])
    loaded = datasets.load_dataset("json", data_files=files, features=samples_features(files), split="train",
                                   cache_dir=str(tmp_path / "cache"))
    assert loaded["judge_score"] == [None, None, 12.0, 12.0]
    assert loaded.features["judge_score"] == datasets.Value("float64")
    assert all(isinstance(value, float) for value in loaded["rouge_l"])


# Every Eval Ever's own converter and validator, in the venv `make install-eee` makes (they need
# Python >= 3.12); the file it leaves names the version installed
EEE_VENV = Path(__file__).resolve().parents[1] / ".venv-eee"


@pytest.fixture(scope="module")
def eee_python() -> Path:
    """.venv-eee's python (asked for first: a missing venv fails the test before the lm_eval runs)."""
    from lm_eval_fin.export import eee

    if not (EEE_VENV / f".every-eval-ever-{eee.SCHEMA_VERSION}").exists():
        pytest.fail(f"no every-eval-ever {eee.SCHEMA_VERSION} in {EEE_VENV}: `make install-eee` installs it "
                    "(it needs Python >= 3.12: PYTHON312=/path/to/python3.12 make install-eee)")
    return EEE_VENV / "bin" / "python"


@pytest.fixture(scope="module")
def lfqa_and_lfqa_test_root(unjudged_lfqa_root, tmp_path_factory, embedded_model_dir):
    """One model folder holding fin_lfqa's unjudged run (documents 0 and 1) and a --predict_only
    run of fin_lfqa-test on the demo's document 2: two results files, and two samples files whose
    names agree up to the task's name."""
    root = tmp_path_factory.mktemp("lfqa-and-test") / "fin_lfqa"
    shutil.copytree(unjudged_lfqa_root, root)
    unjudged_lfqa_run(root, embedded_model_dir, "fin_lfqa-test", "--samples", '{"fin_lfqa-test": [2]}',
                      "--predict_only")
    return root


def every_eval_ever(python: Path, cwd: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_every_eval_ever_converts_each_task_with_its_own_samples(eee_python, lfqa_and_lfqa_test_root, tmp_path):
    """Every Eval Ever's lm-eval converter finds a task's samples by the glob
    ``samples_{task}_*.jsonl``: under fin_lfqa's old variant name fin_lfqa_test it attached that
    task's samples to fin_lfqa's record. Each record holds its own task's samples, its scores are
    ours, and Every Eval Ever's validator passes the records."""
    # the datastore's layout, which the validator checks: data/<benchmark>/<developer>/<model>/<uuid>.json
    out = tmp_path / "data"
    done = every_eval_ever(eee_python, tmp_path, "every_eval_ever.converters.lm_eval", "--log_path", lfqa_and_lfqa_test_root,
                           "--output_dir", out.name, "--include_samples")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    (model_dir,) = lfqa_and_lfqa_test_root.iterdir()
    ours = {}  # task -> (its results, its samples lines)
    for results_file in model_dir.glob("results_*.json"):
        results = strict_json(results_file.read_text())
        for task in results["results"]:
            (samples_file,) = model_dir.glob(f"samples_{task}_{results_file.stem.removeprefix('results_')}.jsonl")
            ours[task] = results["results"][task], [strict_json(line) for line in samples_file.read_text().splitlines()]
    assert set(ours) == {"fin_lfqa", "fin_lfqa-test"}
    records = {}
    for path in out.rglob("*.json"):
        record = strict_json(path.read_text())
        (task,) = {result["evaluation_name"] for result in record["evaluation_results"]}
        rows = [strict_json(line) for line in path.with_name(f"{path.stem}_samples.jsonl").read_text().splitlines()]
        assert record["detailed_evaluation_results"]["total_rows"] == len(rows)
        records[task] = record, rows
    assert set(records) == set(ours)
    for task, (record, rows) in records.items():
        results, lines = ours[task]
        # the task's own documents, and all of them: lm-eval's doc_id and the hash of the logged document
        assert {row["sample_id"] for row in rows} == {str(line["doc_id"]) for line in lines}, task
        assert {row["metadata"]["doc_hash"] for row in rows} == {line["doc_hash"] for line in lines}, task
        # the figures of our results file, each metric's value of our lines
        scores = {result["metric_config"]["metric_name"]: result["score_details"]["score"]
                  for result in record["evaluation_results"]}
        assert scores == {key.split(",")[0]: value for key, value in results.items()
                          if "," in key and "_stderr," not in key and isinstance(value, (int, float))}, task
        by_doc = {str(line["doc_id"]): line for line in lines}
        for row in rows:
            if row["evaluation_result_id"] is not None:  # None: a line without a number (predict-only)
                metric = next(result["metric_config"]["metric_name"] for result in record["evaluation_results"]
                              if result["evaluation_result_id"] == row["evaluation_result_id"])
                assert row["evaluation"]["score"] == by_doc[row["sample_id"]][metric], (task, metric)
    (fin_lfqa, _), (fin_lfqa_test, _) = records["fin_lfqa"], records["fin_lfqa-test"]
    assert {"numeric_f1", "evidence_f1", "rouge_l", "bertscore_f1"} <= {
        result["metric_config"]["metric_name"] for result in fin_lfqa["evaluation_results"]}
    assert [result["metric_config"]["metric_name"] for result in fin_lfqa_test["evaluation_results"]] == ["bypass"]
    files = sorted(str(path.relative_to(tmp_path)) for path in out.rglob("*.json*"))
    checked = every_eval_ever(eee_python, tmp_path, "every_eval_ever", "validate", *files, "--format", "json")
    assert checked.returncode == 0, checked.stdout[-4000:] + checked.stderr[-2000:]
