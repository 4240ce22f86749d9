"""Our output folders as lm-eval's own consumers read them: a judged fin_ems run, a judged
fin_lfqa run and a fin_agentbench run through the real ``lm_eval`` CLI (the embedded model
answers, a scripted judge behind the real OpenAI-compatible test server judges), then

* strict JSON: the results file and every samples line parse with NaN and Infinity refused;
* lm-eval's results: a metric of each task's ``metric_list`` is a number with a stderr key
  where the run defines it, and absent where it does not (never null: lm-eval 0.5 adds up what
  it aggregates);
* W&B: the figures ``WandbLogger`` logs (``_sanitize_results_dict``) hold the headline metrics
  (EMS, BERTScore, the judge's); its samples table (``_generate_dataset``) needs every listed
  metric in every line, which holds where every metric is defined (fin_agentbench);
* Zeno: the metrics ``scripts/zeno_visualize.py`` registers (those whose aggregation is
  ``mean``) hold the headline metrics;
* Zeno: what lm-eval's ``scripts/zeno_visualize.py`` reads (it is not distributed on PyPI, so
  its reads are repeated here with lm-eval's own file-name helpers): every subfolder of the
  output path is a model folder with results files, the tasks come from the latest one's
  configs, and each sample holds the fields and every listed metric its tables take;
* ``datasets``: the samples of a judged and an unjudged run load as one set with
  :func:`lm_eval_fin.harness.samples.samples_features`;
* ``lm-eval-fin export``: Every Eval Ever records valid against the every-eval-ever schemas,
  and a model card's model-index that huggingface_hub reads;
* ``lm-eval-fin agreement``: the judged runs against labels, through the console script.

Nothing but lm-eval's model folders may be written into ``--output_path``.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
            "fin_agentbench": ({"data_path": str(paths.data_path("finagentbench_demo"))}, None, []),
            "fin_ems": ({"data_path": str(paths.data_path("ems_demo")), "bertscore_model": "offline",
                         "max_gen_toks": 16}, ems_judge.spec, []),
            "fin_lfqa": ({"data_path": str(paths.data_path("finlfqa_demo", "finlfqa_demo.jsonl")),
                          "bertscore_model": "offline"}, f"openai:{lfqa_judge.base_url}#verdict",
                         ["--confirm_run_unsafe_code", "--limit", "2"]),
        }
        processes = {}
        for name, (metadata, judge, extra) in runs.items():
            env = dict(os.environ, LM_EVAL_FIN_CACHE=str(root / f"{name}.sqlite"))
            env.pop("LM_EVAL_FIN_JUDGE", None)
            if judge:
                env["LM_EVAL_FIN_JUDGE"] = judge
            processes[name] = subprocess.Popen(
                [BIN / "lm_eval", "run", "--include_path", str(paths.tasks_dir()), "--model", "hf",
                 "--model_args", f"pretrained={embedded_model_dir},dtype=float32", "--apply_chat_template",
                 "--tasks", name, "--gen_kwargs", "max_gen_toks=16", "--metadata", json.dumps(metadata),
                 *(extra if "--limit" in extra else [*extra, "--limit", "1"]), "--output_path", str(root / name),
                 "--log_samples"],
                cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )
        for name, process in processes.items():
            log, _ = process.communicate(timeout=900)
            assert process.returncode == 0, f"{name}: {log[-4000:]}"
    return {name: root / name for name in runs}


@pytest.fixture(scope="module")
def unjudged_lfqa_root(tmp_path_factory, embedded_model_dir):
    """The --output_path of a fin_lfqa run without a judge: no judge metric in any line."""
    root = tmp_path_factory.mktemp("unjudged")
    env = {key: value for key, value in os.environ.items() if key != "LM_EVAL_FIN_JUDGE"}
    metadata = {"data_path": str(paths.data_path("finlfqa_demo", "finlfqa_demo.jsonl")), "judge": "none",
                "bertscore_model": "offline"}
    done = subprocess.run(
        [BIN / "lm_eval", "run", "--include_path", str(paths.tasks_dir()), "--model", "hf", "--model_args",
         f"pretrained={embedded_model_dir},dtype=float32", "--apply_chat_template", "--tasks", "fin_lfqa",
         "--gen_kwargs", "max_gen_toks=16", "--metadata", json.dumps(metadata), "--confirm_run_unsafe_code",
         "--limit", "2", "--output_path", str(root / "fin_lfqa"), "--log_samples"],
        cwd=root, env=dict(env, LM_EVAL_FIN_CACHE=str(root / "cache.sqlite")), capture_output=True, text=True,
        timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return root / "fin_lfqa"


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
            else:  # undefined on every document: in no line either
                assert not any(metric in line for line in lines), (task, metric)
        assert lines
        for line in lines:
            for metric in listed:
                assert metric not in line or isinstance(line[metric], float), (task, metric, line[metric])
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
    assert ems_line["judge_failure"] == 0.0 and "ems_offline_rouge_f1" not in ems_line
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


@pytest.mark.parametrize("name", ["fin_agentbench"])
def test_wandb_builds_its_samples_table(output_roots, name):
    from lm_eval.loggers.wandb_logger import WandbLogger

    results, samples = run_files(output_roots[name])
    for task, lines in samples.items():
        # the samples as lm-eval holds them in memory when it logs to W&B (the file spells arguments out)
        data = [dict(line, arguments=[tuple(arg.values()) for arg in line["arguments"].values()]) for line in lines]
        table = WandbLogger._generate_dataset(None, data, results["configs"][task])
        listed = [entry["metric"] for entry in results["configs"][task]["metric_list"]]
        assert len(table) == len(lines) and set(listed) <= set(table.columns)


@pytest.mark.parametrize("name", ["fin_agentbench", "fin_ems", "fin_lfqa"])
def test_zeno_reads_the_output_folder(output_roots, name):
    from lm_eval.utils import get_latest_filename, get_results_filenames, get_sample_results_filenames

    root = output_roots[name]
    models = [entry for entry in os.scandir(root) if entry.is_dir()]
    assert models and all(get_results_filenames([f.as_posix() for f in Path(m.path).iterdir()]) for m in models)
    for model in models:
        files = [f.as_posix() for f in Path(model.path).iterdir() if f.is_file()]
        results = strict_json(Path(get_latest_filename(get_results_filenames(files))).read_text())
        assert isinstance(results["config"]["model_args"], (str, dict))
        for task, config in results["configs"].items():
            samples_file = get_latest_filename([Path(f).name for f in get_sample_results_filenames(files) if task in f])
            data = [strict_json(line) for line in (Path(model.path) / samples_file).read_text().splitlines()]
            ids = [f"{x['doc_id']}.{x['filter']}" for x in data] if config.get("filter_list") else [x["doc_id"] for x in data]
            assert len(set(ids)) == len(data)
            assert config["output_type"] == "generate_until"
            for x in data:
                assert isinstance(x["arguments"]["gen_args_0"]["arg_0"], str) and "target" in x
                assert isinstance(str(x["filtered_resps"][0]), str)
                for metric in config["metric_list"]:  # a metric undefined for the document is left out
                    assert metric["metric"] in x or metric.get("aggregation") == "mean"


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
