"""The two-stage path with a ``vllm:`` judge: ``lm-eval-fin run --predict_only --log_samples``
for fin_ems and fin_lfqa (child processes of the session's pool, runs.py), then ``lm-eval-fin
score DIR --judge vllm:...`` over both, called in this process (``lm_eval_fin.cli.main``). The
command builds one judge engine for both runs and releases it before it returns; run again,
it answers everything from the cache and builds none."""

from __future__ import annotations

import json
import logging

from lm_eval_fin import cli
from lm_eval_fin.judge import vllm_backend
from tests_vllm import figures
from tests_vllm.figures import STARTING
from tests_vllm.runs import JUDGE_FLAGS, check_judged_ems


def judged_results(root) -> dict:
    """task -> (results, judge section) of every judged_results file under ``root``."""
    found = {}
    for path in root.rglob("judged_results_*.json"):
        document = json.loads(path.read_text())
        found.update({task: (document["results"][task], document["judge"]) for task in document["results"]})
    return found


def test_two_stage_score_of_predict_only_runs(runs, tmp_path, judge_spec, monkeypatch, capsys, caplog):
    """Stage one, ``lm-eval-fin run --predict_only --log_samples`` for fin_ems and fin_lfqa (no
    judge); stage two, ``lm-eval-fin score DIR --judge vllm:...`` over both: one engine."""
    for name in ("stage1/ems", "stage1/lfqa"):
        run = runs.result(name).check()
        assert "vLLM judge" not in run.stderr
        figures.record(f"run {name} (--predict_only): wall (s)", f"{run.wall_s:.0f}")
    root = runs.output("stage1")
    monkeypatch.setenv("LM_EVAL_FIN_CACHE", str(tmp_path / "score.sqlite"))
    caplog.set_level(logging.INFO, logger="lm_eval_fin.judge")
    argv = ["score", str(root), "--judge", judge_spec, *JUDGE_FLAGS]
    status = cli.main(argv)
    capsys.readouterr()
    assert caplog.text.count(STARTING) == 1
    assert vllm_backend.current_engine() is None  # the command closed its judge: engine released
    figures.record("judge engine start, lm-eval-fin score (s)",
                   ", ".join(f"{s:.1f}" for s in figures.judge_engine_starts(caplog.text)))
    judged = judged_results(root)
    assert set(judged) == {"fin_ems", "fin_lfqa"}
    ems, ems_judge = judged["fin_ems"]
    assert ems_judge["spec"] == judge_spec and ems_judge["stats"]["fin_ems"]["model_calls"] > 0
    check_judged_ems(ems)
    lfqa, lfqa_judge = judged["fin_lfqa"]
    assert (lfqa["judge_failure,none"], lfqa["judge_parse_failure,none"]) == (0.0, 0.0)
    assert 3.0 <= lfqa["judge_score,none"] <= 15.0
    assert lfqa_judge["stats"]["fin_lfqa"]["model_calls"] == 2
    # a judge request that failed for good, or an answer that stayed unreadable, is counted in
    # the results and fails the command
    stats = [judge["stats"][task] for task, (_, judge) in judged.items()]
    assert status == (1 if any(s["failures"] or s["parse_failures"] for s in stats) else 0)

    caplog.clear()
    # warm: the same judge requests, no engine (unreadable answers the cache holds are kept as
    # they are: re-asking them is --judge-retry-unparsable's job, tested in the light suite)
    assert cli.main([*argv, "--judge-retry-unparsable", "no"]) == status
    capsys.readouterr()
    assert STARTING not in caplog.text
    again = judged_results(root)
    assert {task: judge["stats"][task]["model_calls"] for task, (_, judge) in again.items()} == {"fin_ems": 0, "fin_lfqa": 0}
    assert again["fin_lfqa"][0]["judge_score,none"] == lfqa["judge_score,none"]
