"""Issue 22, points 2, 3 and 6 at the unit level: what ``lm-eval-fin run`` checks before a model
loads (lm_eval_fin.harness.preflight, the function run calls), each bad data file named by
file and line, and files written whole or not at all (lm_eval_fin.plumbing.atomic). The console-script
side, one test per exit status, is in tests/test_cli_errors.py."""

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from lm_eval_fin.benchmarks import all_benchmarks
from lm_eval_fin.harness import preflight
from lm_eval_fin.harness.settings import known_keys
from lm_eval_fin.judge.preflight import cache_problem
from lm_eval_fin.plumbing import atomic, exit_status, paths

CHUNKS = paths.data_path("finagentbench_demo", "chunk_ranking_demo.jsonl")
LFQA = paths.data_path("finlfqa_demo", "finlfqa_demo.jsonl")


def lines(path):
    return Path(path).read_text(encoding="utf-8").splitlines()


def write(path, rows):
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows), encoding="utf-8")
    return path


def problems_of(task, data_path, scored=True):
    metadata = {"data_path": str(data_path)}
    if not task.startswith("fin_agentbench"):
        metadata["bertscore_model"] = "offline"  # the packaged MiniLM: no hub needed
    problems, _, _ = preflight.task_problems([task], metadata, all_benchmarks(), scored)
    return [p.message for p in problems]


# ------------------------------------------------------- FinAgentBench: every field its scorer needs


def chunk_records():
    return [json.loads(line) for line in lines(CHUNKS)]


@pytest.mark.parametrize("change, message", [
    (lambda r: r.pop("qrel"), ":1: no 'qrel' (grades; 1 of 4 records)"),
    (lambda r: r.update(qrel=None), ":1: no 'qrel'"),
    (lambda r: r["qrel"].update({"1": "high"}), ":1: 'qrel' grade of candidate 1 is 'high', not a number"),
    (lambda r: r["qrel"].update({"1": True}), ":1: 'qrel' grade of candidate 1 is True, not a number"),
])
def test_agentbench_records_without_usable_grades_stop_a_scored_run(tmp_path, change, message):
    records = chunk_records()
    change(records[0])
    data = write(tmp_path / "chunk_ranking_dev.jsonl", records)
    assert problems_of("fin_agentbench_chunk", data) == [problems_of("fin_agentbench_chunk", data)[0]]
    assert problems_of("fin_agentbench_chunk", data)[0].startswith(f"{data}{message}")


def test_an_eval_file_without_grades_is_fine_for_predict_only(tmp_path):
    records = chunk_records()
    for record in records:
        record.pop("qrel")
        record["_id"] = record.pop("uuid")
    data = write(tmp_path / "chunk_ranking_eval.jsonl", records)
    assert problems_of("fin_agentbench_chunk", data, scored=False) == []
    assert "no 'qrel'" in problems_of("fin_agentbench_chunk", data)[0]


def test_agentbench_query_ids_given_twice_name_both_lines(tmp_path):
    data = write(tmp_path / "chunk_ranking_dev.jsonl", [*lines(CHUNKS), lines(CHUNKS)[1]])
    assert problems_of("fin_agentbench_chunk", data) == [
        f"{data}:5: query id 'demo-chunk-2' again (first at {data}:2); each record needs its own 'uuid' or '_id'"]


# ------------------------------------------------------------------------ FinLFQA: file and line


def lfqa_record(**changes):
    return {**json.loads(lines(LFQA)[0]), **changes}


def test_lfqa_data_problems_name_the_file_and_the_line(tmp_path):
    first, second = lines(LFQA)[:2]
    cases = {
        "null_clauses.jsonl": ([first, lfqa_record(id="x", clauses=None)],
                               ":2: no reference answer ('clauses' empty or null; 1 of 2 records)"),
        "a_list.jsonl": ([first, json.dumps(["a", "b", "c", "d", "e"])], ":2: expected a JSON object, got list"),
        "broken.jsonl": ([first, '{"id": "x", "question": }'], ":2: not JSON (Expecting value, column 25)"),
        "clause_shape.jsonl": ([first, lfqa_record(id="x", clauses=json.dumps([{"clause": 3}]))],
                               ":2, clause 0: needs its text"),
        "twice.jsonl": ([first, second, first], ":3: id 'finlfqa-demo-1' again (first at {data}:1)"),
    }
    for name, (rows, message) in cases.items():
        data = write(tmp_path / name, rows)
        assert problems_of("fin_lfqa", data) == [problems_of("fin_lfqa", data)[0]], name
        assert problems_of("fin_lfqa", data)[0].startswith(f"{data}{message.format(data=data)}"), name
    # a JSON list file: the line each record starts on
    listed = tmp_path / "listed.json"
    listed.write_text("[\n" + first + ",\n" + json.dumps([1]) + "\n]\n", encoding="utf-8")
    assert problems_of("fin_lfqa", listed)[0].startswith(f"{listed}:3: expected a JSON object")


def test_an_empty_or_non_utf8_file_is_named(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    assert problems_of("fin_lfqa", empty) == [f"{empty}: holds no records; expected the hub schema of Dragongon/FinLFQA"]
    latin = tmp_path / "latin1.jsonl"
    latin.write_bytes(lines(LFQA)[0].encode() + b"\n" + "{\"question\": \"r\u00e9venue\"}\n".encode("latin-1"))
    assert problems_of("fin_lfqa", latin) == [
        f"{latin}:2: not UTF-8 text (byte 0xe9 at column 16); save the file as UTF-8"]
    whole = tmp_path / "latin1.json"  # a JSON file read at once names the line too
    whole.write_bytes(b"[\n" + "{\"question\": \"r\u00e9venue\"}\n]".encode("latin-1"))
    assert problems_of("fin_lfqa", whole)[0].startswith(f"{whole}:2: not UTF-8 text")
    chunks = tmp_path / "chunk_ranking_dev.jsonl"
    chunks.write_bytes(CHUNKS.read_bytes().replace(b"Northwind", "N\u00f6rthwind".encode("latin-1"), 1))
    assert problems_of("fin_agentbench_chunk", chunks)[0].startswith(f"{chunks}:1: not UTF-8 text (byte 0xf6")


def test_ems_records_are_named_by_line_and_ids_are_unique(tmp_path):
    record = {"id": "a", "question": "q", "transcript": "t", "reference": "r"}
    data = write(tmp_path / "ems.jsonl", [record, dict(record, id="b"), record])
    assert problems_of("fin_ems", data) == [f"{data}:3: id 'a' again (first at {data}:1); each record needs its own id"]


# ------------------------------------------------------------ the model, the output path, the cache


def test_a_missing_local_model_is_a_problem_an_api_model_is_not_ours(tmp_path):
    assert preflight.model_problem("hf", {"pretrained": "/nonexistent"}).message == (
        "--model_args pretrained: no model folder '/nonexistent'")
    assert preflight.model_problem(None, {"pretrained": "/nonexistent"}) is not None  # lm-eval's default is hf
    assert preflight.model_problem("fin-refine", {"base": "vllm", "pretrained": "/nonexistent"}) is not None
    assert preflight.model_problem("hf", {"pretrained": str(tmp_path)}) is None
    assert preflight.model_problem("local-chat-completions", {"model": "x", "base_url": "http://h/v1"}) is None


def test_output_path_must_be_writable_with_free_space(tmp_path, monkeypatch):
    assert atomic.output_problem(str(tmp_path / "new" / "deeper")) is None
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert atomic.output_problem(str(blocker / "out")) == f"--output_path {blocker / 'out'}: {blocker} is a file, not a folder"
    usage = type("Usage", (), {"free": 10 * 2**20})
    monkeypatch.setattr(atomic.shutil, "disk_usage", lambda path: usage)
    assert atomic.output_problem(str(tmp_path / "out"), needed_bytes=100 * 2**20) == (
        f"--output_path {tmp_path / 'out'}: 10 MiB free on {tmp_path}, less than the 100 MiB the results may need; "
        "free some space or write elsewhere")


def test_run_wants_room_for_the_samples_of_its_data(tmp_path, monkeypatch):
    usage = type("Usage", (), {"free": atomic.MIN_FREE_BYTES + 1})
    monkeypatch.setattr(atomic.shutil, "disk_usage", lambda path: usage)
    lm_args = type("Args", (), {"tasks": ["fin_lfqa"], "output_path": str(tmp_path / "out"), "model": "dummy",
                                "metadata": {"data_path": str(LFQA), "bertscore_model": "offline"}})
    problems = preflight.run_problems(lm_args, all_benchmarks())
    assert [p.message.split(":")[0] for p in problems] == [f"--output_path {tmp_path / 'out'}"]


def test_a_corrupt_cache_is_a_cache_problem_and_an_intact_one_is_none(tmp_path):
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"this is not a database" * 100)
    assert "is not a usable judge cache" in cache_problem(corrupt) and "delete it" in cache_problem(corrupt)
    assert cache_problem(tmp_path / "fresh.sqlite") is None
    assert sqlite3.connect(tmp_path / "fresh.sqlite").execute("SELECT count(*) FROM claims").fetchone() == (0,)


def test_problems_print_one_line_each_and_the_status_says_which_kind(capsys):
    cache, usage = exit_status.Problem("cache", exit_status.JUDGE_CACHE), exit_status.Problem("two\nlines")
    assert exit_status.report("prog", [cache]) == exit_status.JUDGE_CACHE
    assert exit_status.report("prog", [cache, usage]) == exit_status.USAGE
    assert capsys.readouterr().err.splitlines() == ["prog: error: cache", "prog: error: cache", "prog: error: two lines"]


def test_known_metadata_keys_are_listed_once():
    for benchmark in all_benchmarks():
        keys = known_keys(benchmark.settings)
        assert len(keys) == len(set(keys)) and "data_path" in keys, benchmark.name


# ----------------------------------------------------------- point 3: written whole or not at all

CHILD = """
import resource, signal, sys
from pathlib import Path
from lm_eval_fin.plumbing import atomic
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
target = Path(sys.argv[1])
try:
    {write}
except OSError as exc:
    print(exc.errno)
"""


@pytest.mark.parametrize("write", [
    "atomic.write_text(target, 'x' * 100_000)",
    "with atomic.open_text(target) as out:\n        for _ in range(1000): out.write('y' * 100 + '\\n')",
    "with atomic.folder(target) as new:\n        (new / 'data.bin').write_bytes(b'z' * 100_000)",
])
def test_a_write_that_fails_on_a_full_disk_leaves_the_old_file_and_no_temporary(tmp_path, write):
    target = tmp_path / "results.json"
    if "folder" in write:
        target.mkdir()
        (target / "data.bin").write_bytes(b"old")
    else:
        target.write_text("old", encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", CHILD.format(write=write), str(target)], capture_output=True, text=True)
    assert done.stdout.strip() == "27", done.stderr  # EFBIG
    assert (target / "data.bin").read_bytes() == b"old" if "folder" in write else target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]  # no temporary left behind


def test_an_exception_while_writing_keeps_the_old_file_and_a_new_file_gets_the_usual_mode(tmp_path):
    target = tmp_path / "samples.jsonl"
    target.write_text("old\n")
    target.chmod(0o640)
    with pytest.raises(TypeError), atomic.open_text(target) as out:
        out.write("half\n")
        out.write(json.dumps({"not": object()}))
    assert target.read_text() == "old\n" and len(list(tmp_path.iterdir())) == 1
    atomic.write_text(target, "new\n")
    assert target.read_text() == "new\n" and target.stat().st_mode & 0o777 == 0o640  # the old file's mode kept
    fresh = tmp_path / "fresh.txt"
    atomic.write_text(fresh, "x")
    umask = os.umask(0)
    os.umask(umask)
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~umask


def test_no_module_writes_a_file_but_through_atomic():
    """Every file the package writes goes through lm_eval_fin.plumbing.atomic (the sandbox's snippets
    and a lock file opened for appending aside; a dataset is saved into atomic.folder's
    ``building``)."""
    package = Path(paths.__file__).parent
    offenders = []
    for path in package.rglob("*.py"):
        if path.name == "atomic.py" or "sandbox" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        for needle in (r"(?<!atomic)\.write_text\(", r"""open\([^)]*["']w""", r"\.save_to_disk\((?!str\(building\))", r"os\.replace\("):
            offenders += [f"{path.relative_to(package)}: {found}" for found in re.findall(needle, text)]
    assert offenders == []



def test_answers_left_unreadable_are_reported_without_a_first_error_of_none(caplog):
    from lm_eval_fin.harness import stage

    before = len(stage.FAILURES)
    stage.record_judge_failures("fin_lfqa", 0, 2, 5, None)
    del stage.FAILURES[before:]
    assert "fin_lfqa: the judge answered unreadably on 2 of 5 documents; their judged values" in caplog.text
    assert "None" not in caplog.text
