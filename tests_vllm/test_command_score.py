"""The two-stage path with a ``vllm:`` judge: ``lm-eval-fin run --predict_only --log_samples``
for fin_ems and fin_lfqa (child processes of the session's pool, runs.py), then ``lm-eval-fin
score DIR --judge vllm:...`` over both, called in this process (``lm_eval_fin.cli.main``): each
run's logged answers replayed through lm-eval, which writes a results and samples file beside
the run's. The command builds one judge engine for both runs and releases it before it
returns; run again, it answers everything from the cache and builds none."""

from __future__ import annotations

import logging
import re

from lm_eval_fin import cli
from lm_eval_fin.judge import vllm_backend
from tests.logged_runs import ems_judge_usage, read_task_run
from tests_vllm import figures
from tests_vllm.figures import STARTING, model_calls_logged
from tests_vllm.runs import JUDGE_FLAGS, check_judged_ems

LFQA_BATCH = re.compile(r"FinLFQA judge \[vllm:[^\]]*\]: (\d+) requests, (\d+) cache hits, (\d+) model calls")


def scored(root, task: str):
    """lm-eval's results entry and samples lines of the newest run ``score`` wrote for ``task``."""
    run, lines = read_task_run(root, task, model="fin-replay")
    return run.results["results"][task], lines


def test_two_stage_score_of_predict_only_runs(runs, tmp_path, judge_spec, monkeypatch, capsys, caplog):
    """Stage one, ``lm-eval-fin run --predict_only --log_samples`` for fin_ems and fin_lfqa (no
    judge); stage two, ``lm-eval-fin score DIR --judge vllm:...`` over both: one engine."""
    for name in ("stage1/ems", "stage1/lfqa"):
        run = runs.result(name).check()
        assert "vLLM judge" not in run.stderr
        figures.record(f"run {name} (--predict_only): wall (s)", f"{run.wall_s:.0f}")
    root = runs.output("stage1")
    monkeypatch.setenv("LM_EVAL_FIN_CACHE", str(tmp_path / "score.sqlite"))
    caplog.set_level(logging.INFO, logger="lm_eval_fin")
    argv = ["score", str(root), "--judge", judge_spec, *JUDGE_FLAGS, "--confirm_run_unsafe_code"]
    status = cli.main(argv)
    capsys.readouterr()
    assert caplog.text.count(STARTING) == 1
    assert vllm_backend.current_engine() is None  # the command closed its judge: engine released
    figures.record("judge engine start, lm-eval-fin score (s)",
                   ", ".join(f"{s:.1f}" for s in figures.judge_engine_starts(caplog.text)))
    ems, _ = scored(root / "ems", "fin_ems")
    ((_, usage),) = ems_judge_usage(caplog.text)
    assert usage["model_calls"] > 0
    unjudged = check_judged_ems(ems)
    lfqa, lfqa_lines = scored(root / "lfqa", "fin_lfqa")
    assert (lfqa["judge_failure,none"], lfqa["judge_parse_failure,none"]) == (0.0, 0.0)
    assert 3.0 <= lfqa["judge_score,none"] <= 15.0 and all(3.0 <= line["judge_score"] <= 15.0 for line in lfqa_lines)
    ((requests, _, calls),) = LFQA_BATCH.findall(caplog.text)
    assert (int(requests), int(calls)) == (2, 2)
    # a judge request that failed for good, or an answer that stayed unreadable, is counted in
    # the results and fails the command
    assert status == (1 if unjudged else 0)

    caplog.clear()
    # warm: the same judge requests, no engine (unreadable answers the cache holds are kept as
    # they are: re-asking them is --judge-retry-unparsable's job, tested in the light suite)
    assert cli.main([*argv, "--judge-retry-unparsable", "no"]) == status
    capsys.readouterr()
    assert STARTING not in caplog.text
    assert model_calls_logged(caplog.text) and set(model_calls_logged(caplog.text)) == {0}
    again, _ = scored(root / "lfqa", "fin_lfqa")
    assert again["judge_score,none"] == lfqa["judge_score,none"]
    assert scored(root / "ems", "fin_ems")[0] == ems
