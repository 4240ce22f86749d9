"""Nothing lost at the edges, through the console script: lm-eval's own writes that fail (an
``--output_path`` that is a file, a folder replaced mid-run, a full disk), an empty file left
behind, Ctrl-C and SIGTERM while the judge is asked or the model generates, and a judge server
that redirects (issue 33). Real child processes, a loopback judge (tests/openai_server.py)
held mid-request where a test acts mid-run."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lm_eval_fin.plumbing import exit_status
from tests.finlfqa_fixtures import write_hub_fixture
from tests.logged_runs import lfqa_documents, write_predict_only_run
from tests.openai_server import ServerProcess

BIN = Path(sys.executable).parent
VERDICT = json.dumps({"accuracy": 2, "numerical_correctness": 1, "evidence_entailment": 1})
ANSWER = "1. CWT's net interest expense rose 25% to $125 million.\nEvidence: CWT [1]"


@pytest.fixture
def env(tmp_path, judge_cache):
    """The commands' environment: a private judge cache and cache home (where a run that could
    not be written is kept), no judge from the caller's environment, one thread."""
    values = {key: value for key, value in os.environ.items() if not key.startswith("LM_EVAL_FIN_JUDGE")}
    return {**values, "LM_EVAL_FIN_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1"}


@pytest.fixture
def logged(tmp_path):
    """A --predict_only run of fin_lfqa (two documents): its folder."""
    return write_predict_only_run(tmp_path / "run", "fin_lfqa", lfqa_documents(tmp_path), [ANSWER, ANSWER]).parent


def lm_eval_fin(*argv, cwd, env, timeout=600):
    return subprocess.run([BIN / "lm-eval-fin", *map(str, argv)], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=timeout)


def start(*argv, cwd, env):
    return subprocess.Popen([BIN / "lm-eval-fin", *map(str, argv)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=cwd, env=env)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ": error: " in line]


def wait_for_calls(server, process, count=1, timeout=300):
    """Until the held server has received ``count`` requests (the command waits on its judge)."""
    deadline = time.monotonic() + timeout
    while server.stats()["calls"] < count:
        if process.poll() is not None:
            raise AssertionError(f"the command ended first: {process.stderr.read()[-3000:]}")
        assert time.monotonic() < deadline, "no judge request arrived"
        time.sleep(0.2)


def lfqa_run_argv(tmp_path, server, out):
    data = write_hub_fixture(tmp_path / "finlfqa.jsonl")
    return ["run", "--model", "dummy", "--tasks", "fin_lfqa", "--judge", f"openai:{server.base_url}#m",
            "--confirm_run_unsafe_code", "--metadata", json.dumps({"data_path": str(data), "bertscore_model": "offline"}),
            "--output_path", out, "--log_samples"]


def kept_run(stderr: str) -> Path:
    """The folder the one error line says the run is kept under."""
    line = error_lines(stderr)[-1]
    return Path(line.split("are kept under ", 1)[1].split(":", 1)[0])


# ------------------------------------------------------------------ point 1: lm-eval's own writes


def test_an_output_path_that_is_a_file_is_refused_before_work(tmp_path, env, logged):
    afile = tmp_path / "results"
    afile.write_text("not a folder")
    with ServerProcess(reply=VERDICT) as server:
        run = lm_eval_fin(*lfqa_run_argv(tmp_path, server, afile), cwd=tmp_path, env=env)
        score = lm_eval_fin("score", logged, "--judge", f"openai:{server.base_url}#m", "--confirm_run_unsafe_code",
                            "--output_path", afile, cwd=tmp_path, env=env)
        calls = server.stats()["calls"]
    for done in (run, score):
        assert done.returncode == exit_status.USAGE, done.stderr[-3000:]
        assert error_lines(done.stderr) == [error_lines(done.stderr)[0]]
        assert f"--output_path {afile} is a file" in done.stderr and "Traceback" not in done.stderr
    assert calls == 0 and afile.read_text() == "not a folder"


def test_a_model_folder_name_too_long_is_refused_before_work(tmp_path, env):
    """A 300-character model name: lm-eval would make the output folder, then fail on the
    model's, leaving empty folders and no results."""
    with ServerProcess(reply=VERDICT) as server:
        argv = lfqa_run_argv(tmp_path, server, tmp_path / "out")
        argv[argv.index("dummy") + 1:argv.index("dummy") + 1] = ["--model_args", "pretrained=" + "m" * 300]
        done = lm_eval_fin(*argv, cwd=tmp_path, env=env)
    assert done.returncode == exit_status.USAGE, done.stderr[-3000:]
    assert "is 300 bytes, longer than the" in error_lines(done.stderr)[0]
    assert not (tmp_path / "out").exists()


def test_score_whose_output_folder_is_replaced_mid_run_keeps_the_run_elsewhere(tmp_path, env, logged):
    """The output folder becomes a file while the judge is asked: lm-eval's writes fail (it
    only logs a warning); score exits 1 naming what is missing and where the run is kept,
    whole, and leaves no empty file."""
    out = tmp_path / "scored"
    gate = tmp_path / "gate"
    with ServerProcess(reply=VERDICT, hold_until=gate) as server:
        process = start("score", logged, "--judge", f"openai:{server.base_url}#m", "--confirm_run_unsafe_code",
                        "--output_path", out, cwd=tmp_path, env=env)
        wait_for_calls(server, process)
        out.write_text("a file where the folder was")  # score made no folder yet: lm-eval makes it at the end
        gate.touch()
        _, stderr = process.communicate(timeout=600)
    assert process.returncode == exit_status.INCOMPLETE, stderr[-3000:]
    assert "Traceback" not in stderr and len(error_lines(stderr)) == 1, stderr[-3000:]
    assert f"could not write {out}/my__model/results_" in stderr and "Not a directory" in stderr
    kept = kept_run(stderr)
    assert kept.is_relative_to(tmp_path / "home" / "unsaved-runs")
    results = list(kept.rglob("results_*.json"))
    samples = list(kept.rglob("samples_fin_lfqa_*.jsonl"))
    assert len(results) == 1 and len(samples) == 1
    assert json.loads(results[0].read_text())["results"]["fin_lfqa"]["judge_failure,none"] == 0
    assert [json.loads(line)["doc_id"] for line in samples[0].read_text().splitlines()] == [0, 1]


@pytest.fixture
def small_disk(tmp_path):
    """A command prefix that runs it in a mount namespace with a 70 MiB tmpfs at tmp/disk
    (room for the pre-check's 64 MiB), or a skip where no namespace can be made."""
    disk = tmp_path / "disk"
    disk.mkdir()
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=70m tmpfs {disk}"],
                           capture_output=True) if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("no mount namespace here to make a small disk in")
    return disk


def test_run_whose_disk_fills_mid_run_keeps_the_run_elsewhere(tmp_path, env, small_disk):
    """A real full disk: while the judge is asked, the tmpfs under --output_path is filled;
    run exits 1 with the run kept whole under the cache home, and no empty file on the disk."""
    gate, held, listing = tmp_path / "gate", tmp_path / "held", tmp_path / "listing"
    with ServerProcess(reply=VERDICT, hold_until=gate) as server:
        argv = " ".join(f"'{arg}'" for arg in [BIN / "lm-eval-fin", *lfqa_run_argv(tmp_path, server, small_disk / "out")])
        script = textwrap.dedent(f"""\
            mount -t tmpfs -o size=70m tmpfs {small_disk}
            {argv} 2> {tmp_path / 'stderr'} &
            pid=$!
            while [ ! -e {held} ]; do sleep 0.1; done
            dd if=/dev/zero of={small_disk}/fill bs=1M 2>/dev/null
            touch {gate}
            wait $pid; echo $? > {tmp_path / 'status'}
            rm {small_disk}/fill
            find {small_disk} -type f > {listing}
            """)
        process = subprocess.Popen(["unshare", "-rm", "sh", "-c", script], cwd=tmp_path, env=env)
        deadline = time.monotonic() + 300
        while server.stats()["calls"] < 1:
            assert process.poll() is None and time.monotonic() < deadline, "the run ended before its judge was asked"
            time.sleep(0.2)
        held.touch()
        process.wait(timeout=600)
    stderr = (tmp_path / "stderr").read_text()
    assert int((tmp_path / "status").read_text()) == exit_status.INCOMPLETE, stderr[-3000:]
    assert "Traceback" not in stderr and len(error_lines(stderr)) == 1, stderr[-3000:]
    assert "No space left on device" in error_lines(stderr)[0]
    assert listing.read_text() == ""  # no empty or cut file left on the full disk
    kept = kept_run(stderr)
    samples = list(kept.rglob("samples_fin_lfqa_*.jsonl"))
    assert len(list(kept.rglob("results_*.json"))) == 1 and len(samples) == 1
    assert len(samples[0].read_text().splitlines()) == 2


def test_an_empty_file_left_behind_never_blocks_score(tmp_path, env, logged):
    """Empty results and samples files (a write that never happened) beside a run: score
    scores the run as if they were not there."""
    (logged / "samples_fin_lfqa_2025-02-02T00-00-00.000000.jsonl").touch()
    (logged / "results_2025-02-02T00-00-00.000000.json").touch()
    done = lm_eval_fin("score", logged.parent, "--judge", "none", "--confirm_run_unsafe_code", cwd=tmp_path, env=env)
    assert done.returncode == exit_status.OK, done.stderr[-3000:]
    assert len(list(logged.glob("results_*.json"))) == 3  # the run's, the empty one, and the scored one


# ------------------------------------------------------------------ point 5: interrupts


@pytest.mark.parametrize("sent, status, said", [(signal.SIGINT, 130, "interrupted (Ctrl-C)"),
                                                (signal.SIGTERM, 143, "terminated (SIGTERM)")])
def test_an_interrupt_while_judging_is_one_line_and_resumes(tmp_path, env, logged, judge_cache, sent, status, said):
    gate = tmp_path / "gate"
    with ServerProcess(reply=VERDICT, hold_until=gate) as server:
        process = start("score", logged, "--judge", f"openai:{server.base_url}#m", "--confirm_run_unsafe_code",
                        cwd=tmp_path, env=env)
        wait_for_calls(server, process)
        process.send_signal(sent)
        _, stderr = process.communicate(timeout=120)
    assert process.returncode == status, stderr[-3000:]
    assert "Traceback" not in stderr and "failed for good" not in stderr, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"lm-eval-fin score: {said}: ") and str(judge_cache) in last and "same command again" in last
    assert sum(said in line for line in stderr.splitlines()) == 1
    assert len(list(logged.glob("results_*.json"))) == 1  # nothing half written beside the run


def test_ctrl_c_while_the_model_generates_is_one_line(tmp_path, env, embedded_model_dir):
    """Ctrl-C once lm-eval generates with a real model: one line, status 130, no traceback."""
    data = write_hub_fixture(tmp_path / "finlfqa.jsonl")
    process = start("run", "--model", "hf", "--model_args", f"pretrained={embedded_model_dir}", "--tasks", "fin_lfqa",
                    "--predict_only", "--log_samples", "--output_path", tmp_path / "out", "--confirm_run_unsafe_code",
                    "--gen_kwargs", "max_gen_toks=4000", "--metadata",
                    json.dumps({"data_path": str(data), "bertscore_model": "offline", "judge": "none"}),
                    cwd=tmp_path, env=env)
    seen = []
    deadline = time.monotonic() + 300
    while not any("Running generate_until requests" in line for line in seen):
        line = process.stderr.readline()
        assert line or process.poll() is None, "".join(seen)[-3000:]
        assert time.monotonic() < deadline
        seen.append(line)
    time.sleep(2)  # into the generation itself
    process.send_signal(signal.SIGINT)
    _, rest = process.communicate(timeout=120)
    assert process.returncode == 130, rest[-3000:]
    assert "Traceback" not in rest, rest[-3000:]
    assert rest.strip().splitlines()[-1].startswith("lm-eval-fin run: interrupted (Ctrl-C): lm-eval writes a run's "
                                                    "files only at its end, so none were written")
    assert not list((tmp_path / "out").rglob("*.json*")) if (tmp_path / "out").exists() else True


# ------------------------------------------------------------------ point 8: a judge that redirects


def test_a_judge_server_that_redirects_elsewhere_is_refused(tmp_path, env, logged):
    with ServerProcess(reply=VERDICT, models=["m"]) as elsewhere, \
            ServerProcess(redirect=elsewhere.base_url.replace("127.0.0.1", "localhost").removesuffix("/v1")) as server:
        done = lm_eval_fin("score", logged, "--judge", f"openai:{server.base_url}#m", "--confirm_run_unsafe_code",
                           cwd=tmp_path, env=env)
        calls = elsewhere.stats()["calls"]
    assert done.returncode == exit_status.USAGE, done.stderr[-3000:]
    assert len(error_lines(done.stderr)) == 1 and "Traceback" not in done.stderr
    assert f"the server at {server.base_url} redirects to http://localhost:{elsewhere.port}/v1/models" in done.stderr
    assert calls == 0


def test_the_judge_client_follows_no_redirect(tmp_path, judge_cache):
    """Past the pre-check (bare lm_eval, a server that starts redirecting): the first request
    ends the batch with a configuration error; no prompt reaches the other host."""
    from lm_eval_fin.judge import JudgeConfigError, JudgeOptions, JudgeRequest, load_judge

    with ServerProcess(reply=VERDICT) as elsewhere, \
            ServerProcess(redirect=elsewhere.base_url.removesuffix("/v1")) as server:
        judge = load_judge(f"openai:{server.base_url}#m", JudgeOptions(max_retries=1, backoff_s=0.01))
        with pytest.raises(JudgeConfigError, match=r"redirects to .*/v1/chat/completions \(HTTP 307\)"):
            judge.complete([JudgeRequest(messages=({"role": "user", "content": "grade this"},))])
        assert elsewhere.stats()["calls"] == 0


# ------------------------------------------------------------------ point 8: output folders found before work


@pytest.fixture
def judged(tmp_path):
    """Two judged fin_lfqa runs by hand (tests/judged_runs.py): their folder."""
    from tests.judged_runs import lfqa_doc, write_run

    docs = [lfqa_doc("a", "answer a", (4, 3, 5)), lfqa_doc("b", "answer b", (2, 2, 1))]
    write_run(tmp_path / "runs", "fin_lfqa", "model-a", "openai:http://127.0.0.1:1/v1#j1", docs)
    return write_run(tmp_path / "runs", "fin_lfqa", "model-a", "openai:http://127.0.0.1:1/v1#j2", docs,
                     date="2025-01-01T00-00-00.000002")


@pytest.mark.parametrize("command", [["report"], ["export", "--format", "eee"], ["agreement"],
                                     ["agreement", "--template", "2"]])
def test_an_output_folder_that_is_a_file_is_refused_before_work(tmp_path, env, judged, command):
    afile = tmp_path / "taken"
    afile.write_text("a file")
    done = lm_eval_fin(*command, judged, "--output_path", afile, cwd=tmp_path, env=env)
    assert done.returncode == exit_status.USAGE, done.stderr[-3000:]
    assert error_lines(done.stderr) == [f"lm-eval-fin {command[0]}: error: --output_path {afile} is a file; name a "
                                        "folder (a new one is made)"]
    assert done.stdout == "" and afile.read_text() == "a file"  # nothing built, nothing printed


def test_export_refuses_a_model_id_too_long_for_a_folder_name_before_work(tmp_path, env, judged):
    out = tmp_path / "out"
    done = lm_eval_fin("export", judged, "--format", "eee", "--model_id", "org/" + "n" * 300, "--output_path", out,
                       cwd=tmp_path, env=env)
    assert done.returncode == exit_status.USAGE, done.stderr[-3000:]
    assert "--model_id 'org/nnnn" in error_lines(done.stderr)[0] and "at most 96 characters" in done.stderr
    assert not out.exists()  # no empty folders
