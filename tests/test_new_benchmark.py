"""A new benchmark is its package and its task folder, nothing else (docs/adding-a-benchmark.md).

The toy benchmark ``fin_toy`` (tests/toy_benchmark: ``lm_eval_fin/benchmarks/fin_toy/`` and
``tasks/fin_toy/``, exact match plus one judged metric) is dropped into a copy of the package
laid out as ``pip install`` lays it out (tasks/ and metrics/ inside it as lm_eval_fin/tasks and
lm_eval_fin/metrics, as setup.cfg maps them), and every command runs on it as a real process
with that copy first on PYTHONPATH: one real lm-eval run with the embedded model, ``score`` with
a scripted judge behind the real loopback OpenAI-compatible server, ``agreement`` against a
person's labels, ``report`` and ``export``. No other file of the copy is changed: a command that
needed a list, a mapping or a name of the benchmarks edited would fail here."""

import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from lm_eval_fin.outputs import records
from tests.openai_server import ServerThread

REPO = Path(__file__).resolve().parent.parent
TOY = Path(__file__).resolve().parent / "toy_benchmark"
BIN = Path(sys.executable).parent
TASK = "fin_toy"
TOY_FILES = {Path("lm_eval_fin/benchmarks/fin_toy"): TOY / "lm_eval_fin" / "benchmarks" / "fin_toy",
             Path("lm_eval_fin/tasks/fin_toy"): TOY / "tasks" / "fin_toy"}
REFERENCE = re.compile(r"^Reference answer: (.*)$", re.MULTILINE)
CANDIDATE = re.compile(r"^Candidate answer: (.*)$", re.MULTILINE)
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")
# one lm-eval run of 4 questions, score, agreement, report and two exports: well under this on 2 shared cores
SECONDS = 600


def normalised(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def verdict(reference: str, answer: str) -> int:
    """The scripted judge's rule: correct where the reference's words appear in the answer."""
    return int(f" {normalised(reference)} " in f" {normalised(answer)} ")


class ToyJudge(ServerThread):
    """The test server (a thread of this process) answering each fin_toy judge request by :func:`verdict`."""

    def __init__(self):
        super().__init__()
        self.state.generate = self.generate

    @staticmethod
    def generate(messages: list[dict], max_tokens: int) -> tuple[str, int, int]:
        user = messages[-1]["content"]
        reply = json.dumps({"correct": verdict(REFERENCE.search(user)[1], CANDIDATE.search(user)[1])})
        return reply, len(user.split()), 3


def installed_tree(root: Path) -> Path:
    """The package as installed (a copy of this checkout's) with the toy benchmark's files dropped in."""
    site = root / "site"
    shutil.copytree(REPO / "lm_eval_fin", site / "lm_eval_fin", ignore=IGNORED)
    shutil.copytree(REPO / "tasks", site / "lm_eval_fin" / "tasks", ignore=IGNORED)
    shutil.copytree(REPO / "metrics", site / "lm_eval_fin" / "metrics", ignore=IGNORED)
    for target, source in TOY_FILES.items():
        assert not (site / target).exists()
        shutil.copytree(source, site / target, ignore=IGNORED)
    return site


def digests(site: Path) -> dict[str, str]:
    """sha256 of every file of the copy that is not the toy's (nor bytecode)."""
    return {str(path.relative_to(site)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(site.rglob("*")) if path.is_file() and "__pycache__" not in path.parts
            and not any(path.relative_to(site).is_relative_to(toy) for toy in TOY_FILES)}


def results_of(folder: Path, model: str) -> tuple[Path, dict, list[dict]]:
    """The results file of the run of ``model`` under ``folder``, its fin_toy results and samples lines."""
    (path,) = [p for p in folder.rglob("results_*.json")
               if json.loads(p.read_text(encoding="utf-8"))["config"]["model"] == model]
    (samples,) = path.parent.glob(f"samples_{TASK}_{path.stem.removeprefix('results_')}.jsonl")
    lines = [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]
    return path, json.loads(path.read_text(encoding="utf-8"))["results"][TASK], lines


def answer_of(line: dict) -> str:
    """The answer as scored, from a samples line's scored-answer record."""
    return records.decode(line["filtered_resps"])["answer"]


def test_a_toy_benchmark_runs_through_every_command_without_another_file(tmp_path, embedded_model_dir):
    started = time.perf_counter()
    site = installed_tree(tmp_path)
    before = digests(site)
    env = {key: value for key, value in os.environ.items() if not key.startswith("LM_EVAL_FIN_")}
    env.update(PYTHONPATH=str(site), LM_EVAL_FIN_CACHE=str(tmp_path / "judge-cache.sqlite"), OMP_NUM_THREADS="1")

    def command(*argv: object, status: int = 0) -> subprocess.CompletedProcess:
        done = subprocess.run([BIN / "lm-eval-fin", *map(str, argv)], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=SECONDS)
        assert done.returncode == status, (argv[0], done.stdout[-2000:], done.stderr[-4000:])
        return done

    # the commands import the copy (its task folder, its registry), not this checkout
    found = subprocess.run([sys.executable, "-c", "import lm_eval_fin; print(lm_eval_fin.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, env=env, check=True)
    assert Path(found.stdout.strip()) == site / "lm_eval_fin" / "__init__.py"
    assert Path(command("tasks-dir").stdout.strip()) == site / "lm_eval_fin" / "tasks"

    # run: a real lm-eval run with the embedded model, no judge (its metric is then undefined)
    out = tmp_path / "out"
    run = command("run", "--model", "hf", "--model_args", f"pretrained={embedded_model_dir},dtype=float32",
                  "--apply_chat_template", "--tasks", TASK, "--batch_size", "4", "--output_path", out, "--log_samples",
                  "--metadata", json.dumps({TASK: {"data_path": str(TOY / "questions.jsonl")}, "judge": "none"}))
    assert "no judge configured" in run.stderr
    _, results, lines = results_of(out, "hf")
    assert len(lines) == 4 and "judge_correct,none" not in results
    assert results["exact_match,none"] == sum(line["exact_match"] for line in lines) / 4
    for line in lines:
        assert line["exact_match"] == float(normalised(answer_of(line)) == normalised(line["doc"]["reference"]))

    # score: the logged answers judged, in one batch, by the judge behind the loopback server
    with ToyJudge() as server:
        judge = f"openai:{server.base_url}#toy-judge"
        command("score", out, "--judge", judge)
        assert server.stats()["calls"] == 4
    scored_file, scored, scored_lines = results_of(out, "fin-replay")
    expected = {line["doc"]["id"]: verdict(line["doc"]["reference"], answer_of(line)) for line in lines}
    assert {line["doc"]["id"]: line["judge_correct"] for line in scored_lines} == expected
    assert scored["judge_correct,none"] == sum(expected.values()) / 4
    assert scored["exact_match,none"] == results["exact_match,none"]

    # agreement: the judge against a person who agrees on every answer but the first
    labels = tmp_path / "labels.jsonl"
    ids = sorted(expected)
    labels.write_text("".join(json.dumps({"task": TASK, "id": doc_id, "annotator": "a1",
                                          "labels": {"correct": expected[doc_id] ^ (doc_id == ids[0])}}) + "\n"
                              for doc_id in ids), encoding="utf-8")
    agreement = command("agreement", out, "--labels", labels, "--output_path", tmp_path / "study",
                        "--resamples", "50")
    assert TASK in agreement.stdout and "correct" in agreement.stdout and judge in agreement.stdout
    figures = json.loads((tmp_path / "study" / "agreement.json").read_text(encoding="utf-8"))
    assert TASK in json.dumps(figures) and '"correct"' in json.dumps(figures)

    # report: the leaderboard's headline columns and the toy's own view of each answer
    command("report", out, "--output_path", tmp_path / "report", "--agreement", tmp_path / "study",
            "--bootstrap_iters", "50", "--permutation_iters", "50")
    board = (tmp_path / "report" / "leaderboard.md").read_text(encoding="utf-8")
    # the first declared headline metric ranks the table; the judged one carries the agreement figures
    assert f"{TASK}: exact_match" in board and "judged metric it covers: judge_correct" in board
    with open(tmp_path / "report" / "leaderboard.csv", encoding="utf-8-sig", newline="") as handle:
        (row,) = [row for row in csv.DictReader(handle) if row["kind"] == "model"]
    assert float(row[f"{TASK}/exact_match"]) == scored["exact_match,none"]
    assert float(row[f"{TASK}/judge_correct"]) == scored["judge_correct,none"]
    assert TASK in (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    (answers,) = (tmp_path / "report").glob(f"answers-{TASK}*.html")
    page = answers.read_text(encoding="utf-8")
    assert "Reference answer" in page and "toy-judge" in page  # the blocks of the toy's view

    # export (the scored run: a card shows one run of a task): the model card's results (the
    # headline metrics) and Every Eval Ever records
    exported = tmp_path / "export"
    command("export", scored_file, "--format", "model-index", "--output_path", exported, "--bootstrap_iters", "50")
    index = yaml.safe_load((exported / "model-index.yaml").read_text(encoding="utf-8"))
    entries = [entry for model in index["model-index"] for entry in model["results"] if entry["dataset"]["config"] == TASK]
    metrics = {metric["type"] for entry in entries for metric in entry["metrics"]}
    assert {"exact_match", "judge_correct"} <= metrics, index
    command("export", scored_file, "--format", "eee", "--output_path", exported / "eee", "--bootstrap_iters", "50")
    records = "".join(path.read_text(encoding="utf-8") for path in (exported / "eee").rglob("*.json"))
    assert all(name in records for name in (TASK, "exact_match", "judge_correct"))

    # the checks every benchmark gets from the registry hold for the toy: its YAML's metric_list
    # says what metrics.py declares (tests/test_metric_declarations.py, run on the copy as it is)
    checks = tmp_path / "checks"
    checks.mkdir()
    shutil.copy(REPO / "tests" / "test_metric_declarations.py", checks)
    declared = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--rootdir", checks,
                               checks], capture_output=True, text=True, cwd=checks, env=env, timeout=SECONDS)
    assert declared.returncode == 0, declared.stdout[-4000:]
    assert f"test_every_task_yaml_lists_its_declared_metrics[{TASK}] PASSED" in declared.stdout

    assert digests(site) == before  # no command wrote into the package
    print(f"toy benchmark through every command: {time.perf_counter() - started:.1f} s")
