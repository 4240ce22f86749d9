"""Every task on lm-eval's pre-release (``.venv-next``, made by ``make install-next``; ``make
test`` makes it): the real ``lm_eval run`` of that venv with lm-eval's ``dummy`` model on the
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

from lm_eval_fin.harness import taskfiles
from lm_eval_fin.plumbing import paths

REPO = Path(__file__).resolve().parents[1]
NEXT_BIN = REPO / ".venv-next" / "bin"
# one run per benchmark (each has its own --metadata); fin_lfqa-posthoc and _iterative need the
# fin-refine wrapper, which bare lm_eval cannot name (it is registered by import), and
# fin_lfqa-test is predict-only: fin_lfqa is their template
RUNS = {
    "fin_agentbench": (["fin_agentbench_doc", "fin_agentbench_chunk"], "dummy",
                       {"data_path": str(paths.data_path("finagentbench_demo"))}),
    "fin_ems": (["fin_ems"], "dummy", {"data_path": str(paths.data_path("ems_demo")), "judge": "none",
                                       "bertscore_model": "offline"}),
    "fin_lfqa": (["fin_lfqa"], "dummy",
                 {"data_path": str(paths.data_path("finlfqa_demo", "finlfqa_demo.jsonl")), "judge": "none",
                  "bertscore_model": "offline"}),
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
    command = [NEXT_BIN / "lm_eval", "run", "--include_path", str(paths.tasks_dir()), "--model", model,
               "--tasks", ",".join(tasks), "--metadata", json.dumps(metadata), "--limit", "3",
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
        assert len(lines) == 3 and all(line[metric] is not None for line in lines for metric in listed if metric in line)
