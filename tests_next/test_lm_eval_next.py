"""Every task on lm-eval's pre-release (``.venv-next``, made by ``make install-next``; ``make
test-next`` makes it and runs this folder): the real ``lm_eval run`` of that venv with lm-eval's ``dummy`` model on the
shipped samples. lm-eval 0.5 bootstraps a standard error for every aggregation but its ``mean``
(our ``total`` included) and hands the bootstrap the same values it logs: a None there stopped
fin_ems and fin_lfqa after generation. The results must come out whole, in strict JSON, with a
number for every metric the run defines and none for a metric it does not."""

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lm_eval_fin.benchmarks import demo_data
from lm_eval_fin.harness import taskfiles
from lm_eval_fin.plumbing import paths

REPO = Path(__file__).resolve().parents[1]
NEXT_BIN = REPO / ".venv-next" / "bin"
# one run per benchmark (each has its own --metadata); fin_lfqa-posthoc and _iterative need the
# fin-refine wrapper, which neither 0.4.13 nor 0.5.0.dev1 finds through its entry point: they run
# through `lm-eval-fin run` (lm-eval's CLI; it registers the entry point) over the dummy model.
# fin_lfqa-test is predict-only: fin_lfqa is its template
LFQA_METADATA = {"data_path": str(demo_data("fin_lfqa", "finlfqa_demo.jsonl")), "judge": "none",
                 "bertscore_model": "offline"}
RUNS = {
    "fin_agentbench": (["fin_agentbench_doc", "fin_agentbench_chunk"], "dummy",
                       {"data_path": str(demo_data("fin_agentbench"))}),
    "fin_ems": (["fin_ems"], "dummy", {"data_path": str(demo_data("fin_ems")), "judge": "none",
                                       "bertscore_model": "offline"}),
    "fin_lfqa": (["fin_lfqa"], "dummy", LFQA_METADATA),
    "fin_lfqa_refine": (["fin_lfqa-posthoc", "fin_lfqa-iterative"], "fin-refine", LFQA_METADATA),
}


def strict_json(text: str):
    return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))


def next_lm_eval_version() -> str:
    if not (NEXT_BIN / "python").exists():
        pytest.fail(f"no {NEXT_BIN.parent}: `make install-next` makes it (lm-eval's pre-release beside the package)")
    done = subprocess.run([NEXT_BIN / "python", "-c", "import importlib.metadata as m; print(m.version('lm_eval'))"],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def run(name: str, root: Path) -> subprocess.CompletedProcess:
    tasks, model, metadata = RUNS[name]
    if model == "fin-refine":
        start = [NEXT_BIN / "lm-eval-fin", "run", "--model", model, "--model_args", "base=dummy"]
    else:
        start = [NEXT_BIN / "lm_eval", "run", "--include_path", str(paths.tasks_dir()), "--model", model]
    command = [*start, "--tasks", ",".join(tasks), "--metadata", json.dumps(metadata), "--limit", "3",
               "--confirm_run_unsafe_code", "--output_path", str(root / name),
               "--log_samples"]
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "LM_EVAL_FIN_CACHE": str(root / f"{name}.sqlite"),
                   "LMEVAL_DISABLE_MULTIPROC": "1", "DISABLE_MULTIPROC": "1"}
    environment.pop("LM_EVAL_FIN_JUDGE", None)
    environment.pop("VIRTUAL_ENV", None)
    return subprocess.run(command, cwd=root, env=environment, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    assert next_lm_eval_version().startswith("0.5."), "the pre-release venv holds another lm-eval"
    root = tmp_path_factory.mktemp("next")
    with ThreadPoolExecutor(len(RUNS)) as pool:
        done = dict(zip(RUNS, pool.map(lambda name: run(name, root), RUNS)))
    return root, done


@pytest.mark.parametrize("name", list(RUNS))
def test_every_task_runs_and_aggregates_on_the_pre_release(finished, name):
    root, done = finished
    assert done[name].returncode == 0, done[name].stdout[-3000:] + done[name].stderr[-5000:]
    (model_dir,) = [path for path in (root / name).iterdir() if path.is_dir()]
    (results_file,) = model_dir.glob("results_*.json")
    results = strict_json(results_file.read_text(encoding="utf-8"))
    for task in RUNS[name][0]:
        entry = results["results"][task]
        listed = taskfiles.metric_names(task)
        reported = {key.partition(",")[0] for key in entry if "," in key}
        assert reported - {f"{metric}_stderr" for metric in listed} <= set(listed), task
        # a run without a judge defines no judge metric: absent, never a None or a made-up 0
        assert not reported & {"judge_score", "judge_failure", "ems_llm_f1"}, (task, reported)
        for key, value in entry.items():
            if "," in key and not key.startswith("alias"):
                assert isinstance(value, (int, float)) or value == "N/A", (task, key, value)
        # every aggregation lm-eval reads as a mean: Zeno and W&B register those
        aggregations = {entry_["metric"]: entry_["aggregation"] for entry_ in results["configs"][task]["metric_list"]}
        assert set(aggregations.values()) <= {"mean"} | {a for a in aggregations.values() if "def total" in str(a)}
        (samples_file,) = model_dir.glob(f"samples_{task}_*.jsonl")
        lines = [strict_json(line) for line in samples_file.read_text(encoding="utf-8").splitlines()]
        # a value where lm-eval's `metrics` names it defined; `lm-eval-fin run` writes the others null
        assert len(lines) == 3 and all(line[metric] is not None or metric not in line["metrics"]
                                       for line in lines for metric in listed if metric in line)
        if RUNS[name][1] == "fin-refine":
            assert all(metric in line for line in lines for metric in listed), task


def test_lm_evals_registry_finds_fin_refine_with_no_hand_import(tmp_path):
    """fin-refine through its entry point on the pre-release (tests/test_lm_eval_plugins.py
    holds the lookup and its checks, and 0.4.13's case)."""
    from tests.test_lm_eval_plugins import registry_lookup

    assert registry_lookup(NEXT_BIN / "python", tmp_path).startswith("0.5.")
