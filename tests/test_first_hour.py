"""The first hour of a new user: every mistake stops `lm-eval-fin run` before a model loads (one
line, exit 2), several benchmarks run in one command with a section of ``--metadata`` each
(the README's examples, run as written), BERTScore falls back to the packaged model offline,
and the task folder is declared where a future lm-eval looks for installed tasks."""

import configparser
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lm_eval_fin.benchmarks import all_benchmarks
from lm_eval_fin.harness import doctor, startchecks
from lm_eval_fin.harness.settings import SettingsError, check_user_metadata, known_keys, read_settings, task_metadata
from lm_eval_fin.measures import textsim
from lm_eval_fin.plumbing import exit_status, hub, paths

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent
LFQA_DEMO = str(paths.data_path("finlfqa_demo", "finlfqa_demo.jsonl"))
EMS_DEMO = str(paths.data_path("ems_demo"))
AGENTBENCH_DEMO = str(paths.data_path("finagentbench_demo"))
BENCHMARKS = {b.name: b for b in all_benchmarks()}
SHARED = [s.name for b in BENCHMARKS.values() for s in b.settings]
# generous: these runs import lm-eval and read the arguments, no model (a model run takes minutes here)
NO_MODEL_SECONDS = 60


@pytest.fixture
def offline_env(tmp_path):
    """The environment of an offline machine with an empty Hugging Face cache."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty-hf-home")}


@pytest.fixture
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))
    hub.hub_unreachable.cache_clear()
    textsim._warn_fallback.cache_clear()


# ------------------------------------------------------------ mistakes, before any model loads

MISTAKES = {
    "unsafe code without the flag": (
        ["--tasks", "fin_lfqa", "--metadata", json.dumps({"data_path": LFQA_DEMO, "bertscore_model": "offline"})],
        "fin_lfqa runs the model's code (in lm-eval-fin's sandbox), so lm-eval asks for --confirm_run_unsafe_code",
    ),
    "hub dataset offline": (
        ["--tasks", "fin_lfqa", "--confirm_run_unsafe_code", "--metadata", json.dumps({"bertscore_model": "offline"})],
        "fin_lfqa: the dataset 'Dragongon/FinLFQA' is not in the local Hugging Face cache and offline mode is set",
    ),
    "limit 0": (
        ["--tasks", "fin_agentbench", "--limit", "0", "--metadata", json.dumps({"data_path": AGENTBENCH_DEMO})],
        "--limit 0 leaves no documents to run",
    ),
    "metadata not JSON": (
        ["--tasks", "fin_agentbench", "--metadata", "{data_path: 'x'}"],
        "--metadata is not valid JSON (Expecting property name enclosed in double quotes at character 2)",
    ),
    "metadata key mistyped in a section": (
        ["--tasks", "fin_agentbench", "--metadata", json.dumps({"fin_agentbench": {"data_pth": AGENTBENCH_DEMO}})],
        "the --metadata section 'fin_agentbench' has unknown key(s) ['data_pth'] (did you mean 'data_path'?)",
    ),
    "task not found": (
        ["--tasks", "fin-ems"],
        "Tasks not found: fin-ems; did you mean 'fin_ems' for 'fin-ems'? lm-eval-fin's tasks: fin_agentbench,",
    ),
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_each_mistake_is_one_line_before_the_model_loads(tmp_path, offline_env, embedded_model_dir, mistake):
    argv, message = MISTAKES[mistake]
    started = time.perf_counter()
    done = subprocess.run(
        [BIN / "lm-eval-fin", "run", "--model", "hf", "--model_args", f"pretrained={embedded_model_dir}", *argv],
        capture_output=True, text=True, cwd=tmp_path, env=offline_env, timeout=300,
    )
    seconds = time.perf_counter() - started
    assert done.returncode == exit_status.USAGE, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and message in errors[0], done.stderr[-3000:]
    assert "Initializing hf model" not in done.stderr  # lm-eval never got to the model
    assert seconds < NO_MODEL_SECONDS, seconds


def test_json_arguments_are_read_before_lm_evals_parser():
    assert startchecks.json_argument_problem(["--metadata", '{"a": 1}', "--model_args", "pretrained=x,dtype=float32"]) is None
    assert "--model_args is not valid JSON" in startchecks.json_argument_problem(["-a", "{'pretrained': 'x'}"])
    assert "--metadata must be one JSON object" in startchecks.json_argument_problem(["--metadata=[1, 2]"])
    assert startchecks.json_argument_problem(["--metadata", "judge=none"]) is None  # key=value: lm-eval's


def test_limits_and_the_unsafe_flag():
    assert startchecks.limit_problem(None) is None and startchecks.limit_problem(0.01) is None
    assert "--limit -1 leaves no documents" in startchecks.limit_problem(-1.0)
    assert startchecks.unsafe_code_problem(["fin_ems", "fin_agentbench_doc"], confirmed=False) is None
    assert startchecks.unsafe_code_problem(["fin_lfqa-test"], confirmed=True) is None
    assert startchecks.unsafe_code_problem(["fin_lfqa", "fin_lfqa-test"], confirmed=False).startswith(
        "fin_lfqa, fin_lfqa-test run the model's code"
    )


def test_a_cached_hub_dataset_passes_offline(offline, tmp_path):
    assert hub.dataset_problem("Dragongon/FinLFQA") is not None
    (tmp_path / "empty-hf-home" / "datasets" / "dragongon___fin_lfqa" / "default").mkdir(parents=True)
    assert hub.dataset_problem("Dragongon/FinLFQA") is None


# ------------------------------------------------------------------- sections of --metadata


def test_a_task_reads_shared_keys_then_its_benchmarks_section_then_its_own():
    metadata = {
        "bertscore_model": "offline", "max_gen_toks": 7,
        "fin_agentbench": {"gain": "linear", "max_gen_toks": 9}, "fin_agentbench_chunk": {"gain": "exponential"},
        "fin_lfqa": {"data_path": "val.json"}, "fin_lfqa-test": {"data_path": "test.json"},
    }
    assert task_metadata("fin_agentbench_doc", metadata) == {"bertscore_model": "offline", "max_gen_toks": 9, "gain": "linear"}
    assert task_metadata("fin_agentbench_chunk", metadata)["gain"] == "exponential"
    assert task_metadata("fin_lfqa-posthoc", metadata)["data_path"] == "val.json"  # its benchmark's section
    assert task_metadata("fin_lfqa-test", metadata)["data_path"] == "test.json"
    assert task_metadata("fin_ems", metadata) == {"bertscore_model": "offline", "max_gen_toks": 7}
    # a task's own section wins over its group's, even where the group's name is longer
    grouped = {"fin_lfqa_settings": {"max_rounds": 2}, "fin_lfqa": {"max_rounds": 5}}
    assert task_metadata("fin_lfqa", grouped)["max_rounds"] == 5
    assert task_metadata("fin_lfqa-iterative", grouped)["max_rounds"] == 2
    settings = BENCHMARKS["fin_agentbench"].read_settings("fin_agentbench_doc", metadata)
    assert settings["gain"] == "linear" and settings["max_gen_toks"] == 9


def test_every_task_ignores_the_shared_keys_of_other_benchmarks():
    metadata = {"bertscore_model": "offline", "max_score": 5, "index_base": 0, "fin_ems": {"data_path": "x"}}
    for name, benchmark in BENCHMARKS.items():
        for task in benchmark.tasks:
            check = dict(metadata, **{name: {"data_path": AGENTBENCH_DEMO}}) if name == "fin_agentbench" else metadata
            try:
                check_user_metadata(task, check, benchmark.settings, SHARED)
            except SettingsError as exc:  # only data problems may remain, never a key
                assert "key" not in str(exc), exc
    read_settings("fin_agentbench_doc", {"bertscore_model": "offline"}, BENCHMARKS["fin_agentbench"].settings)


def test_unknown_keys_and_sections_name_the_closest_one_and_the_known_keys_once():
    settings = BENCHMARKS["fin_agentbench"].settings
    with pytest.raises(SettingsError, match=r"unknown --metadata key\(s\) \['fin_emss'\] \(did you mean 'fin_ems'\?\)"):
        check_user_metadata("fin_agentbench_doc", {"fin_emss": {}}, settings, SHARED)
    with pytest.raises(SettingsError) as raised:
        check_user_metadata("fin_agentbench_doc", {"bertscore_modle": "x"}, settings, SHARED)
    message = str(raised.value)
    assert "(did you mean 'bertscore_model'?)" in message and message.count("'data_path'") == 1
    # inside its own section a task takes only its own keys
    with pytest.raises(SettingsError, match=r"section 'fin_agentbench' has unknown key\(s\) \['bertscore_model'\]"):
        check_user_metadata("fin_agentbench_doc", {"fin_agentbench": {"bertscore_model": "x"}}, settings, SHARED)
    with pytest.raises(SettingsError, match="a section must be a JSON object"):
        read_settings("fin_ems", {"fin_ems": "data/ems"}, BENCHMARKS["fin_ems"].settings)
    for benchmark in BENCHMARKS.values():
        keys = known_keys(benchmark.settings)
        assert len(keys) == len(set(keys))


# ------------------------------------------------------------------------ BERTScore offline


def test_bertscore_falls_back_to_the_packaged_model_offline_with_one_warning(offline, caplog):
    settings = BENCHMARKS["fin_ems"].settings
    first = read_settings("fin_ems", {}, settings)
    again = read_settings("fin_ems", {}, settings)
    assert first["bertscore_model"] == again["bertscore_model"] == "offline"
    warnings = [r.getMessage() for r in caplog.records if "packaged MiniLM" in r.getMessage()]
    assert len(warnings) == 1 and "instead of roberta-large" in warnings[0] and "\n" not in warnings[0]
    # named, roberta-large is what the user asked for: no fallback, the run stops at the start
    named = read_settings("fin_ems", {"bertscore_model": "roberta-large"}, settings)
    with pytest.raises(SettingsError, match="'roberta-large' is not in the local Hugging Face cache"):
        BENCHMARKS["fin_ems"].check_usable(named)
    found = doctor.check_bertscore()
    assert not found.ok and found.warn and "runs use the packaged MiniLM, not roberta-large" in found.detail


def test_without_the_packaged_model_the_default_stays_and_doctor_says_runs_stop(offline, monkeypatch):
    monkeypatch.setattr(textsim, "offline_bertscore_model", lambda: None)
    assert textsim.usable_bertscore_model() == "roberta-large"
    found = doctor.check_bertscore()
    assert not found.ok and found.needed and "runs stop at the start" in found.detail


# ------------------------------------------------------------ the README's multi-task examples

README_PATHS = {
    '"$(lm-eval-fin model-path)"': "{model}",
    "pretrained=<model under test>": "pretrained={model}",
    "--model vllm": "--model hf",  # the light environment has no vLLM; `make test-vllm` covers it
    '"data/ems"': json.dumps(EMS_DEMO),
    '"data/finlfqa.jsonl"': json.dumps(LFQA_DEMO),
    '"data/finagentbench"': json.dumps(AGENTBENCH_DEMO),
}


def readme_multi_task_commands() -> list[str]:
    """Each `lm-eval-fin run` of the README that names several tasks, continuation lines joined."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        command = ""
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            command = f"{command} {line.strip()}" if command else line
            if command.count("'") % 2:  # a quoted value goes on to the next line
                continue
            if command.startswith("lm-eval-fin run") and re.search(r"--tasks \S+,\S+", command):
                commands.append(command)
            command = ""
    return commands


def test_the_readme_has_multi_task_examples():
    commands = readme_multi_task_commands()
    assert len(commands) >= 2 and all("--metadata" in command for command in commands)


@pytest.mark.parametrize("index", [0, 1])
def test_the_readmes_multi_task_examples_run_as_written(tmp_path, offline_env, embedded_model_dir, index):
    command = readme_multi_task_commands()[index]
    for written, here in README_PATHS.items():
        command = command.replace(written, here.format(model=embedded_model_dir))
    argv = shlex.split(command)[1:]
    argv[argv.index("--output_path") + 1] = str(tmp_path / "out")
    argv += ["--limit", "1", "--gen_kwargs", "max_gen_toks=8", "--batch_size", "1"]
    done = subprocess.run([BIN / "lm-eval-fin", *argv], capture_output=True, text=True, cwd=tmp_path,
                          env=offline_env, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    tasks = argv[argv.index("--tasks") + 1].split(",")
    samples = {path.name for path in (tmp_path / "out").rglob("samples_*.jsonl")}
    for task in tasks:
        assert any(name.startswith(f"samples_{task}") for name in samples), (task, samples)
    if "--predict_only" in argv:
        return
    # offline with an empty cache: BERTScore ran with the packaged model, and every record says so
    for path in (tmp_path / "out").rglob("samples_fin_[el]*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            sample = json.loads(line)
            assert json.loads(sample["doc"]["settings"])["values"]["bertscore_model"] == "offline"
            assert json.loads(sample["filtered_resps"][0])["bertscore_model"] == "offline"


# --------------------------------------------------------------- where a future lm-eval looks


def test_the_task_folder_is_declared_as_an_lm_eval_tasks_entry_point():
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    entries = dict(
        line.split("=", 1) for line in config["options.entry_points"]["lm_eval.tasks"].strip().splitlines()
    )
    (target,) = [value.strip() for value in entries.values()]
    spec = importlib.util.find_spec(target)
    assert Path(spec.submodule_search_locations[0]).resolve() == paths.tasks_dir().resolve()
    assert (paths.tasks_dir() / "fin_ems" / "fin_ems.yaml").is_file()


# ----------------------------------------------------------------------------- the demo's threads


def test_threads_are_the_cpus_the_load_leaves_free():
    from lm_eval_fin.plumbing import cpus

    assert [cpus.free_cpus(2, load) for load in (0.0, 0.4, 0.9, 6.0)] == [2, 2, 1, 1]
    assert cpus.free_cpus(16, 3.2) == 13 and cpus.free_cpus(1, 0.0) == 1
    assert cpus._quota("max 100000") is None and cpus._quota("250000 100000") == 2.5
    assert 1 <= cpus.compute_threads() <= cpus.usable_cpus() <= (os.cpu_count() or 1)


def test_the_demo_says_how_long_and_keeps_the_threads_the_user_set():
    from lm_eval_fin.harness import demo
    from lm_eval_fin.plumbing import cpus

    assert demo.demo_threads({"OMP_NUM_THREADS": "3"}) == 3
    assert 1 <= demo.demo_threads({"OMP_NUM_THREADS": "auto"}) <= cpus.usable_cpus()  # the load's choice
    line = demo.first_line(["fin_agentbench", "fin_ems"], 1)
    assert line.startswith("lm-eval-fin demo: fin_agentbench, fin_ems on their shipped samples")
    assert "(1 thread)" in line and f"about {round(demo.QUIET_SECONDS / 60)} minutes on 2 quiet cores" in line
