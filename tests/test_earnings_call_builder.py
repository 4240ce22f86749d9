"""The earnings-call builder: sources, call selection by calendar quarter, and a real build
with the embedded model as both answerers and the consolidator."""

import datetime as dt
import json
import logging

import pytest

from lm_eval_fin import cli
from lm_eval_fin.benchmarks.fin_ems.data import DISK_NAME, JSONL_NAME, DatasetError, read_dataset
from lm_eval_fin.builders import earnings_call as ec
from lm_eval_fin.judge import JudgeOptions, JudgeResponse, parse_spec
from lm_eval_fin.judge.cache import JudgeCache
from lm_eval_fin.judge.core import CachedJudge

NORTHWIND = (
    "Operator: Welcome to the Northwind Tools call. CEO: Revenue was $4.2 billion, up 12%. "
    "CFO: Free cash flow was $460 million and we bought back $200 million of stock."
)
CONTOSO = (
    "Operator: Welcome. CEO: Subscription revenue grew 24% to $1.8 billion. CFO: Capex rose to $240 million."
)


@pytest.mark.parametrize(
    "text, expected",
    [("2024Q3", (2024, 3)), ("2024-q4", (2024, 4)), ("Q1 2025", (2025, 1))],
)
def test_parse_quarter(text, expected):
    assert ec.parse_quarter(text) == expected


@pytest.mark.parametrize("text", ["2024", "Q5 2024", "", "third quarter"])
def test_parse_quarter_rejects(text):
    with pytest.raises(ec.BuildError, match="expected e.g. 2024Q3"):
        ec.parse_quarter(text)


def test_quarter_windows_by_results_and_by_call_date():
    assert ec.quarter_window(2024, 3) == (dt.date(2024, 10, 1), dt.date(2024, 12, 31))
    assert ec.quarter_window(2024, 4) == (dt.date(2025, 1, 1), dt.date(2025, 3, 31))
    assert ec.quarter_window(2024, 3, "call-date") == (dt.date(2024, 7, 1), dt.date(2024, 9, 30))
    assert ec.quarter_window(2024, 4, "call-date") == (dt.date(2024, 10, 1), dt.date(2024, 12, 31))
    with pytest.raises(ec.BuildError, match="basis"):
        ec.quarter_window(2024, 3, "fiscal")


def transcript(ticker, date, label=""):
    return ec.Transcript(ticker, ticker, dt.date.fromisoformat(date), "text", label)


def test_selection_uses_call_dates_not_fiscal_labels(caplog):
    calls = [
        transcript("AAPL", "2024-10-31", "FY2024 Q4"),  # calendar Q3 results: in
        transcript("MSFT", "2024-10-30", "FY2025 Q1"),  # calendar Q3 results: in
        transcript("MSFT", "2024-07-30", "FY2024 Q4"),  # calendar Q2 results: out
        transcript("NVDA", "2024-11-20", "FY2025 Q3"),
        transcript("NVDA", "2024-12-02", "FY2025 Q3"),  # a second call in the window: left out
        transcript("XOM", "2024-11-01"),  # not asked for
    ]
    chosen = ec.select_transcripts(calls, ["NVDA", "AAPL", "MSFT", "TSLA"], ec.quarter_window(2024, 3))
    assert [(t.ticker, t.call_date.isoformat()) for t in chosen] == [
        ("NVDA", "2024-11-20"),
        ("AAPL", "2024-10-31"),
        ("MSFT", "2024-10-30"),
    ]
    assert "TSLA" in caplog.text and "two calls" in caplog.text


def test_hub_style_records():
    record = {
        "symbol": "aapl",
        "year": 2024,
        "quarter": 4,
        "date": "2024-10-31 17:00:00",
        "content": "text",
        "company_name": "Apple Inc.",
    }
    parsed = ec.transcript_from_record(record, "hub")
    assert (parsed.ticker, parsed.call_date, parsed.fiscal_period, parsed.company) == (
        "AAPL",
        dt.date(2024, 10, 31),
        "FY2024 Q4",
        "Apple Inc.",
    )
    with pytest.raises(ec.BuildError, match="needs a ticker"):
        ec.transcript_from_record({"symbol": "AAPL", "content": "x"}, "hub")
    with pytest.raises(ec.BuildError, match="bad call date"):
        ec.transcript_from_record({"symbol": "AAPL", "content": "x", "date": "Oct 31"}, "hub")


def test_local_folder_names_sidecars_and_jsonl(tmp_path):
    (tmp_path / "NWND_2024-10-24.txt").write_text(NORTHWIND)
    (tmp_path / "CTSO_2025_Q1.txt").write_text(CONTOSO)  # fiscal label: needs a sidecar
    (tmp_path / "CTSO_2025_Q1.json").write_text(json.dumps({"call_date": "2024-11-06", "company": "Contoso"}))
    (tmp_path / "more.jsonl").write_text(
        json.dumps({"symbol": "ZZZ", "date": "2024-10-02", "content": "x"}) + "\n\n"
    )
    found = {t.ticker: t for t in ec.local_transcripts(tmp_path)}
    assert found["NWND"].call_date == dt.date(2024, 10, 24) and found["NWND"].text == NORTHWIND
    assert (found["CTSO"].call_date, found["CTSO"].company, found["CTSO"].fiscal_period) == (
        dt.date(2024, 11, 6),
        "Contoso",
        "FY2025 Q1",
    )
    assert found["ZZZ"].call_date == dt.date(2024, 10, 2)


def test_fiscal_file_name_without_sidecar_is_a_clear_error(tmp_path):
    (tmp_path / "AAPL_2024_Q4.txt").write_text("text")
    with pytest.raises(ec.BuildError, match="fiscal label .*FY2024 Q4.* not the calendar quarter"):
        ec.local_transcripts(tmp_path)
    (tmp_path / "AAPL_2024_Q4.txt").unlink()
    (tmp_path / "notes.txt").write_text("text")
    with pytest.raises(ec.BuildError, match="<TICKER>_<YYYY-MM-DD>.txt"):
        ec.local_transcripts(tmp_path)
    with pytest.raises(ec.BuildError, match="does not exist"):
        ec.local_transcripts(tmp_path / "missing")


def test_questions_default_to_the_papers_five():
    questions = ec.load_questions()
    assert [q["id"] for q in questions] == ["q1", "q2", "q3", "q4", "q5"]


def test_read_dataset_errors(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        read_dataset(tmp_path / "nothing.jsonl")
    with pytest.raises(DatasetError, match="holds no dataset"):
        read_dataset(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "question": "q", "transcript": "t"}) + "\n")
    with pytest.raises(DatasetError, match=r"bad.jsonl:1: no reference; expected"):
        read_dataset(bad)
    bad.write_text(json.dumps({"id": "x", "question": "q", "transcript": "t", "reference": 3}) + "\n")
    with pytest.raises(DatasetError, match=r"bad.jsonl:1: reference is a int, not text"):
        read_dataset(bad)
    bad.write_text("{not json\n")
    with pytest.raises(DatasetError, match="not JSON"):
        read_dataset(bad)


def test_build_with_the_embedded_model_in_all_three_roles(tmp_path, embedded_judge_spec, judge_cache, capsys):
    source = tmp_path / "calls"
    source.mkdir()
    (source / "CTSO_2025_Q1.txt").write_text(CONTOSO)
    (source / "CTSO_2025_Q1.json").write_text(json.dumps({"call_date": "2024-11-06"}))
    (source / "CTSO_2024-07-25.txt").write_text("An earlier call, reporting calendar Q2.")
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps({"questions": [{"id": "q5", "question": "How is free cash flow used?"}]}))
    out = tmp_path / "built"

    code = cli.main(
        [
            "build",
            "earnings-call",
            "--source",
            str(source),
            "--tickers",
            "CTSO,NWND",
            "--quarter",
            "2024Q3",
            "--questions",
            str(questions),
            "--output",
            str(out),
            "--judge",
            embedded_judge_spec,
            "--judge_max_tokens",
            "16",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["transcripts"] == ["CTSO 2024-11-06"]  # the July call reports Q2; no NWND call
    assert summary["records"] == 1 and summary["skipped"] == []

    from_jsonl = read_dataset(out / JSONL_NAME)
    from_disk = read_dataset(out / DISK_NAME)
    assert from_jsonl == read_dataset(out)  # the output folder reads as its saved dataset
    assert [r["id"] for r in from_jsonl] == ["CTSO-2024-11-06-q5"]
    assert [r["reference"] for r in from_disk] == [r["reference"] for r in from_jsonl]
    record = from_jsonl[0]
    assert set(record) == {
        "id", "company", "ticker", "call_date", "fiscal_period", "question_id", "question", "transcript",
        "reference", "provenance",
    }
    assert record["transcript"] == CONTOSO and record["reference"].strip()
    assert record["fiscal_period"] == "FY2025 Q1" and record["call_date"] == "2024-11-06"
    provenance = record["provenance"]
    assert provenance["answerer_a"] == provenance["consolidator"] == embedded_judge_spec
    assert len(provenance["answer_prompt_hash"]) == 12 and provenance["built_at"].startswith("20")
    seeds = {role: decoding["seed"] for role, decoding in provenance["answer_decoding"].items()}
    assert seeds["answerer_b"] == seeds["answerer_a"] + 1


class ScriptedBackend:
    """A model behind the real judge layer (CachedJudge + sqlite cache) that says which
    request it answers; ``batches`` holds every batch that reached the model; ``thinking``
    comes before every reply (a reasoning model's block)."""

    def __init__(self):
        self.batches = []
        self.thinking = ""

    def run(self, requests, sink):
        self.batches.append(list(requests))
        for index, request in enumerate(requests):
            if request.messages[0]["content"] == ec.CONSOLIDATE_SYSTEM:
                text = "Consolidated: " + request.messages[-1]["content"].rsplit("Answer 1:\n", 1)[1][:80]
            else:
                text = f"An answer (seed {request.seed}, temperature {request.temperature})."
            sink.done(index, JudgeResponse(self.thinking + text, prompt_tokens=10, completion_tokens=5))

    def close(self):
        pass


@pytest.fixture
def scripted_build(tmp_path, monkeypatch):
    """``lm-eval-fin build`` over a folder of two Contoso calls (July and November 2024) with
    one scripted judge for every spec; returns (run(*extra args) -> (code, summary), backend)."""
    source = tmp_path / "calls"
    source.mkdir()
    (source / "CTSO_2024-07-25.txt").write_text("The July call, reporting calendar Q2. " + CONTOSO)
    (source / "CTSO_2024-11-06.txt").write_text(CONTOSO)
    questions = tmp_path / "questions.json"
    questions.write_text(
        json.dumps({"questions": [{"id": "q1", "question": "Q one?"}, {"id": "q5", "question": "Q five?"}]})
    )
    backend = ScriptedBackend()
    judges = {}

    def load_judge(spec, options=None):
        judges[spec] = CachedJudge(
            parse_spec(spec), backend, options or JudgeOptions(), cache=JudgeCache(tmp_path / "judge.sqlite")
        )
        return judges[spec]

    monkeypatch.setattr("lm_eval_fin.judge.load_judge", load_judge)
    # the scripted specs name no model or server to check before the build
    monkeypatch.setattr("lm_eval_fin.judge.preflight.judge_problems", lambda specs, score_later=True: [])

    def run(*extra):
        out = tmp_path / f"built-{len(list(tmp_path.glob('built-*')))}"
        code = cli.main(
            ["build", "earnings-call", "--source", str(source), "--tickers", "CTSO"]
            + ["--questions", str(questions), "--output", str(out), *extra]
        )
        return code, out

    return run, backend


def test_one_spec_for_both_answerers_still_makes_two_answers(scripted_build, capsys, caplog):
    run, backend = scripted_build
    with caplog.at_level(logging.WARNING, logger="lm_eval_fin.builders.earnings_call"):
        code, out = run("--judge", "hf:one-model")
    assert code == 0
    # answerer A, answerer B, consolidation: three batches that each reached the model; B's
    # requests are not A's cached answers
    assert [len(batch) for batch in backend.batches] == [2, 2, 2]
    a_batch, b_batch, _ = backend.batches
    assert {r.seed for r in a_batch} == {0} and {r.seed for r in b_batch} == {1}
    assert {r.temperature for r in b_batch} == {ec.SAME_MODEL_TEMPERATURE}  # greedy judge: B samples
    assert "both answers come from one model" in caplog.text
    summary = json.loads(capsys.readouterr().out)
    assert summary["records"] == 2
    (record, _) = read_dataset(out)
    assert record["provenance"]["answer_decoding"] == {
        "answerer_a": {"seed": 0, "temperature": None},
        "answerer_b": {"seed": 1, "temperature": ec.SAME_MODEL_TEMPERATURE},
    }
    assert "seed 0" in record["reference"]  # the consolidator saw answer A ...


def test_two_answerer_specs_keep_the_judges_decoding(scripted_build, capsys, caplog):
    run, backend = scripted_build
    with caplog.at_level(logging.WARNING, logger="lm_eval_fin.builders.earnings_call"):
        code, _ = run("--answerer_a", "hf:a", "--answerer_b", "hf:b", "--consolidator", "hf:a")
    assert code == 0 and "one model" not in caplog.text
    assert [len(batch) for batch in backend.batches] == [2, 2, 2]
    assert {r.temperature for r in backend.batches[1]} == {0.0}  # greedy, as the judge options say


def test_quarter_basis_results_and_call_date(scripted_build, capsys):
    run, _ = scripted_build
    code, out = run("--judge", "hf:one-model")  # default: 2024Q3 on the results basis
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["transcripts"] == ["CTSO 2024-11-06"]
    assert summary["calls_held"] == "2024-10-01..2024-12-31 (results basis of 2024Q3)"
    code, out = run("--judge", "hf:one-model", "--quarter_basis", "call-date")
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["transcripts"] == ["CTSO 2024-07-25"]
    assert summary["calls_held"] == "2024-07-01..2024-09-30 (call-date basis of 2024Q3)"
    code, _ = run("--judge", "hf:one-model", "--quarter", "2024Q1", "--quarter_basis", "call-date")
    assert code == 2 and "held 2024-01-01..2024-03-31 (call-date basis of 2024Q1)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run("--judge", "hf:one-model", "--quarter_basis", "fiscal")
    help_text = cli.build_parser()._subparsers._group_actions[0].choices["build"].format_help()
    assert "results (default)" in help_text and "call-date" in help_text and "2024-07-01" in help_text


def test_prompt_hashes_cover_the_whole_request_templates(scripted_build, monkeypatch, capsys):
    before = ec.prompt_hashes()
    for name, changes in (
        ("ANSWER_USER", "answer_prompt_hash"),
        ("CONSOLIDATE_USER", "consolidate_prompt_hash"),
        ("CALL_HEADER", "answer_prompt_hash"),
    ):
        with monkeypatch.context() as patch:
            patch.setattr(ec, name, getattr(ec, name) + " Reply in French.")
            assert ec.prompt_hashes()[changes] != before[changes], name
    run, _ = scripted_build
    code, out = run("--judge", "hf:one-model")
    assert code == 0
    provenance = read_dataset(out)[0]["provenance"]
    assert {key: provenance[key] for key in before} == before


def test_build_without_any_judge_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("LM_EVAL_FIN_JUDGE", raising=False)
    code = cli.main(["build", "earnings-call", "--source", str(tmp_path), "--output", str(tmp_path / "o")])
    assert code == 2 and "no judge" in capsys.readouterr().err


def test_consolidation_follows_the_papers_figure_4(scripted_build, capsys):
    run, backend = scripted_build
    assert run("--judge", "hf:one-model")[0] == 0
    consolidations = backend.batches[2]
    (system,) = {r.messages[0]["content"] for r in consolidations}
    user = consolidations[0].messages[-1]["content"]
    # both answers and the transcript reach the consolidator
    assert "Answer 1:\nAn answer (seed 0" in user and "Answer 2:\nAn answer (seed 1" in user
    assert "Transcript:\n" + CONTOSO in user
    # keep the best of each, settle disagreements from the transcript, no repetition or
    # padding, and no content beyond what the answers state (no "add what both missed")
    assert "Combine the best of both" in system
    assert "settle it with the transcript" in system
    assert "no statement repeated and no needless wording" in system
    assert "not a source of new points" in system
    assert "missed" not in system and "add anything" not in system.lower()


def test_a_reasoning_models_thinking_stays_out_of_answers_and_references(scripted_build, capsys):
    run, backend = scripted_build
    backend.thinking = "<think>Maybe revenue fell? Draft: revenue fell 3%.</think>\n"
    code, out = run("--judge", "hf:one-model")
    assert code == 0
    # the consolidator is handed the answers without their thinking ...
    user = backend.batches[2][0].messages[-1]["content"]
    assert "Answer 1:\nAn answer (seed 0" in user and "Draft" not in user
    # ... and the references hold the answer part only
    references = [record["reference"] for record in read_dataset(out)]
    assert references and all(r.startswith("Consolidated: An answer") for r in references)
    assert not any("think>" in r or "Draft" in r for r in references)
    # a reply cut off while thinking has no answer part: the parser is handed "" (the judge
    # layer strips the block), which is no answer
    assert ec.parse_answer("") is None and ec.parse_answer(" \n") is None
