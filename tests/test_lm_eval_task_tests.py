"""lm-eval's own task tests, run on our task folder.

lm-eval checks every task folder of its repository with ``tests/test_tasks.py``: the dataset
loads, the splits are declared, prompts and targets are text, a prompt does not end in whitespace
when the target delimiter is whitespace, requests build for the first 10 documents. The file is
in lm-eval's source distribution, which ``make install`` downloads for the installed version;
this module runs it, unchanged, in a pytest of its own, with ``tests/lm_eval_rig`` in the place
of lm-eval's ``conftest``-free rig (``utils.py``'s ``new_tasks()`` naming our tasks, a default
``TaskManager`` reading our task folder). The data are the shipped samples, repeated under new
ids to the file's 10 documents (the samples hold 3 to 6)."""

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from lm_eval_fin.harness import stage, taskfiles
from lm_eval_fin.plumbing import paths

LM_EVAL_SDISTS = Path(__file__).resolve().parents[1] / ".cache" / "lm-eval"
RIG = Path(__file__).parent / "lm_eval_rig"
DOCUMENTS = 12  # lm-eval's file takes the first 10 of each task
# fin_lfqa-test's answers are private: the task loads for --predict_only runs only
PREDICT_ONLY_TASKS = ["fin_lfqa-test"]
GRADED_TASKS = [task for task in sorted(taskfiles.task_configs()) if task not in PREDICT_ONLY_TASKS]


def lm_eval_task_tests() -> bytes:
    version = importlib.metadata.version("lm_eval")
    sdist = LM_EVAL_SDISTS / f"lm_eval-{version}.tar.gz"
    if not sdist.exists():
        pytest.fail(f"no lm-eval {version} source distribution in {LM_EVAL_SDISTS}: `make install` downloads it "
                    f"(pip download --no-deps --no-binary=:all: --dest {LM_EVAL_SDISTS} lm_eval=={version})")
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(f"lm_eval-{version}/tests/test_tasks.py")
        assert member is not None
        return member.read()


def repeated(source: Path, target: Path) -> Path:
    """``source`` (a JSON-lines file, or a folder of them) with each file's rows repeated under
    new ids to ``DOCUMENTS`` rows."""
    if source.is_dir():
        target.mkdir(parents=True)
        for path in sorted(source.glob("*.jsonl")):
            repeated(path, target / path.name)
        return target
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    with target.open("w", encoding="utf-8") as out:
        for number in range(DOCUMENTS):
            row = dict(rows[number % len(rows)])
            key = "id" if "id" in row else "uuid"
            row[key] = f"{row[key]}-{number // len(rows)}" if number >= len(rows) else row[key]
            out.write(json.dumps(row) + "\n")
    return target


def run_metadata(folder: Path) -> dict:
    def data(*parts: str) -> str:
        return str(repeated(paths.data_path(*parts), folder / parts[-1]))

    return {
        "fin_agentbench": {"data_path": data("finagentbench_demo")},
        "fin_ems": {"data_path": data("ems_demo"), "judge": "none", "bertscore_model": "offline"},
        "fin_lfqa": {"data_path": data("finlfqa_demo", "finlfqa_demo.jsonl"), "judge": "none",
                     "bertscore_model": "offline"},
    }


def outcomes(report: Path) -> dict[str, str]:
    """Test id -> passed, failed, error or skipped, from pytest's JUnit XML."""
    result = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        result[case.get("name", "")] = kinds[0] if kinds else "passed"
    return result


@pytest.mark.parametrize("tasks", [GRADED_TASKS, PREDICT_ONLY_TASKS], ids=["graded", "predict_only"])
def test_lm_eval_task_tests_pass_on_every_task(tmp_path, tasks):
    package = tmp_path / "lm_eval_task_tests"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "test_tasks.py").write_bytes(lm_eval_task_tests())
    shutil.copy(RIG / "conftest_rig.py", package / "conftest.py")
    shutil.copy(RIG / "utils_rig.py", package / "utils.py")
    report = tmp_path / "report.xml"
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "LM_EVAL_FIN_RIG_TASKS": json.dumps(tasks),
                   "LM_EVAL_FIN_RIG_METADATA": json.dumps(run_metadata(tmp_path / "data")),
                   stage.PREDICT_ONLY_ENV: "1" if tasks == PREDICT_ONLY_TASKS else "0"}
    # the class that lm-eval parametrizes with new_tasks(); the file's other test is about lm-eval's own tasks
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
               str(package / "test_tasks.py"), "-k", "TestNewTasksElseDefault"]
    finished = subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=900)
    assert report.exists(), finished.stdout[-3000:] + finished.stderr[-3000:]
    results = outcomes(report)
    not_passed = {name: outcome for name, outcome in results.items() if outcome != "passed"}
    assert not not_passed and finished.returncode == 0, (not_passed, finished.stdout[-3000:])
    checks = {name.split("[")[0] for name in results}
    assert len(checks) >= 13  # the checks of lm-eval 0.4.13's BaseTasks
    assert sorted(results) == sorted(f"{check}[{task}]" for check in checks for task in tasks)


def test_every_yaml_of_the_folder_names_one_task_once():
    """lm-eval's CI names the tasks of a changed folder by reading ``task`` from every YAML in it
    (its ``tests/utils.py``, not in the source distribution, with lm-eval's own YAML reader): a
    group YAML would give a list, or a group beside its own tasks ("Duplicate task"). The
    collections are tags, on the tasks' own YAMLs."""
    from lm_eval.tasks._yaml_loader import load_yaml  # lm-eval's reader of task YAMLs (includes followed)

    named = [load_yaml(path, resolve_func=False)["task"] for path in sorted(paths.tasks_dir().rglob("*.yaml"))]
    assert all(isinstance(name, str) for name in named), named
    assert sorted(named) == sorted(set(named)) == sorted(taskfiles.task_configs())
    tags = set(taskfiles.names()) - set(named)
    assert tags >= {"fin_agentbench", "fin_lfqa_settings"} and not tags & set(named)



def test_no_task_name_is_a_glob_prefix_of_another():
    """Every Eval Ever's lm-eval converter finds a task's samples with ``samples_{task}_*.jsonl``:
    no task's samples file may match another task's pattern. Tags (``fin_agentbench``,
    ``fin_lfqa_settings``, old names) have no results entry and no samples file."""
    import fnmatch

    tasks = sorted(taskfiles.task_configs())
    for task in tasks:
        for other in tasks:
            if other != task:
                assert not fnmatch.fnmatch(f"samples_{other}_2026-11-28T03-00-00.000001.jsonl", f"samples_{task}_*.jsonl"), (
                    task, other)
